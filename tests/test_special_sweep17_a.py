"""torch.special's Bessel and Airy functions, i0e / i1 / i1e, orthogonal polynomials and
zeta (llgrad/special_series.py over llgrad/ir/ops_special_bessel.py) against PyTorch:
values in float32 and float64 over wide ranges, dtypes, broadcasting, autograd and
compiled == eager."""
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.special_series import BESSEL, POLYNOMIALS, SCALED_I

torch = pytest.importorskip("torch")

_rng = np.random.default_rng(1717)
_SPECIALS = [0.0, -0.0, 1.0, -1.0, 2.0, 2.09, -2.09, 5.0, -5.0, 8.0, -8.0, 103.9, 700.0,
             -700.0, 1e4, 1e30, -1e30, 1e-30, np.inf, -np.inf, np.nan]
_XS = np.concatenate([_rng.uniform(-10, 10, 600), _rng.uniform(-3, 3, 200),
                      10.0 ** _rng.uniform(-8, 3, 100), -10.0 ** _rng.uniform(-8, 3, 100),
                      _SPECIALS])


def _close(ours, ref, dt, ulps):
    """Equal nan / inf positions, else within ulps machine epsilons of max(|ref|, 1)."""
    a, b = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    assert np.array_equal(np.isnan(a), np.isnan(b))
    fin = np.isfinite(b)
    assert np.array_equal(a[~fin & ~np.isnan(b)], b[~fin & ~np.isnan(b)])
    err = np.abs(a[fin] - b[fin]) / np.maximum(np.abs(b[fin]), 1.0)
    assert err.max(initial=0.0) <= ulps * np.finfo(dt).eps, err.max()


def _both(arr):
    return llgrad.tensor(arr), torch.tensor(arr)


def test_every_torch_special_name_exists_and_no_extra_aliases():
    assert sorted(set(torch.special.__all__) - set(dir(llgrad.special))) == []
    for name in BESSEL + SCALED_I + POLYNOMIALS + ("zeta",):
        assert hasattr(llgrad, name) == hasattr(torch, name), name
        assert hasattr(llgrad.Tensor, name) == hasattr(torch.Tensor, name), name


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("name", BESSEL + SCALED_I)
def test_unary_values(name, dt):
    x = _XS.astype(dt)
    ours = getattr(llgrad.special, name)(llgrad.tensor(x))
    ref = getattr(torch.special, name)(torch.tensor(x))
    assert ours.dtype.name == str(ref.dtype).split(".")[1]
    # (PyTorch's series step for step, with its fused multiply-adds and libm's functions:
    # equal bit for bit on x86-64 glibc; a few ulps leave room for another libm)
    _close(ours.numpy(), ref.numpy(), dt, 4)


_PX = np.concatenate([_rng.uniform(-1.5, 1.5, 60), _rng.uniform(-0.2, 1.2, 30),
                      [0.0, -0.0, 1.0, -1.0, 0.5, np.inf, -np.inf, 1e10]])
_PN = np.array([-3, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 20, 2.5, -0.5, 6.9, np.nan,
                np.inf, -np.inf, 1e30, 600])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_values(name, dt):
    x, n = (a.astype(dt) for a in np.meshgrid(_PX, _PN))
    ours = getattr(llgrad.special, name)(llgrad.tensor(x), llgrad.tensor(n))
    ref = getattr(torch.special, name)(torch.tensor(x), torch.tensor(n))
    # (a few ulps: the float64 recurrences near overflow, 1e304, round their FMA twice)
    _close(ours.numpy(), ref.numpy(), dt, 16)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_nan_x_small_degree(name):
    # (from n = 2 PyTorch's result for a nan x is whatever its loop left unset: not compared)
    x, n = np.meshgrid([np.nan], [-1.0, 0.0, 1.0])
    ours = getattr(llgrad.special, name)(llgrad.tensor(x), llgrad.tensor(n))
    ref = getattr(torch.special, name)(torch.tensor(x), torch.tensor(n))
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_zeta_values(dt):
    q, x = (a.astype(dt) for a in np.meshgrid(
        np.concatenate([_rng.uniform(-5, 5, 80), [0, -1, -2.5, 1, 2, np.inf, np.nan, 1e-3, 1e5]]),
        np.concatenate([_rng.uniform(0, 10, 20), [1, 2, 3, 0.5, -1, np.nan, np.inf, 30, 100]])))
    ours = llgrad.special.zeta(llgrad.tensor(x), llgrad.tensor(q))
    ref = torch.special.zeta(torch.tensor(x), torch.tensor(q))
    _close(ours.numpy(), ref.numpy(), dt, 4)


