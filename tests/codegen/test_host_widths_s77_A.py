"""Native code at the host's own vector widths: kernels JIT for the host CPU, so the tiles,
masked tails and host-gated rules differ between an AVX2 host (gemm.py's 6 x 2*8 float32
tile, the shared-weight rule off) and an AVX-512 one (8 x 2*16, the rule on: see
codegen/lowerings/shared_weight_gemm.py). These cases take their sizes from the host's
widths (one below, at, one above a vector, a tile, two of each), so every host runs its own
edges.

- gemm.py called directly (tests/codegen/test_gemm.py's guarded call: nothing written
  outside C) at the host's tile edges, every operand layout, against float64 NumPy;
- recurrences h_{t+1} = tanh(h_t @ W) with the rule left to the host (not forced), compiled
  against the IR interpreter: on a 512-bit host the products run on gemm.py ("small");
- reductions of rows of the host's tail lengths with NaN, +-inf and -0.0 placed in the first
  lane, in the last lane of the first vector, in the tail: compiled against eager (NaN where
  eager has NaN, equal values, argmax's index), eager against torch. Not the sign of a zero
  that amax / amin pick from a +0 / -0 tie: NumPy's SIMD loops pick it by lane (eager
  differs between lengths 16 and 17 on AVX-512), native code always picks +0 / -0.

Marked slow: a random sweep of M, N, K in 1..70 and a few large shapes; the reductions at
every tail size in float64 and transposed; nn.LSTM / GRU / RNN training steps at odd sizes
compiled against eager and torch (the rule on by itself on a 512-bit host)."""
import os
import sys
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.codegen.build import blas_available
from llgrad.codegen.kernel import Kernel
from llgrad.codegen.lower import lower
from llgrad.codegen.lowerings import shared_weight_gemm
from llgrad.codegen.native import jit
from llgrad.ir.interpret import evaluate

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gemm as _gemm  # noqa: E402  (the guarded direct call)
import test_shared_weight_gemm_s69_l3 as _sw  # noqa: E402  (graphs, RNN steps)

NAN, INF = float("nan"), float("inf")


def _widths(dtype):
    """(vector width in elements, rows of gemm.py's tile) as gemm.ensure_library picks them."""
    bits = jit.jit().vector_bits
    return max(bits // (32 if dtype == "float32" else 64), 2), (8 if bits >= 512 else 6)


def _around(n):
    return sorted({max(1, n - 1), n, n + 1})


@pytest.fixture(autouse=True)
def _host_decides(monkeypatch):
    # (the rule as this host takes it: neither forced on nor off)
    monkeypatch.delenv("LLGRAD_SHARED_WEIGHT_GEMM", raising=False)


# ---- gemm.py at the host's tile edges ---------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gemm_at_the_host_tile_edges(dtype):
    vw, mr = _widths(dtype)
    rng = np.random.default_rng(77)
    Ms = _around(mr) + [2 * mr + 1]
    Ns = _around(vw) + [2 * vw, 2 * vw + vw // 2 + 1]
    for lay in ("NN", "NT", "TN", "TT"):
        for M in Ms:
            for N in Ns:
                for K in (1, vw + 1):
                    _gemm._call(dtype, M, N, K, lay[0], lay[1], rng, ldc_pad=M % 3)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gemm_random_shapes_up_to_70_and_large(dtype):
    rng = np.random.default_rng(7)
    for lay in ("NN", "NT", "TN", "TT"):
        for _ in range(300):
            M, N, K = (int(v) for v in rng.integers(1, 71, 3))
            _gemm._call(dtype, M, N, K, lay[0], lay[1], rng, ldc_pad=int(rng.integers(0, 4)))
        for M, N, K in [(32, 512, 128), (33, 1000, 129), (200, 300, 70), (1, 4096, 16)]:
            _gemm._call(dtype, M, N, K, lay[0], lay[1], rng)


# ---- the shared-weight rule as the host takes it -----------------------------------------

def _shared_weight_case(dt, M, K, N, a_layout, b_layout, addmm, seed):
    g, ins = _sw._recurrence(dt, M=M, K=K, N=N, a_layout=a_layout, b_layout=b_layout,
                             addmm=addmm)
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(v.type.shape).astype(dt) for v in ins]
    k = lower(g)
    want, _ = evaluate(g, arrays)
    tol = 2e-5 if dt == "float32" else 1e-12
    for a, b in zip(k(arrays), want):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * K)
    if blas_available():
        wide = jit.jit().vector_bits >= shared_weight_gemm.MIN_VECTOR_BITS
        assert _sw._kinds(k) == ["small" if wide else "blas"] * 3, _sw._kinds(k)


@pytest.mark.parametrize("dt,a_layout,b_layout,addmm", [
    ("float32", "dense", "dense", False), ("float64", "transposed", "sliced", True)])
def test_shared_weight_products_at_the_host_edges(dt, a_layout, b_layout, addmm):
    before = llgrad.get_num_threads()
    llgrad.set_num_threads(1)       # (the rule's own GEMM runs on one thread only)
    try:
        vw, mr = _widths(dt)
        for M, N in [(mr + 1, vw + 1), (2 * mr + 1, 2 * vw + 1)]:
            _shared_weight_case(dt, M, N - 1, N, a_layout, b_layout, addmm, M)
    finally:
        llgrad.set_num_threads(before)


