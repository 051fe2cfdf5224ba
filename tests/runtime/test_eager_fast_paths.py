"""Eager paths that PyTorch's CPU kernels special-case, taken here too for their values and
their speed: pow to 2, 3, -1, -2 and -0.5 (products, a division, 1/sqrt: libm's pow was 200x
slower and an ulp off PyTorch in 30% of elements), clamp to two number bounds (NumPy's
clip), arange of integer values (exact), searchsorted by binary search (it compared every
pair: n x m memory). Each is checked bit for bit against torch, special values included,
and compiled against eager."""
import numpy as np
import pytest

import llgrad
from llgrad.ir.np_sums import cascade_sum

torch = pytest.importorskip("torch")

_SPECIAL = [np.nan, -0.0, 0.0, 1.0, -1.0, np.inf, -np.inf, 0.5, -0.5, 3e-39, 1e30]


def _values(dtype, n=4000):
    x = np.concatenate([np.array(_SPECIAL), np.random.default_rng(0).standard_normal(n) * 3])
    with np.errstate(over="ignore"):
        return x.astype(dtype)


def _same(a, b):
    nan = np.isnan(a)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True) \
        and np.array_equal(np.signbit(a[~nan]), np.signbit(b[~nan]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("e", [2, 3, -1, -2, -0.5, 2.0, 3.0])
def test_pow_fast_exponents_are_torch_bits(dtype, e):
    if dtype == np.float16 and e == -0.5:
        pytest.skip("float16's -0.5 is pow's in PyTorch (libm's rounding)")
    x = _values(dtype)
    assert _same(llgrad.tensor(x).pow(e).numpy(), torch.tensor(x).pow(e).numpy())


@pytest.mark.parametrize("e", [2, 3, -1, -2, -0.5])
def test_pow_fast_exponents_compiled_equal_eager_and_grad(e):
    x0 = np.abs(_values(np.float32, 200)[len(_SPECIAL):]) + 0.1
    f = lambda x: (x ** e).sum()                                     # noqa: E731
    c = llgrad.compile(f)
    out = []
    for fn in (f, c, c):
        x = llgrad.tensor(x0, requires_grad=True)
        y = fn(x)
        y.backward()
        out.append((y.item(), x.grad.numpy()))
    tx = torch.tensor(x0, requires_grad=True)
    (tx ** e).sum().backward()
    for y, g in out:
        np.testing.assert_allclose(y, out[0][0], rtol=1e-6)
        np.testing.assert_allclose(g, tx.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_clamp_two_number_bounds_are_torch_bits(dtype):
    x = _values(dtype)
    for lo, hi in [(-0.5, 0.5), (0.0, 1.0), (-0.0, 0.0), (0.5, -0.5), (float("nan"), 1.0),
                   (-1.0, float("nan")), (-float("inf"), float("inf")), (-1, 2)]:
        assert _same(llgrad.tensor(x).clamp(lo, hi).numpy(),
                     torch.tensor(x).clamp(lo, hi).numpy()), (lo, hi)


def test_clamp_result_is_a_new_tensor_and_compiled_equals_eager():
    x = llgrad.tensor(_values(np.float32, 50))
    y = x.clamp(-0.5, 0.5)
    assert y.data_ptr() != x.data_ptr()
    c = llgrad.compile(lambda t: t.clamp(-0.5, 0.5) * 2)
    for _ in range(2):
        assert _same(c(x).numpy(), (x.clamp(-0.5, 0.5) * 2).numpy())


@pytest.mark.parametrize("args", [(65536.0,), (0, 100000.0), (-5.0, 3000.0, 3.0), (1.5, 100.0),
                                  pytest.param((0.0, 2.0 ** 24 + 100, 1.0), marks=pytest.mark.slow),
                                  (2.0 ** 24 - 50, 2.0 ** 24 + 100, 1.0),     # (the 2^24 edge)
                                  (3.0, -4000.0, -1.0), (0.0, 1.0, 0.1), (0.0, 4096.0)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_arange_is_torch_bits(args, dtype):
    try:
        want = torch.arange(*args, dtype=getattr(torch, dtype)).numpy()
    except RuntimeError:
        pytest.skip("torch refuses this range in this dtype")
    got = llgrad.arange(*args, dtype=getattr(llgrad, dtype)).numpy()
    assert _same(got, want)


_RNG = np.random.default_rng(1)
_SEARCHES = [
    (np.sort(_RNG.standard_normal(300)).astype(np.float32), _RNG.standard_normal(80).astype(np.float32)),
    (np.sort(_RNG.standard_normal((3, 20)), -1), _RNG.standard_normal((3, 7))),
    (np.sort(_RNG.standard_normal((100, 5)), -1), _RNG.standard_normal((100, 3))),
    (np.array([0., 1., 1., 1., 2., 5.], np.float32),
     np.array([np.nan, 1., -0., 0., 3., -np.inf, np.inf], np.float32)),
    (np.arange(10), np.array([[3, 3], [11, -1]])),
    (np.arange(10), np.array(4)),
    (np.arange(10.0), np.array([2, 5])),                          # (dtypes differ)
]


@pytest.mark.parametrize("k", range(len(_SEARCHES)))
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_is_torch(k, right):
    seq, vals = _SEARCHES[k]
    for i32 in (False, True):
        want = torch.searchsorted(torch.tensor(seq), torch.tensor(vals), right=right,
                                  out_int32=i32)
        got = llgrad.searchsorted(llgrad.tensor(seq), llgrad.tensor(vals), right=right,
                                  out_int32=i32)
        assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("seq", [[0., 1., 2., np.nan], [3., 1., 2., 0.5], [np.nan, 1., 2.]])
def test_searchsorted_of_unsorted_or_nan_boundaries_compiled_equals_eager(seq):
    """Boundaries that are not sorted numbers: PyTorch's result is its binary search's,
    eagerly and in the compiled call's graph (s63 p3: not a count of comparisons)."""
    s = llgrad.tensor(np.array(seq, np.float32))
    v = llgrad.tensor(np.array([0.5, 1.5, 3.0, np.nan], np.float32))
    c = llgrad.compile(lambda a, b: llgrad.searchsorted(a, b, right=True) + 0)
    want = llgrad.searchsorted(s, v, right=True).numpy()
    np.testing.assert_array_equal(want, torch.searchsorted(
        torch.tensor(s.numpy()), torch.tensor(v.numpy()), right=True).numpy())
    for _ in range(2):
        np.testing.assert_array_equal(c(s, v).numpy(), want)


def test_searchsorted_compiled_equals_eager():
    c = llgrad.compile(lambda s, v: llgrad.bucketize(v, s) * 2)
    s = llgrad.tensor(np.sort(_RNG.standard_normal(50)))
    for _ in range(3):
        v = llgrad.tensor(_RNG.standard_normal(20))
        np.testing.assert_array_equal(c(s, v).numpy(), (llgrad.bucketize(v, s) * 2).numpy())


@pytest.mark.parametrize("shape,dim", [((64, 128, 16), 1), ((16, 1024, 4), 1), ((4096, 32), 0),
                                       ((5, 7, 9, 2), 1), ((6, 40, 1), 1), ((3, 4, 80), 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_and_mean_over_a_middle_axis_are_numpys_bits(shape, dim, dtype, keepdim):
    """A reduction over one axis with a few elements after it takes einsum (NumPy's reduce
    loops over those few per element): the same additions in the same order as
    np.add.reduce / np.mean, so the same bits; against torch within rounding."""
    x0 = (np.random.default_rng(2).standard_normal(shape) * 3).astype(dtype)
    x0.flat[7] = -0.0
    s = llgrad.tensor(x0).sum(dim, keepdim=keepdim).numpy()
    m = llgrad.tensor(x0).mean(dim, keepdim=keepdim).numpy()
    # (an axis of 256 or more NumPy adds in sequence is added in blocks: np_sums.py)
    blocked = cascade_sum(x0, (dim,), keepdim)
    if blocked is None:
        assert _same(s, np.asarray(np.add.reduce(x0, axis=dim, keepdims=keepdim)))
        assert _same(m, np.asarray(np.mean(x0, axis=dim, keepdims=keepdim)))
    else:
        assert _same(s, blocked)
        assert _same(m, np.true_divide(blocked, np.intp(shape[dim]), casting="unsafe",
                                       out=blocked.copy()))
    # (a sum's rounding scales with the sum of magnitudes: PyTorch adds in another order)
    eps = np.finfo(dtype).eps * 4 * np.abs(x0).sum(dim, keepdims=keepdim)
    np.testing.assert_array_less(
        np.abs(s - torch.tensor(x0).sum(dim, keepdim=keepdim).numpy()), eps + 1e-30)
    np.testing.assert_array_less(
        np.abs(m - torch.tensor(x0).mean(dim, keepdim=keepdim).numpy()),
        eps / shape[dim] + 1e-30)
