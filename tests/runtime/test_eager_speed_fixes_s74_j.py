"""The overlapping strided scatter behind view backwards (Tensor.unfold, as_strided with
overlapping windows, expand's strided views): its flat index now built from the innermost
dimension outwards and np.add.at given 1-D index and values (NumPy's fast path): the same
index and the same adds in the same C order as before, so the same bits; and the
gradients against torch's (bench/eager_op_sweep.py's tensor_unfold/bwd was 6x torch's)."""
import numpy as np
import pytest
import torch

import llgrad
from llgrad.ir.ops_shape import _flat_index, _strided_scatter


def _old_flat_index(geom):
    shape, strides, offset = geom
    idx = np.full(shape, offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        sh = [1] * len(shape)
        sh[d] = n
        idx = idx + (np.arange(n, dtype=np.int64) * s).reshape(sh)
    return idx


def _old_strided_scatter(x, geom, span):
    buf = np.zeros(span, dtype=x.dtype)
    np.add.at(buf, _old_flat_index(geom), x)
    return buf


GEOMS = [((), (), 3), ((5,), (2,), 1), ((0, 4), (4, 1), 0), ((3, 0), (1, 1), 2),
         ((8, 6, 63, 8), (6 * 256, 256, 4, 1), 0), ((4, 5, 3), (1, 1, 1), 7),
         ((2, 3, 4, 5), (0, 5, 1, 1), 3), ((1, 7, 1), (9, 2, 5), 4)]


@pytest.mark.parametrize("geom", GEOMS, ids=str)
def test_flat_index_same_as_before(geom):
    new, old = _flat_index(geom), _old_flat_index(geom)
    assert new.shape == old.shape and new.dtype == old.dtype
    assert np.array_equal(new, old)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.complex64])
@pytest.mark.parametrize("geom", [g for g in GEOMS if 0 not in g[0]], ids=str)
def test_overlapping_strided_scatter_same_bits(geom, dtype):
    rng = np.random.RandomState(0)
    x = rng.standard_normal(geom[0]) * 1e3
    if dtype is np.complex64:
        x = x + 1j * rng.standard_normal(geom[0])
    x = np.asarray(x, dtype=dtype)
    span = int(_old_flat_index(geom).max()) + 1 if x.size else 1
    new, old = _strided_scatter(x, geom, span), _old_strided_scatter(x, geom, span)
    assert new.dtype == old.dtype
    assert new.tobytes() == old.tobytes()


def test_overlapping_strided_scatter_noncontiguous_values():
    rng = np.random.RandomState(1)
    geom = ((6, 5), (1, 2), 0)
    x = rng.standard_normal((5, 6)).astype(np.float32).T          # (6, 5), F-ordered
    new, old = _strided_scatter(x, geom, 14), _old_strided_scatter(x, geom, 14)
    assert new.tobytes() == old.tobytes()


def _both(fn, *arrays):
    outs = []
    for lib in (llgrad, torch):
        ts = [lib.tensor(a, requires_grad=True) for a in arrays]
        out = fn(lib, *ts)
        (out * lib.tensor(np.linspace(-1, 1, out.numel(), dtype=np.float32)
                          .reshape(tuple(out.shape)))).sum().backward()
        outs.append((out.detach().numpy(), [t.grad.numpy() for t in ts]))
    return outs


@pytest.mark.parametrize("size,step", [(8, 4), (3, 1), (4, 4), (5, 2), (1, 1)])
def test_tensor_unfold_backward_as_torch(size, step):
    x = np.random.RandomState(2).standard_normal((2, 3, 33)).astype(np.float32)
    (lo, lg), (to, tg) = _both(lambda L, t: t.unfold(2, size, step), x)
    np.testing.assert_array_equal(lo, to)
    np.testing.assert_allclose(lg[0], tg[0], rtol=1e-6, atol=1e-6)


def test_as_strided_overlapping_backward_as_torch():
    x = np.random.RandomState(3).standard_normal(48).astype(np.float32)
    (lo, lg), (to, tg) = _both(lambda L, t: (t * 1).as_strided((6, 7, 4), (5, 2, 1), 1), x)
    np.testing.assert_array_equal(lo, to)
    np.testing.assert_allclose(lg[0], tg[0], rtol=1e-6, atol=1e-6)


