"""Sweep 9: torch.save's errors for objects pickle cannot name (a local class or function, a
lambda), against torch's (its C pickler's AttributeError / PicklingError and their texts);
torch.load(mmap=True) (copy-on-write: the file keeps its values) and its errors;
torch.serialization.get_unsafe_globals_in_checkpoint."""
import collections
import io
import os
import threading

import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _local_class_instance():
    class C:
        pass
    return C()


def _local_function():
    def k():
        pass
    return k


class _Outer:
    class Inner:
        pass


def _saves(lib):
    out = []
    for obj in (lambda: 1, _local_class_instance(), threading.Lock(), {"a": lambda: 2},
                _local_function(), _Outer.Inner(), [_Outer.Inner, _local_function]):
        try:
            lib.save(obj, io.BytesIO())
            out.append("saved")
        except Exception as e:      # noqa: BLE001 (compared with torch's)
            out.append((type(e).__name__, str(e).split(" at 0x")[0]))
    return out


def test_save_errors_for_unnamable_objects_as_torch():
    assert _saves(llgrad) == _saves(torch)


def _mmap(lib, tmp_path):
    out = []
    path = os.path.join(tmp_path, f"{lib.__name__}.pt")
    lib.save({"w": lib.arange(4.)}, path)
    r = lib.load(path, mmap=True)
    r["w"][0] = 5
    out += [r["w"].tolist(), lib.load(path)["w"].tolist()]
    for f in (lambda: lib.load(io.BytesIO(open(path, "rb").read()), mmap=True),
              lambda: lib.load(open(path, "rb"), mmap=True)):
        try:
            f()
        except ValueError as e:
            out.append(str(e))
    return out


def test_load_mmap_as_torch(tmp_path):
    assert _mmap(llgrad, str(tmp_path)) == _mmap(torch, str(tmp_path))


Point = collections.namedtuple("Point", "x y")


class Config:
    def __init__(self, a):
        self.a = a


def _unsafe_globals(lib):
    S = lib.serialization
    buf = io.BytesIO()
    lib.save({"p": Point(1, lib.ones(1)), "c": Config(3), "t": lib.ones(2)}, buf)
    out = []
    for allowed in ([], [Point], [Point, Config]):
        buf.seek(0)
        with S.safe_globals(allowed):
            out.append(sorted(S.get_unsafe_globals_in_checkpoint(buf)))
    try:
        S.get_unsafe_globals_in_checkpoint(io.BytesIO(b"not a zip"))
    except ValueError as e:
        out.append(str(e))
    return out


def test_get_unsafe_globals_in_checkpoint_as_torch():
    assert _unsafe_globals(llgrad) == _unsafe_globals(torch)
