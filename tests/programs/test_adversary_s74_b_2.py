"""In-place / view / autograd, NaN-inf-ties and reduction corners against torch: in-place
ops on views of leaves and of non-leaves, t_ / unsqueeze_ / transpose_, saved tensors
modified in place (the version-counter error), out= with a resize and a wrong dtype,
in-place on an expanded tensor, strided in-place then backward; max / sort / topk / median /
mode / kthvalue with NaN and ties, clamp with min > max, isclose's equal_nan, scans and
softmax over infinities; reductions over dim lists with keepdim and dtype=, empty
reductions, std / var corrections, norms with p = 0 / inf / -inf, einsum with repeated
indices and ellipsis, tensordot's dims forms, cdist with p = 0 / 1 / inf; and what s74
found (now fixed): nan_to_num's gradient (torch's grad * isfinite(input), a nan where an
infinite or nan gradient meets a non-finite input; llgrad's where gave 0): torch, llgrad
eager and llgrad.compile (adversarial_harness_s69_a10.check)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

nan, inf = float("nan"), float("inf")
X = (np.arange(24, dtype=np.float32).reshape(4, 6) - 10) / 3
N = np.array([[1., nan, 3., 3., -1., 3.], [2., 2., -inf, nan, nan, 0.],
              [5., 5., 5., 1., 1., 5.], [0., -0., 0., inf, inf, -1.]], dtype=np.float32)
XD = ((np.arange(24, dtype=np.float64).reshape(2, 3, 4) * 7) % 11 - 5) / 3


# ---- in-place, views and autograd (on X) -----------------------------------------------------

def view_of_leaf_inplace(torch, x):
    v = x[1:3]
    v.mul_(2)               # (a view of a leaf requiring grad: torch raises)
    return v


def view_of_non_leaf_inplace(torch, x):
    y = x * 2
    v = y[:, 1::2]
    v.mul_(v.detach() + 1)
    v.add_(x[:, :3])
    return y, v


def shape_inplace_methods(torch, x):
    y = x * 1
    y.t_()
    z = y * 1
    z.unsqueeze_(1)
    z.squeeze_(1)
    return y, z, (x + 1).transpose_(0, 1), y.is_contiguous()


def saved_input_modified(torch, x):
    y = x * 1
    z = y.exp()             # (exp saves its result: the write to y is harmless)
    y.add_(1)
    return z * y


def saved_result_modified(torch, x):
    z = x.tanh()
    z.mul_(2)               # (tanh's saved result: the backward raises)
    return z


def out_wrong_dtype(torch, x):
    o = torch.empty(4, 6, dtype=torch.int64)
    torch.add(x, 1, out=o)
    return o


def out_resized(torch, x):
    o, o2 = torch.empty(0), torch.zeros(3)
    torch.add(x.detach(), 1, out=o)
    torch.sum(x.detach(), 1, out=o2)            # (torch warns and resizes)
    return o, o2


def expanded_inplace(torch, x):
    y = torch.zeros(1, 6).expand(4, 6)
    y.add_(x)
    return y


def strided_inplace_then_grad(torch, x):
    y = x * 1
    y[::2].mul_(2)
    y[:, ::3].add_(y[:, 1::3])
    y.diagonal()[:] = 0
    return y


def detach_shares_storage(torch, x):
    y = x * 3
    y.detach().zero_()
    return y


def no_grad_view_then_inplace(torch, x):
    y = x * 1
    with torch.no_grad():
        v = y[0]
    v.mul_(2)               # (a view made in no_grad, modified with grad on: torch raises)
    return y


def writes_through_transposed_views(torch, x):
    y = x * 1
    v = y.t()
    v.index_put_((torch.tensor([0, 5]),), x[:2].t() * 5)
    v.index_put_((torch.tensor([1, 1]), torch.tensor([0, 0])), torch.tensor([1., 2.]),
                 accumulate=True)
    y[:, 1::2].masked_scatter_(x[:, ::2] > 0, x.flip(0) * 2)
    y.t()[1:3].scatter_(1, torch.tensor([[0, 3], [2, 2]]), x[:2, :2] * 7)
    return y


# ---- NaN, inf and ties (on N and X) ----------------------------------------------------------

def max_min_ties_nan(torch, x):
    return x.max(1), x.min(1), x.argmax(1), x.argmin(0), x.max(), x.argmax()


def sort_topk_nan(torch, x):
    return (x.sort(1), x.sort(1, descending=True), x.topk(2, 1), x.topk(2, 1, largest=False),
            x.sort(0, stable=True))


def median_mode_kth(torch, x):
    return x.median(1), x.nanmedian(1), x.mode(1), x.mode(0), x.median(), x.kthvalue(2, 1)


def clamp_crossed_and_nan_to_num(torch, x):
    return (x.clamp(3, 1), x.clamp(min=torch.tensor(2.), max=torch.tensor(-2.)), x.clamp(max=-1),
            torch.nan_to_num(x), torch.nan_to_num(x.double()),
            torch.nan_to_num(x, nan=1., posinf=2.))


def isclose_equal_nan(torch, x):
    y = x.clone()
    return (torch.isclose(x, y), torch.isclose(x, y, equal_nan=True),
            torch.allclose(x, y, equal_nan=True), torch.isclose(x, x + 1e-6, rtol=0, atol=1e-7))


def scans_with_inf(torch, x):
    y = torch.nan_to_num(x, nan=0.5)
    return (y.cumsum(1), y.cumprod(1), y.logcumsumexp(1), y.cummin(1),
            torch.tensor([-inf, -inf, 0.]).logcumsumexp(0))


def softmax_extremes(torch, x):
    y = torch.cat([torch.nan_to_num(x, nan=0.5, posinf=3.0), torch.full((1, 6), -inf)])
    return (y.softmax(1), y.log_softmax(1), torch.tensor([[1e30, -1e30, 0.]]).log_softmax(1),
            (x * 1e4).log_softmax(1), (x * 1e-30).log_softmax(0))


# ---- reductions, einsum, tensordot, cdist (on XD) ----------------------------------------------

def dim_list_reductions(torch, x):
    return (x.sum([0, 2]), x.mean((0, -1), keepdim=True), x.amax([1, 2]),
            x.std([0, 2], correction=0), x.var((1,), correction=2, keepdim=True),
            x.logsumexp([0, 1]), x.sum(dim=(), keepdim=True), x.norm(dim=[0, 2]))


def dtype_argument(torch, x):
    i = (x * 3).long()
    return (x.sum(dtype=torch.float32), i.sum(1, dtype=torch.float64), i.prod(dtype=torch.int32),
            x.mean(2, dtype=torch.float32), i.cumsum(1, dtype=torch.float32),
            x.softmax(1, dtype=torch.float32))


def empty_reductions(torch, x):
    e = x[:, :0]
    return (e.sum(), e.prod(), e.mean(), e.sum(1), e.prod(2), e.amax(1), e.logsumexp(1), e.std(),
            e.norm())


def empty_max_raises(torch, x):
    return x[:, :0].max()


def std_var_corrections(torch, x):
    return (x.std(1, unbiased=False), x.var(unbiased=True), x.std(2, correction=2),
            x.var(0, correction=0), torch.std_mean(x, (0, 1), correction=0),
            torch.var_mean(x, 2, keepdim=True), x.std(0, correction=3))


def norms_p(torch, x):
    return (x.norm(p=0, dim=1), x.norm(p=inf, dim=2), x.norm(p=-inf),
            torch.linalg.vector_norm(x, 0, dim=(0, 2)), torch.linalg.vector_norm(x, -inf, dim=1),
            x.norm(p=3, dim=0), torch.linalg.norm(x[0]), torch.linalg.norm(x[0], inf))


def einsum_forms(torch, x):
    m = x[0, :, :3]
    return (torch.einsum("ii->i", m), torch.einsum("ii", m), torch.einsum("...j,...j->...", x, x),
            torch.einsum("bij,bkj->bik", x, x), torch.einsum("i...k->k...", x),
            torch.einsum(x, [0, 1, 2], [0, 2]), torch.einsum("bii->b", x[:, :, :3]),
            torch.einsum("...ii->...i", x[:, :2, :2]), torch.einsum("ij,ij,ij->i", m, m, m))


def tensordot_forms(torch, x):
    y = x.permute(2, 1, 0)
    return (torch.tensordot(x, y, dims=1), torch.tensordot(x, y, dims=([1, 2], [1, 0])),
            torch.tensordot(x[0], x[1], dims=2), torch.tensordot(x[0], x[1], dims=0),
            torch.tensordot(x, x, dims=[[0], [0]]))


def cdist_p(torch, x):
    a, b = x[0], x[1, :2]
    return (torch.cdist(a, b, p=0), torch.cdist(a, b, p=1), torch.cdist(a, b, p=inf),
            torch.cdist(a, b), torch.cdist(x, x, p=3))


# ---- what s74 found -------------------------------------------------------------------------

def nan_to_num_gradient_at_non_finite(torch, x):
    # (an infinite gradient reaches every element: torch's inf * isfinite(x) is nan at a nan
    # or infinite x, llgrad's where(isfinite, g, 0) was 0)
    return torch.nan_to_num(x) * inf, torch.nan_to_num(x, 1.0, 2.0, -2.0).cumprod(1)


VIEWS = [view_of_leaf_inplace, view_of_non_leaf_inplace, shape_inplace_methods,
         saved_input_modified, saved_result_modified, out_wrong_dtype, out_resized,
         expanded_inplace, strided_inplace_then_grad, detach_shares_storage,
         no_grad_view_then_inplace, writes_through_transposed_views]
NAN = [max_min_ties_nan, sort_topk_nan, median_mode_kth, clamp_crossed_and_nan_to_num,
       isclose_equal_nan, scans_with_inf, softmax_extremes]
REDUCTIONS = [dim_list_reductions, dtype_argument, empty_reductions, empty_max_raises,
              std_var_corrections, norms_p, einsum_forms, tensordot_forms, cdist_p]
# (the compiled call runs eagerly, warned: a saved tensor modified later, out='s resize)
WARNS = {saved_result_modified: "running eagerly", out_resized: "running eagerly"}


@pytest.mark.slow       # (a compile a case; what s74 found runs by default, below)
@pytest.mark.parametrize("fn", VIEWS, ids=lambda f: f.__name__)
def test_inplace_and_views(fn):
    check(fn, ("grad", X), rtol=1e-5, atol=1e-6, compiled_warns=WARNS.get(fn))


@pytest.mark.slow
@pytest.mark.parametrize("fn", NAN, ids=lambda f: f.__name__)
@pytest.mark.parametrize("data", ["N", "X"])
def test_nan_inf_ties(fn, data):
    check(fn, ("grad", {"N": N, "X": X}[data]), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("fn", REDUCTIONS, ids=lambda f: f.__name__)
def test_reductions(fn):
    check(fn, ("grad", XD), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("data", ["N", "X"])
def test_nan_to_num_gradient_is_grad_times_isfinite(data):
    check(nan_to_num_gradient_at_non_finite, ("grad", {"N": N, "X": X}[data]), rtol=1e-5, atol=1e-6)