def test_unfold_then_sum_gradient_counts_windows():
    # each element's gradient: the number of windows reading it (exact small integers)
    x = llgrad.zeros(2, 20, requires_grad=True)
    x.unfold(1, 6, 2).sum().backward()
    t = torch.zeros(2, 20, requires_grad=True)
    t.unfold(1, 6, 2).sum().backward()
    assert np.array_equal(x.grad.numpy(), t.grad.numpy())
    assert x.grad.dtype == llgrad.float32


# ---- cumprod: forward by np_cumsum's slice loop, backward's eager no-zero path ----------

from llgrad.ir import np_cumsum  # noqa: E402
from llgrad.ir.ops_tensor import _first_order  # noqa: E402


@pytest.mark.parametrize("shape,dim", [((64, 256), 0), ((16, 4, 64, 16, 16), 2), ((300, 300), 1),
                                       ((5,), 0), ((), 0), ((40, 300), 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.float16])
def test_np_cumprod_same_bits(shape, dim, dtype):
    x = np.asarray(np.random.RandomState(4).uniform(0.5, 1.6, shape), dtype=dtype)
    acc = {np.float32: np.float64, np.float16: np.float32}.get(dtype, dtype)
    got, want = np_cumsum.cumprod(x, dim, acc), np.cumprod(x, axis=dim, dtype=acc)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def test_np_cumprod_nonfinite_same_bits():
    x = np.random.RandomState(5).uniform(-3, 3, (64, 256)).astype(np.float32)
    x[3, 7], x[10, 9], x[20, 11], x[30, 12] = np.inf, np.nan, -np.inf, 0.0
    with np.errstate(all="ignore"):
        got, want = np_cumsum.cumprod(x, 0, np.float64), np.cumprod(x, axis=0, dtype=np.float64)
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cumprod_backward_no_zero_same_as_masked_formula(dim, dtype):
    rng = np.random.RandomState(6)
    xa = rng.uniform(-1.5, 1.5, (64, 256)).astype(dtype)
    ga = rng.standard_normal((64, 256)).astype(dtype)
    x = llgrad.tensor(xa, requires_grad=True)
    out = x.cumprod(dim)
    out.backward(llgrad.tensor(ga))
    with llgrad.no_grad():
        xt, gt = llgrad.tensor(xa), llgrad.tensor(ga)
        want = _first_order(xt, gt, xt.cumprod(dim), dim)
    assert x.grad.numpy().tobytes() == want.numpy().tobytes()
    t = torch.tensor(xa, requires_grad=True)
    t.cumprod(dim).backward(torch.tensor(ga))
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=2e-4, atol=1e-5)


