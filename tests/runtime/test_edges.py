"""Edge values and edge uses where llgrad once differed from PyTorch (issue: reliability,
second round): each compared with PyTorch when installed, eager and compiled."""
import math
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
NAN, INF = math.nan, math.inf


def _both(fn, values, backward=True):
    """fn's value and gradient in llgrad and in torch, on the same float64 values."""
    out = []
    for T in (llgrad, torch):
        x = T.tensor(np.array(values, dtype=np.float64), requires_grad=True)
        y = fn(T, x)
        if backward:
            (y * T.tensor(1.5, dtype=T.float64)).sum().backward()
        out.append((np.asarray(y.detach().numpy()), None if not backward else
                    x.grad.numpy().copy()))
    return out


def _same(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-7, equal_nan=True)


@pytest.mark.parametrize("name,fn", [
    ("relu", lambda T, x: T.relu(x)), ("sign", lambda T, x: T.sign(x)),
    ("abs", lambda T, x: x.abs()), ("max", lambda T, x: x.max()), ("min", lambda T, x: x.min()),
    ("amax", lambda T, x: x.amax(0)), ("maximum", lambda T, x: T.maximum(x, x * 0.5)),
    ("minimum", lambda T, x: T.minimum(x, x * 0.5)),
    ("gelu", lambda T, x: T.nn.functional.gelu(x)),
    ("gelu_tanh", lambda T, x: T.nn.functional.gelu(x, approximate="tanh")),
])
@pytest.mark.parametrize("values", [[1.0, NAN, -2.0, INF, -INF, 0.0, -0.0],
                                    [NAN, NAN, 3.0], [2.0, 2.0, 1.0]])
def test_special_values_match_torch_eager_and_compiled(name, fn, values):
    (lv, lg), (tv, tg) = _both(fn, values)
    _same(lv, tv)
    _same(lg, tg)
    for backend in ("llvm", "interpret"):
        cf = llgrad.compile(lambda x: fn(llgrad, x), backend=backend)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(2):
                x = llgrad.tensor(np.array(values), requires_grad=True)
                y = cf(x)
                (y * 1.5).sum().backward()
        _same(y.detach().numpy(), tv)
        _same(x.grad.numpy(), tg)


@pytest.mark.parametrize("dim", [None, 0, 1])
@pytest.mark.parametrize("correction", [1, 2, 3, 6, 7])
@pytest.mark.parametrize("fn", ["var", "std"])
def test_var_std_with_correction_at_or_past_n(fn, correction, dim):
    a = [[1.0, 2.0, 4.0], [3.0, 3.0, 3.0]]
    (lv, lg), (tv, tg) = _both(lambda T, x: getattr(x, fn)(dim=dim, correction=correction), a)
    _same(lv, tv)
    _same(lg, tg)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_log1p_of_huge_values_is_finite(dtype):
    big = np.finfo(dtype).max
    a = np.array([1e-30, -0.5, 3.0, big / 4, big / 2, big], dtype=dtype)
    cf = llgrad.compile(lambda x: x.log1p(), backend="llvm")
    for _ in range(2):
        got = cf(llgrad.tensor(a)).numpy()
    np.testing.assert_allclose(got, np.log1p(a), rtol=2e-7 if dtype == np.float32 else 1e-15)


@pytest.mark.parametrize("expr", ["x // 0", "x % 0", "x // y", "x % y", "x.div(y, rounding_mode='trunc')"])
def test_integer_division_by_zero_raises_as_torch(expr):
    for T in (llgrad, torch):
        x, y = T.tensor([7, -7]), T.tensor([2, 0])
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            eval(expr)
    x = llgrad.tensor([7, -7])
    assert (x // 2).tolist() == [3, -4] and (x % 3).tolist() == [1, 2]


def test_writing_through_data_does_not_invalidate_saved_tensors():
    grads = []
    for T in (llgrad, torch):
        x = T.tensor([1.0, 2.0], requires_grad=True)
        y = x.exp()
        y.data.mul_(2)
        y.sum().backward()
        grads.append(x.grad.numpy())
    _same(*grads)


def test_once_differentiable_runs_without_history_and_refuses_a_second_derivative():
    for T in (llgrad, torch):
        class Square(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            @T.autograd.function.once_differentiable
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return 2 * x * g
        x = T.tensor([1.0, 2.0], requires_grad=True)
        g, = T.autograd.grad(Square.apply(x).sum(), x, create_graph=True)
        assert g.grad_fn is None                 # (the incoming gradient needs none)
        g, = T.autograd.grad(Square.apply(x), x, T.ones(2, requires_grad=True),
                             create_graph=True)
        assert type(g.grad_fn).__name__ == "Error"
        with pytest.raises(RuntimeError, match="differentiate twice a function that was "
                                               "marked with @once_differentiable"):
            g.sum().backward()


def test_uint8_index_tensors_are_masks():
    for T in (llgrad, torch):
        x = T.tensor([1.0, 2.0, 3.0])
        m = T.tensor([1, 0, 1], dtype=T.uint8)
        with pytest.warns(UserWarning, match="uint8 is now deprecated"):
            assert x[m].tolist() == [1.0, 3.0]


def test_clear_errors():
    with pytest.raises(NotImplementedError, match='"softmax_lastdim_kernel_impl" not '
                                                  "implemented for 'Long'"):
        llgrad.tensor([1, 2]).softmax(0)
    for fn in (llgrad.softmax, llgrad.log_softmax):     # (no kernel runs on an empty one)
        out = fn(llgrad.zeros(0, 3, dtype=llgrad.int64), 0)
        assert out.dtype == llgrad.int64 and tuple(out.shape) == (0, 3)
    a = np.ones(3)
    a.setflags(write=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = llgrad.from_numpy(a)
    with pytest.raises(RuntimeError, match="read-only"):
        t.add_(1)


def test_numpy_warnings_do_not_leak_from_ops():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = llgrad.tensor([INF, -1.0, 0.0])
        (x * 0, x.log(), x / 0, x.sqrt())
