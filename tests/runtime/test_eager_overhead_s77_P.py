"""The eager fast paths for the common argument patterns (shapes of plain ints, *_like of a
row-major tensor, sigmoid and a full mean of a row-major float array) give what the general
paths give: torch's shapes, strides, values and errors, NumPy's np.mean and the where-form
sigmoid bit for bit; and they are taken (the general path's helpers are not called)."""
import numpy as np
import pytest

import llgrad
from llgrad.ir import ops_reduce, sigmoid_np
from llgrad.runtime import shapes
from llgrad.runtime.tensor import Tensor

SIZES = [(3, 4), ((3, 4),), ([3, 4],), (5,), ((),), ((0, 2),), (1, 0, 3)]


@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
@pytest.mark.parametrize("args", SIZES, ids=str)
def test_creation_sizes_as_torch(name, args):
    torch = pytest.importorskip("torch")
    want = getattr(torch, name)(*args)
    got = getattr(llgrad, name)(*args)
    assert tuple(got.shape) == tuple(want.shape) and got.stride() == want.stride()
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]


@pytest.mark.parametrize("args", [(-1, 2), ((2, -3),), (2.0,), ((2, 2.5),), (None,),
                                  ("3",), ()], ids=str)
def test_creation_size_errors_as_torch(args):
    torch = pytest.importorskip("torch")
    for name in ("zeros", "ones", "empty"):
        with pytest.raises(Exception) as want:
            getattr(torch, name)(*args)
        with pytest.raises(Exception) as got:
            getattr(llgrad, name)(*args)
        assert type(got.value) is type(want.value), (name, args, got.value, want.value)


def test_unpack_shape_gives_tuples():
    # (a list of ints is returned as a tuple, as the general path returns it)
    assert shapes.unpack_shape([2, 3]) == (2, 3) and type(shapes.unpack_shape([2, 3])) is tuple
    assert shapes.unpack_shape((4,)) == (4,)
    assert shapes.unpack_shape(((2, 3),)) == (2, 3)
    assert llgrad.ones(6).view([2, 3]).shape == (2, 3)
    with pytest.raises(TypeError):
        shapes.unpack_shape((2.0,))


@pytest.mark.parametrize("maker", ["zeros_like", "ones_like", "empty_like"])
@pytest.mark.parametrize("shape", [(2, 3), (1, 4), (3, 1), (0, 2), ()], ids=str)
def test_like_of_row_major_as_torch(maker, shape):
    torch = pytest.importorskip("torch")
    n = int(np.prod(shape))
    a = np.arange(n, dtype=np.float32).reshape(shape)
    for dtype in (None, "float64"):
        want = getattr(torch, maker)(torch.tensor(a), dtype=dtype and getattr(torch, dtype))
        got = getattr(llgrad, maker)(llgrad.tensor(a), dtype=dtype and getattr(llgrad, dtype))
        assert tuple(got.shape) == tuple(want.shape) and got.stride() == want.stride()
        assert got.dtype.name == str(want.dtype).split(".")[1]
        assert got.is_leaf and got._base is None and not got.requires_grad
        if maker != "empty_like":
            assert got.numpy().tolist() == want.numpy().tolist()


def test_like_of_row_major_skips_layout_checks(monkeypatch):
    calls = []
    monkeypatch.setattr(Tensor, "is_contiguous", lambda self, *a: calls.append(1) or True)
    x = llgrad.ones(2, 3)
    r = llgrad.zeros_like(x)
    assert r.shape == (2, 3) and not calls
    llgrad.zeros_like(x, memory_format=llgrad.contiguous_format)     # (the general path)
    llgrad.zeros_like(x.t())
    assert calls


