"""cumprod's gradient of a gradient where slices hold zeros: the O(n) first-order formula
is exact in value but not in derivative (it masks terms that are 0 in value), so under
create_graph a slice with a zero takes the O(n^2) product formula, as PyTorch does."""
import numpy as np
import pytest

import llgrad as L
from llgrad.autograd import gradcheck, gradgradcheck

ROWS = [[2.0, 0.0, 3.0, 4.0], [0.0, 3.0, 0.0, 2.0], [1.5, 0.0, 2.0, 0.0, 3.0],
        [0.0, 0.0, 2.0, 3.0], [2.0, 3.0, 0.5, -1.5]]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: ",".join(map(str, r)))
def test_gradgradcheck_with_zeros(row):
    x = L.tensor(row, dtype=L.float64, requires_grad=True)
    assert gradcheck(lambda t: t.cumprod(0), (x,))
    assert gradgradcheck(lambda t: t.cumprod(0), (x,))


@pytest.mark.parametrize("dim", [0, 1])
def test_gradgradcheck_matrix_each_dim(dim):
    x = L.tensor([[1.5, 0.0, 2.0, -0.5], [0.0, 3.0, 0.0, 2.0], [2.0, -2.0, 0.5, 0.0]],
                 dtype=L.float64, requires_grad=True)
    assert gradgradcheck(lambda t: t.cumprod(dim), (x,))


def _double(M, x, g):
    (gx,) = M.autograd.grad((x.cumprod(1) * g).sum(), x, create_graph=True)
    (gg,) = M.autograd.grad((gx * gx).sum(), x)
    return gx.detach(), gg


ROWS_2D = np.array([[1.5, 0.0, 2.0, -0.5], [0.0, 3.0, 0.0, 2.0], [2.0, -2.0, 0.5, 0.0],
                    [1.0, 2.0, 3.0, 4.0]])
G = np.random.RandomState(0).randn(4, 4)


def test_compiled_equals_eager_and_torch():
    torch = pytest.importorskip("torch")
    want = [t.numpy() for t in _double(torch, torch.tensor(ROWS_2D, requires_grad=True),
                                       torch.tensor(G))]
    eager = _double(L, L.tensor(ROWS_2D, requires_grad=True), L.tensor(G))
    compiled_fn = L.compile(lambda x, g: _double(L, x, g))
    for _ in range(2):   # (the trace's call, then the native one)
        got = compiled_fn(L.tensor(ROWS_2D, requires_grad=True), L.tensor(G))
        for e, c, w in zip(eager, got, want):
            np.testing.assert_allclose(e.numpy(), w, rtol=1e-13, atol=1e-12)
            np.testing.assert_allclose(c.numpy(), w, rtol=1e-13, atol=1e-12)
