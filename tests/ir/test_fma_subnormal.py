"""ir/fused_madd.fma64 where the product falls below the normal range (Dekker's split cannot
hold its error there): one rounding of the exact a * b + c, signed zeros as IEEE's, as the
hardware FMA of compiled code and of PyTorch's kernels gives it."""
import itertools
from fractions import Fraction

import numpy as np
import pytest

from llgrad.ir.fused_madd import fma64

VALUES = [0.0, -0.0, 5e-324, -5e-324, 1e-310, -3e-320, 1e-308, 1e-160, -3e-170, 1.0, -2.5]


def _want(a, b, c):
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return -0.0 if np.signbit(a * b) and np.signbit(c) else 0.0
    return float(exact)


def test_tiny_products_round_once_with_ieee_zero_signs():
    cases = list(itertools.product(VALUES, [0.5, -0.5, 2.5, 1e-170, -1e-300], VALUES))
    a, b, c = (np.array(x) for x in zip(*cases))
    got = fma64(a, b, c)
    want = np.array([_want(*t) for t in cases])
    assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))


def test_sub_with_an_alpha_at_the_smallest_subnormal_is_torch_s():
    torch = pytest.importorskip("torch")
    import llgrad
    for a, b, alpha in ((0.0, 5e-324, 0.5), (5e-324, 5e-324, 0.5), (1e-310, 1e-310, -2.5)):
        want = torch.tensor([a], dtype=torch.float64).sub(
            torch.tensor([b], dtype=torch.float64), alpha=alpha).numpy()
        got = llgrad.tensor([a], dtype=llgrad.float64).sub(
            llgrad.tensor([b], dtype=llgrad.float64), alpha=alpha).numpy()
        assert np.array_equal(got, want) and np.signbit(got) == np.signbit(want)
