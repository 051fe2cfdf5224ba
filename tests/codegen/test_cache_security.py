"""The disk cache treats its entries as code (codegen/native/cache.py): an entry not signed
with this user's key (forged with a recomputed hash, copied from another key) is rebuilt,
never run; a directory owned by someone else or writable by others is refused with one
warning; swapping the directory after the check changes nothing; a FIFO, a device or a
symlink where an entry should be is never read; directories llgrad makes are 0700 whatever
the umask; a killed writer's old temporary files go; an entry missing its symbol is built
again. Tests that need another user chown to one (they run as root, or skip)."""
import contextlib
import hashlib
import os
import stat
import threading
import time

import numpy as np
import pytest

from llgrad.codegen.lower import lower
from llgrad.codegen.native import cache, cache_dir, cache_key, jit
from llgrad.ir import Builder, TensorType
from llgrad.ir.interpret import evaluate

OTHER_UID = 54321            # "someone else" (a uid nobody here has)
as_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                             reason="needs root to make files owned by another user")
posix = pytest.mark.skipif(not cache_dir._POSIX, reason="POSIX only")
pytestmark = posix


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A cache directory and a key file of this test's own."""
    d = tmp_path / "kernels"
    key = tmp_path / "keys" / "cache-key"
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(d))
    monkeypatch.setenv("LLGRAD_CACHE_KEY_FILE", str(key))
    cache._reset()
    jit._reset()
    yield d, key
    cache._reset()
    jit._reset()


def _graph(scale=2.0, n=37):
    bld = Builder("secure")
    x = bld.input(TensorType("float32", (n,)))
    y = bld.add("tanh", [bld.add("mul", [x, scale])])
    return bld.ret(bld.add("sum", [y], {"dim": None, "keepdim": False}))


def _run(g):
    x = np.linspace(-1, 3, g.inputs[0].type.shape[0], dtype=np.float32)
    got = lower(g)([x])[0]
    np.testing.assert_allclose(got, evaluate(g, [x])[0][0], rtol=1e-6)


def _entry(d, g):
    return d / (lower(g).cache_key + ".llk")


def _fresh():
    """As a new process: nothing in memory (the directory and key are opened again)."""
    cache._reset()
    jit._reset()


def _rebuilt():
    return jit.stats["loaded"] == 0 and jit.stats["codegen"] == 1


def test_entries_are_signed_and_the_key_lives_outside(env):
    d, key = env
    f = _entry(d, _graph())
    assert key.exists() and stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    assert len(key.read_bytes()) == cache.KEY_BYTES
    assert not key.is_relative_to(d)
    _fresh()
    _run(_graph())
    assert jit.stats["loaded"] == 1 and jit.stats["codegen"] == 0
    assert cache._decode(f.read_bytes(), f.stem) is not None


@pytest.mark.parametrize("tag", ["sha256", "another key", "none"])
def test_a_forged_entry_is_rebuilt_not_run(env, tag):
    """The attack the old format let through: an entry whose recorded hash the forger
    recomputed. Here the forger's entry is another graph's (valid) code under this key's
    name: running it would give the wrong answer."""
    d, _ = env
    g, h = _graph(), _graph(scale=-7.0)
    f_g, f_h = _entry(d, g), _entry(d, h)
    body = f_h.read_bytes()[:-cache.TAG_BYTES]
    body = body.replace(f_h.stem.encode(), f_g.stem.encode())        # the header's key
    entry_h = lower(h).entry_name.encode()
    body = body.replace(entry_h, lower(g).entry_name.encode()[:len(entry_h)])
    forged = {"sha256": body + hashlib.sha256(body).digest(),
              "another key": body + cache._tag(os.urandom(32), body),
              "none": body}[tag]
    f_g.write_bytes(forged)
    _fresh()
    _run(g)                                      # right results: built from the graph
    assert _rebuilt()
    assert cache._decode(f_g.read_bytes(), f_g.stem) is not None     # and replaced


def test_an_entry_from_another_key_is_rebuilt(env, tmp_path, monkeypatch):
    """A cache copied in from another machine or user (entries signed with their key)."""
    d, _ = env
    g = _graph()
    _run(g)
    monkeypatch.setenv("LLGRAD_CACHE_KEY_FILE", str(tmp_path / "elsewhere" / "cache-key"))
    _fresh()
    _run(g)
    assert _rebuilt()
    _fresh()
    _run(g)                                      # signed with this key now: loaded
    assert jit.stats["loaded"] == 1