@pytest.mark.parametrize("call", [
    lambda m, x: m.special.bessel_j0(x), lambda m, x: m.special.i1(x),
    lambda m, x: m.special.chebyshev_polynomial_t(x, 3),
    lambda m, x: m.special.chebyshev_polynomial_u(0.25, x),
    lambda m, x: m.special.zeta(x, 2), lambda m, x: m.special.zeta(3, x),
    lambda m, x: m.special.zeta(x + 2, m.tensor(1.5, dtype=m.float64)),
    lambda m, x: m.special.legendre_polynomial_p(x.float(), x.double()[:2].reshape(2, 1)),
])
@pytest.mark.parametrize("dtype", ["int64", "bool", "float32", "float64"])
def test_dtypes_and_broadcasting(call, dtype):
    x = np.array([1, 0, 3]).astype(dtype)
    ours, ref = call(llgrad, llgrad.tensor(x)), call(torch, torch.tensor(x))
    assert ours.dtype.name == str(ref.dtype).split(".")[1]
    assert tuple(ours.shape) == tuple(ref.shape)
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-6, equal_nan=True)


def test_default_dtype_and_half():
    prev = llgrad.get_default_dtype()
    llgrad.set_default_dtype(llgrad.float64)
    try:
        assert llgrad.special.bessel_y0(llgrad.tensor([1, 2])).dtype == llgrad.float64
        assert llgrad.special.zeta(llgrad.tensor([2, 3]), 2).dtype == llgrad.float64
    finally:
        llgrad.set_default_dtype(prev)
    h = np.array([0.5, -3.0, 9.0], np.float16)
    for name in SCALED_I:       # (PyTorch's i0e / i1 / i1e take half: evaluated in float)
        ours = getattr(llgrad.special, name)(llgrad.tensor(h))
        ref = getattr(torch.special, name)(torch.tensor(h))
        assert ours.dtype == llgrad.float16
        # (PyTorch's scalar half loop rounds every step to half, its vector loop does not)
        np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=2e-3)
    for fn in (lambda m, t: m.special.bessel_j0(t), lambda m, t: m.special.zeta(t, t),
               lambda m, t: m.special.hermite_polynomial_h(t, 2)):
        with pytest.raises(NotImplementedError) as ours:
            fn(llgrad, llgrad.tensor(h))
        with pytest.raises(NotImplementedError) as ref:
            fn(torch, torch.tensor(h))
        assert str(ours.value) == str(ref.value)


def test_argument_errors_and_out():
    for fn in (lambda m: m.special.bessel_j0(2.0), lambda m: m.special.zeta(2.0, 3.0),
               lambda m: m.special.chebyshev_polynomial_t(0.5, 3)):
        with pytest.raises(TypeError) as ours:
            fn(llgrad)
        with pytest.raises(TypeError) as ref:
            fn(torch)
        assert str(ours.value).split(":")[0] == str(ref.value).split(":")[0]
    out = llgrad.empty(3)
    r = llgrad.special.modified_bessel_k1(llgrad.tensor([0.5, 1.0, 3.0]), out=out)
    assert r is out
    np.testing.assert_allclose(out.numpy(), torch.special.modified_bessel_k1(
        torch.tensor([0.5, 1.0, 3.0])).numpy(), rtol=1e-6)


def test_no_derivative_results_do_not_require_grad():
    x = llgrad.tensor([0.5, 1.5], requires_grad=True)
    tx = torch.tensor([0.5, 1.5], requires_grad=True)
    for name in BESSEL:
        ours, ref = getattr(llgrad.special, name)(x), getattr(torch.special, name)(tx)
        assert ours.requires_grad == ref.requires_grad and ours.grad_fn is None
    for name in POLYNOMIALS:
        ours, ref = getattr(llgrad.special, name)(x, x), getattr(torch.special, name)(tx, tx)
        assert ours.requires_grad == ref.requires_grad and ours.grad_fn is None