def _sigmoid_where(x):
    """sigmoid_np.sigmoid's general (np.where) form, the fast path's oracle."""
    z = np.exp(-np.abs(x))
    zero_at = sigmoid_np.ZERO_AT.get(x.dtype.name)
    if zero_at is not None:
        z = np.where(x <= zero_at, 0, z)
    d = 1 + z
    return np.where(x >= 0, 1 / d, z / d).astype(np.result_type(x), copy=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_fast_path_bits(dtype):
    special = [np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, -88.72283935546875, -88.7228,
               -88.73, -709.7827128933841, -709.78, -710, -745, -104, -103.9, 1e-45, -1e-45]
    rs = np.random.RandomState(0)
    for x in (rs.randn(257) * 60, np.array(special), np.array(-3.5), rs.randn(4, 4)):
        x = x.astype(dtype)
        want, got = _sigmoid_where(x), sigmoid_np.sigmoid(x)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.strides == want.strides
        assert want.tobytes() == got.tobytes()
    x = (rs.randn(3, 8) * 50).astype(dtype)[:, ::2]       # (the general path's layout)
    assert sigmoid_np.sigmoid(x).tobytes() == _sigmoid_where(x).tobytes()


def test_sigmoid_fast_path_taken(monkeypatch):
    x = np.linspace(-100, 100, 12, dtype=np.float32).reshape(3, 4)
    want = _sigmoid_where(x)
    calls = []
    monkeypatch.setattr(np, "where", lambda *a: calls.append(1))
    got = sigmoid_np.sigmoid(x)
    assert got.tobytes() == want.tobytes() and not calls


def test_sigmoid_as_torch_with_grad():
    torch = pytest.importorskip("torch")
    a = np.random.RandomState(1).randn(5, 3).astype(np.float32) * 10
    t, x = torch.tensor(a, requires_grad=True), llgrad.tensor(a, requires_grad=True)
    rt, rx = t.sigmoid(), x.sigmoid()
    np.testing.assert_allclose(rx.detach().numpy(), rt.detach().numpy(), rtol=1e-6, atol=0)
    rt.sum().backward()
    rx.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-7)
    assert type(rx.grad_fn).__name__ == "SigmoidBackward0"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_full_mean_as_np_mean_bits(dtype, monkeypatch):
    rs = np.random.RandomState(2)
    cases = [rs.randn(4, 4), rs.randn(3000) * 1e3, np.array(2.5), np.array([np.inf, -np.inf]),
             np.array([3e38, 3e38]), rs.randn(7)]
    want = []
    for x in cases:
        with np.errstate(all="ignore"):
            want.append(np.asarray(np.mean(x.astype(dtype))))
    calls = []
    monkeypatch.setattr(np, "mean", lambda *a, **k: calls.append(1))
    for x, w in zip(cases, want):
        with np.errstate(all="ignore"):
            got = ops_reduce._mean(x.astype(dtype))
        assert type(got) is np.ndarray and got.dtype == w.dtype and got.shape == w.shape
        assert got.tobytes() == w.tobytes()
    assert not calls            # (the fast path: np.mean's wrappers are not run)


def test_full_mean_as_torch_with_grad():
    torch = pytest.importorskip("torch")
    a = np.random.RandomState(3).randn(4, 5)
    t, x = torch.tensor(a, requires_grad=True), llgrad.tensor(a, requires_grad=True)
    rt, rx = t.mean(), x.mean()
    assert rx.item() == pytest.approx(rt.item(), rel=1e-14) and rx.shape == ()
    assert rx.dtype == llgrad.float64
    rt.backward()
    rx.backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())
    assert type(rx.grad_fn).__name__ == "MeanBackward0"


@pytest.mark.slow
def test_like_traced_reads_the_general_path():
    # (under a trace the *_like of a row-major tensor takes the general path: its size
    # reads are noted; compiled and eager agree)
    def f(x):
        return llgrad.zeros_like(x) + x.sigmoid() + x.mean()
    fn = llgrad.compile(f)
    x = llgrad.randn(3, 4)
    np.testing.assert_allclose(fn(x).numpy(), f(x).numpy(), rtol=1e-6)
    assert fn(x).shape == (3, 4)
