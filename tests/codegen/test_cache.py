"""The kernel cache: memory and disk hits skip code generation, a second process loads the
object instead of building it, and no damaged, foreign or swapped file is ever loaded."""
import json
import os
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from llgrad.codegen.lowerings import pool
from llgrad.codegen.native import blas, cache, host, jit, trampoline
from llgrad.codegen.lower import lower
from llgrad.ir import Builder, TensorType
from llgrad.ir.interpret import evaluate


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "kernels"
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(d))
    cache._reset()
    jit._reset()                         # a fresh engine: nothing in memory
    yield d
    cache._reset()
    jit._reset()


def _graph(scale=2.0, n=37):
    bld = Builder("cached")
    x = bld.input(TensorType("float32", (n,)))
    y = bld.add("tanh", [bld.add("mul", [x, scale])])
    return bld.ret(bld.add("sum", [y], {"dim": None, "keepdim": False}))


def _run(kernel, g):
    x = np.linspace(-1, 3, g.inputs[0].type.shape[0], dtype=np.float32)
    got = kernel([x])[0]
    want = evaluate(g, [x])[0][0]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    return got


def _files(d):
    """The kernels' cache files in d (not the trampoline's, which the first kernel call of
    a process may write there: codegen/native/trampoline.py, nor the BLAS shims' and the
    thread pool's: blas.py, lowerings/pool.py, nor the host's record: host.py)."""
    plumbing = {trampoline._NAME, *blas._SHIM.values(), pool._NAMES[0], pool._PLAIN_NAME,
                host.ENTRY}
    return sorted(p for p in d.iterdir() if p.suffix == ".llk" and
                  (cache._decode(p.read_bytes(), p.stem) or [None])[0] not in plumbing)


def _fresh_engine():
    """As a new process would start: no code in memory."""
    jit._reset()


def test_memory_then_disk_then_build(cache_dir):
    g = _graph()
    _run(lower(g), g)
    assert jit.stats["codegen"] == 1 and jit.stats["loaded"] == 0
    assert len(_files(cache_dir)) == 1
    _run(lower(_graph()), g)                     # same IR text: the same code, in memory
    assert jit.stats["codegen"] == 1 and jit.stats["memory_hits"] == 1
    _fresh_engine()
    _run(lower(_graph()), g)                     # from disk: no optimisation, no codegen
    assert jit.stats == {"optimized": 0, "codegen": 0, "loaded": 1, "memory_hits": 0}
    _run(lower(_graph(scale=3.0)), _graph(scale=3.0))   # another graph: another key
    assert jit.stats["codegen"] == 1 and len(_files(cache_dir)) == 2


def test_directory_is_private(cache_dir):
    lower(_graph())
    mode = stat.S_IMODE(os.stat(cache_dir).st_mode)
    assert mode & 0o077 == 0
    for f in _files(cache_dir):
        assert stat.S_IMODE(os.stat(f).st_mode) & 0o077 == 0


def _damage(path, how, other=None):
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif how == "bitflip":                       # one bit of the object code
        b = bytearray(data)
        b[len(b) // 3] ^= 0x10
        path.write_bytes(bytes(b))
    elif how == "garbage":
        path.write_bytes(b"\x7fELF" + os.urandom(200))
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "swapped":                       # a valid file, written for another key
        path.write_bytes(other.read_bytes())


@pytest.mark.parametrize("how", ["truncated", "bitflip", "garbage", "empty", "swapped"])
def test_damaged_files_are_rebuilt_not_loaded(cache_dir, how):
    g, h = _graph(), _graph(scale=5.0)
    f_g = cache_dir / (lower(g).cache_key + ".llk")
    f_h = cache_dir / (lower(h).cache_key + ".llk")
    _damage(f_g, how, other=f_h)
    _fresh_engine()
    _run(lower(_graph()), g)                     # correct results: rebuilt from the graph
    assert jit.stats["loaded"] == 0 and jit.stats["codegen"] == 1
    assert cache._decode(f_g.read_bytes(), f_g.stem) is not None   # and rewritten whole
    _fresh_engine()
    lower(_graph())
    assert jit.stats["loaded"] == 1 and jit.stats["codegen"] == 0


def test_disabled_cache_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("LLGRAD_CACHE_DIR", "0")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    jit._reset()
    g = _graph()
    _run(lower(g), g)
    assert list(tmp_path.iterdir()) == []
    jit._reset()


def test_unusable_directory_warns_once_and_keeps_working(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(blocker / "kernels"))
    cache._reset()
    jit._reset()
    with pytest.warns(RuntimeWarning, match="kept in memory only") as rec:
        for scale in (1.0, 2.0, 3.0):
            g = _graph(scale=scale)
            _run(lower(g), g)
    assert len([w for w in rec if "kernel cache" in str(w.message)]) == 1
    cache._reset()
    jit._reset()


def test_directory_writable_by_others_is_refused(tmp_path, monkeypatch):
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o777)
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(d))
    cache._reset()
    jit._reset()
    with pytest.warns(RuntimeWarning, match="writable by other users"):
        g = _graph()
        _run(lower(g), g)
    assert _files(d) == []
    cache._reset()
    jit._reset()


