"""A C-contiguous stack of matrices times one matrix is one product of the stack's rows
(ir/ops_nn.py's matmul impl): values, gradients and grad_fn names as torch's, for a
transposed matrix (a linear layer's weight.t()), a non-contiguous stack (NumPy's loop),
and empty stacks."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

CASES = {
    "stack @ matrix": lambda lib, a, b: lib.matmul(a, b),
    "stack @ matrix.t()": lambda lib, a, b: lib.matmul(a, b.t().contiguous().t()),
    "transposed stack @ matrix": lambda lib, a, b: lib.matmul(a.transpose(0, 1), b),
    "linear, no bias": lambda lib, a, b: lib.nn.functional.linear(a, b.t()),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("shape", [(3, 5, 4), (2, 3, 5, 4), (0, 5, 4), (3, 0, 4)])
def test_matches_torch(case, shape):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal((4, 6)).astype(np.float32)
    out = []
    for lib in (torch, llgrad):
        ta, tb = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        y = CASES[case](lib, ta, tb)
        y.backward(lib.ones_like(y) * 0.5)
        out.append((y.detach().numpy(), ta.grad.numpy(), tb.grad.numpy(),
                    type(y.grad_fn).__name__))
    for want, got in zip(out[0][:3], out[1][:3]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert out[1][3] == out[0][3]
