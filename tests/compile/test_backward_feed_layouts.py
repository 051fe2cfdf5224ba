"""A compiled function's backward given a cotangent that is not C-contiguous (the gradient of
`y.transpose(1, 2)`): every backend's backward takes it as the native one does (a dense copy
where the graph types it dense), with eager's gradients. The interpreter's and the Python
source's raised NumPy's ValueError in a view of it, and so did the interpreted backward a
call runs after its native forward is built and before its backward is
(LLGRAD_COMPILE=background: tests/programs/test_sweep19_c13.py::test_detr, now and then)."""
import numpy as np
import pytest

import llgrad


def _grad(backend):
    lin = llgrad.nn.Linear(3, 4)
    with llgrad.no_grad():
        lin.weight.copy_(llgrad.tensor(np.arange(12, dtype=np.float32).reshape(4, 3) / 12))
    f = (lambda x: lin(x)) if backend is None else llgrad.compile(lambda x: lin(x),
                                                                  backend=backend)
    x = llgrad.tensor(np.arange(30, dtype=np.float32).reshape(2, 5, 3) / 30,
                      requires_grad=True)
    w = llgrad.tensor(np.arange(40, dtype=np.float32).reshape(2, 4, 5) / 40)
    out = []
    for _ in range(3):
        x.grad = None
        (f(x).transpose(1, 2) * w).sum().backward()
        if backend is not None:
            f.wait()
        out.append(x.grad.numpy().copy())
    return out


@pytest.mark.parametrize("backend", ["interpret", "python", "llvm"])
def test_a_transposed_cotangent(backend):
    want = _grad(None)
    for got, ref in zip(_grad(backend), want):
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)
