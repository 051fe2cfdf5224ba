"""Eager speed fixes of round s75 (F), against torch: atan2 on a native loop
(compile/eager_binary.py: np.arctan2 was ~9x torch's), cumsum on eager_shaped.py's kernel of
its lowering (NumPy's accumulate ~5x; the same bits), and cdist for p = 2 beyond 25 rows in
ATen's matrix-product form (_euclidean_dist: its values near 0, its backward, its
ViewBackward0 / EuclideanDistBackward0 nodes; the differences form was ~10x torch's)."""
import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_binary, eager_builds, eager_shaped
from llgrad.ir import OPS

torch = pytest.importorskip("torch")


def _pair(*arrays, grad=False):
    return ([llgrad.tensor(a, requires_grad=grad) for a in arrays],
            [torch.tensor(a, requires_grad=grad) for a in arrays])


def _close(got, want, rtol=1e-5, atol=1e-5):
    w = want.detach().numpy() if isinstance(want, torch.Tensor) else want
    g = got.detach().numpy() if isinstance(got, llgrad.Tensor) else got
    assert g.shape == w.shape and g.dtype == w.dtype
    scale = max(1.0, float(np.abs(w).max(initial=0)))
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * scale)


# ---- atan2 -------------------------------------------------------------------------------

def _atan2_operands(dtype):
    r = np.random.RandomState(0)
    y, x = r.randn(64, 80).astype(dtype), r.randn(64, 80).astype(dtype)
    y[0, :10] = [0, -0.0, 0, -0.0, np.inf, -np.inf, 1, 1, -1, 1e-40]
    x[0, :10] = [0, 0, -0.0, -0.0, np.inf, 1, np.inf, -np.inf, -np.inf, -1e-40]
    return y, x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_atan2_native_values_and_grads(dtype):
    y, x = _atan2_operands(dtype)
    llgrad.atan2(llgrad.tensor(y), llgrad.tensor(x))
    eager_builds.wait()         # (background builds: NumPy's until the kernel is there)
    before = eager_binary.stats["calls"]
    (ly, lx), (ty, tx) = _pair(y, x, grad=True)
    got, want = llgrad.atan2(ly, lx), torch.atan2(ty, tx)
    assert eager_binary.stats["calls"] > before         # (the native loop ran)
    _close(got, want, rtol=2e-7 if dtype == np.float32 else 1e-15, atol=0)
    g, w = got.detach().numpy(), want.detach().numpy()
    assert np.array_equal(np.signbit(g), np.signbit(w))  # (the zeros' signs, the quadrants)
    got.sum().backward()
    want.sum().backward()
    _close(ly.grad, ty.grad)
    _close(lx.grad, tx.grad)


def test_atan2_falls_back_off_the_fast_path():
    # broadcast operands, strided ones, a small one: NumPy's, the same values
    r = np.random.RandomState(1)
    y, x = r.randn(64, 128).astype(np.float32), r.randn(128).astype(np.float32)
    _close(llgrad.atan2(llgrad.tensor(y), llgrad.tensor(x)), torch.atan2(torch.tensor(y),
                                                                        torch.tensor(x)))
    _close(llgrad.tensor(y)[:, ::2].atan2(llgrad.tensor(y)[:, 1::2]),
           torch.tensor(y)[:, ::2].atan2(torch.tensor(y)[:, 1::2]))
    a = llgrad.tensor(y.copy())
    a.atan2_(llgrad.tensor(y.T.copy().T))
    _close(a, torch.tensor(y).atan2(torch.tensor(y)))


# ---- cumsum -----------------------------------------------------------------------------

