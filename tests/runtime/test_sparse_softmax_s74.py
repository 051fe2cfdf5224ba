"""torch.sparse.softmax / log_softmax (s74): over the specified entries of a sparse COO
tensor (the unspecified ones count as -inf), the result on the coalesced input's entries,
differentiable to the values; a sparse dim or a dense (hybrid) one. Before, llgrad.sparse had
neither (AttributeError). (torch 2.13's backward for a negative dim is wrong, its values
right: dims are compared in their non-negative spelling for the gradients.)"""
import numpy as np
import pytest

import llgrad

CASES = [   # (indices, values shape, size): coalesced, uncoalesced with duplicates, hybrid, 3-D
    ([[0, 0, 1, 2, 2, 2], [0, 3, 1, 0, 2, 3]], (6,), (4, 4)),
    ([[2, 0, 0, 1, 2, 0], [3, 0, 3, 1, 0, 3]], (6,), (3, 4)),
    ([[0, 0, 1, 1], [0, 2, 1, 2]], (4, 3), (2, 3, 3)),
    ([[0, 0, 1, 1, 1], [0, 1, 0, 1, 1], [1, 0, 2, 2, 0]], (5,), (2, 2, 3))]


def _run(lib, fname, indices, values, size, dim):
    v = lib.tensor(values, requires_grad=True)
    out = getattr(lib.sparse, fname)(lib.sparse_coo_tensor(lib.tensor(indices), v, size), dim)
    w = np.arange(1, np.prod(size) + 1, dtype=np.float32).reshape(size)
    (out.to_dense() * lib.tensor(w)).sum().backward()
    c = out.coalesce()
    return c.indices().numpy(), c.values().detach().numpy(), v.grad.numpy()


@pytest.mark.parametrize("fname", ["softmax", "log_softmax"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_against_torch(fname, case):
    torch = pytest.importorskip("torch")
    indices, vshape, size = CASES[case]
    values = np.random.default_rng(case).standard_normal(vshape).astype(np.float32)
    for dim in range(len(size)):
        want = _run(torch, fname, indices, values, size, dim)
        got = _run(llgrad, fname, indices, values, size, dim)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[2], want[2], rtol=1e-4, atol=1e-5)
        neg = _run(llgrad, fname, indices, values, size, dim - len(size))
        for a, b in zip(neg, got):
            np.testing.assert_array_equal(a, b)


def test_values_by_hand():
    s = llgrad.sparse_coo_tensor(llgrad.tensor([[0, 0, 1], [0, 2, 1]]),
                                 llgrad.tensor([0.3, -0.5, 1.0]), (2, 3))
    out = llgrad.sparse.softmax(s, 1)
    assert out.layout == llgrad.sparse_coo and out.is_coalesced()
    e = np.exp([0.3, -0.5])
    np.testing.assert_allclose(out.values().numpy(), list(e / e.sum()) + [1.0], rtol=1e-6)
    np.testing.assert_allclose(llgrad.sparse.log_softmax(s, 0).values().numpy(), [0, 0, 0])
    assert llgrad.sparse.softmax(s.double(), 1, dtype=llgrad.float32).dtype == llgrad.float32
    v = llgrad.tensor([1.0, 2.0], requires_grad=True)
    g = llgrad.sparse_coo_tensor(llgrad.tensor([[0, 1], [1, 1]]), v, (2, 2))
    assert type(llgrad.sparse.softmax(g, 1).grad_fn).__name__ == "SparseSoftmaxBackward0"
    empty = llgrad.sparse_coo_tensor(llgrad.zeros(2, 0, dtype=llgrad.int64), llgrad.zeros(0),
                                     (2, 3))
    assert llgrad.sparse.log_softmax(empty, 1).to_dense().tolist() == [[0.0] * 3] * 2


def test_dense_input_raises():
    with pytest.raises(NotImplementedError, match="_sparse_softmax"):
        llgrad.sparse.softmax(llgrad.ones(2, 2), 0)
