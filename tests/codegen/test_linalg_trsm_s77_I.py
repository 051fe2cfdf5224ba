"""Triangular solves run on BLAS trsm (llgrad/ir/blas_trsm.py) in eager mode, and compiled
code calls that back for matrices past the native loop's size (codegen/lowerings/
ops_linalg.py): solve_triangular (upper/lower, left/right, unitriangular), cholesky_solve,
cholesky_inverse, triangular_solve and cholesky, their gradients, strided and broadcast
operands, float32/float64, empty and singular matrices, as torch's."""
import numpy as np
import pytest

import llgrad
from llgrad.ir import blas_trsm, ops_linalg_solve

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)


def _tri(shape, dt):
    n = shape[-1]
    return (RNG.standard_normal(shape) + 2 * n ** 0.5 * np.eye(n)).astype(dt)


def _spd(n, dt=np.float64):
    m = RNG.standard_normal((n, n))
    return (m @ m.T / n + np.eye(n)).astype(dt)


def _both(fn, *arrays, grads=True):
    """fn(lib, *tensors) on torch and llgrad: [(result, grads)] per library."""
    out = []
    for lib in (torch, llgrad):
        ts = [lib.tensor(a, requires_grad=grads) for a in arrays]
        r = fn(lib, *ts)
        if grads:
            (r * lib.tensor(np.linspace(-1, 1, r.numel()).reshape(r.shape).astype(
                arrays[0].dtype))).sum().backward()
        out.append((r.detach().numpy(), [t.grad.numpy() for t in ts] if grads else []))
    return out


def _close(got, want, dt):
    tol = 2e-4 if dt == np.float32 else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [True, False])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_solve_triangular_as_torch(dt, upper, left, unit, layout):
    A = _tri((2, 6, 6), dt)
    B = RNG.standard_normal((3, 2, 6, 5) if left else (3, 2, 5, 6)).astype(dt)

    def fn(lib, a, b):
        if layout == "transposed":
            a = a.mT.contiguous().mT          # (column-major matrices)
        elif layout == "strided":
            a = a.repeat_interleave(2, -1)[..., ::2]
            b = b.mT.contiguous().mT
        return lib.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit)

    (want, wg), (got, gg) = _both(fn, A, B)
    assert got.dtype == want.dtype
    _close(got, want, dt)
    for g, w in zip(gg, wg):
        _close(g, w, dt)


def test_many_small_matrices_and_mixed_batches_as_torch():
    # (a batch too many for one trsm call each: the row loop; A broadcast over B's batch)
    for a_shape, b_shape in [((300, 3, 3), (300, 3, 2)), ((4, 4), (5, 4, 3)),
                             ((5, 1, 4, 4), (3, 4, 2))]:
        A, B = _tri(a_shape, np.float64), RNG.standard_normal(b_shape)
        (want, wg), (got, gg) = _both(
            lambda lib, a, b: lib.linalg.solve_triangular(a, b, upper=False), A, B)
        _close(got, want, np.float64)
        for g, w in zip(gg, wg):
            _close(g, w, np.float64)


def test_empty_and_singular_as_torch():
    for a_shape, b_shape, left in [((0, 0), (0, 3), True), ((3, 3), (3, 0), True),
                                   ((0, 3, 3), (0, 3, 2), True), ((0, 0), (2, 0), False)]:
        (want, _), (got, _) = _both(
            lambda lib, a, b: lib.linalg.solve_triangular(a, b, upper=True, left=left),
            np.zeros(a_shape), np.zeros(b_shape), grads=False)
        assert got.shape == want.shape
    A = np.triu(_tri((5, 5), np.float64))
    A[1, 1] = 0.0
    B = RNG.standard_normal((5, 3))
    for left in (True, False):
        (want, _), (got, _) = _both(
            lambda lib, a, b: lib.linalg.solve_triangular(a, b if left else b.mT, upper=True,
                                                          left=left), A, B, grads=False)
        np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("upper", [True, False])
