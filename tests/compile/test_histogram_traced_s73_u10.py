"""torch.histogram with a bin count and its range given inside llgrad.compile is traced (a
confidence or weight histogram logged by a training step ran the whole step eagerly, with a
warning): hist and bin_edges equal eager's and PyTorch's, with values on the edges, outside
the range, NaN and inf, weights, density, float64, a one-point range; a new input reuses
the trace. A range from the data, or a tensor of edges, still runs eagerly."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

X = np.array([0.0, 0.2, 0.25, 0.5, 0.99, 1.0, -0.1, 1.5, np.nan, np.inf, 0.75, 0.3],
             np.float32)
W = np.linspace(0.5, 2.0, X.size).astype(np.float32)


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")


CASES = [dict(bins=4, range=(0.0, 1.0)), dict(bins=5, range=(0.0, 1.0), weight=True),
         dict(bins=3, range=(-0.5, 1.2), density=True),
         dict(bins=4, range=(0.0, 1.0), weight=True, density=True),
         dict(bins=2, range=(0.25, 0.25)), dict(bins=7, range=[0.1, 0.9], dtype="float64")]


@pytest.mark.parametrize("kw", CASES, ids=[str(i) for i in range(len(CASES))])
def test_traced_equals_eager_and_torch(kw):
    kw = dict(kw)
    dt = kw.pop("dtype", "float32")
    use_w = kw.pop("weight", False)

    def run(lib, x, w):
        return lib.histogram(x * 1.0, weight=w if use_w else None, **kw)
    cf = llgrad.compile(lambda x, w: run(llgrad, x, w))
    for shift in (0.0, 0.05):       # (a second input: the same trace)
        x, w = (X + shift).astype(dt), W.astype(dt)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = cf(llgrad.tensor(x), llgrad.tensor(w))
        eager = run(llgrad, llgrad.tensor(x), llgrad.tensor(w))
        ref = run(torch, torch.tensor(x), torch.tensor(w))
        for g, e, r in zip(got, eager, ref):
            assert str(g.dtype).split(".")[-1] == str(r.dtype).split(".")[-1]
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6)
            np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-6)
    assert cf.graph_breaks == [] and len(cf.entries) == 1


def test_in_a_training_step():
    lin = llgrad.nn.Linear(3, 4)
    opt = llgrad.optim.SGD(lin.parameters(), lr=0.1)

    def step(x, y):
        logits = lin(x)
        loss = llgrad.nn.functional.cross_entropy(logits, y)
        opt.zero_grad(); loss.backward(); opt.step()
        conf = logits.softmax(-1).amax(-1).detach()
        return loss.detach(), llgrad.histogram(conf, bins=5, range=(0.0, 1.0)).hist
    cf = llgrad.compile(step)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            x = llgrad.tensor(rng.standard_normal((8, 3)).astype(np.float32) * 3)
            with llgrad.no_grad():
                want = llgrad.histogram(lin(x).softmax(-1).amax(-1), bins=5, range=(0.0, 1.0))
            _, hist = cf(x, llgrad.tensor(rng.integers(0, 4, 8)))
            np.testing.assert_array_equal(hist.numpy(), want.hist.numpy())
    assert cf.graph_breaks == []


@pytest.mark.parametrize("call", [lambda x: llgrad.histogram(x, bins=3),
                                  lambda x: llgrad.histogram(x, bins=llgrad.tensor([0., .5, 1.]))],
                         ids=["data_range", "edges_tensor"])
def test_still_eager(call):
    cf = llgrad.compile(call)
    with pytest.warns(UserWarning, match="histogram"):
        cf(llgrad.tensor(X[:6]))
    assert cf.graph_breaks
