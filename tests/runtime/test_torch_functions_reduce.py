"""The reductions, scans and order statistics llgrad writes as compositions
(llgrad/runtime/functions_reduce.py) against PyTorch: values, dtypes, shapes, index
results, gradients (including PyTorch's even split among ties of median()) and errors."""
import numpy as np
import pytest

from torch_compare import compare, compare_error

torch = pytest.importorskip("torch")
import llgrad  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

rng = np.random.default_rng(11)
X = rng.standard_normal((4, 5)).astype(np.float32)
X3 = rng.standard_normal((2, 3, 5))
NANS = np.array([[1.0, np.nan, 3.0, -2.0], [np.nan, np.nan, np.nan, np.nan],
                 [0.5, 0.5, np.nan, -1.0]], np.float32)
TIES = np.array([[2.0, 1.0, 2.0, 1.0, 3.0], [4.0, 4.0, 4.0, 0.0, 0.0]], np.float32)
INTS = np.array([[3, 1, 2, 1], [0, 5, 5, -2]], np.int64)
INF = np.array([np.inf, 1.0, np.inf, -np.inf, 0.0], np.float32)


@pytest.mark.parametrize("x", [X, X3, NANS, INTS, INF, np.zeros((0, 3), np.float32)],
                         ids=["f32", "f64-3d", "nans", "ints", "inf", "empty"])
def test_nan_sums_and_counts(x):
    compare(lambda lib, t: lib.nansum(t), x)
    compare(lambda lib, t: t.nansum(-1, keepdim=True), x)
    compare(lambda lib, t: lib.count_nonzero(t), x)
    compare(lambda lib, t: t.count_nonzero((0, -1) if t.dim() > 1 else 0), x)
    compare(lambda lib, t: lib.count_nonzero(t, dim=-1), x)
    if x.dtype.kind == "f":
        compare(lambda lib, t: lib.nanmean(t), x)
        compare(lambda lib, t: t.nanmean(dim=0, dtype=lib.float64), x)
        compare(lambda lib, t: lib.nansum(t, -1, dtype=lib.float64), x)


def test_nanmean_of_integers_raises():
    compare_error(lambda lib, t: lib.nanmean(t), INTS)


@pytest.mark.parametrize("x", [X, X3, INTS, TIES], ids=["f32", "f64", "ints", "ties"])
def test_aminmax_and_var_mean(x):
    compare(lambda lib, t: lib.aminmax(t), x)
    compare(lambda lib, t: t.aminmax(dim=1, keepdim=True), x)
    compare(lambda lib, t: lib.aminmax(t, dim=-1), x)
    if x.dtype.kind == "f":
        compare(lambda lib, t: lib.var_mean(t), x)
        compare(lambda lib, t: lib.std_mean(t, 1, keepdim=True), x)
        compare(lambda lib, t: lib.var_mean(t, dim=(0, 1), correction=0), x)
        compare(lambda lib, t: lib.std_mean(t, False), x)


def test_aminmax_errors_and_empty():
    compare_error(lambda lib, t: lib.aminmax(t), np.zeros(0, np.float32))
    compare_error(lambda lib, t: lib.aminmax(t, dim=1), np.zeros((1, 0), np.float32))
    compare(lambda lib, t: lib.aminmax(t, dim=0), np.zeros((1, 0), np.float32))
    assert repr(llgrad.aminmax(llgrad.tensor([1, 2]))).startswith(
        "llgrad.return_types.aminmax(\nmin=tensor(1)")


@pytest.mark.parametrize("x", [X, X3, NANS, INF, np.array([-1000.0, 0.0, -np.inf], np.float32)],
                         ids=["f32", "f64", "nans", "inf", "wide"])
