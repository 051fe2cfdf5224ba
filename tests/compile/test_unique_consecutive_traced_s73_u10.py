"""torch.unique_consecutive inside llgrad.compile (dim None) is traced, as unique is: a run
starts where an element differs from the one before it, the runs' first elements by a bool
mask whose count the trace guards; values, inverse and counts equal eager's (NaNs each their
own run, bools, a single element), a different run count traces again, and nothing runs
eagerly (a CTC greedy decode's collapse of repeats ran its whole step eagerly, with a
warning). With dim, or on an input requiring grad, the call still runs eagerly."""
import warnings

import numpy as np
import pytest

import llgrad

CASES = [np.array([1, 1, 2, 2, 2, 3, 1, 1]), np.array([[5, 5, 0], [0, 7, 7]]),
         np.array([3, 3, 3, 3]), np.array([1., np.nan, np.nan, 2., 2.], np.float32),
         np.array([True, True, False, True]), np.array([4])]


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")


def _all(x):
    v, inv, cnt = llgrad.unique_consecutive(x, return_inverse=True, return_counts=True)
    return v, inv, cnt, x.unique_consecutive(), llgrad.unique_consecutive(x, return_counts=True)[1]


@pytest.mark.parametrize("arr", CASES, ids=lambda a: f"{a.dtype}{a.shape}")
def test_traced_equals_eager(arr):
    cf = llgrad.compile(_all)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = cf(llgrad.tensor(arr))
    assert cf.graph_breaks == [] and cf.entries
    for g, e in zip(got, _all(llgrad.tensor(arr))):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_array_equal(g.numpy(), e.numpy())


def test_run_count_is_guarded():
    cf = llgrad.compile(lambda x: llgrad.unique_consecutive(x * 2, return_counts=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for a, v, c in (([1, 1, 2, 2], [2, 4], [2, 2]), ([1, 2, 3, 4], [2, 4, 6, 8], [1] * 4),
                        ([1, 1, 2, 2], [2, 4], [2, 2]), ([5, 5, 5, 6], [10, 12], [3, 1])):
            out = cf(llgrad.tensor(a))
            assert out[0].tolist() == v and out[1].tolist() == c
    assert cf.graph_breaks == [] and len(cf.entries) == 2


def test_greedy_ctc_collapse_in_a_training_step():
    lin = llgrad.nn.Linear(3, 4)
    opt = llgrad.optim.SGD(lin.parameters(), lr=0.1)

    def step(x):
        logits = lin(x)
        loss = logits.logsumexp(-1).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        path = logits.argmax(-1)
        tokens = llgrad.unique_consecutive(path)
        return loss.detach(), tokens[tokens != 0]
    cf = llgrad.compile(step)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            x = llgrad.tensor(rng.standard_normal((7, 3)).astype(np.float32))
            with llgrad.no_grad():
                want = llgrad.unique_consecutive(lin(x).argmax(-1))
            _, tokens = cf(x)
            assert tokens.tolist() == want[want != 0].tolist()
    assert cf.graph_breaks == []


@pytest.mark.parametrize("call", [lambda x: llgrad.unique_consecutive(x.view(2, 2), dim=0),
                                  lambda x: llgrad.unique_consecutive(x.float().requires_grad_())],
                         ids=["dim", "requires_grad"])
def test_still_eager(call):
    cf = llgrad.compile(call)
    with pytest.warns(UserWarning, match="unique_consecutive"):
        cf(llgrad.tensor([1, 1, 2, 2]))
    assert cf.graph_breaks