# ---- reductions with NaN / inf / -0.0 at the host's tail lengths ---------------------------

def _rows(n, dt, vw):
    r = np.random.default_rng(n)
    m = r.normal(size=(8, n))
    m[0, -1] = NAN                          # in the tail
    m[1, 0] = NAN                           # the first lane
    m[2, min(vw - 1, n - 1)] = NAN          # the last lane of the first vector
    m[2, n // 3] = INF
    m[3] = -0.0
    m[4] = -INF
    m[5, min(vw, n - 1)], m[5, 0] = INF, -INF
    m[6] = 1.0
    m[6, min(vw + 1, n - 1)] = m[6, n - 1] = 3.0    # ties: the first index
    m[7] = 0.0
    m[7, ::2] = -0.0
    return m.astype(dt)


def _reductions(m, x):
    F = m.nn.functional
    return (x.sum(-1), x.amax(-1), x.amin(-1), x.max(-1)[0], x.argmax(-1), x.argmin(-1),
            m.logsumexp(x, -1), m.softmax(x, -1), F.layer_norm(x, x.shape[-1:]), x.var(-1),
            x.amax(0), x.argmax(0), x.sum(0))


def _array(t):
    return np.array(t.numpy())


def _same(a, b, exact):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f" and not np.array_equal(np.isnan(a), np.isnan(b)):
        return False
    if exact:
        return np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    return np.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)


# names whose native sums run in another order (within float32 rounding, NaN placed alike)
_APPROX = {0, 6, 7, 8, 9, 12}


def _check_reductions(dt, sizes, transposed=False):
    vw, _ = _widths(dt)
    datas = [_rows(n, dt, vw) for n in sizes]
    if transposed:
        datas = [np.ascontiguousarray(d.T) for d in datas]

    def fn(m, *xs):
        return tuple(o for x in xs for o in _reductions(m, x.t() if transposed else x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager = [_array(o) for o in fn(llgrad, *map(llgrad.tensor, datas))]
        ref = [_array(o) for o in fn(torch, *map(torch.from_numpy, datas))]
        f = llgrad.compile(lambda *xs: fn(llgrad, *xs), backend="llvm")
        f(*map(llgrad.tensor, datas))
        f.wait()        # (LLGRAD_COMPILE=background: the native code, built)
        got = [_array(o) for o in f(*map(llgrad.tensor, datas))]
    notes = [str(k) for e in f.entries for k in e.kernels.values() if not isinstance(k, Kernel)]
    assert not notes, notes
    per = len(eager) // len(sizes)
    bad = []
    for i, (g, e, t) in enumerate(zip(got, eager, ref)):
        approx = i % per in _APPROX
        where = f"size {sizes[i // per]} output {i % per}"
        if not _same(g, e, exact=not approx):
            bad.append(f"{where}: compiled {g.tolist()} eager {e.tolist()}")
        if not _same(e, t, exact=False):
            bad.append(f"{where}: eager {e.tolist()} torch {t.tolist()}")
    assert not bad, "\n".join(bad[:10])


def test_reductions_at_the_host_tails_float32():
    vw, _ = _widths("float32")
    _check_reductions("float32", [vw - 1, 2 * vw + 1])


@pytest.mark.slow
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("transposed", [False, True])
def test_reductions_at_every_tail_size(dt, transposed):
    _check_reductions(dt, [1, 3, 15, 16, 17, 31, 33, 63, 65, 127, 129, 1000], transposed)


# ---- recurrent training steps (the rule by itself on a 512-bit host) ---------------------

@pytest.mark.slow
@pytest.mark.parametrize("kind,batch,hidden", [
    ("LSTM", 3, 17), ("GRU", 7, 33), ("RNN", 9, 15), ("LSTM", 17, 31), ("GRU", 32, 65),
    ("RNN", 31, 1)])
def test_recurrent_steps_at_odd_sizes_equal_eager_and_torch(kind, batch, hidden):
    before = llgrad.get_num_threads()
    llgrad.set_num_threads(1)
    try:
        seq = 4
        fn, params, x, y = _sw._step(torch, kind, batch, seq, hidden, 1)
        loss = fn(x, y)
        want = [loss.item()] + [g.numpy() for g in torch.autograd.grad(loss, params)]
        got = {}
        for compiled in (False, True):
            fn, params, x, y = _sw._step(llgrad, kind, batch, seq, hidden, 1)
            run = llgrad.compile(fn) if compiled else fn
            for _ in range(3 if compiled else 1):
                loss = run(x, y)
                if compiled:
                    run.wait()
                got[compiled] = [loss.item()] + [
                    g.numpy() for g in llgrad.autograd.grad(loss, params)]
            if compiled:
                assert any(e.kernels for e in run.entries)
        for mine, theirs, rtol in ((got[True], got[False], 1e-5), (got[False], want, 1e-4)):
            np.testing.assert_allclose(mine[0], theirs[0], rtol=rtol)
            for a, b in zip(mine[1:], theirs[1:]):
                np.testing.assert_allclose(a, b, rtol=rtol,
                                           atol=rtol * max(1e-3, float(np.abs(b).max())))
    finally:
        llgrad.set_num_threads(before)
