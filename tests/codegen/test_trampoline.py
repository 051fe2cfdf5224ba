"""The native trampoline (codegen/native/trampoline.py) and the lean launch (kernel.py): kernels
give the same results, raise the same errors and run from several threads at once through
the trampoline and through ctypes (LLGRAD_TRAMPOLINE=0, or a failed build); the trampoline
releases the GIL, keeps None's reference count and never reaches the disk cache."""
import ctypes
import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import llgrad
from llgrad.codegen.native import cache, host, jit, trampoline
from llgrad.codegen import kernel
from llgrad.codegen.lower import lower
from llgrad.ir import Builder, TensorType
from llgrad.ir.interpret import evaluate

PATHS = ["trampoline", "ctypes"]


@pytest.fixture(autouse=True)
def _default_switch(monkeypatch):
    monkeypatch.delenv("LLGRAD_TRAMPOLINE", raising=False)


@pytest.fixture(params=PATHS)
def path(request, monkeypatch):
    """Kernels lowered in the test call their entry through this path."""
    monkeypatch.setenv("LLGRAD_TRAMPOLINE", "1" if request.param == "trampoline" else "0")
    return request.param


def _is_builtin(fn):
    return type(fn) is type(len)


def _probe():
    """The probe (p[0] += 1; p[1] = whether the GIL is held) behind a builtin."""
    tramp = trampoline._get()
    assert tramp is not None, trampoline.failure
    return trampoline.caller(tramp.compiled.address(trampoline._PROBE))


def _elementwise(n=37, dtype="float32"):
    bld = Builder("tramp_ew")
    x = bld.input(TensorType(dtype, (n,)))
    y = bld.input(TensorType(dtype, (n,)))
    t = bld.add("tanh", [bld.add("mul", [x, y])])
    return bld.ret(t, bld.add("sum", [t], {"dim": None, "keepdim": False}))


def _kernel_and_data(n=37):
    g = _elementwise(n)
    rng = np.random.default_rng(3)
    return g, lower(g), [rng.standard_normal(n).astype(np.float32) for _ in range(2)]


# ---- the trampoline itself ---------------------------------------------------------------
def test_builds_and_runs_the_probe_once_without_the_gil():
    assert trampoline.enabled(), trampoline.failure
    assert trampoline.build_seconds is not None and trampoline.failure is None
    words = (ctypes.c_int64 * 2)(0, -1)
    call = _probe()
    for k in range(1, 4):
        assert call(ctypes.addressof(words)) is None
        assert list(words) == [k, 0]              # ran once; PyGILState_Check() == 0


def test_bad_arguments_raise_and_run_nothing():
    words = (ctypes.c_int64 * 2)(0, -1)
    call = _probe()
    with pytest.raises(ValueError, match="null"):
        call(0)
    with pytest.raises(TypeError):
        call("not an address")
    with pytest.raises(TypeError):
        call()
    assert list(words) == [0, -1]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="None is immortal from 3.12")
def test_none_reference_count_is_kept():
    words = (ctypes.c_int64 * 2)()
    call, addr = _probe(), ctypes.addressof(words)
    call(addr)
    before = sys.getrefcount(None)
    for _ in range(10000):
        call(addr)
    assert abs(sys.getrefcount(None) - before) < 100     # (one leak a call: 10000)


def test_builtins_keep_their_trampoline_alive_across_reset():
    call = _probe()
    trampoline._reset()
    try:
        words = (ctypes.c_int64 * 2)()
        assert call(ctypes.addressof(words)) is None and words[0] == 1
        assert call.__self__.owner is not trampoline._get()   # a new one was built
    finally:
        trampoline._reset()


