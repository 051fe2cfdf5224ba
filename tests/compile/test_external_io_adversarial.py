"""Adversarial programs for what a compiled function reads or writes outside (sweep 25, H3):
the world changes between calls (a file, a directory, the environment, a server, another
process's output), and each compiled call must give what the function run eagerly gives,
or run eagerly with a warning naming the user's line. Diverged when written, now eager:
os.path.exists / getsize / getmtime, os.walk, os.makedirs (the os module's own code is a
frozen module, whose frames were taken for the import system's), os.access and
os.path.islink (lstat), os.getenv, os.getcwd, a function bound before the trace (`from os
import listdir`, in the function or in a helper), io.FileIO, np.loadtxt (NumPy keeps
io.open in a table), bz2.open, a socket, sys.stdin, a command (subprocess, os.system),
sqlite3.connect, files read on threads or in processes the function starts, the process's
own counters (getrusage, sys.getallocatedblocks, gc.get_objects, os.times). The false
positive, the strict xfails and the classes that held: test_external_io_adversarial_held.py."""
import io
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import llgrad


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")    # (native code from the second call)


def _calls(fn, prepare, n=4, arg=lambda k: llgrad.ones(2)):
    """[fn(arg(k)) as a list after prepare(k)] for k < n, and the warnings' texts."""
    out = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(n):
            prepare(k)
            r = fn(arg(k))
            out.append(r.tolist() if isinstance(r, llgrad.Tensor) else r)
    return out, [str(w.message) for w in caught]


def _same_as_eager(f, prepare, n=4, arg=lambda k: llgrad.ones(2), eager=True, where=None):
    """Compiled f over n calls equals f run eagerly; eager: whether the compiled function
    must have said it runs eagerly (naming `where`, the user's file:line, if given)."""
    compiled = llgrad.compile(f)
    got, said = _calls(compiled, prepare, n, arg)
    running_eagerly = [s for s in said if "running eagerly" in s]
    if eager:
        assert running_eagerly, (compiled.n_traces, said)
        if where is not None:
            assert any(where in s for s in running_eagerly), running_eagerly
    else:
        assert compiled.n_traces == 1 and not running_eagerly, (compiled.n_traces, said)
    want, _ = _calls(f, prepare, n, arg)
    assert got == want
    return got


def _files(d, n):
    """d holding exactly the files f0 .. f{n-1}."""
    d.mkdir(exist_ok=True)
    for q in d.iterdir():
        q.unlink()
    for i in range(n):
        (d / f"f{i}").write_text("")


def _line_of(fn, text):
    """'file.py:line' of the first line of fn's source holding text."""
    import inspect
    lines, first = inspect.getsourcelines(fn)
    k = next(i for i, s in enumerate(lines) if text in s)
    return f"{os.path.basename(fn.__code__.co_filename)}:{first + k}"


# ---- divergences found: wrong values, no warning ----

def test_os_path_getsize_and_exists(tmp_path):
    p = tmp_path / "a.txt"

    def f(x):
        return x * os.path.getsize(p) if os.path.exists(p) else x

    def prepare(k):
        p.write_text("a" * (k + 1))
    got = _same_as_eager(f, prepare, where=_line_of(f, "getsize"))
    assert got == [[k + 1.0] * 2 for k in range(4)]


def test_os_path_getmtime(tmp_path):
    def f(x):
        return x * (os.path.getmtime(tmp_path) % 1000)
    _same_as_eager(f, lambda k: os.utime(tmp_path, (k * 10, k * 10)))


def test_os_walk(tmp_path):
    def f(x):
        return x * sum(len(files) for _, _, files in os.walk(tmp_path))
    got = _same_as_eager(f, lambda k: _files(tmp_path / "w", k + 1), n=3)
    assert got[0] != got[-1]


def test_os_makedirs_each_call(tmp_path):
    d = tmp_path / "made" / "here"

    def f(x):
        os.makedirs(d, exist_ok=True)
        return x + 1
    _same_as_eager(f, lambda k: d.exists() and d.rmdir(),
                   arg=lambda k: llgrad.ones(1))
    assert d.is_dir()


def test_os_access_and_islink(tmp_path):
    p, link = tmp_path / "p", tmp_path / "link"
    p.write_text("")

    def f(x):
        return x * (2.0 if os.access(tmp_path / "q", os.R_OK) else 3.0) * \
            (5.0 if os.path.islink(link) else 7.0)

    def prepare(k):
        for q in (tmp_path / "q", link):
            if q.is_symlink() or q.exists():
                q.unlink()
        if k == 2:
            (tmp_path / "q").write_text("")
            link.symlink_to(p)
    _same_as_eager(f, prepare, n=3)


def test_os_getenv_in_the_function(monkeypatch):
    def f(x):
        return x * float(os.getenv("LLGRAD_H3_SCALE", "1"))
    _same_as_eager(f, lambda k: monkeypatch.setenv("LLGRAD_H3_SCALE", str(k + 2)),
                   where=_line_of(f, "getenv"))


def test_a_function_bound_before_the_trace(tmp_path):
    from os import listdir

    def f(x):
        return x * len(listdir(tmp_path))
    got = _same_as_eager(f, lambda k: _files(tmp_path, k + 1))
    assert got == [[k + 1.0] * 2 for k in range(4)]