def test_cholesky_solve_inverse_triangular_solve_as_torch(upper):
    K = _spd(7)
    L = np.linalg.cholesky(K)
    L = L.T.copy() if upper else L
    B = RNG.standard_normal((2, 7, 3))
    (want, wg), (got, gg) = _both(lambda lib, b, f: lib.cholesky_solve(b, f, upper=upper), B, L)
    _close(got, want, np.float64)
    for g, w in zip(gg, wg):
        _close(g, w, np.float64)
    (want, wg), (got, gg) = _both(lambda lib, f: lib.cholesky_inverse(f, upper=upper), L)
    _close(got, want, np.float64)
    _close(gg[0], wg[0], np.float64)
    for transpose in (True, False):
        (want, wg), (got, gg) = _both(
            lambda lib, b, a: lib.triangular_solve(b, a, upper=upper, transpose=transpose)[0],
            B, L)
        _close(got, want, np.float64)
        for g, w in zip(gg, wg):
            _close(g, w, np.float64)


def test_gradcheck_float64():
    A = _tri((2, 4, 4), np.float64)
    B = RNG.standard_normal((2, 4, 3))
    L = np.linalg.cholesky(_spd(4))
    for fn, args in [
            (lambda a, b: llgrad.linalg.solve_triangular(a, b, upper=True, left=True), (A, B)),
            (lambda a, b: llgrad.linalg.solve_triangular(a, b.mT, upper=False, left=False),
             (A, B)),
            (lambda b, f: llgrad.cholesky_solve(b, f.tril()), (B, L)),
            (lambda k: llgrad.linalg.cholesky(k @ k.mT + llgrad.eye(4, dtype=k.dtype)),
             (L,))]:
        ts = [llgrad.tensor(a, requires_grad=True) for a in args]
        assert llgrad.autograd.gradcheck(fn, ts)


