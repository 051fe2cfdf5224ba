"""Bad input gets a clear error that names the problem (and, under compile, the arguments
and the user's line), never a crash or a silently wrong number; odd but valid input (NaN,
inf, empty tensors) flows through as NumPy would."""
import re
import sys
import warnings

import numpy as np
import pytest

import llgrad

BACKENDS = ["llvm", "interpret"]


def _note(exc_info):
    return " ".join(getattr(exc_info.value, "__notes__", []))


@pytest.mark.parametrize("backend", BACKENDS)
def test_mismatched_shapes_name_the_arguments_and_line(backend):
    def loss(x, w):
        y = x * 2.0
        return (y * w).sum()          # the line that fails
    line = loss.__code__.co_firstlineno + 2
    cf = llgrad.compile(loss, backend=backend)
    with pytest.raises(RuntimeError, match=r"size of tensor a \(3\) must match the size of "
                                           r"tensor b \(4\)") as e:
        cf(llgrad.ones(3), llgrad.ones(4))
    note = _note(e)
    assert "loss(x: float32[3], w: float32[4])" in note
    assert f"{__file__}:{line}" in note
    out = cf(llgrad.ones(3), llgrad.full((3,), 2.0))    # the state is clean: this works
    assert out.item() == 12.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_mismatched_dtypes(backend):
    cf = llgrad.compile(lambda a, b: a @ b, backend=backend)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but "
                                           "got: float != double"):
        cf(llgrad.ones(2, 3), llgrad.ones(3, 2, dtype=llgrad.float64))
    with pytest.raises(IndexError, match="tensors used as indices must be long"):
        llgrad.compile(lambda x, i: x[i], backend=backend)(llgrad.ones(3),
                                                            llgrad.tensor([0.0]))


@pytest.mark.parametrize("bad", [[1.0, 2.0], "ab", {"a": 1}, object()])
def test_non_tensor_operands_are_type_errors(bad):
    # (torch.Tensor's * returns NotImplemented: Python's error, or the sequence's repeat's)
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError) as ref:
        torch.ones(2) * bad
    with pytest.raises(TypeError, match=re.escape(str(ref.value))):
        llgrad.ones(2) * bad
    cf = llgrad.compile(lambda x, w: (w * x).sum())
    with pytest.raises(TypeError, match=re.escape(str(ref.value))):
        cf(bad, llgrad.ones(2))
    with pytest.raises(TypeError, match=r"mul\(\): argument 'other' \(position 1\) must be "
                                        r"a Tensor or a number, not " + type(bad).__name__):
        llgrad.ones(2).mul(bad)


def test_integer_tensors_cannot_ask_for_gradients():
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype "
                                           "can require gradients"):
        llgrad.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        llgrad.arange(3).requires_grad_()
    with pytest.raises(TypeError, match="argument 0 must be a floating-point tensor, got "
                                        "llgrad.int64"):
        llgrad.value_and_grad(lambda x: (x * x).sum())(llgrad.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="does not require grad"):
        llgrad.autograd.grad(llgrad.ones(2, requires_grad=True).sum(), [llgrad.arange(2)])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_nan_and_inf_propagate_as_numpy_does(backend, dt):
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, 3e38, -3e38], dt)

    def f(x, y):
        return (x.exp() * y + x.tanh() - (x * y).sigmoid()).log1p(), (x / y).sum()

    cf = llgrad.compile(f, backend=backend)
    xs, ys = special, special[::-1].copy()
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = [o.numpy() for o in f(llgrad.tensor(xs), llgrad.tensor(ys))]
        for _ in range(2):                           # the trace run, then the kernel
            got = [o.numpy() for o in cf(llgrad.tensor(xs), llgrad.tensor(ys))]
            for a, b in zip(got, want):
                np.testing.assert_allclose(a, b, rtol=1e-5, equal_nan=True)
                assert (np.isnan(a) == np.isnan(b)).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_tensors(backend):
    cf = llgrad.compile(lambda x, w: ((x * w).tanh().sum(1), (x * w).mean()),
                        backend=backend)
    for _ in range(2):
        x = llgrad.ones(0, 4, requires_grad=True)
        w = llgrad.ones(4, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)      # NumPy: mean of empty
            rows, mean = cf(x, w)
        assert rows.shape == (0,) and np.isnan(mean.item())
        rows.sum().backward()
        assert x.grad.shape == (0, 4) and np.array_equal(w.grad.numpy(), np.zeros(4))


@pytest.mark.parametrize("backend", BACKENDS)
def test_huge_shapes_are_memory_errors(backend):
    with pytest.raises(MemoryError):
        llgrad.zeros(10 ** 7, 10 ** 7)
    cf = llgrad.compile(lambda x: x.expand(10 ** 7, 10 ** 7) * 2.0, backend=backend)
    with pytest.raises(MemoryError):
        cf(llgrad.ones(10 ** 7))


def test_from_numpy_strides():
    a = np.arange(10.0)
    with pytest.raises(ValueError, match="At least one stride in the given numpy array is "
                                         "negative"):
        llgrad.from_numpy(a[::-1])
    t = llgrad.from_numpy(a[::2])                # non-contiguous: shares memory, strided
    assert t.stride() == (2,) and t.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
    a[2] = 42.0
    assert t[1].item() == 42.0
    with pytest.raises(TypeError):
        llgrad.from_numpy([1.0, 2.0])


@pytest.mark.parametrize("value,what", [(np.zeros(2), "ndarray"), (object(), "object"),
                                        ([llgrad.ones(1), range(2)], "range")])
def test_functions_returning_non_tensors(value, what):
    """What a compiled function cannot return runs eagerly (eager returns it), with a
    warning naming it; fullgraph=True refuses it."""
    with pytest.raises(Exception, match=r"returned a non-tensor \(" + what):
        llgrad.compile(lambda x: value, fullgraph=True)(llgrad.ones(2))
    cf = llgrad.compile(lambda x: value)
    with pytest.warns(UserWarning, match=r"running eagerly: .*returned a non-tensor \(" + what):
        assert cf(llgrad.ones(2)) is value
    assert cf(llgrad.ones(2)) is value


@pytest.mark.parametrize("value", [3, None, "s", 2.5, True])
def test_functions_returning_python_constants(value):
    # (None and Python numbers and strings come back as they are: constants of the result)
    cf = llgrad.compile(lambda x: (x + 1, value))
    for _ in range(2):
        out, got = cf(llgrad.ones(2))
        assert got == value and type(got) is type(value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_user_exceptions_during_tracing_are_the_originals(backend):
    class UserError(Exception):
        pass

    def step(x):
        y = x * 2
        if y.shape[0] > 2:
            raise UserError("the user's own error")
        return y.sum()

    cf = llgrad.compile(step, backend=backend)
    with pytest.raises(UserError, match="the user's own error") as e:
        cf(llgrad.ones(3))
    assert "step(x: float32[3])" in _note(e)
    assert sys.exc_info() == (None, None, None)
    for _ in range(3):                                   # compile state left clean
        assert cf(llgrad.ones(2)).item() == 4.0
    with pytest.raises(UserError):                       # nothing cached for the bad input
        cf(llgrad.ones(3))
