"""slogdet of matrices with entries near float64's range: LAPACK's LU of the unscaled matrix
over- or underflowed (log|det| 708.68 with sign +1 where the exact value is 710.04 with sign
-1); eager scales rows and columns by powers of two first. Against torch, exact arithmetic
and the native kernel."""
import math
from fractions import Fraction

import numpy as np
import pytest

import llgrad

EXTREME = np.array([[4.94065646e-324, -5.56268465e-309, 1.79769313e+308],
                    [-5.99231045e+307, 1.25, -0.75],
                    [0.5, 1.11253693e-308, -2.0]])


def _exact(m):
    f = [[Fraction(v) for v in row] for row in m.tolist()]
    d = (f[0][0] * (f[1][1] * f[2][2] - f[1][2] * f[2][1])
         - f[0][1] * (f[1][0] * f[2][2] - f[1][2] * f[2][0])
         + f[0][2] * (f[1][0] * f[2][1] - f[1][1] * f[2][0]))
    return (1.0 if d > 0 else -1.0), math.log(abs(d.numerator)) - math.log(d.denominator)


def test_near_the_range_eager_and_compiled_are_exact():
    sign, logabs = _exact(EXTREME)
    s, la = llgrad.linalg.slogdet(llgrad.tensor(EXTREME))
    assert s.item() == sign and la.item() == pytest.approx(logabs, rel=1e-14)
    f = llgrad.compile(lambda a: llgrad.linalg.slogdet(a))
    for _ in range(2):
        cs, cla = f(llgrad.tensor(EXTREME))
    assert cs.item() == sign and cla.item() == pytest.approx(logabs, rel=1e-14)


@pytest.mark.parametrize("scale", [1e-300, 1e-150, 1.0, 1e150, 1e300])
def test_scaled_random_matrices_as_torch(scale):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(1).standard_normal((3, 4, 4)) * scale
    s, la = llgrad.linalg.slogdet(llgrad.tensor(a))
    ts, tla = torch.linalg.slogdet(torch.tensor(a))
    np.testing.assert_array_equal(s.numpy(), ts.numpy())
    np.testing.assert_allclose(la.numpy(), tla.numpy(), rtol=1e-12)


def test_special_matrices_as_before():
    for m, want in ((np.zeros((3, 3)), (0.0, -np.inf)), (np.diag([np.inf, 1.0]), (1.0, np.inf)),
                    (np.zeros((0, 0)), (1.0, 0.0))):
        s, la = llgrad.linalg.slogdet(llgrad.tensor(m))
        assert (s.item(), la.item()) == want


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_the_sign_alone_gives_no_gradient(compiled, monkeypatch):
    # (PyTorch's formula returns an undefined gradient without log|det|'s: A.grad stays None,
    # not zeros; with both, the sign's is ignored: the table's vjp_reads)
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    a = llgrad.tensor([[2.0, 1.0], [1.0, 3.0]], dtype=llgrad.float64, requires_grad=True)

    def sign_only(a):
        s, _ = llgrad.linalg.slogdet(a)
        (s * 3).sum().backward()

    def both(a):
        s, la = llgrad.linalg.slogdet(a)
        (s * 3 + la).sum().backward()

    for fn, want in ((sign_only, None), (both, [[0.6, -0.2], [-0.2, 0.4]])):
        f = llgrad.compile(fn) if compiled else fn
        for _ in range(3):
            a.grad = None
            f(a)
            if want is None:
                assert a.grad is None
            else:
                np.testing.assert_allclose(a.grad.numpy(), want, rtol=1e-12)
    assert llgrad.autograd.grad(llgrad.slogdet(a)[0].sum(), a, allow_unused=True) == (None,)