@pytest.mark.parametrize("name", SCALED_I)
def test_scaled_i_gradients(name):
    x = np.array([0.0, 1e-20, 0.3, -2.0, 7.9, -8.5, 30.0])
    ours_x, ref_x = llgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours, ref = getattr(llgrad.special, name)(ours_x), getattr(torch.special, name)(ref_x)
    assert type(ours.grad_fn).__name__ == type(ref.grad_fn).__name__
    ours.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(ours_x.grad.numpy(), ref_x.grad.numpy(), rtol=1e-12,
                               atol=1e-15)
    t = llgrad.tensor([0.3, -2.0, 7.9, -8.5, 30.0], dtype=llgrad.float64, requires_grad=True)
    fn = getattr(llgrad.special, name)
    assert llgrad.autograd.gradcheck(fn, (t,))
    assert llgrad.autograd.gradgradcheck(fn, (t,))


def test_zeta_gradients_and_nodes():
    for make in (lambda m, x, q: m.special.zeta(x, q), lambda m, x, q: m.special.zeta(2.5, q),
                 lambda m, x, q: m.special.zeta(x, 1.5)):
        pair = []
        for m in (llgrad, torch):
            x = m.tensor([2.0, 3.5, 1.5], dtype=m.float64)
            q = m.tensor([0.7, 2.0, 5.0], dtype=m.float64, requires_grad=True)
            r = make(m, x, q)
            if r.requires_grad:
                r.sum().backward()
            pair.append((type(r.grad_fn).__name__, None if q.grad is None else q.grad.numpy()))
        assert pair[0][0] == pair[1][0]
        if pair[1][1] is not None:
            np.testing.assert_allclose(pair[0][1], pair[1][1], rtol=1e-13)
    for m in (llgrad, torch):
        x = m.tensor([2.0, 3.5], requires_grad=True)
        with pytest.raises(NotImplementedError, match="the derivative for 'zeta' is not"):
            m.special.zeta(x, m.tensor([1.0, 2.0])).sum().backward()
    q = llgrad.tensor([0.7, 2.0, 5.0], dtype=llgrad.float64, requires_grad=True)
    x = llgrad.tensor([2.0, 3.5, 1.5], dtype=llgrad.float64)
    assert llgrad.autograd.gradcheck(lambda q: llgrad.special.zeta(x, q), (q,))
    assert llgrad.autograd.gradgradcheck(lambda q: llgrad.special.zeta(x, q), (q,))


def _program(a, b):
    s = llgrad.special
    out = s.i0e(a) + s.i1(a) * s.i1e(b) + s.zeta(3.0, a.abs() + 0.5)
    out = out + s.zeta(b.detach().abs() + 1.5, a * a + 1)
    for name in BESSEL:
        out = out + getattr(s, name)(b.abs() + 0.25)
    for name in POLYNOMIALS:
        out = out + getattr(s, name)(a.tanh(), 4) + getattr(s, name)(0.3, b.detach() * 5)
    return out.sum()


def test_compiled_equals_eager_forward_and_backward():
    cf = llgrad.compile(_program)
    for dtype in (llgrad.float32, llgrad.float64):
        gen = np.random.default_rng(3)
        a0, b0 = gen.standard_normal((3, 5)), gen.standard_normal(5) * 3
        ea = llgrad.tensor(a0, dtype=dtype, requires_grad=True)
        eb = llgrad.tensor(b0, dtype=dtype, requires_grad=True)
        ca = llgrad.tensor(a0, dtype=dtype, requires_grad=True)
        cb = llgrad.tensor(b0, dtype=dtype, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")      # (native code, no fallback)
            got = cf(ca, cb)
            got.backward()
        want = _program(ea, eb)
        want.backward()
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        np.testing.assert_allclose(ca.grad.numpy(), ea.grad.numpy(), rtol=1e-6)
        np.testing.assert_allclose(cb.grad.numpy(), eb.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_i0_is_pytorchs_series_and_compiles(dt):
    x = _XS.astype(dt)
    _close(llgrad.i0(llgrad.tensor(x)).numpy(), torch.i0(torch.tensor(x)).numpy(), dt, 4)
    ours_x = llgrad.tensor(x[:40], requires_grad=True)
    ref_x = torch.tensor(x[:40], requires_grad=True)
    llgrad.i0(ours_x).sum().backward()
    torch.i0(ref_x).sum().backward()
    _close(ours_x.grad.numpy(), ref_x.grad.numpy(), dt, 4)
    f = llgrad.compile(lambda t: llgrad.i0(t * 2).sum())
    a = llgrad.tensor(x[:40] / 100)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (an op now: no graph break)
        got = f(a)
    assert got.item() == llgrad.i0(a * 2).sum().item()