@as_root
def test_a_directory_owned_by_someone_else_is_refused(env):
    d, _ = env
    d.mkdir(mode=0o700)
    os.chown(d, OTHER_UID, -1)
    with pytest.warns(RuntimeWarning, match="owned by another user") as rec:
        for scale in (1.0, 2.0):
            _run(_graph(scale))
    assert len([w for w in rec if "kernel cache" in str(w.message)]) == 1
    assert list(d.iterdir()) == []


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757, 0o1777])
def test_a_directory_others_may_write_is_refused(env, mode):
    d, _ = env
    d.mkdir()
    os.chmod(d, mode)
    with pytest.warns(RuntimeWarning, match="writable by other users"):
        _run(_graph())
    assert list(d.iterdir()) == []


def test_a_symlinked_directory_is_refused(env, tmp_path):
    d, _ = env
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    d.symlink_to(real)
    with pytest.warns(RuntimeWarning, match="symbolic link"):
        _run(_graph())
    assert list(real.iterdir()) == []


@as_root
def test_a_directory_swapped_after_the_check_is_never_read(env, tmp_path):
    """Another user who can write the cache directory's parent renames it away and puts
    theirs (holding an entry for the same key, code of their choosing) in its place, again
    and again, while this process loads. Every load reads this user's directory (opened
    once, checked on its descriptor) or refuses theirs (owned by another user); theirs is
    never read, however the race falls."""
    d, _ = env
    g = _graph()
    f = _entry(d, g)
    ours = f.read_bytes()
    rec = cache._decode(ours, f.stem)
    secret = cache_key._keys[cache.key_file()]
    theirs_dir = tmp_path / "theirs"
    theirs_dir.mkdir(mode=0o755)
    # their code, even signed with this user's key (as if they had it), under our key's name
    theirs = cache.encode(f.stem, rec[0], b"\x7fELF" + b"their code" * 50, b"", b"", secret)
    (theirs_dir / f.name).write_bytes(theirs)
    os.chown(theirs_dir / f.name, OTHER_UID, -1)
    os.chown(theirs_dir, OTHER_UID, -1)
    parked = tmp_path / "parked"
    stop = threading.Event()
    swaps = [0]

    def attacker():
        while not stop.is_set():
            os.rename(d, parked)
            os.rename(theirs_dir, d)
            os.rename(d, theirs_dir)
            os.rename(parked, d)
            swaps[0] += 1

    t = threading.Thread(target=attacker)
    t.start()
    seen = {"ours": 0, "refused": 0}
    deadline = time.monotonic() + 2.0
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            while time.monotonic() < deadline:
                cache._reset()                   # (warn again, check again, every time)
                got = cache.load(f.stem)
                assert got is None or got[1] == rec[1], "read the swapped-in directory"
                seen["ours" if got is not None else "refused"] += 1
        finally:
            stop.set()
            t.join()
    assert swaps[0] > 10 and seen["ours"] > 0


def _in_thread(fn, timeout=20):
    out, t = [], threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "hung"
    return out[0]


@pytest.mark.parametrize("kind", ["fifo", "symlink to /dev/zero", "symlink to an entry",
                                  "device", "directory"])
def test_what_is_not_a_regular_file_is_never_read(env, kind):
    d, _ = env
    g, h = _graph(), _graph(scale=3.0)
    f, other = _entry(d, g), _entry(d, h)
    f.unlink()
    if kind == "fifo":
        os.mkfifo(f)
    elif kind == "symlink to /dev/zero":
        f.symlink_to("/dev/zero")
    elif kind == "symlink to an entry":          # (a valid entry of ours, even)
        target = d / "elsewhere.llk"
        target.write_bytes(other.read_bytes().replace(other.stem.encode(), f.stem.encode()))
        f.symlink_to(target)
    elif kind == "device":
        if os.geteuid() != 0:
            pytest.skip("needs root to make a device node")
        os.mknod(f, stat.S_IFCHR | 0o600, os.makedev(1, 5))          # /dev/zero's
    else:
        f.mkdir()
    assert _in_thread(lambda: cache.load(f.stem)) is None
    _fresh()
    with pytest.warns(RuntimeWarning, match="cannot be written") if kind == "directory" \
            else contextlib.nullcontext():      # (a directory cannot be replaced by a file)
        _in_thread(lambda: _run(g))              # built again (a FIFO must not hang this)
    assert _rebuilt()