@pytest.mark.parametrize("zeros", [[], [(1, 2)], [(1, 2), (1, 5)], [(0, 0), (3, 7)]])
def test_cumprod_grads_as_torch_with_and_without_zeros(zeros):
    xa = np.random.RandomState(7).uniform(0.5, 1.5, (4, 9))
    for i, j in zeros:
        xa[i, j] = 0.0
    grads = []
    for lib in (llgrad, torch):
        x = lib.tensor(xa, requires_grad=True)
        y = x.cumprod(1)
        (g,) = lib.autograd.grad((y * y.detach()).sum(), x, create_graph=True)
        (gg,) = lib.autograd.grad(g.sum(), x)
        grads.append((g.detach().numpy(), gg.numpy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


# ---- kthvalue: the k-th position by a partition, not a full sort -------------------------

from llgrad.ir import ops_sort  # noqa: E402
from llgrad.ir.select_order import kthvalue_position  # noqa: E402


def _old_kthvalue(x, k, dim):
    idx = np.take(ops_sort._argsort(x, dim, False), [k - 1], axis=dim).astype(np.int64)
    v = np.take_along_axis(x, idx, axis=dim)
    equal = (x == v) | ((x != x) & (v != v))
    ops_sort._replay(x, idx, dim, equal.sum(dim) > 1, lambda row: [kthvalue_position(row, k)])
    return np.take_along_axis(x, idx, axis=dim), idx


def _kth_inputs():
    rng = np.random.RandomState(8)
    f = rng.standard_normal((12, 40)).astype(np.float32)
    ties = rng.randint(0, 5, (12, 40)).astype(np.float32)
    nans = f.copy()
    nans[rng.rand(12, 40) < 0.2] = np.nan
    zeros = np.where(rng.rand(12, 40) < 0.5, np.float32(0.0), np.float32(-0.0))
    zeros[:, ::7] = 1.0
    return [("float", f), ("ties", ties), ("nans", nans), ("signed_zeros", zeros),
            ("int", rng.randint(-3, 3, (12, 40)).astype(np.int64)),
            ("half", rng.standard_normal((12, 40)).astype(np.float16)),
            ("float64_3d", rng.standard_normal((4, 6, 9)))]


@pytest.mark.parametrize("name,x", _kth_inputs(), ids=lambda v: v if isinstance(v, str) else "")
def test_kthvalue_same_as_sorting(name, x):
    for dim in range(x.ndim):
        for k in sorted({1, 2, x.shape[dim] // 2, x.shape[dim]}):
            v, i = ops_sort._kthvalue(x, k, dim)
            ov, oi = _old_kthvalue(x, k, dim)
            assert v.tobytes() == ov.tobytes() and np.array_equal(i, oi), (dim, k)


@pytest.mark.parametrize("name,x", _kth_inputs()[:5], ids=lambda v: v if isinstance(v, str) else "")
def test_kthvalue_as_torch(name, x):
    for dim in range(x.ndim):
        for k in (1, 3, x.shape[dim]):
            got = llgrad.tensor(x).kthvalue(k, dim)
            want = torch.tensor(x).kthvalue(k, dim)
            np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
            np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())


def test_kthvalue_backward_as_torch():
    x = np.random.RandomState(9).standard_normal((64, 256)).astype(np.float32)
    grads = []
    for lib in (llgrad, torch):
        t = lib.tensor(x, requires_grad=True)
        t.kthvalue(5, 1).values.sum().backward()
        grads.append(t.grad.numpy())
    assert np.array_equal(*grads)


# ---- integer remainder: a - floor(a / b) * b (three ops, was fmod's nine) ---------------

def _int_values(dt):
    info = np.iinfo(dt)
    cand = [info.min, info.min + 1, -7, -3, -1, 0, 1, 3, 7, info.max - 1, info.max]
    return np.array(sorted({int(v) for v in cand if info.min <= v <= info.max}), dtype=dt)


@pytest.mark.parametrize("dt", ["int8", "uint8", "int16", "int32", "int64"])
@pytest.mark.parametrize("kind", ["tensor", "number", "0d"])
def test_int_remainder_as_torch(dt, kind):
    vals = _int_values(dt)
    for d in vals[vals != 0]:
        outs = []
        for lib in (llgrad, torch):
            b = {"tensor": lambda: lib.tensor(np.full(vals.shape, d, dtype=dt)),
                 "0d": lambda: lib.tensor(np.array(d, dtype=dt)), "number": lambda: int(d)}[kind]()
            outs.append((lib.tensor(vals) % b).numpy())
        assert outs[0].dtype == outs[1].dtype and np.array_equal(*outs), (dt, d)


@pytest.mark.parametrize("case", [
    lambda M: M.tensor([5, -5]) % M.tensor([[3], [-3]]),
    lambda M: 7 % M.tensor([3, -4]),
    lambda M: M.tensor([5, -5], dtype=M.int8) % 300,
    lambda M: M.tensor([5, 250], dtype=M.uint8) % M.tensor(-3),
    lambda M: M.tensor([True, False]) % 2,
    lambda M: M.tensor([], dtype=M.int64) % 0,
    lambda M: M.remainder(M.tensor([9, -9, 4]), M.tensor([4, 4, -3])),
    lambda M: M.tensor([9, -9, 4]).remainder_(-4),
    lambda M: M.tensor([3, 4]) % 0,
    lambda M: M.tensor([3, 4]) % M.tensor([1, 0]),
    lambda M: M.tensor([True]) % M.tensor([True]),
])
def test_int_remainder_edges_as_torch(case):
    outs = []
    for lib in (llgrad, torch):
        try:
            r = case(lib)
            outs.append((str(r.dtype).split(".")[-1], r.tolist()))
        except Exception as e:  # noqa: BLE001
            outs.append((type(e).__name__, str(e)))
    assert outs[0] == outs[1]


def test_take_along_dim_wraps_indices_as_torch():
    x = np.random.RandomState(10).standard_normal((4, 6)).astype(np.float32)
    idx = np.array([[0, -1, 5], [-6, 2, 3], [1, 1, 1], [-3, 4, 0]])
    got = llgrad.take_along_dim(llgrad.tensor(x), llgrad.tensor(idx), 1)
    want = torch.take_along_dim(torch.tensor(x), torch.tensor(idx), 1)
    assert np.array_equal(got.numpy(), want.numpy())
