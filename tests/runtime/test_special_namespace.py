"""llgrad.special (llgrad/special.py): a real submodule; each function against
torch.special over ordinary and special values (inf, nan, +-0, negative) in float64 and
float32; gradients by gradcheck (no PyTorch needed)."""
import math

import numpy as np
import pytest

import llgrad
import llgrad.special
from llgrad.special import expit

try:
    import torch
except ImportError:         # the PyTorch comparisons skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

VALUES = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -3.0, 5.0, 8.9, 9.1, 20.0, 26.5, 30.0,
                   -30.0, 1e-30, math.inf, -math.inf, math.nan])
UNIT = np.array([0.0, 1.0, 0.5, 0.25, 0.975, 0.01, 1e-6, 1 - 1e-6, -0.5, 1.5, math.nan])

# name -> (call(module, x, y), x values, tolerance in float64)
UNARY = {n: (lambda m, x, n=n: getattr(m, n)(x), VALUES, 1e-12)
         for n in ("expit", "erf", "erfc", "erfcx", "ndtr", "gammaln", "digamma", "psi",
                   "entr", "sinc", "expm1", "exp2", "log1p", "round")}
UNARY.update({
    "log_ndtr": (lambda m, x: m.log_ndtr(x), VALUES[np.abs(VALUES) < 30], 1e-10),
    "logit": (lambda m, x: m.logit(x), UNIT, 1e-12),
    "logit_eps": (lambda m, x: m.logit(x, eps=1e-3), UNIT, 1e-12),
    "erfinv": (lambda m, x: m.erfinv(x * 2 - 1), UNIT, 1e-10),
    "ndtri": (lambda m, x: m.ndtri(x), UNIT, 1e-8),
    "polygamma": (lambda m, x: m.polygamma(1, x), VALUES[VALUES > 0], 1e-8),
    "multigammaln": (lambda m, x: m.multigammaln(x.abs() + 2, 3), VALUES[np.isfinite(VALUES)],
                     1e-12),
    "logsumexp": (lambda m, x: m.logsumexp(x.reshape(3, 4), 1), VALUES[:12], 1e-12),
    "softmax": (lambda m, x: m.softmax(x.reshape(3, 4), 0), VALUES[:12], 1e-12),
    "log_softmax": (lambda m, x: m.log_softmax(x.reshape(3, 4), -1), VALUES[:12], 1e-12),
    "xlogy": (lambda m, x: m.xlogy(x, x.flip(0)), VALUES, 1e-12),
    "xlog1py": (lambda m, x: m.xlog1py(x, x.flip(0)), VALUES, 1e-12),
    "xlogy_number": (lambda m, x: m.xlogy(2.0, x), VALUES, 1e-12),
    "xlog1py_number": (lambda m, x: m.xlog1py(x, 0.5), VALUES, 1e-12),
})


def test_is_a_submodule():
    assert llgrad.special is not None and expit is llgrad.special.expit
    assert llgrad.special.psi is llgrad.special.digamma
    for name in llgrad.special.__all__:
        assert callable(getattr(llgrad.special, name)), name


@needs_torch
@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_matches_torch(name, dtype):
    fn, x, tol = UNARY[name]
    # (ndtri in float32: erfinv(2p - 1) has lost digits of p = 1e-6 before it starts)
    tol = tol if dtype == "float64" else 1e-3 if name == "ndtri" else 2e-5
    got = fn(llgrad.special, llgrad.tensor(x.astype(dtype))).numpy()
    want = fn(torch.special, torch.tensor(x.astype(dtype))).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 1e-2, equal_nan=True)


@needs_torch
@pytest.mark.torch
@pytest.mark.parametrize("name", ["expit", "erfcx", "ndtr", "log_ndtr", "ndtri", "entr",
                                  "xlog1py", "multigammaln", "logit"])
def test_gradients_match_torch(name):
    fn, x, _ = UNARY[name]
    x = x[np.isfinite(x) & (x != 0)]
    if name in ("entr", "xlog1py"):         # (entr: PyTorch's -inf / nan at x <= 0)
        x = x[x > 0]
    if name == "erfcx":                     # (exp(x^2) overflows: inf * 0 is nan, not -inf)
        x = x[x > -20]
    if name in ("ndtri", "logit"):
        x = x[(x > 0) & (x < 1)]
    lx = llgrad.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    fn(llgrad.special, lx).sum().backward()
    fn(torch.special, tx).sum().backward()
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-8, atol=1e-12)


def test_multigammaln_outside_its_domain_is_inf_as_pytorch_2_13():
    """(PyTorch no longer checks the domain: lgamma's poles give inf.)"""
    torch = pytest.importorskip("torch")
    x = [0.5, 0.1, 3.0]
    np.testing.assert_allclose(llgrad.special.multigammaln(llgrad.tensor(x), 3).numpy(),
                               torch.special.multigammaln(torch.tensor(x), 3).numpy(),
                               rtol=1e-6)
    with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
        llgrad.special.multigammaln(llgrad.tensor(x), 0)


@pytest.mark.parametrize("name", ["expit", "erfcx", "ndtr", "log_ndtr", "ndtri", "entr",
                                  "xlog1py", "xlogy", "multigammaln", "gammaln", "logit_eps"])
def test_gradcheck(name):
    fn, _, _ = UNARY[name]
    x = np.array([0.3, 0.45, 0.7, 0.9])
    if name not in ("ndtri", "logit_eps"):
        x = np.array([-2.0, -0.7, 0.4, 1.3, 3.0]) if name not in ("entr", "gammaln", "xlogy",
                                                                 "xlog1py") else x * 3
    t = llgrad.tensor(x, dtype=llgrad.float64, requires_grad=True)
    assert llgrad.autograd.gradcheck(lambda v: fn(llgrad.special, v), [t])
    assert llgrad.autograd.gradgradcheck(lambda v: fn(llgrad.special, v), [t])