def test_a_function_bound_before_in_a_helper_module(tmp_path, monkeypatch):
    (tmp_path / "h3_helper_listdir.py").write_text(textwrap.dedent("""\
        from os import listdir
        def count(d):
            return len(listdir(d))
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import h3_helper_listdir as helper
    d = tmp_path / "d"

    def f(x):
        return x * helper.count(d)
    got = _same_as_eager(f, lambda k: _files(d, k + 1), n=3, where="h3_helper_listdir.py:3")
    assert got == [[k + 1.0] * 2 for k in range(3)]


def test_io_fileio(tmp_path):
    p = tmp_path / "v.txt"

    def f(x):
        with io.FileIO(str(p)) as fh:
            return x * float(fh.read())
    _same_as_eager(f, lambda k: p.write_text(str(k + 1)))


def test_np_loadtxt(tmp_path):
    p = tmp_path / "v.txt"

    def f(x):
        return x * float(np.loadtxt(p))
    _same_as_eager(f, lambda k: p.write_text(str(k + 1)), where=_line_of(f, "loadtxt"))


def test_bz2_open(tmp_path):
    import bz2      # (which binds builtins.open to a name of its own as it loads)
    p = tmp_path / "v.bz2"

    def f(x):
        with bz2.open(p, "rt") as fh:
            return x * float(fh.read())

    def prepare(k):
        with bz2.open(p, "wt") as fh:
            fh.write(str(k + 1))
    _same_as_eager(f, prepare)


def test_a_socket_connected_in_the_function():
    import socket
    import threading
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    address, served = server.getsockname(), [0]

    def serve():
        while True:
            try:
                c, _ = server.accept()
            except OSError:
                return
            served[0] += 1
            c.sendall(str(served[0]).encode())
            c.close()
    threading.Thread(target=serve, daemon=True).start()

    def f(x):
        s = socket.socket()
        s.connect(address)
        r = float(s.recv(16))
        s.close()
        return x * r
    compiled = llgrad.compile(f)
    try:
        got, said = _calls(compiled, lambda k: None)
        assert any("running eagerly" in s for s in said), said
        assert got == [[k + 1.0] * 2 for k in range(4)]
    finally:
        server.close()


def test_a_socket_made_before_the_call():
    import socket
    a, b = socket.socketpair()

    def f(x):
        return x * float(b.recv(1))
    try:
        _same_as_eager(f, lambda k: a.sendall(str(k + 1).encode()))
    finally:
        a.close()
        b.close()


def test_sys_stdin(monkeypatch):
    def f(x):
        return x * float(sys.stdin.readline())
    _same_as_eager(f, lambda k: monkeypatch.setattr(sys, "stdin", io.StringIO(f"{k + 1}\n")))


def test_a_command_writing_a_file(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"

    def f(x):
        subprocess.run(["cp", str(src), str(dst)], check=True)
        return x + 1
    compiled = llgrad.compile(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(3):
            src.write_text(str(k))
            compiled(llgrad.ones(1))
            assert dst.read_text() == str(k)
    assert any("running eagerly" in str(w.message) for w in caught)


def test_os_system(tmp_path):
    out = tmp_path / "out"

    def f(x):
        os.system(f"echo . >> {out}")
        return x + 1
    compiled = llgrad.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(3):
            compiled(llgrad.ones(1))
    assert out.read_text().split() == ["."] * 3


def test_sqlite3_connect_in_the_function(tmp_path):
    sqlite3 = pytest.importorskip("sqlite3")
    path = str(tmp_path / "db.sqlite")
    with sqlite3.connect(path) as db:
        db.execute("create table t(v)")
        db.execute("insert into t values (0)")

    def f(x):
        db = sqlite3.connect(path)
        (v,), = db.execute("select v from t").fetchall()
        db.close()
        return x * float(v)

    def prepare(k):
        db = sqlite3.connect(path)
        db.execute("update t set v = ?", (k + 1,))
        db.commit()
        db.close()
    _same_as_eager(f, prepare)


def _write_value(path, v):
    np.save(path, np.float32(v))


def test_files_read_on_threads_the_function_starts(tmp_path):
    from concurrent.futures import ThreadPoolExecutor
    paths = [tmp_path / f"a{i}.npy" for i in range(3)]
    for p in paths:
        _write_value(p, 1)

    def f(x):
        with ThreadPoolExecutor(2) as pool:
            return x * float(sum(pool.map(np.load, paths)))
    _same_as_eager(f, lambda k: _write_value(paths[0], k + 1), n=3)


def test_files_read_in_processes_the_function_starts(tmp_path):
    import multiprocessing
    paths = [tmp_path / f"a{i}.npy" for i in range(2)]
    for p in paths:
        _write_value(p, 1)

    def f(x):
        with multiprocessing.get_context("fork").Pool(1) as pool:
            return x * float(sum(pool.map(np.load, paths)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)     # (fork with threads running)
        _same_as_eager(f, lambda k: _write_value(paths[0], k + 1), n=2)


def test_the_process_own_counters():
    import gc
    import resource
    kept = []

    def f(x):
        return x * 0 + float(resource.getrusage(resource.RUSAGE_SELF).ru_minflt) + \
            float(sys.getallocatedblocks()) + len(gc.get_objects())

    def prepare(k):      # (new pages touched, new objects kept: each count grows)
        kept.append(bytearray(1 << 22))
        kept.append([object() for _ in range(1000)])
    compiled = llgrad.compile(f)
    got, said = _calls(compiled, prepare)
    assert any("running eagerly" in s for s in said), said
    assert all(a[0] < b[0] for a, b in zip(got, got[1:])), got


def test_os_getcwd(tmp_path, monkeypatch):
    dirs = [tmp_path, tmp_path / "a_longer_directory_name"]
    dirs[1].mkdir()

    def f(x):
        return x * len(os.getcwd())
    _same_as_eager(f, lambda k: monkeypatch.chdir(dirs[k % 2]))
