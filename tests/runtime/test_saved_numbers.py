"""A Python number that PyTorch wraps into a tensor and saves (x * 2, x / 2: MulBackward0 /
DivBackward0's other) is freed with the graph as PyTorch's saved variable is
(runtime/node.py SavedNumber): a second backward through the node raises instead of
silently adding the gradient again, and `_saved_other` is PyTorch's wrapped 0-d tensor."""
import numpy as np
import pytest

import llgrad

FREED = "Trying to backward through the graph a second time"
CASES = {"x * 2": lambda x: x * 2, "2 * x": lambda x: 2 * x, "x / 2": lambda x: x / 2,
         "x.mul(2.5)": lambda x: x.mul(2.5), "x * True": lambda x: x * True,
         "x.div(2, rounding_mode=None)": lambda x: x.div(2, rounding_mode=None),
         "2 / x": lambda x: 2 / x, "x.clone().mul_(2)": lambda x: x.clone().mul_(2)}


def _second_backward(lib, fn):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = fn(x).sum()
    y.backward()
    try:
        y.backward()
    except RuntimeError as e:
        return "freed" if FREED in str(e) else str(e)
    return x.grad.tolist()


@pytest.mark.parametrize("name", sorted(CASES))
def test_second_backward_through_a_saved_number_raises(name):
    assert _second_backward(llgrad, CASES[name]) == "freed"


@pytest.mark.parametrize("name", sorted(CASES))
def test_second_backward_as_torch(name):
    torch = pytest.importorskip("torch")
    assert _second_backward(llgrad, CASES[name]) == _second_backward(torch, CASES[name])


def test_retain_graph_keeps_it_and_adding_a_number_saves_none():
    x = llgrad.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 2).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 4.0]
    z = (x + 2).sum()                   # (AddBackward0 saves nothing: again is fine)
    z.backward()
    z.backward()
    assert x.grad.tolist() == [6.0, 6.0]


def test_double_grad_through_the_wrapped_number_twice_raises():
    x = llgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = llgrad.ones(3, requires_grad=True)
    (g,) = llgrad.autograd.grad(x * 2, x, grad_outputs=v, create_graph=True)
    assert llgrad.autograd.grad(g.sum(), v)[0].tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(RuntimeError, match=FREED):
        llgrad.autograd.grad(g.sum(), v)


@pytest.mark.parametrize("number,dtype", [(2, "int64"), (2.5, "float64"), (True, "bool")])
def test_saved_other_is_the_wrapped_tensor(number, dtype):
    x = llgrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * number
    other = y.grad_fn._saved_other
    assert isinstance(other, llgrad.Tensor) and other.shape == () and \
        other.dtype is getattr(llgrad, dtype) and other.item() == number
    y.sum().backward()
    with pytest.raises(RuntimeError, match=FREED):
        y.grad_fn._saved_other


def test_saved_other_as_torch():
    torch = pytest.importorskip("torch")
    for number in (2, 2.5, True):
        a = (llgrad.ones(2, requires_grad=True) * number).grad_fn._saved_other
        b = (torch.ones(2, requires_grad=True) * number).grad_fn._saved_other
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        assert a.item() == b.item()


@pytest.mark.parametrize("backend", ["llvm", "interpret"])
def test_compiled_calls_free_as_eager(backend):
    def f(x):
        return (x * 2).sum()
    cf = llgrad.compile(f, backend=backend)
    for _ in range(3):          # the traced call is eager's; the compiled ones follow it
        x = llgrad.tensor([1.0, 2.0], requires_grad=True)
        y = cf(x)
        y.backward()
        with pytest.raises(RuntimeError, match=FREED):
            y.backward()
        np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
    assert cf.n_traces == 1