@pytest.mark.parametrize("dim", [0, -1])
def test_logcumsumexp(x, dim):
    grad = not np.isinf(x).any()        # (PyTorch's gradient at inf is nan)
    compare(lambda lib, t: lib.logcumsumexp(t, dim), x, grad=grad, rtol=1e-5)
    compare(lambda lib, t: t.logcumsumexp(dim), x, grad=grad, rtol=1e-5)


def test_logcumsumexp_edges():
    compare(lambda lib, t: lib.logcumsumexp(t, 1), np.zeros((2, 0), np.float32))
    compare(lambda lib, t: lib.logcumsumexp(t, 0), np.full((), 2.5, np.float32))
    compare(lambda lib, t: lib.logcumsumexp(t, 0), rng.standard_normal(37).astype(np.float32))
    compare_error(lambda lib, t: lib.logcumsumexp(t, 0), INTS)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("x", [X, X3, TIES, INTS, NANS, INF,
                               np.array([True, False, True, True]),
                               np.array([1.0, 3.0, 3.0, np.nan, 2.0, np.nan], np.float32)],
                         ids=["f32", "f64", "ties", "ints", "nans", "inf", "bool", "nan-run"])
def test_cummax_cummin(name, x):
    for dim in range(-1, x.ndim):
        compare(lambda lib, t: getattr(lib, name)(t, dim), x)
        compare(lambda lib, t: getattr(t, name)(dim), x)


def test_cummax_edges():
    compare(lambda lib, t: lib.cummax(t, 0), np.ones((), np.float32))
    compare(lambda lib, t: lib.cummin(t, 1), np.zeros((1, 0), np.float32))
    compare(lambda lib, t: lib.cummin(t, 0), rng.standard_normal(33).astype(np.float32))


@pytest.mark.parametrize("name", ["median", "nanmedian"])
@pytest.mark.parametrize("x", [X, X3, TIES, INTS, NANS, INF, rng.standard_normal(8)],
                         ids=["f32", "f64", "ties", "ints", "nans", "inf", "even"])
def test_median_over_all_elements(name, x):
    compare(lambda lib, t: getattr(lib, name)(t), x)
    compare(lambda lib, t: getattr(t, name)(), x)


def _check_indices(lib, t, r, dim, keepdim):
    """The indices point at the values (PyTorch does not promise which of equal values)."""
    idx = r.indices if keepdim else r.indices.unsqueeze(dim)
    picked = t.detach().gather(dim, idx)
    vals = r.values.detach() if keepdim else r.values.detach().unsqueeze(dim)
    assert bool(((picked == vals) | (picked.isnan() & vals.isnan())).all())


