"""Sweep 64 (t3), an adversarial parity sweep of scans and nan/edge gradients against torch,
eager and compiled. The cases that differed before their fix:

- cumsum / cumprod of float32 accumulated in float32; PyTorch's CPU kernels accumulate in
  float64 (acc_type) and round each result once, so (1e8, 1 x 8, -1e8).cumsum(0) ends in 8
  there and gave 0 (ir/ops_reduce._cumsum, ir/ops_tensor._cumprod, their LLVM kernels in
  codegen/lowerings: silent wrong values);
- cumsum's gradient was total - cumsum(g) + g, which cancels: g = (1e8, 1, 1, 1) in float32
  gave (1e8, 1, 1, 1) for PyTorch's reversed cumsum (1e8, 3, 2, 1) (silent wrong gradient);
- logcumsumexp of float32 ran its scan in float32 (values an ulp or two from PyTorch's,
  whose CPU kernel accumulates in float64); of an input that requires grad it replaced the
  result at a +inf input by +inf even after a nan earlier in the scan (PyTorch's stays nan:
  the forward value depended on requires_grad); along a dim of size 1 it kept -0.0 (PyTorch: +0.0) and gave a
  gradient of 1 at +-inf and nan (PyTorch: nan) (runtime/functions_reduce.logcumsumexp);
- xlogy / xlog1py's gradient for self was g * log(y): nan where g is 0 and y is 0 (a
  where() upstream masking the -inf), PyTorch's xlogy(g, y) is 0 there (a silent nan
  gradient; ir/ops_special._xlog_vjp)."""
import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

pytestmark = pytest.mark.torch
nan, inf = math.nan, math.inf


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")


def _np(t):
    return np.asarray(t.detach().numpy())


def _run(fn, arrays, backend):
    """fn(L, *tensors) -> tuple of outputs, with L torch or llgrad (eager or compiled);
    returns the outputs and the inputs' gradients of a fixed weighted sum of them."""
    L = torch if backend == "torch" else llgrad

    def inputs():
        return [L.tensor(a).requires_grad_(a.dtype.kind == "f") for a in arrays]

    if backend == "compiled":
        cf = llgrad.compile(lambda *xs: fn(llgrad, *xs))
        cf(*inputs())       # (the trace; the next call runs the compiled graphs)
        xs = inputs()
        outs = cf(*xs)
    else:
        xs = inputs()
        outs = fn(L, *xs)
    loss = None
    for o in outs:
        if o.requires_grad:
            w = L.arange(1., o.numel() + 1, dtype=L.float64).reshape(o.shape).sin()
            t = (o.double() * w).sum()
            loss = t if loss is None else loss + t
    if loss is not None:
        loss.backward()
    return outs, [x.grad for x in xs if x.requires_grad]


def _same(fn, arrays, backend, exact=True):
    want, wg = _run(fn, arrays, "torch")
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (a compiled call must not fall back)
        got, gg = _run(fn, arrays, backend)
    assert len(gg) == len(wg)
    for k, (g, w) in enumerate(list(zip(got, want)) + list(zip(gg, wg))):
        assert str(g.dtype)[7:] == str(w.dtype)[6:] and tuple(g.shape) == tuple(w.shape)
        if exact and k < len(want):     # (gradients: up to the order their parts are added)
            np.testing.assert_array_equal(_np(g), _np(w))
            # (and the same signs of zeros; a NaN's sign is not a value: an invalid operation's
            # NaN is negative on x86, and whether a lane made or passed it depends on the host)
            real = ~np.isnan(_np(w))
            assert np.array_equal(np.signbit(_np(g))[real], np.signbit(_np(w))[real])
        else:
            np.testing.assert_allclose(_np(g), _np(w), rtol=1e-6, atol=1e-6)


BACKENDS = ["eager", "compiled"]


# ---- cumsum / cumprod of float32 accumulate in float64 --------------------------------------

