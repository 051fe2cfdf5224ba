"""Adversarial sweep against PyTorch 2.13 (sweep 21, h4): type promotion, integer division
and remainder at negative operands, zeros and infinities, NaN and -inf rows through the
reductions, sorts and selections, ties, and empty tensors through the reductions, with
their values, dtypes, strides, exceptions and warnings; compiled calls equal eager."""
import warnings

import numpy as np
import pytest

import llgrad
from sweep21_h4_compare import check

torch = pytest.importorskip("torch")
nan, inf = np.nan, np.inf

A = dict(
 fa=np.array([[1., nan, 3.], [nan, nan, nan], [-inf, -inf, -inf], [2., 2., 1.]], np.float32),
 ia=np.array([[-7, 7, 0], [5, -5, 3]], np.int64),
 u8=np.array([250, 3, 0], np.uint8),
 i32=np.array([2**31-1, -2**31, 5], np.int32),
 b=np.array([True, False, True]),
 e=np.zeros((0, 3), np.float32),
 z=np.array([-0.0, 0.0, inf, -inf, nan, 5.5], np.float32),
 t=np.array([3., 1., 3., 2., 1., 3.], np.float32),
 s=np.array(2.5, np.float32),
 si=np.array(3, np.int64),
)
CASES = [
 # promotion
 ("T,s,ia", "s + ia"), ("T,si,fa", "si * fa"), ("T,ia", "ia + 2.5"), ("T,ia", "ia * True"),
 ("T,b", "b + b"), ("T,b", "b * 2"), ("T,b", "b - b"), ("T,b", "b / b"), ("T,u8", "u8 + 10"),
 ("T,u8", "u8 - 5"), ("T,u8", "u8 * 3"), ("T,u8", "-u8"), ("T,i32", "i32 + 1"), ("T,i32", "i32 * 2"),
 ("T,i32", "i32 + T.tensor(1)"), ("T,i32", "i32 + T.tensor([1])"), ("T,i32", "i32 + 1.5"),
 ("T,u8", "u8 + T.tensor(-1)"), ("T,u8", "u8 + T.tensor([-1], dtype=T.int8)"),
 ("T,ia", "ia / 2"), ("T,ia", "ia // -2"), ("T,ia", "ia % -2"), ("T,ia", "ia // 2"), ("T,ia", "-ia % 3"),
 ("T,ia", "T.true_divide(ia, -2)"), ("T,ia", "T.floor_divide(ia, -3)"), ("T,ia", "T.fmod(ia, -3)"),
 ("T,ia", "T.remainder(ia, -3)"), ("T,ia", "ia // 0"), ("T,ia", "ia % 0"), ("T,ia", "T.div(ia, -2, rounding_mode='trunc')"),
 ("T,ia", "T.div(ia, -2, rounding_mode='floor')"), ("T,ia", "T.div(ia, 2.5, rounding_mode='floor')"),
 ("T,z", "z // 2"), ("T,z", "z % 2"), ("T,z", "z // -inf"), ("T,z", "z % inf"), ("T,z", "z % -inf"), ("T,z", "z // inf"),
 ("T,z", "2 // z"), ("T,z", "2 % z"), ("T,z", "T.fmod(z, inf)"), ("T,z", "T.remainder(-0.0, z)"),
 ("T,z", "z ** 0"), ("T,z", "0 ** z"), ("T,ia", "ia ** 2"), ("T,ia", "2 ** ia"), ("T,ia", "ia ** -1"), ("T,ia", "ia ** 0.5"),
 ("T,ia", "T.pow(ia, T.tensor(-1))"), ("T,ia", "ia.float() ** ia"), ("T,b", "b ** 2"),
 ("T,ia", "ia >> 1"), ("T,ia", "ia << 62"), ("T,ia", "ia & 3"), ("T,b", "b & True"), ("T,b", "~b"), ("T,ia", "~ia"),
 ("T,fa", "fa & 1"), ("T,ia", "abs(ia)"), ("T,u8", "abs(u8)"), ("T,i32", "abs(i32)"), ("T,u8", "u8.sign()"),
 ("T,ia", "T.sqrt(ia)"), ("T,b", "T.exp(b)"), ("T,ia", "T.sigmoid(ia)"), ("T,ia", "ia.mean()"), ("T,ia", "ia.float().mean(dtype=T.int64)"),
 ("T,ia", "ia.sum(dtype=T.float32)"), ("T,b", "b.sum()"), ("T,b", "b.cumsum(0)"), ("T,ia", "ia.cumsum(1, dtype=T.float64)"),
 ("T,u8", "u8.sum()"), ("T,u8", "u8.cumsum(0)"), ("T,u8", "u8.prod()"), ("T,i32", "i32.sum()"), ("T,i32", "i32.cumprod(0)"),
 ("T,b", "b.prod()"), ("T,b", "b.mean()"), ("T,b", "b.max()"), ("T,b", "b.argmax()"), ("T,b", "b.float().std()"),
 ("T", "T.arange(0, 1, 0.1)"), ("T", "T.arange(1, 0, -0.3)"), ("T", "T.arange(0, 10, 3)"), ("T", "T.arange(0.5, 3)"),
 ("T", "T.arange(5, dtype=T.float32)"), ("T", "T.arange(0, -5)"), ("T", "T.arange(0, 5, 0)"), ("T", "T.arange(0, 5, -1)"),
 ("T", "T.arange(10, 0)"), ("T", "T.arange(-1.0, 1.0, 0.25, dtype=T.int32)"),
 ("T", "T.linspace(0, 10, 4, dtype=T.int64)"), ("T", "T.linspace(-1, 1, 5, dtype=T.int32)"), ("T", "T.linspace(0, 1, 1)"),
 ("T", "T.linspace(0, 1, 0)"), ("T", "T.linspace(3, 3, 3)"), ("T", "T.logspace(0, 2, 3, base=2)"), ("T", "T.linspace(0, 1, -1)"),
 ("T", "T.full((2,), True)"), ("T", "T.full((2,), 3)"), ("T", "T.full((2,), 3.)"), ("T", "T.full((2,), 1+2j)"),
 ("T", "T.full((2,), 3, dtype=T.bool)"), ("T", "T.tensor([])"), ("T", "T.tensor([[]])"), ("T", "T.tensor([1, 2.])"),
 ("T", "T.tensor([True, 1])"), ("T", "T.tensor(3)"), ("T", "T.tensor([[1], [2, 3]])"), ("T", "T.tensor([1, 2], dtype=T.bool)"),
 ("T", "T.tensor(2**63)"), ("T", "T.tensor([2**63 - 1])"), ("T", "T.tensor([], dtype=T.int64).sum()"),
 ("T,fa", "T.zeros_like(fa.t(), memory_format=T.preserve_format)"), ("T,fa", "T.empty_like(fa.t()).stride()"),
 ("T,fa", "T.zeros_like(fa.t(), memory_format=T.contiguous_format)"), ("T,fa", "T.ones_like(fa[:, ::2])"),
 ("T,fa", "T.zeros_like(fa.t()[::2])"), ("T,fa", "(fa.t() + 1).stride()"), ("T,fa", "(fa.t() + fa.t()).stride()"),
 ("T,fa", "(fa.t() * fa[0]).stride()"), ("T,fa", "fa.t().clone()"), ("T,fa", "fa.t().contiguous()"), ("T,fa", "fa.t().exp()"),
 # nan / inf
 ("T,fa", "fa.max(1)"), ("T,fa", "fa.min(1)"), ("T,fa", "fa.amax(1)"), ("T,fa", "fa.amin(0)"), ("T,fa", "fa.argmax(1)"),
 ("T,fa", "fa.argmin(1)"), ("T,fa", "fa.max()"), ("T,fa", "fa.argmax()"), ("T,fa", "fa.topk(2, 1)"), ("T,fa", "fa.topk(2, 1, largest=False)"),
 ("T,fa", "fa.sort(1)"), ("T,fa", "fa.sort(1, descending=True)"), 
 ("T,fa", "fa.argsort(1)"), ("T,fa", "fa.unique()"), ("T,fa", "fa.unique(return_counts=True)"), 
 ("T,fa", "fa.cummax(1)"), ("T,fa", "fa.cummin(1)"), ("T,fa", "fa.clamp(0, 2)"), ("T,fa", "fa.clamp(min=nan)"),
 ("T,fa", "fa.clamp(2, 1)"), ("T,fa", "T.where(fa > 1, fa, -fa)"), ("T,fa", "T.maximum(fa, fa.flip(1))"),
 ("T,fa", "T.fmax(fa, fa.flip(0))"), ("T,fa", "T.fmin(fa, T.tensor(0.))"), ("T,fa", "T.nan_to_num(fa)"),
 ("T,fa", "T.nan_to_num(fa, nan=1., neginf=-2.)"), ("T,fa", "fa.logsumexp(1)"), ("T,fa", "fa.softmax(1)"), ("T,fa", "fa.log_softmax(1)"),
 ("T,fa", "fa.logcumsumexp(1)"), ("T,fa", "fa.cumsum(1)"), ("T,fa", "fa.nansum(1)"), ("T,fa", "fa.nanmean(1)"),
 ("T,fa", "fa.nanmedian(1)"), ("T,fa", "fa.median(1)"), ("T,fa", "fa.median()"), ("T,fa", "fa.mode(1)"), 
 ("T,fa", "fa.quantile(0.5, 1)"), ("T,fa", "fa.nanquantile(0.5, 1)"), ("T,fa", "fa.aminmax(dim=1)"), ("T,fa", "fa.msort()"),
 ("T,fa", "fa.sign()"), ("T,fa", "fa.sgn()"), ("T,fa", "fa.isclose(fa)"), ("T,fa", "fa == fa"), ("T,fa", "fa.equal(fa)"),
 ("T,fa", "fa.allclose(fa, equal_nan=True)"), ("T,fa", "fa.std(1)"), ("T,fa", "fa.var(1, correction=0)"), ("T,fa", "fa.norm(dim=1)"),
 ("T,fa", "fa.renorm(2, 0, 1)"), ("T,fa", "fa.histc(4)"), ("T,fa", "T.topk(fa, 3, 1, sorted=True)"), ("T,fa", "fa.nanmedian()"),
 ("T,t", "t.argmax()"), ("T,t", "t.argmin()"), ("T,t", "t.topk(2, largest=False)"), ("T,t", "t.sort(stable=True)"),
 ("T,t", "t.sort(stable=True, descending=True)"), ("T,t", "t.mode()"), ("T,t", "t.median()"), ("T,t", "t.kthvalue(2)"),
 ("T,t", "t.max(0)"), ("T,t", "t.min(0)"), ("T,t", "t.unique(sorted=False)"), ("T,t", "t.unique_consecutive(return_inverse=True)"),
 ("T,t", "t.cummax(0)"), ("T,t", "t.reshape(2, 3).mode(0)"), ("T,t", "t.reshape(3, 2).median(0)"), ("T,t", "t.bincount() if False else t.long().bincount()"),
 ("T,t", "t.argsort(stable=True, descending=True)"), ("T,t", "t.msort()"), ("T,t", "t.searchsorted(T.tensor(2.))"),
 ("T,t", "t.sort()[0].searchsorted(T.tensor([1., 3.]), right=True)"), ("T,t", "T.bucketize(t, T.tensor([1., 2.]))"),
 # empties
 ("T,e", "e.sum()"), ("T,e", "e.sum(0)"), ("T,e", "e.sum(1)"), ("T,e", "e.prod(0)"), ("T,e", "e.mean()"), ("T,e", "e.mean(0)"),
 ("T,e", "e.max()"), ("T,e", "e.max(0)"), ("T,e", "e.max(1)"), ("T,e", "e.amax(0)"), ("T,e", "e.amax(1)"), ("T,e", "e.argmax()"),
 ("T,e", "e.argmax(1)"), ("T,e", "e.min(0)"), ("T,e", "e.std()"), ("T,e", "e.std(0, correction=0)"), ("T,e", "e.var(1)"),
 ("T,e", "e.var_mean(0)"), ("T,e", "e.std_mean()"), ("T,e", "e.norm()"), ("T,e", "e.norm(dim=0)"), ("T,e", "e.logsumexp(0)"),
 ("T,e", "e.softmax(0)"), ("T,e", "e.cumsum(0)"), ("T,e", "e.median()"), ("T,e", "e.mode(0)"), ("T,e", "e.topk(0, 0)"),
 ("T,e", "e.topk(1, 0)"), ("T,e", "e.sort(0)"), ("T,e", "e.unique()"), ("T,e", "e.all()"), ("T,e", "e.any(1)"), ("T,e", "e.count_nonzero()"),
 ("T,e", "e.nansum()"), ("T,e", "e.nanmean()"), ("T,e", "e.kthvalue(1, 0)"), ("T,e", "e.quantile(0.5)"), ("T,e", "e.min()"),
 ("T,e", "e.aminmax()"), ("T,e", "e @ e.t()"), ("T,e", "e.t() @ e"), ("T,e", "e.logcumsumexp(0)"), ("T,e", "e.cummax(0)"),
 ("T,e", "e.max(1, keepdim=True)"), ("T,e", "e.amin()"), ("T,e", "e.std(1)"), ("T,e", "e.var(0, unbiased=False)"),
 ("T,e", "e.sum((0, 1))"), ("T,e", "e.sum(dim=())"), ("T,e", "e.mean(dim=[])"), ("T,e", "e.prod()"), ("T,e", "e.norm(p=0)"),
 ("T,e", "e.norm(p=float('inf'))"), ("T,e", "e.norm(p=float('inf'), dim=1)"), ("T,e", "e.reshape(-1)"), ("T,e", "e.reshape(0, -1)"),
 ("T,e", "e.view(3, 0)"), ("T,e", "e.expand(2, 0, 3)"), ("T,e", "e.flatten()"), ("T,e", "e.unflatten(1, (3, 1))"),
 ("T,e", "T.cat([e, e])"), ("T,e", "T.stack([e, e], 1)"), ("T,e", "e.chunk(2)"), ("T,e", "e.split(1, 1)"), ("T,e", "e.min(1)"),
 ("T,e", "e.var_mean(1, correction=2)"), ("T,e", "e.t().std(0)"), ("T,e", "e.argsort(1)"), ("T,e", "e.mode(1)"),
]