def test_a_failed_build_falls_back_to_ctypes(monkeypatch):
    def broken():
        raise OSError("no C API here")
    trampoline._reset()
    monkeypatch.setattr(trampoline, "_build", broken)
    try:
        g, k, arrays = _kernel_and_data()
        assert not trampoline.enabled() and "no C API here" in trampoline.failure
        assert isinstance(k._fn, ctypes._CFuncPtr)
        got = k(arrays)
        np.testing.assert_allclose(got[0], evaluate(g, arrays)[0][0], rtol=1e-6)
    finally:
        monkeypatch.undo()
        trampoline._reset()


def test_the_switch_picks_the_path(path):
    _, k, _ = _kernel_and_data()
    if path == "trampoline":
        assert _is_builtin(k._fn) and k._fn.__self__ == k.address
    else:
        assert isinstance(k._fn, ctypes._CFuncPtr)


_CHILD = textwrap.dedent("""
    import json, ctypes
    from llgrad.codegen.native import trampoline
    words = (ctypes.c_int64 * 2)(1, 0)
    f = trampoline.caller(trampoline._get().compiled.address(trampoline._PROBE))
    f(ctypes.addressof(words))
    print(json.dumps({"origin": trampoline.origin, "failure": trampoline.failure,
                      "words": list(words)}))
""")


@pytest.mark.slow
def test_second_process_loads_it_from_the_disk_cache(tmp_path, monkeypatch):
    # its object file names the C API by symbols resolved when it is linked, so a
    # process with other addresses (ASLR) runs the cached code
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(tmp_path), LLGRAD_TRAMPOLINE="1")
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert [r["origin"] for r in runs] == ["built", "disk cache"]
    assert all(r["failure"] is None and r["words"] == [2, 0] for r in runs)
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(tmp_path))   # (read it here too)
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.parent == tmp_path
             and (cache.load(p.stem) or [None])[0] != host.ENTRY]   # (the host's record;
    # not llgrad's own modules' bytecode, in modules/ where Python writes none: _bytecode.py)
    assert len(files) == 1
    _, obj, before, after = cache.load(files[0].stem)
    assert before == after == b""           # (no IR text kept)


