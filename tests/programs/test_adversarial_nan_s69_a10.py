"""NaN and inf through order statistics, clamps, softmax-like reductions and nan_to_num:
torch, llgrad eager and llgrad.compile must agree on values, index results and gradients
(adversarial_harness_s69_a10.check)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case; the fast regressions are in
# test_adversarial_regressions_s69_a10.py)

nan, inf = float("nan"), float("inf")
F32 = np.float32
ROWS = np.array([[1., nan, 3., 3.], [-inf, 2., inf, 2.], [0., -0., 5., nan], [4., 4., 4., 4.]],
                F32)
NEG_INF_ROWS = np.array([[-inf, -inf, -inf], [0., -inf, 1.], [inf, 1., 2.]], F32)


def max_dim(torch, x):
    return torch.max(x, 1)


def min_dim(torch, x):
    return torch.min(x, 0)


def amax_amin(torch, x):
    return x.amax(1), x.amin(0), x.max(), x.min()


def arg_max_min(torch, x):
    return x.argmax(1), x.argmin(0), x.argmax()


def sort_rows(torch, x):
    return torch.sort(x, 1), torch.sort(x, 0, descending=True)


def sort_stable(torch, x):
    return torch.sort(x, dim=1, stable=True), torch.argsort(x, dim=1, descending=True, stable=True)


def topk_rows(torch, x):
    return torch.topk(x, 2, 1), torch.topk(x, 2, 1, largest=False)


def median_rows(torch, x):
    return torch.median(x, 1), torch.median(x)


def nanmedian_rows(torch, x):
    return torch.nanmedian(x, 1), torch.nanmedian(x)


def kthvalue_rows(torch, x):
    return torch.kthvalue(x, 2, 1)


def cummax_rows(torch, x):
    return torch.cummax(x, 1), torch.cummin(x, 0)


def maximum_minimum(torch, x):
    return torch.maximum(x, x.flip(1)), torch.minimum(x, x.flip(0))


def fmax_fmin(torch, x):
    return torch.fmax(x, x.flip(1)), torch.fmin(x, x.flip(0))


def clamp_nan_bounds(torch, x):
    lo = torch.full_like(x, float("nan"))
    return x.clamp(min=lo), x.clamp(max=lo), x.clamp(float("nan"), 1.0)


def clamp_tensor_bounds(torch, x):
    lo = x.flip(0)
    return x.clamp(min=lo, max=lo + 1), torch.clamp(x, max=-1.0)


def clamp_crossed(torch, x):
    return x.clamp(2.0, 1.0), x.clamp(min=x.flip(1), max=x.flip(1) - 1)


def softmax_all_neg_inf(torch, x):
    return torch.softmax(x, 1), torch.log_softmax(x, 1)


def softmax_all_neg_inf_dim0(torch, x):
    return torch.softmax(x, 0), torch.log_softmax(x, 0)


def logsumexp_inf(torch, x):
    return torch.logsumexp(x, 1), torch.logsumexp(x, 0, keepdim=True)


def nan_to_num_default(torch, x):
    return torch.nan_to_num(x), torch.nan_to_num(x, nan=-1.0, posinf=7.0)


def nan_to_num_int(torch, x):
    return torch.nan_to_num(x.long()), torch.nan_to_num(x > 0)


def nansum_nanmean(torch, x):
    return x.nansum(1), x.nanmean(0), x.nansum()


def sum_mean_prod_nan(torch, x):
    return x.sum(1), x.mean(0), x.prod(1), x.cumsum(1)


def cumprod_nan(torch, x):
    # (NaN and inf past a zero: PyTorch's gradient leaves those products out)
    return x.cumprod(0), x.cumprod(1), x.flip(0).cumprod(0)


def isnan_family(torch, x):
    return x.isnan(), x.isinf(), x.isfinite(), x.isposinf(), x.isneginf(), x.signbit()


def where_nan_cond(torch, x):
    return torch.where(x > 1, x, -x), torch.where(x != x, torch.zeros_like(x), x)


def sign_nan(torch, x):
    return x.sign(), x.sgn(), torch.copysign(torch.ones_like(x), x), x.abs()


def eq_ne_nan(torch, x):
    return x == x, x != x, x < inf, x >= -inf, torch.eq(x, x.flip(1))


def std_var_nan(torch, x):
    return x.std(1), x.var(0, unbiased=False)


def norm_inf(torch, x):
    return x.norm(dim=1), torch.linalg.vector_norm(x, float("inf"), 1), x.norm(p=1, dim=0)


def round_trip_special(torch, x):
    return x.floor(), x.ceil(), x.round(), x.trunc(), x.frac()


def exp_log_special(torch, x):
    return x.exp(), x.log(), x.sqrt(), x.reciprocal(), x.rsqrt(), torch.log1p(x), torch.expm1(x)


def sigmoid_tanh_special(torch, x):
    # (not gelu: torch's gelu(inf) is inf on its scalar path and NaN on its vector path)
    return x.sigmoid(), x.tanh(), torch.nn.functional.softplus(x), torch.nn.functional.mish(x)


def relu_family_nan(torch, x):
    F = torch.nn.functional
    return F.relu(x), F.leaky_relu(x, 0.1), F.elu(x), F.silu(x), F.hardtanh(x), F.relu6(x)


def unique_nan(torch, x):
    return torch.unique(x.flatten().nan_to_num(nan=9.0))


CASES = [max_dim, min_dim, amax_amin, arg_max_min, sort_rows, sort_stable, topk_rows,
         median_rows, nanmedian_rows, kthvalue_rows, cummax_rows, maximum_minimum, fmax_fmin,
         clamp_nan_bounds, clamp_tensor_bounds, clamp_crossed, nan_to_num_default,
         nan_to_num_int, nansum_nanmean, sum_mean_prod_nan, cumprod_nan, isnan_family, where_nan_cond,
         sign_nan, eq_ne_nan, std_var_nan, norm_inf, round_trip_special, exp_log_special,
         sigmoid_tanh_special, relu_family_nan]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_nan_inf_rows_values(fn):
    check(fn, ROWS)


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_nan_inf_rows_gradients(fn):
    if fn is sum_mean_prod_nan:     # (prod: test_adversarial_regressions_s69_a10.py's xfail)
        fn = sum_mean_nan
    check(fn, ("grad", ROWS))


def sum_mean_nan(torch, x):
    return x.sum(1), x.mean(0), x.cumsum(1)



@pytest.mark.parametrize("fn", [softmax_all_neg_inf, softmax_all_neg_inf_dim0, logsumexp_inf,
                                max_dim, amax_amin, sort_rows, cummax_rows],
                         ids=lambda f: f.__name__)
def test_rows_of_minus_inf(fn):
    check(fn, ("grad", NEG_INF_ROWS), atol=1e-6)     # (cancellation in the softmax gradient)


def test_unique_without_grad_compiles():
    check(unique_nan, ROWS)


def test_unique_with_grad_runs_eagerly_with_a_warning():
    check(unique_nan, ("grad", ROWS), compiled_warns="unique")
