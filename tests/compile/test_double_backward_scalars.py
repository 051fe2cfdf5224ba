"""Double and repeated backward through MulBackward0 / DivBackward0 whose other operand is
a Python number (PyTorch wraps it into a tensor): the gradient of x * 2 is a constant, so
differentiating it again raises in autograd.grad (it does not require grad), gives None
with a grad_outputs that requires grad, and zeros in the functional transforms
(torch.func.grad, llgrad.grad); and a compiled graph can be backpropagated through twice
exactly when eager's can (x + 2 saves nothing; x * 2 saves its wrapped number, x * x its
operand), as in PyTorch."""
import numpy as np
import pytest

import llgrad

NOT_REQUIRING = "element 0 of tensors does not require grad and does not have a grad_fn"
UNUSED = "appears to not have been used in the graph"
FREED = "Trying to backward through the graph a second time"


def _outcome(fn):
    try:
        r = fn()
    except RuntimeError as e:
        msg = str(e)
        return ("error", next((m for m in (NOT_REQUIRING, UNUSED, FREED) if m in msg), msg))
    return ("value", [None if g is None else g.tolist() for g in r])


def _cases(lib):
    def x():
        return lib.tensor([1.0, 2.0, 3.0], requires_grad=True)

    def grad_of_grad():
        a = x()
        (g,) = lib.autograd.grad((a * 2).sum(), a, create_graph=True)
        return lib.autograd.grad(g.sum(), a)

    def grad_of_grad_unused():
        a = x()
        (g,) = lib.autograd.grad((2 * a).sum(), a, create_graph=True)
        return lib.autograd.grad(g.sum(), a, allow_unused=True)

    def through_grad_outputs():
        a, v = x(), lib.ones(3, requires_grad=True)
        (g,) = lib.autograd.grad(a * 2, a, grad_outputs=v, create_graph=True)
        return lib.autograd.grad(g.sum(), [a, v], allow_unused=True)

    def through_grad_outputs_unused():
        a, v = x(), lib.ones(3, requires_grad=True)
        (g,) = lib.autograd.grad(a / 2, a, grad_outputs=v, create_graph=True)
        return lib.autograd.grad(g.sum(), [a, v])

    def second_order_mixed():
        a = x()
        (g,) = lib.autograd.grad(((a * 2.5) ** 2).sum(), a, create_graph=True)
        return lib.autograd.grad(g.sum(), a)

    return {"grad_of_grad": grad_of_grad, "grad_of_grad_unused": grad_of_grad_unused,
            "through_grad_outputs": through_grad_outputs,
            "through_grad_outputs_unused": through_grad_outputs_unused,
            "second_order_mixed": second_order_mixed}


EXPECTED = {"grad_of_grad": ("error", NOT_REQUIRING),
            "grad_of_grad_unused": ("error", NOT_REQUIRING),
            "through_grad_outputs": ("value", [None, [2.0, 2.0, 2.0]]),
            "through_grad_outputs_unused": ("error", UNUSED),
            "second_order_mixed": ("value", [[12.5, 12.5, 12.5]])}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_double_backward_through_a_scalar_product(name):
    assert _outcome(_cases(llgrad)[name]) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_double_backward_through_a_scalar_product_as_torch(name):
    torch = pytest.importorskip("torch")
    assert _outcome(_cases(llgrad)[name]) == _outcome(_cases(torch)[name])


def test_nested_grad_of_a_constant_gradient_is_zero():
    def f(x):
        return (x * 2).sum()

    x = llgrad.tensor([1.0, 2.0, 3.0])
    hess_diag = llgrad.grad(lambda y: llgrad.grad(f)(y).sum())
    assert hess_diag(x).tolist() == [0.0, 0.0, 0.0]
    value, g = llgrad.value_and_grad(lambda y: llgrad.grad(f)(y).sum())(x)
    assert value.item() == 6.0 and g.tolist() == [0.0, 0.0, 0.0]
    assert llgrad.grad(lambda y: llgrad.tensor(3.0))(x).tolist() == [0.0, 0.0, 0.0]
    assert llgrad.func.grad(lambda y: llgrad.func.grad(f)(y).sum())(x).tolist() == [0.0] * 3
    # a gradient that does depend on x still nests
    cube = llgrad.grad(lambda y: llgrad.grad(lambda z: (z ** 3).sum())(y).sum())
    assert cube(x).tolist() == [6.0, 12.0, 18.0]


def test_nested_grad_matches_torch_func():
    torch = pytest.importorskip("torch")
    import torch.func as tf

    def f(x, lib):
        return (x * 2).sum()
    want = tf.grad(lambda y: tf.grad(lambda z: f(z, torch))(y).sum())(torch.ones(3))
    got = llgrad.grad(lambda y: llgrad.grad(lambda z: f(z, llgrad))(y).sum())(llgrad.ones(3))
    assert got.tolist() == want.tolist()


SECOND = {"x + 2": (lambda x: (x + 2).sum(), True),
          "x - x.sum()": (lambda x: (x - x.sum()).sum(), True),
          "x * x": (lambda x: (x * x).sum(), False),
          "tanh": (lambda x: x.tanh().sum(), False)}


@pytest.mark.parametrize("backend", ["llvm", "interpret"])
@pytest.mark.parametrize("name", sorted(SECOND))
def test_compiled_second_backward_follows_eager(name, backend):
    fn, again = SECOND[name]
    x = llgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    fn(x).backward()
    once = x.grad.numpy().copy()
    cf = llgrad.compile(fn, backend=backend)
    for _ in range(3):              # the tracing call, then compiled ones
        for f in (fn, cf):
            x = llgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
            y = f(x)
            y.backward()
            if again:
                y.backward()
                np.testing.assert_allclose(x.grad.numpy(), 2 * once)
            else:
                with pytest.raises(RuntimeError, match=FREED):
                    y.backward()
    assert cf.n_traces == 1
