"""resize_ / resize_as_ to the tensor's own shape is PyTorch's no-op (same tensor, strides
and version), so a traced function doing it compiles (NPID's LinearAverageOp.backward
does gradInput.resize_as_(x)); a resize to another shape still runs eagerly with the
warning (test_contract_sweep5.py)."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _no_op_resizes(lib, x):
    y = x * 2
    z = y.resize_as_(x)                   # (same shape: no-op)
    w = (y.t() + 1).resize_(*y.t().shape)     # (a strided tensor keeps its strides)
    return z is y, w.stride(), (z + w.t()).sum(1)


def test_same_shape_resize_compiles_and_equals_torch():
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    same, stride, ref = _no_op_resizes(torch, torch.tensor(data))
    cf = llgrad.compile(lambda x: _no_op_resizes(llgrad, x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (no "running eagerly" fallback)
        for _ in range(3):
            got = cf(llgrad.tensor(data))
    assert cf.entries, cf.graph_breaks
    assert got[0] is same and tuple(got[1]) == tuple(stride)
    np.testing.assert_allclose(got[2].numpy(), ref.numpy())


def test_resize_as_in_a_custom_backward_compiles():
    """The NPID pattern: a custom Function's backward resizes its gradient to x's shape."""
    def run(lib, compiled):
        class Scale(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                ctx.save_for_backward(w)
                return lib.mm(x.data, w.t())

            @staticmethod
            def backward(ctx, grad_out):
                w, = ctx.saved_tensors
                grad_in = lib.mm(grad_out.data, w)
                grad_in.resize_as_(grad_in)
                return grad_in, None

        def step(x, w):
            x = x.clone().requires_grad_(True)
            Scale.apply(x, w).pow(2).sum().backward()
            return x.grad

        f = llgrad.compile(step) if compiled else step
        w = lib.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
        outs = [f(lib.tensor(np.full((4, 3), k, np.float32)), w).numpy() for k in (1.0, 2.0)]
        return outs, f
    ref, _ = run(torch, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, cf = run(llgrad, True)
    assert cf.entries, cf.graph_breaks
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-6)
