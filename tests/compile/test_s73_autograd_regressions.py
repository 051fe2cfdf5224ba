"""Regressions found by stop 73's autograd comparison (tests/programs/test_adversary_s73_autograd*,
slow): a compiled call's Hessian-vector product, tensors passed to an autograd.Function by
keyword, forward-mode hessian's refusals. Oracle: eager llgrad (itself checked against torch
in the slow files) and float64 finite differences."""
import numpy as np
import pytest

import llgrad
from llgrad.autograd import Function, gradgradcheck

X = np.array([[0.5, -1.25, 2.0], [1.5, 0.75, -0.5]])
W = np.array([[0.5, 0.25], [-1.0, 0.125], [0.0625, 1.5]])


def _hvp(fn):
    x = llgrad.tensor(X, requires_grad=True)
    w = llgrad.tensor(W, requires_grad=True)
    out = fn(x, w).pow(2).sum()
    (g,) = llgrad.autograd.grad(out, w, create_graph=True)
    (h,) = llgrad.autograd.grad(g.sum(), w)
    return g.detach().numpy(), h.numpy()


def test_compiled_hessian_vector_product_equals_eager_on_every_call():
    def f(x, w):
        return llgrad.tanh(x @ w)
    want = _hvp(f)
    cf = llgrad.compile(f)
    for _ in range(3):      # (the trace's call, then native ones: they raised 'a second time')
        for a, b in zip(_hvp(cf), want):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert gradgradcheck(f, (llgrad.tensor(X, requires_grad=True),
                             llgrad.tensor(W, requires_grad=True)))


class _Mul(Function):
    @staticmethod
    def forward(ctx, x, w=None):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x * 10, None


@pytest.mark.parametrize("call", ["keyword_w", "all_keywords"])
def test_function_inputs_passed_by_keyword_get_gradients(call):
    x = llgrad.tensor([1.0, 2.0], requires_grad=True)
    w = llgrad.tensor([3.0, -1.0], requires_grad=True)
    y = _Mul.apply(x, w=w) if call == "keyword_w" else _Mul.apply(w=w, x=x)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, -1.0])
    np.testing.assert_array_equal(w.grad.numpy(), [10.0, 20.0])


@pytest.mark.parametrize("kw, error", [(dict(create_graph=True), NotImplementedError),
                                       (dict(strict=True), RuntimeError)])
def test_forward_mode_hessian_refuses_as_torch(kw, error):
    from llgrad.autograd.functional import hessian
    with pytest.raises(error):
        hessian(lambda x: (x ** 3).sum(), llgrad.ones(2, dtype=llgrad.float64),
                outer_jacobian_strategy="forward-mode", vectorize=True, **kw)
    with pytest.raises(AssertionError):
        hessian(lambda x: (x ** 3).sum(), llgrad.ones(2), outer_jacobian_strategy="sideways")
