"""llgrad.nn.grad (torch.nn.grad): a convolution's input and weight gradients from the
gradient of its output, against PyTorch's in 1-D, 2-D and 3-D with strides, padding,
dilation and groups; differentiable again (finite differences); and the custom
autograd.Function of PyTorch's "fuse convolution and batch norm" tutorial built on them."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

CASES = [(1, dict()), (1, dict(stride=2, padding=1, groups=2)),
         (2, dict()), (2, dict(stride=2, padding=1, dilation=1, groups=2)),
         (2, dict(stride=(1, 2), padding=(2, 0), dilation=(2, 1))),
         (3, dict()), (3, dict(stride=2, padding=1))]


@pytest.mark.parametrize("d,kw", CASES)
def test_input_and_weight_gradients_are_torch_s(d, kw):
    rng = np.random.default_rng(d)
    x = rng.standard_normal((2, 4) + (7,) * d)
    w = rng.standard_normal((6, 4 // kw.get("groups", 1)) + (3,) * d)
    conv = getattr(torch.nn.functional, f"conv{d}d")
    g = rng.standard_normal(conv(torch.tensor(x), torch.tensor(w), **kw).shape)
    name = f"conv{d}d"
    want = getattr(torch.nn.grad, name + "_input")(x.shape, torch.tensor(w), torch.tensor(g),
                                                   **kw)
    got = getattr(llgrad.nn.grad, name + "_input")(x.shape, llgrad.tensor(w),
                                                   llgrad.tensor(g), **kw)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12)
    want = getattr(torch.nn.grad, name + "_weight")(torch.tensor(x), w.shape,
                                                    torch.tensor(g), **kw)
    got = getattr(llgrad.nn.grad, name + "_weight")(llgrad.tensor(x), w.shape,
                                                    llgrad.tensor(g), **kw)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12)
    assert not got.requires_grad


def test_they_are_differentiable_again():
    rng = np.random.default_rng(5)
    x = llgrad.tensor(rng.standard_normal((1, 2, 5, 5)), requires_grad=True)
    w = llgrad.tensor(rng.standard_normal((3, 2, 3, 3)), requires_grad=True)
    g = llgrad.tensor(rng.standard_normal((1, 3, 3, 3)), requires_grad=True)
    assert llgrad.autograd.gradcheck(
        lambda w, g: llgrad.nn.grad.conv2d_input((1, 2, 5, 5), w, g), (w, g))
    assert llgrad.autograd.gradcheck(
        lambda x, g: llgrad.nn.grad.conv2d_weight(x, (3, 2, 3, 3), g), (x, g))


def _tutorial_conv(lib):
    class Conv2D(lib.autograd.Function):
        @staticmethod
        def forward(ctx, X, weight):
            ctx.save_for_backward(X, weight)
            return lib.nn.functional.conv2d(X, weight)

        @staticmethod
        def backward(ctx, grad_out):
            X, weight = ctx.saved_tensors
            grad_input = lib.nn.grad.conv2d_input(X.shape, weight, grad_out)
            grad_X = lib.nn.grad.conv2d_weight(X, weight.shape, grad_out)
            return grad_input, grad_X
    return Conv2D


def test_the_tutorials_custom_function():
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((2, 3, 6, 6)), rng.standard_normal((4, 3, 3, 3))
    out = []
    for lib in (torch, llgrad):
        X, W = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        _tutorial_conv(lib).apply(X, W).pow(2).sum().backward()
        out.append((X.grad.numpy(), W.grad.numpy()))
    for a, b in zip(*out):
        np.testing.assert_allclose(b, a, atol=1e-10)
    X = llgrad.tensor(x, requires_grad=True)
    W = llgrad.tensor(w, requires_grad=True)
    assert llgrad.autograd.gradcheck(_tutorial_conv(llgrad).apply, (X, W))