def _params(cases, arrays, every):
    # (args, expr) -> pytest params; each `every`-th case is also compiled (compiled == eager)
    out = []
    for i, (argstr, expr) in enumerate(cases):
        names = [a.strip() for a in argstr.split(",")[1:]]
        out.append(pytest.param(names, expr, bool(names) and i % every == 0, id=expr))
    return out


@pytest.mark.parametrize("names,expr,compiled", _params(CASES, A, 5))
def test_matches_torch(names, expr, compiled):
    fn = eval(f"lambda T, {', '.join(names)}: {expr}" if names else f"lambda T: {expr}")
    check(torch, fn, [A[k].copy() for k in names], compiled)


@pytest.mark.parametrize("shape,dim", [((0, 3), 1), ((0, 3), 0), ((2, 0), 0), ((2, 0), 1),
                                       ((0, 3), None), ((1,), 0), ((3,), 0)])
@pytest.mark.parametrize("fn", ["var", "std", "var_mean", "std_mean"])
def test_degrees_of_freedom_warning_counts_by_output_numel(shape, dim, fn):
    # PyTorch's reduction factor is input numel / output numel (an empty output counting 1):
    # var(1) of a (0, 3) tensor warns though each (absent) row would have 3 values; llgrad
    # counted the reduced dims' sizes and stayed silent
    def f(T, x):
        return getattr(T, fn)(x, dim)
    check(torch, f, [np.zeros(shape, np.float32)], compiled=False)