def _scan_input():
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((3, 64)) * 1e3 + 1e4).astype(np.float32)
    a[0, :10] = [1e8] + [1.] * 8 + [-1e8]
    return a


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_cumsum_accumulates_in_float64(backend):
    _same(lambda L, x: (x.cumsum(1), x.cumsum(0), x.t().cumsum(1), x.cumsum(-1, dtype=L.float64)),
          [_scan_input()], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_cumprod_accumulates_in_float64(backend):
    rng = np.random.default_rng(1)
    a = rng.uniform(0.9, 1.1, (3, 200)).astype(np.float32)
    a[1, :4] = [3.0, 1 / 3, 3.0, 1 / 3]
    _same(lambda L, x: (x.cumprod(1), x.cumprod(0), x[:, :7].cumprod(1)), [a], backend)


def test_float32_cumsum_of_a_cancelling_sequence():
    for L in (torch, llgrad):
        x = L.tensor([1e8] + [1.] * 8 + [-1e8])
        assert x.cumsum(0)[-1].item() == 8.0, L.__name__


@pytest.mark.parametrize("backend", BACKENDS)
def test_cumsum_gradient_is_a_reversed_cumsum(backend):
    def fn(L, x, g):
        return ((x.cumsum(0) * g).sum(),)
    _same(fn, [np.zeros(4, np.float32), np.array([1e8, 1., 1., 1.], np.float32)], backend)
    for L in (torch, llgrad):
        x = L.zeros(4, requires_grad=True)
        x.cumsum(0).backward(L.tensor([1e8, 1., 1., 1.]))
        assert x.grad.tolist() == [1e8, 3., 2., 1.], L.__name__


def test_cumsum_integer_and_half_dtypes_unchanged():
    ints = np.array([[-7, 3, 0, 5], [2, -2, -1, 9]], np.int32)
    _same(lambda L, x: (x.cumsum(1), x.cumprod(0), x.cumsum(0, dtype=L.float32)), [ints], "eager")
    h = np.array([[60000., 6000., 1., 2.], [0.1, 0.2, 0.3, 0.4]], np.float16)
    _same(lambda L, x: (x.cumsum(1), x.cumprod(1)), [h], "eager")


# ---- logcumsumexp: nan kept, size-one dims ---------------------------------------------------

LCSE = np.array([[nan, 1., nan, inf, 0.], [2., inf, nan, 1., 0.], [inf, 1., inf, -inf, 2.],
                 [-inf, -inf, 0., 1., inf]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_logcumsumexp_keeps_nan_at_a_later_inf(backend):
    _same(lambda L, x: (x.logcumsumexp(1),), [LCSE], backend)


def test_logcumsumexp_value_does_not_depend_on_requires_grad():
    for grad in (False, True):
        x = llgrad.tensor(LCSE, requires_grad=grad)
        np.testing.assert_array_equal(_np(x.logcumsumexp(1)),
                                      _np(torch.tensor(LCSE).logcumsumexp(1)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_logcumsumexp_along_a_dim_of_size_one(backend):
    _same(lambda L, x: (x.logcumsumexp(1), x.logcumsumexp(0)[:, 0] * 2),
          [np.array([[-0.0], [inf], [-inf], [nan], [2.]])], backend)


def test_logcumsumexp_of_a_zero_dim_tensor():
    for v in (-0.0, inf, 1.5):
        got, want = (L.tensor(v, requires_grad=True) for L in (llgrad, torch))
        a, b = got.logcumsumexp(0), want.logcumsumexp(0)
        a.backward(), b.backward()
        assert math.copysign(1, a.item()) == math.copysign(1, b.item()) and a.item() == b.item()
        assert got.grad.item() == want.grad.item() and a.grad_fn.name() == b.grad_fn.name()


# ---- xlogy / xlog1py: no nan where the incoming gradient is 0 --------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_xlogy_gradient_under_a_where(backend):
    def fn(L, x, y):
        return (L.where(y > 0, L.xlogy(x, y), 0.), L.where(y > -1, L.special.xlog1py(x, y), 0.))
    _same(fn, [np.array([2., 0., 1., 3., 0.5]), np.array([0., 0., 2., -1., -1.])], backend,
          exact=False)     # (log1p(2) is an ulp from PyTorch's)


def test_xlogy_double_backward_still_matches():
    def fn(L):
        x = L.tensor([2., 0., 1., 3.], requires_grad=True)
        y = L.tensor([0.5, 0.1, 2., 1.], requires_grad=True)
        g, = L.autograd.grad(L.xlogy(x, y).sum(), x, create_graph=True)
        (g * y).sum().backward()
        return g, y.grad
    for a, b in zip(fn(llgrad), fn(torch)):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-6)


def test_xlogy_jvp_still_linear():
    # (llgrad.func.jvp is a double VJP from a zero cotangent: the rule must stay linear in g)
    x, y = np.array([2., 0.5, 1.]), np.array([0.5, 0.1, 2.])
    tx, ty = np.array([1., -2., 0.5]), np.array([0.3, 1., -1.])
    _, got = llgrad.func.jvp(llgrad.xlogy, (llgrad.tensor(x), llgrad.tensor(y)),
                             (llgrad.tensor(tx), llgrad.tensor(ty)))
    _, want = torch.func.jvp(torch.xlogy, (torch.tensor(x), torch.tensor(y)),
                             (torch.tensor(tx), torch.tensor(ty)))
    np.testing.assert_allclose(_np(got), _np(want), rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_logcumsumexp_accumulates_in_float64(backend):
    a = (np.random.default_rng(0).standard_normal((2, 500)) * 3).astype(np.float32)
    want = torch.tensor(a).logcumsumexp(1)
    f = (lambda x: x.logcumsumexp(1)) if backend == "eager" else \
        llgrad.compile(lambda x: x.logcumsumexp(1))
    for _ in range(2):
        got = f(llgrad.tensor(a))
    np.testing.assert_array_equal(_np(got), _np(want))