# ---- kernels through both paths ----------------------------------------------------------
def test_results_are_identical_on_both_paths(monkeypatch):
    g, _, arrays = _kernel_and_data()
    got = {}
    for p in PATHS:
        monkeypatch.setenv("LLGRAD_TRAMPOLINE", "1" if p == "trampoline" else "0")
        got[p] = lower(g)(arrays)
    for a, b in zip(got["trampoline"], got["ctypes"]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(got["ctypes"], evaluate(g, arrays)[0]):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_error_words_raise_on_both_paths(path):
    bld = Builder("tramp_oob")
    x = bld.input(TensorType("float64", (5, 4)))
    i = bld.input(TensorType("int64", (3,)))
    k = lower(bld.ret(bld.add("index_select", [x, i], {"dim": 0})))
    xa = np.arange(20.0).reshape(5, 4)
    for bad in (np.array([0, 5, 1]), np.array([-6, 0, 1])):
        with pytest.raises(IndexError):
            k([xa, bad])
    (out,) = k([xa, np.array([4, 0, 2])])              # later calls are unaffected
    np.testing.assert_array_equal(out, xa[[4, 0, 2]])


def test_out_of_spec_inputs_raise_on_both_paths(path):
    """The lean launch's checks are the general one's: every bad input raises, with no
    native call; inputs the slow check accepts (a list, a size-1 dim's odd stride) run."""
    bld = Builder("tramp_spec")
    x = bld.input(TensorType("float32", (1, 8)))
    y = bld.input(TensorType("float32", (1, 8)))
    g = bld.ret(bld.add("add", [x, y], {"alpha": 1}))
    k = lower(g)
    good = np.ones((1, 8), np.float32)
    misaligned = np.frombuffer(b"\0" * 33, np.uint8)[1:].view(np.float32).reshape(1, 8)
    for arrays, msg in (([good], "takes 2 inputs"), ([good, good, good], "takes 2 inputs"),
                        ([good, np.ones((1, 8))], "dtype"), ([good, np.ones((8,), "f4")],
                                                               "shape"),
                        ([good, np.ones((1, 16), np.float32)[:, ::2]], "strides"),
                        ([misaligned, good], "aligned"), ([good, misaligned], "aligned")):
        with pytest.raises(ValueError, match=msg):
            k(arrays)
    class Sub(np.ndarray):
        pass
    odd = np.lib.stride_tricks.as_strided(good, (1, 8), (12345 * 4, 4))    # (size-1 dim)
    for arrays in ([good, good], [good.view(Sub), good], [odd, 2 * good], (good, 3 * good)):
        (out,) = k(arrays)
        np.testing.assert_array_equal(out, np.add(*[np.asarray(a) for a in arrays]))


def test_not_direct_kernels_launch_leanly_too(path):
    """run() (outputs rebuilt as views) takes the lean launch, which returns the inputs."""
    bld = Builder("tramp_view")
    x = bld.input(TensorType("float64", (4, 6)))
    y = bld.add("exp", [x])
    g = bld.ret(y, bld.add("t", [y], {}, view_of=y))
    k = lower(g)
    xa = np.linspace(-1, 1, 24).reshape(4, 6)
    assert k._launch.__code__.co_filename.startswith("<launch of")
    a, b = k([xa])
    np.testing.assert_allclose(a, np.exp(xa), rtol=1e-15)
    np.testing.assert_array_equal(b, a.T)
    assert np.shares_memory(a, b)


def test_kernels_from_several_threads_at_once(path):
    """Native code runs without the GIL on both paths: four threads in one kernel, each
    with a private context, every result right."""
    n = 4096
    _, k, _ = _kernel_and_data(n)
    errors, barrier = [], threading.Barrier(4)

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            barrier.wait()
            for _ in range(100):
                arrays = [rng.standard_normal(n).astype(np.float32) for _ in range(2)]
                got = k(arrays)
                want = np.tanh(arrays[0] * arrays[1])
                np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-6)
        except BaseException as e:          # reported in the main thread
            errors.append(e)
    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads) and not errors, errors


def test_compiled_value_and_grad_matches_on_both_paths(monkeypatch):
    rng = np.random.default_rng(5)
    xa = rng.standard_normal(16).astype(np.float32)
    got = {}
    for p in PATHS:
        monkeypatch.setenv("LLGRAD_TRAMPOLINE", "1" if p == "trampoline" else "0")
        vg = llgrad.value_and_grad(lambda x: ((x * 0.5).tanh() * x).sigmoid().sum(),
                                   backend="llvm")
        x = llgrad.tensor(xa)
        for _ in range(3):                  # traced, then the quick runner
            v, gx = vg(x)
            vg.wait()
        kern = vg.entries[0].kernels["forward"]
        assert _is_builtin(kern._fn) == (p == "trampoline")
        got[p] = (v.numpy(), gx.numpy())
    for a, b in zip(got["trampoline"], got["ctypes"]):
        np.testing.assert_array_equal(a, b)


# ---- the pieces the lean call path relies on -----------------------------------------------
def test_data_pointer_reads_what_ctypes_reads():
    base = np.arange(64.0)
    for a in (base, base[3:], base[::-3], base.reshape(8, 8).T, np.float32(2)[()],
              np.empty(0), np.ones((2, 3), np.int8)[:, 1:]):
        a = np.asarray(a)
        assert kernel.data_pointer(a) == a.ctypes.data


def test_fresh_tensor_storages_are_what_storage_makes():
    from llgrad.compile.fastpath import fresh_tensors
    from llgrad.runtime.tensor import Storage
    arrays = [np.ones(3, np.float32), np.zeros((2, 2))]
    for t, arr in zip(fresh_tensors(arrays), arrays):
        want = Storage(arr)
        for slot in Storage.__slots__:
            assert getattr(t._storage, slot) is getattr(want, slot), slot
