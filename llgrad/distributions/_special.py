"""The regularised lower incomplete gamma function P(a, x) (torch.special.gammainc, which
llgrad's runtime lacks), composed from tensor ops for Gamma.cdf and the distributions
built on it: Numerical Recipes' series below x = a + 1 and Lentz's continued fraction for
1 - P above, run in float64 until every element has converged."""
import numpy as np

from ..runtime.creation import zeros
from ..runtime.dtypes import bool_, float64
from ..runtime.functions import broadcast_tensors, exp, lgamma, log, where
from ..runtime.grad_mode import is_grad_enabled, no_grad
from ..runtime.node_names import failing_node

__all__ = ["gammainc"]

_EPS = 1e-15
_TINY = 1e-300
_MAX_ITER = 10000


def _series(a, x):
    ap, term = a, 1 / a
    total = term
    for _ in range(_MAX_ITER):
        ap = ap + 1
        term = term * x / ap
        total = total + term
        if not bool((term.abs() >= total.abs() * _EPS).any()):     # (NaN: done)
            break
    return total * exp(-x + a * log(x) - lgamma(a))


def _continued_fraction(a, x):
    b = x + 1 - a
    c = b * 0 + 1 / _TINY
    d = 1 / b
    h = d
    for i in range(1, _MAX_ITER):
        an = -i * (i - a)
        b = b + 2
        d = an * d + b
        d = where(d.abs() < _TINY, _TINY, d)
        c = b + an / c
        c = where(c.abs() < _TINY, _TINY, c)
        d = 1 / d
        delta = d * c
        h = h * delta
        if not bool(((delta - 1).abs() >= _EPS).any()):
            break
    return exp(-x + a * log(x) - lgamma(a)) * h


def gammainc(a, x):
    """P(a, x) for a > 0, x >= 0, in x's dtype, differentiable in x (d/dx is the Gamma(a, 1)
    density); torch's gammainc has no derivative in a: a backward reaching an a that
    requires grad raises NotImplementedError, as PyTorch's IgammaBackward0."""
    a, x = broadcast_tensors(a, x)
    with no_grad(), np.errstate(all="ignore"):     # (the regime not selected may overflow)
        a64, x64 = a.detach().to(float64), x.detach().to(float64)
        use_series = x64 < a64 + 1
        xs = where(use_series & (x64 > 0), x64, 1.0)
        xc = where(use_series | (x64 == float("inf")), a64 + 2, x64)
        p = where(use_series, _series(a64, xs), 1 - _continued_fraction(a64, xc))
        nan, inf = float("nan"), float("inf")
        # (PyTorch's cases in its order (calc_igamma), the first that holds wins)
        p = where(x64 == inf, 1.0, p)
        p = where(a64.abs() == inf, where(x64.abs() == inf, nan, 0.0), p)
        p = where(x64 == 0, 0.0, p)
        p = where(a64 == 0, where(x64 > 0, 1.0, nan), p)
        p = where((x64 < 0) | (a64 < 0), nan, p)
        density = where(x64 > 0, exp(-x64 + (a64 - 1) * log(x64) - lgamma(a64)), 0.0)
        p, density = p.to(x.dtype), density.to(x.dtype)
    if x.requires_grad:
        p = p + (x - x.detach()) * density
    if a.requires_grad and is_grad_enabled():
        never = zeros(p.shape, dtype=bool_)     # (a's path: no value, a failing backward)
        p = failing_node(p + where(never, a.to(p.dtype), 0.0), "IgammaBackward0",
                         "the derivative for 'igamma: input' is not implemented.")
    return p
