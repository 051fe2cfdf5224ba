"""torch.unique (dim=None) inside llgrad.compile (a few-shot episode's
`classes, y = labels.unique(return_inverse=True)`): traced as a sort and a bool mask of
first occurrences whose count the trace guards, not a fallback to eager; values, inverse
and counts equal PyTorch's, also with NaNs (each its own value, sorted last) and when a
later call's count of distinct values differs."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _uniques(lib, x):
    u, inv, cnt = lib.unique(x, return_inverse=True, return_counts=True)
    return x.unique(), u, inv, cnt, x.unique(return_counts=True)[1]


@pytest.mark.parametrize("dtype", ["int64", "float32"])
def test_unique_compiles_and_equals_torch(dtype):
    rng = np.random.default_rng(0)
    cf = llgrad.compile(lambda x: _uniques(llgrad, x))
    arrays = [rng.integers(0, 4, (3, 5)).astype(dtype) for _ in range(3)]
    arrays.append(np.array([[3, 1, 3], [7, 1, 3]], dtype))         # (another count)
    if dtype == "float32":
        arrays[-1][0, 0] = arrays[-1][1, 2] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for a in arrays:
            want = _uniques(torch, torch.tensor(a))
            got = cf(llgrad.tensor(a))
            for w, g in zip(want, got):
                assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
                np.testing.assert_array_equal(g.numpy(), w.numpy())
    assert cf.entries and not cf.graph_breaks


def test_unique_in_a_training_step_compiles():
    w = llgrad.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), requires_grad=True)
    tw = torch.tensor(w.detach().numpy(), requires_grad=True)

    def step(lib, w, x, labels):
        classes, y = labels.unique(return_inverse=True)
        emb = x @ w
        protos = lib.zeros(len(classes), 3).index_add(0, y, emb)
        loss = ((emb - protos[y]) ** 2).sum()
        loss.backward()
        return loss.detach(), classes

    cf = llgrad.compile(lambda *a: step(llgrad, *a))
    x = np.arange(24, dtype=np.float32).reshape(6, 4) / 10
    labels = np.array([5, 2, 5, 9, 2, 9])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = cf(w, llgrad.tensor(x), llgrad.tensor(labels))
    want = step(torch, tw, torch.tensor(x), torch.tensor(labels))
    for a, b in zip(want, got):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5)
    assert cf.entries
