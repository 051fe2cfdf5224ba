"""Gradients at kinks, ties and domain edges (abs/relu at 0, tied maxima of max/amax/norm,
sqrt/pow at 0, where() with NaN or inf in the branch not taken, atan2 at the origin):
torch, llgrad eager and llgrad.compile must give the same .grad, None kept apart from
zeros (adversarial_harness_s69_a10.check)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case; the fast regressions are in
# test_adversarial_regressions_s69_a10.py)

F32 = np.float32
KINKS = np.array([[0., -0., 1., -1.], [2., 2., -3., 0.], [0.5, 0.5, 0.5, 0.5]], F32)
TIES = np.array([[3., 3., 1., 3.], [-1., -1., -1., -1.], [0., 2., 2., 1.]], F32)


def abs_relu(torch, x):
    return x.abs(), torch.relu(x), x.clamp(min=0), x.clamp(0, 0.5), torch.nn.functional.hardtanh(x, 0, 1)


def sign_floor_round(torch, x):
    return x.sign() * x, x.floor(), x.round(), x.ceil(), x.trunc()


def leaky_elu_at_zero(torch, x):
    F = torch.nn.functional
    return F.leaky_relu(x, 0.2), F.elu(x), F.selu(x), F.celu(x, 0.5), F.hardswish(x), F.hardsigmoid(x)


def max_ties(torch, x):
    return x.max(), x.min(), x.amax(1), x.amin(0), x.max(1).values, x.min(0)[0]


def amax_multi_dim(torch, x):
    return x.amax((0, 1)), x.amin(dim=(-1,), keepdim=True)


def maximum_ties(torch, x):
    return torch.maximum(x, x.flip(1)), torch.minimum(x, torch.zeros_like(x)), torch.fmax(x, x)


def clamp_ties(torch, x):
    return x.clamp(min=3.0), x.clamp(max=-1.0), x.clamp(min=x.flip(1)), x.clamp(max=x)


def norm_at_zero(torch, x):
    z = x * 0
    return z.norm(), z.norm(dim=1), torch.linalg.vector_norm(z, 1), torch.linalg.vector_norm(z, 3.0, 0)


def norm_ties(torch, x):
    return torch.linalg.vector_norm(x, float("inf"), 1), torch.linalg.vector_norm(x, -float("inf"), 0), x.norm(p=float("inf"))


def sqrt_pow_at_zero(torch, x):
    z = x.abs()
    return z.sqrt(), z ** 0.5, z ** 2, z ** 1.5, z.pow(0), torch.pow(z, 0.0), z.rsqrt()


def pow_tensor_exponent(torch, x):
    z = x.abs()
    return torch.pow(z, x), torch.pow(2.0, x), torch.pow(z, z.flip(0))


def where_nan_unused_branch(torch, x):
    return torch.where(x > 0, x.sqrt(), torch.zeros_like(x)), torch.where(x != 0, 1 / x, x)


def where_log_unused(torch, x):
    return torch.where(x > 0, x.log(), x), torch.where(x > 0, x, x.log())


def atan2_origin(torch, x):
    return torch.atan2(x, x.flip(1)), torch.atan2(x * 0, x * 0), torch.hypot(x * 0, x * 0)


def dist_cdist_zero(torch, x):
    return torch.dist(x, x), torch.nn.functional.pairwise_distance(x, x), torch.cdist(x, x)


def sort_topk_ties(torch, x):
    return x.sort(1).values, x.topk(2, 1).values, x.kthvalue(2, 1).values, x.median(1).values, x.median()


def cummax_ties(torch, x):
    return x.cummax(1).values, x.cummin(0).values, x.logcumsumexp(1)


def logsumexp_softmax_ties(torch, x):
    return x.logsumexp(1), torch.softmax(x, 0), torch.nn.functional.log_softmax(x * 0, 1)


def mean_std_constant(torch, x):
    c = x * 0 + 1
    return c.std(1), c.var(0), torch.nn.functional.normalize(x * 0, dim=1), torch.nn.functional.cosine_similarity(x * 0, x, 1)


def prod_with_zeros(torch, x):
    return x.prod(1), x.prod(), x.cumprod(1), x.cumprod(0)


def xlogy_special(torch, x):
    return torch.xlogy(x * 0, x * 0), torch.special.xlog1py(x * 0, x * 0 - 1), torch.special.entr(x.abs())


def div_by_zero(torch, x):
    return x / (x * 0), torch.div(x, x.flip(1), rounding_mode="trunc"), torch.remainder(x, 1.5)


def lerp_addcdiv(torch, x):
    return torch.lerp(x, x.flip(0), 0.5), torch.addcdiv(x, x, x.abs() + 1, value=2), torch.lerp(x, x, x)


CASES = [abs_relu, sign_floor_round, leaky_elu_at_zero, max_ties, amax_multi_dim, maximum_ties,
         clamp_ties, norm_at_zero, norm_ties, sqrt_pow_at_zero, pow_tensor_exponent,
         where_nan_unused_branch, where_log_unused, atan2_origin, dist_cdist_zero,
         sort_topk_ties, cummax_ties, logsumexp_softmax_ties, mean_std_constant,
         prod_with_zeros, xlogy_special, div_by_zero, lerp_addcdiv]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_gradients_at_kinks(fn):
    check(fn, ("grad", KINKS))


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_gradients_at_ties(fn):
    check(fn, ("grad", TIES))