def test_degrees_of_freedom_warning_names_the_users_line():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        llgrad.zeros(0, 3).var(1)
        llgrad.zeros(0, 3).std(0)
    assert [x.filename for x in w] == [__file__] * 2


@pytest.mark.parametrize("values,dim", [([300., 300., 0.001], None),
                                        ([[300., 300., 0.001], [2., 3., 0.5]], 1),
                                        ([[300., 2.], [300., 3.], [0.001, 0.5]], 0),
                                        ([[300., 300., 0.001]], (0, 1)),
                                        ([1., 2., 65504., -0.1], None)])
def test_float16_prod_multiplies_in_float16(values, dim):
    # PyTorch's float16 prod rounds each step to float16 (300 * 300 overflows to inf, and
    # stays there); NumPy's reduce carried float32 and gave 90.06
    def f(T, x):
        return x.prod() if dim is None else x.prod(dim)
    check(torch, f, [np.array(values, np.float16)])


def test_special_values_raise_no_numpy_warnings_in_a_recording_context():
    # PyTorch is silent on 1 / 0, log(0), softmax of a -inf row...; llgrad's filter on
    # NumPy's warnings was installed once at import, so a catch_warnings entered before it
    # (pytest's, around each test) dropped it and simplefilter("always") shadowed it
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        x = llgrad.tensor([0., 1., nan, -inf])
        x / 0, x.log(), x // 2, x % 2, x.logsumexp(0), llgrad.zeros(0).nanmean()
        llgrad.tensor([-inf, -inf]).softmax(0), llgrad.tensor([[nan, 1.]]).isclose(x[:1])
        llgrad.zeros(0, 3).var(1)                       # (llgrad's own warning stays)
    assert [str(m.message)[:3] for m in w] == ["var"]


def test_numpy_warnings_outside_llgrad_still_reach_the_user():
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        llgrad.ones(2) / 0
        np.array([1.]) / 0