def test_a_large_solve_makes_one_trsm_call_not_a_numpy_call_per_row(monkeypatch):
    # (the row loop's one np.einsum per row was ~60% of the GP step's eager time)
    calls = []
    real = blas_trsm.trsm
    monkeypatch.setattr(ops_linalg_solve, "trsm", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(ops_linalg_solve.np, "einsum",
                        lambda *a, **k: pytest.fail("a per-row NumPy call"))
    A = _tri((256, 256), np.float64)
    B = RNG.standard_normal((256, 256))
    x = llgrad.cholesky_solve(llgrad.tensor(B), llgrad.tensor(np.tril(A)))
    assert len(calls) == 2
    want = torch.cholesky_solve(torch.tensor(B), torch.tensor(np.tril(A)))
    np.testing.assert_allclose(x.numpy(), want.numpy(), rtol=1e-9, atol=1e-12)


def test_compiled_cholesky_gradient_calls_trsm(monkeypatch):
    # (the native loops took 16 ms for a 256x256 solve against 256 columns, trsm 1.2 ms)
    K = _spd(64)
    W = RNG.standard_normal((64, 64))

    def step(lib, k):
        (lib.linalg.cholesky(k) * lib.tensor(W)).sum().backward()

    cf = llgrad.compile(lambda k: step(llgrad, k))
    res, calls = [], []
    real = blas_trsm.trsm
    monkeypatch.setattr(ops_linalg_solve, "trsm", lambda *a: calls.append(1) or real(*a))
    for lib, fn in ((torch, lambda k: step(torch, k)), (llgrad, lambda k: step(llgrad, k)),
                    (llgrad, cf), (llgrad, cf)):
        k = lib.tensor(K, requires_grad=True)
        fn(k)
        if fn is cf:
            cf.wait()                   # (LLGRAD_COMPILE=background: once it is built)
        res.append(k.grad.numpy())
        calls.clear()
    fn(lib.tensor(K, requires_grad=True))       # (the built code: its 2 solves by trsm)
    assert len(calls) == 2 and cf.n_traces == 1
    for got in res[1:]:
        _close(got, res[0], np.float64)
    np.testing.assert_allclose(res[3], res[1], rtol=1e-12, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("n", [4, 64])
def test_compiled_equals_eager_and_torch(n, monkeypatch):
    # (n=4: the native loops; n=64: past HOST_WORK, the eager implementation (trsm) called
    # back: the native loops took 10 ms for a 256x256 solve against 256 columns)
    K, B, A = _spd(n), RNG.standard_normal((n, 3)), _tri((n, n), np.float64)

    def step(lib, k, b, a):
        low = lib.linalg.cholesky(k)
        x = lib.cholesky_solve(b, low)
        y = lib.linalg.solve_triangular(a.triu(), x, upper=True)
        z = lib.linalg.solve_triangular(a.tril(), y.mT, upper=False, left=False)
        loss = (z * z).sum() + lib.log(lib.diagonal(low)).sum()
        loss.backward()
        return loss.detach()

    res = []
    cf = llgrad.compile(lambda *t: step(llgrad, *t))
    for lib, fn in ((torch, lambda *t: step(torch, *t)), (llgrad, lambda *t: step(llgrad, *t)),
                    (llgrad, cf), (llgrad, cf)):
        ts = [lib.tensor(a, requires_grad=True) for a in (K, B, A)]
        calls = []
        real = blas_trsm.trsm
        monkeypatch.setattr(ops_linalg_solve, "trsm", lambda *a: calls.append(1) or real(*a))
        out = fn(*ts)
        if fn is cf:
            cf.wait()                   # (LLGRAD_COMPILE=background: once it is built)
        res.append([out.numpy()] + [t.grad.numpy() for t in ts])
    assert cf.n_traces == 1
    # (the last call ran the built code. cholesky_solve and its gradient always call the
    # eager implementation back: 2 + 2 trsm; the two 64x64 solves of cholesky's gradient
    # are past HOST_WORK: 2 more; the solves against 3 columns stay native loops)
    assert len(calls) == (6 if n == 64 else 4)
    for got in res[1:]:
        for g, w in zip(got, res[0]):
            _close(g, w, np.float64)
    for g, w in zip(res[3], res[1]):        # compiled (run natively) == eager
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    kernels = [k for e in cf.entries for k in e.kernels.values()]
    assert kernels and not [k for k in kernels if isinstance(k, str)]


@pytest.mark.parametrize("blas", [True, False])
def test_every_triangular_form_against_a_dense_solve(monkeypatch, blas):
    """Each form by trsm and by the row loop (blas=False: every batch too many for trsm) on
    orders 1-5, against NumPy's dense solve of the triangle: a 1x1 A's row stride made an
    illegal lda (trsm returned x untouched), and the loop solved X A = B with A's transpose."""
    import itertools
    monkeypatch.setattr(blas_trsm, "_MATRICES_PER_ROW", 8 if blas else 0)
    rng = np.random.default_rng(0)
    for n, k, batch, upper, left, unit, trans in itertools.product(
            [1, 2, 5], [1, 3], [(), (20,)], *[[False, True]] * 4):
        a = rng.standard_normal(batch + (n, n)) + 3 * np.eye(n)
        b = rng.standard_normal(batch + ((n, k) if left else (k, n)))
        x = ops_linalg_solve._trisolve(a, b, upper, unit, left=left, trans=trans)
        m = np.triu(a) if upper else np.tril(a)
        if unit:
            m[..., range(n), range(n)] = 1
        if trans:
            m = np.swapaxes(m, -1, -2)
        want = np.linalg.solve(m, b) if left else np.swapaxes(
            np.linalg.solve(np.swapaxes(m, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
        np.testing.assert_allclose(x, want, rtol=1e-10, atol=1e-12,
                                   err_msg=f"{n, k, batch, upper, left, unit, trans}")