@as_root
def test_entries_owned_by_someone_else_or_writable_by_others_are_not_read(env):
    d, _ = env
    g = _graph()
    f = _entry(d, g)
    os.chown(f, OTHER_UID, -1)
    _fresh()
    _run(g)
    assert _rebuilt()                            # (and replaced by ours)
    assert f.stat().st_uid == os.geteuid()
    os.chmod(f, 0o666)
    _fresh()
    _run(g)
    assert _rebuilt()


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o777])
def test_directories_llgrad_makes_are_private_whatever_the_umask(tmp_path, monkeypatch,
                                                                 umask):
    d = tmp_path / "a" / "b" / "kernels"
    key = tmp_path / "k1" / "k2" / "cache-key"
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(d))
    monkeypatch.setenv("LLGRAD_CACHE_KEY_FILE", str(key))
    _fresh()
    old = os.umask(umask)
    try:
        _run(_graph())
    finally:
        os.umask(old)
        _fresh()
    for p in (tmp_path / "a", tmp_path / "a" / "b", d, tmp_path / "k1", tmp_path / "k1" / "k2"):
        assert stat.S_IMODE(p.stat().st_mode) == 0o700, p
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    files = [p for p in d.iterdir() if p.suffix == ".llk"]
    assert files and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)


def test_old_temporary_files_of_killed_writers_are_removed(env):
    d, _ = env
    _run(_graph())
    old, fresh = d / ".tmp-99999-deadbeef.llk", d / ".tmp-99999-cafebabe.llk"
    for p in (old, fresh):
        p.write_bytes(b"half an entry")
    hours_ago = time.time() - 2 * cache.STALE_TEMP_SECONDS
    os.utime(old, (hours_ago, hours_ago))
    _fresh()
    _run(_graph(scale=9.0))                      # the process's first write sweeps
    assert not old.exists() and fresh.exists()


@pytest.mark.parametrize("problem", ["mode 0644", "inside the cache", "symlink", "short"])
def test_an_unsafe_key_disables_the_cache(env, tmp_path, monkeypatch, problem):
    d, key = env
    key.parent.mkdir(mode=0o700)
    if problem == "mode 0644":
        key.write_bytes(os.urandom(32))
        os.chmod(key, 0o644)
        match = "0600"
    elif problem == "inside the cache":
        monkeypatch.setenv("LLGRAD_CACHE_KEY_FILE", str(d / "cache-key"))
        match = "inside the cache directory"
    elif problem == "symlink":
        target = tmp_path / "target-key"
        target.write_bytes(os.urandom(32))
        os.chmod(target, 0o600)
        key.symlink_to(target)
        match = "symbolic link"
    else:
        key.write_bytes(b"short")
        os.chmod(key, 0o600)
        match = "not 32"
    with pytest.warns(RuntimeWarning, match=match):
        _run(_graph())
    assert [p for p in d.iterdir() if p.suffix == ".llk"] == []


@as_root
def test_a_key_owned_by_someone_else_disables_the_cache(env):
    d, key = env
    key.parent.mkdir(mode=0o700)
    key.write_bytes(os.urandom(32))
    os.chmod(key, 0o600)
    os.chown(key, OTHER_UID, -1)
    with pytest.warns(RuntimeWarning, match="owned by another user"):
        _run(_graph())
    assert [p for p in d.iterdir() if p.suffix == ".llk"] == []


def test_an_entry_missing_its_symbol_is_rebuilt(env):
    """A signed entry whose object lacks the symbol its header names (written by a bug, or
    an interrupted build) raised `JIT: no address for function`: it is built again."""
    d, _ = env
    g, h = _graph(), _graph(scale=5.0)
    f_g, f_h = _entry(d, g), _entry(d, h)
    name = lower(g).entry_name
    _, obj_h, before, after = cache._decode(f_h.read_bytes(), f_h.stem)
    secret = cache_key._keys[cache.key_file()]
    f_g.write_bytes(cache.encode(f_g.stem, name, obj_h, before, after, secret))
    assert cache._decode(f_g.read_bytes(), f_g.stem)[0] == name       # (a valid entry)
    _fresh()
    _run(g)
    assert _rebuilt()
    _fresh()
    _run(g)
    assert jit.stats["loaded"] == 1