@pytest.mark.parametrize("shape,dim", [((64, 256), 1), ((64, 256), 0), ((8, 16, 64), 1),
                                       ((3, 5000), -1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cumsum_native_same_bits_as_numpy_impl(shape, dim, dtype):
    a = (np.random.RandomState(2).randn(*shape) * 100).astype(dtype)
    a.flat[0] = -0.0                # (a sum from +0: PyTorch's +0)
    llgrad.tensor(a).cumsum(dim)
    eager_builds.wait()         # (background builds: NumPy's until the kernel is there)
    before = eager_shaped.stats["calls"]
    got = llgrad.tensor(a).cumsum(dim).numpy()
    assert eager_shaped.stats["calls"] > before
    ref = OPS["cumsum"].impl(a, dim)
    assert got.dtype == ref.dtype and np.array_equal(got, ref) and not np.signbit(got.flat[0])
    _close(got, torch.tensor(a).cumsum(dim))


def test_cumsum_grad_against_torch():
    a = np.random.RandomState(3).randn(64, 256).astype(np.float32)
    (la,), (ta,) = _pair(a, grad=True)
    g = np.random.RandomState(4).randn(64, 256).astype(np.float32)
    (la.cumsum(1) * llgrad.tensor(g)).sum().backward()
    (ta.cumsum(1) * torch.tensor(g)).sum().backward()
    _close(la.grad, ta.grad)


# ---- cdist -------------------------------------------------------------------------------

def _node_names(fn):
    return type(fn).__name__, [type(f).__name__ for f, _ in fn.next_functions]


@pytest.mark.parametrize("rows,mode", [(64, "use_mm_for_euclid_dist_if_necessary"),
                                       (10, "use_mm_for_euclid_dist"),
                                       (10, "use_mm_for_euclid_dist_if_necessary"),
                                       (64, "donot_use_mm_for_euclid_dist")])
def test_cdist_values_grads_nodes(rows, mode):
    r = np.random.RandomState(5)
    a, b = r.randn(rows, 32).astype(np.float32), r.randn(rows + 3, 32).astype(np.float32)
    (la, lb), (ta, tb) = _pair(a, b, grad=True)
    got, want = llgrad.cdist(la, lb, compute_mode=mode), torch.cdist(ta, tb, compute_mode=mode)
    _close(got, want, rtol=1e-4, atol=1e-5)
    assert type(got.grad_fn).__name__ == type(want.grad_fn).__name__
    if type(want.grad_fn).__name__ == "ViewBackward0":
        assert type(got.grad_fn.next_functions[0][0]).__name__ == "EuclideanDistBackward0"
    g = r.randn(*want.shape).astype(np.float32)
    (got * llgrad.tensor(g)).sum().backward()
    (want * torch.tensor(g)).sum().backward()
    _close(la.grad, ta.grad, rtol=1e-4, atol=1e-4)
    _close(lb.grad, tb.grad, rtol=1e-4, atol=1e-4)


def test_cdist_mm_zero_distance_and_batch():
    # the matrix-product form: cdist(x, x)'s diagonal near 0 (not exactly, as ATen's), a zero
    # distance's gradient 0 (ratio masked), batch dims broadcast and their gradients summed
    r = np.random.RandomState(6)
    x = r.randn(30, 5).astype(np.float32)
    (lx,), (tx,) = _pair(x, grad=True)
    got, want = llgrad.cdist(lx, lx), torch.cdist(tx, tx)
    _close(got, want, rtol=1e-3, atol=2e-3)
    got.sum().backward()
    want.sum().backward()
    assert np.isfinite(lx.grad.numpy()).all()
    _close(lx.grad, tx.grad, rtol=1e-3, atol=1e-3)
    b1, b2 = r.randn(3, 1, 40, 8).astype(np.float32), r.randn(4, 30, 8).astype(np.float32)
    (l1, l2), (t1, t2) = _pair(b1, b2, grad=True)
    got, want = llgrad.cdist(l1, l2), torch.cdist(t1, t2)
    _close(got, want, rtol=1e-4, atol=1e-5)
    got.sum().backward()
    want.sum().backward()
    _close(l1.grad, t1.grad, rtol=1e-4, atol=1e-4)
    _close(l2.grad, t2.grad, rtol=1e-4, atol=1e-4)


def test_cdist_mm_exact_zero_gradient():
    # identical rows of small integers: the product form's distance is an exact 0 there
    x = np.tile(np.arange(4, dtype=np.float32), (30, 1))
    (lx,), (tx,) = _pair(x, grad=True)
    got, want = llgrad.cdist(lx, lx), torch.cdist(tx, tx)
    assert (got.detach().numpy() == 0).all() and (want.detach().numpy() == 0).all()
    got.sum().backward()
    want.sum().backward()
    _close(lx.grad, tx.grad)


def test_cdist_mm_double_backward():
    r = np.random.RandomState(7)
    a, b = r.randn(30, 4).astype(np.float64), r.randn(28, 4).astype(np.float64)
    (la, lb), (ta, tb) = _pair(a, b, grad=True)
    gl, = llgrad.autograd.grad(llgrad.cdist(la, lb).sum(), la, create_graph=True)
    gt, = torch.autograd.grad(torch.cdist(ta, tb).sum(), ta, create_graph=True)
    _close(gl, gt)
    gl.square().sum().backward()
    gt.square().sum().backward()
    _close(lb.grad, tb.grad, rtol=1e-6, atol=1e-8)


def test_cdist_no_grad_and_1d_error():
    r = np.random.RandomState(8)
    a, b = r.randn(40, 6).astype(np.float32), r.randn(50, 6).astype(np.float32)
    with llgrad.no_grad():
        got = llgrad.cdist(llgrad.tensor(a, requires_grad=True), llgrad.tensor(b))
    assert got.grad_fn is None
    _close(got, torch.cdist(torch.tensor(a), torch.tensor(b)), rtol=1e-4)
    with pytest.raises(RuntimeError, match="at least 2D"):
        llgrad.cdist(llgrad.ones(3), llgrad.ones(3, 3))


@pytest.mark.parametrize("shape,dim", [((64, 256), 1), ((64, 256), 0), ((3, 5000), -1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cumprod_native_same_bits_as_numpy_impl(shape, dim, dtype):
    a = (np.random.RandomState(9).rand(*shape) * 0.02 + 0.995).astype(dtype)
    a.flat[5], a.flat[7], a.flat[-3] = 0, np.nan, -np.inf
    llgrad.tensor(a).cumprod(dim)
    eager_builds.wait()         # (background builds: NumPy's until the kernel is there)
    before = eager_shaped.stats["calls"]
    got = llgrad.tensor(a).cumprod(dim).numpy()
    assert eager_shaped.stats["calls"] > before
    ref = OPS["cumprod"].impl(a, dim)
    assert got.dtype == ref.dtype and np.array_equal(got, ref, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(ref))
    _close(got, torch.tensor(a).cumprod(dim))


def test_cumprod_grad_against_torch():
    a = (np.random.RandomState(10).rand(64, 256) * 0.02 + 0.995).astype(np.float32)
    (la,), (ta,) = _pair(a, grad=True)
    la.cumprod(1).sum().backward()
    ta.cumprod(1).sum().backward()
    _close(la.grad, ta.grad, rtol=1e-4)


# ---- take_along_dim, sum over a row-major array's last dim ---------------------------------

def test_take_along_dim_wraps_only_out_of_range_indices():
    # in-range indices skip the remainder (the same gather); out of range ones wrap, as torch
    r = np.random.RandomState(11)
    a = r.randn(64, 256).astype(np.float32)
    for idx in (r.randint(0, 256, (64, 32)), r.randint(-256, 512, (64, 32)),
                r.randint(0, 256, (1, 32)), np.zeros((64, 0), np.int64)):
        (la,), (ta,) = _pair(a, grad=True)
        got = llgrad.take_along_dim(la, llgrad.tensor(idx), 1)
        want = torch.take_along_dim(ta, torch.tensor(idx), 1)
        _close(got, want, rtol=0, atol=0)
        assert type(got.grad_fn).__name__ == type(want.grad_fn).__name__
        got.sum().backward()
        want.sum().backward()
        _close(la.grad, ta.grad, rtol=0, atol=0)


def test_take_along_dim_compiled_wraps():
    r = np.random.RandomState(12)
    a, idx = r.randn(8, 16).astype(np.float32), r.randint(-16, 32, (8, 4))
    f = llgrad.compile(lambda x, i: llgrad.take_along_dim(x, i, 1))
    for i in (idx, idx % 16):
        _close(f(llgrad.tensor(a), llgrad.tensor(i)),
               torch.take_along_dim(torch.tensor(a), torch.tensor(i), 1), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_last_dim_sum_numpy_pairwise(dtype):
    # a row-major array's last dim: NumPy's pairwise reduce, as before (the same bits)
    a = (np.random.RandomState(13).rand(64, 1000) * 0.9).astype(dtype)
    for dim in (1, -1, (1,)):
        got = llgrad.tensor(a).sum(dim).numpy()
        assert np.array_equal(got, np.add.reduce(a, axis=1))
    _close(llgrad.tensor(a).sum(1), torch.tensor(a).sum(1), rtol=1e-6)
    _close(llgrad.tensor(a).mean(-1), torch.tensor(a).mean(-1), rtol=1e-6)