@pytest.mark.parametrize("name", ["median", "nanmedian", "mode", "kthvalue"])
@pytest.mark.parametrize("x", [X, X3, TIES, INTS, NANS],
                         ids=["f32", "f64", "ties", "ints", "nans"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_order_statistics_along_a_dim(name, x, keepdim):
    if name == "mode" and np.isnan(x).any():
        pytest.skip("PyTorch's mode of nan is unspecified")
    for dim in range(-1, x.ndim):
        args = (2,) if name == "kthvalue" else ()

        def values(lib, t):
            r = getattr(lib, name)(t, *args, dim, keepdim)
            _check_indices(lib, t, r, dim % t.dim(), keepdim)
            return r.values
        # (the index PyTorch picks among nans is its quickselect's: only median's, the
        # first nan, is llgrad's)
        compare(values, x, grad=not (x is NANS and name in ("nanmedian", "kthvalue")))
        if name in ("mode",) or x is TIES or x is NANS:
            continue        # (the index among equal values is PyTorch's choice)
        compare(lambda lib, t: getattr(t, name)(*args, dim=dim, keepdim=keepdim), x)


def test_mode_picks_smallest_most_frequent_and_its_last_index():
    compare(lambda lib, t: lib.mode(t), np.array([1, 2, 2, 1, 3]))
    compare(lambda lib, t: lib.mode(t), np.array([3, 2, 2, 1, 3, 3, 2]))
    compare(lambda lib, t: lib.mode(t, 0), np.array([[1.0, 2.0], [1.0, 3.0]], np.float32))
    compare(lambda lib, t: lib.mode(t), np.array([True, False, False]))
    compare(lambda lib, t: lib.mode(t), np.full((), 4.0, np.float32))
    compare(lambda lib, t: lib.mode(t, 0), np.zeros((1, 0), np.float32))


def test_order_statistics_edges_and_errors():
    compare(lambda lib, t: lib.median(t), np.zeros(0, np.float32))
    compare(lambda lib, t: lib.nanmedian(t), np.zeros(0, np.float32))
    compare(lambda lib, t: lib.median(t, 0), np.full((), 3.0, np.float32))
    compare(lambda lib, t: lib.median(t, 0), np.zeros((1, 0), np.float32))
    compare(lambda lib, t: lib.kthvalue(t, 1), np.full((), 3.0, np.float32))
    compare(lambda lib, t: lib.kthvalue(t, 4), np.array([3.0, np.nan, 1.0, 2.0], np.float32))
    compare_error(lambda lib, t: lib.median(t, 1), np.zeros((1, 0), np.float32))
    compare_error(lambda lib, t: lib.kthvalue(t, 4), np.array([3.0, 1.0, 2.0], np.float32))
    compare_error(lambda lib, t: lib.kthvalue(t, 0), np.array([3.0, 1.0, 2.0], np.float32))
    compare_error(lambda lib, t: lib.kthvalue(t, 1, 1), np.zeros((1, 0), np.float32))
    compare_error(lambda lib, t: lib.mode(t), np.zeros(0, np.float32))
    compare_error(lambda lib, t: lib.median(t), np.array([True, False]))
    r = llgrad.median(llgrad.tensor([[2, 1, 2, 1]]), 1)
    assert repr(r).startswith("llgrad.return_types.median(")


@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
@pytest.mark.parametrize("x", [X, X3, TIES, NANS], ids=["f32", "f64", "ties", "nans"])
@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile(name, x, interpolation):
    fn = getattr(torch, name)
    del fn

    def q(lib, t, qq, **kw):
        return getattr(lib, name)(t, qq, interpolation=interpolation, **kw)
    qs = np.array([0.0, 0.25, 0.5, 0.9, 1.0], x.dtype)
    compare(lambda lib, t: q(lib, t, 0.4), x)
    compare(lambda lib, t, qq: q(lib, t, qq), x, qs)
    for dim in range(-1, x.ndim):
        compare(lambda lib, t: q(lib, t, 0.5, dim=dim), x)
        compare(lambda lib, t, qq: q(lib, t, qq, dim=dim, keepdim=True), x, qs)
    compare(lambda lib, t: q(lib, t, 0.3, keepdim=True), x)
    compare(lambda lib, t, qq: getattr(t, name)(qq[2], 0), x, qs)


def test_quantile_errors():
    f = np.array([1.0, 2.0], np.float32)
    compare_error(lambda lib, t: lib.quantile(t, 1.5), f)
    compare_error(lambda lib, t: lib.nanquantile(t, -0.5), f)
    compare_error(lambda lib, t: lib.quantile(t, 0.5), np.array([1, 2]))
    compare_error(lambda lib, t: lib.quantile(t, 0.5), np.zeros(0, np.float32))
    compare_error(lambda lib, t, q: lib.quantile(t, q), f, np.array([0.5]))
    compare_error(lambda lib, t, q: lib.quantile(t, q), f, np.array([[0.5]], np.float32))
    compare_error(lambda lib, t, q: lib.quantile(t, q), f, np.array([0.5, 1.5], np.float32))
    compare_error(lambda lib, t: lib.quantile(t, 0.5, interpolation="bad"), f)
    compare(lambda lib, t: lib.quantile(t, 0.5, dim=0), np.full((), 2.0, np.float32))