_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import llgrad
    from llgrad.codegen.native import jit

    @llgrad.compile(backend="llvm")
    def loss(x, w, v):
        return (((x @ w).tanh() @ v) * 0.5 + x.sum()).sum()

    # (three inputs the backward reads: their order in it must not change between
    # processes, or the second misses the cache)
    x = llgrad.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4),
                      requires_grad=True)
    w = llgrad.tensor(np.linspace(0, 1, 20, dtype=np.float32).reshape(4, 5),
                      requires_grad=True)
    v = llgrad.tensor(np.linspace(-1, 0, 10, dtype=np.float32).reshape(5, 2),
                      requires_grad=True)
    for _ in range(2):                       # the second call runs the native kernels
        x.grad = w.grad = v.grad = None
        out = loss(x, w, v)
        out.backward()
        loss.wait()                          # (LLGRAD_COMPILE=background: built by now)
    print(json.dumps({"stats": jit.stats, "loss": float(out),
                      "grad": [t.grad.numpy().ravel().tolist() for t in (x, w, v)],
                      "kernels": sorted(type(k).__name__
                                        for k in loss.entries[0].kernels.values())}))
""")


def _child(cache_path):
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(cache_path))
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_skips_optimisation_and_codegen(tmp_path):
    first = _child(tmp_path / "c")
    second = _child(tmp_path / "c")
    assert first["kernels"] == ["Kernel", "Kernel"]     # forward and backward are native
    # forward, backward and the GEMM library the transposed operands of x @ w go through
    assert first["stats"]["codegen"] == 3 and first["stats"]["loaded"] == 0
    assert second["stats"]["codegen"] == 0 and second["stats"]["optimized"] == 0
    assert second["stats"]["loaded"] == 3
    assert second["loss"] == first["loss"] and second["grad"] == first["grad"]


@pytest.mark.slow
def test_concurrent_writers_leave_only_whole_files(tmp_path):
    d = tmp_path / "c"
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(d))
    procs = [subprocess.Popen([sys.executable, "-c", _SCRIPT], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert results[0]["grad"] == results[1]["grad"]
    files = _files(d)
    assert len(files) == 3 and not [p for p in d.iterdir() if p.name.startswith(".tmp-")]
    for f in files:
        assert cache._decode(f.read_bytes(), f.stem) is not None
    assert _child(d)["stats"]["loaded"] == 3


def test_read_only_directory_warns_once_and_keeps_working(tmp_path, monkeypatch):
    """A directory the user cannot write (simulated: tests may run as root, who can write
    anywhere) is not used; kernels stay in memory."""
    d = tmp_path / "ro"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(d))
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(d)
                        else real_access(p, mode))
    cache._reset()
    jit._reset()
    with pytest.warns(RuntimeWarning, match="is not writable") as rec:
        for scale in (1.0, 2.0):
            g = _graph(scale=scale)
            _run(lower(g), g)
    assert len([w for w in rec if "kernel cache" in str(w.message)]) == 1
    assert _files(d) == []
    cache._reset()
    jit._reset()


def test_a_failing_write_warns_and_the_kernel_still_runs(cache_dir, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(cache, "_create_temp", refuse)
    with pytest.warns(RuntimeWarning, match="cannot be written"):
        g = _graph()
        _run(lower(g), g)
    assert _files(cache_dir) == []
