"""Sweep 25: training steps built from func transforms inside llgrad.compile (DP-SGD's
clipped per-sample gradients, MAML's second-order inner step through functional_call),
against torch and eager over several steps of an optimiser."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _build(T):
    m = T.nn.Sequential(T.nn.Linear(3, 4), T.nn.Tanh(), T.nn.Linear(4, 2))
    rng = np.random.default_rng(100)
    with T.no_grad():
        for p in m.parameters():
            p.copy_(T.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
    opt = T.optim.Adam(m.parameters(), lr=0.01)

    def dpsgd(x, y):
        params = {k: v.detach() for k, v in m.named_parameters()}

        def loss(p, xx, yy):
            return T.nn.functional.cross_entropy(T.func.functional_call(m, p, (xx[None],)),
                                                 yy[None])
        g = T.func.vmap(T.func.grad(loss), (None, 0, 0))(params, x, y)
        norms = T.stack([v.flatten(1).norm(dim=1) for v in g.values()]).norm(dim=0)
        scale = 1.0 / (norms / 0.5).clamp(min=1.0)
        for v, p in zip(g.values(), m.parameters()):
            p.grad = (v * scale.view(-1, *[1] * (v.dim() - 1))).mean(0)
        opt.step()
        return norms

    def maml(x, y):
        params = dict(m.named_parameters())
        inner = T.nn.functional.cross_entropy(T.func.functional_call(m, params, (x,)), y)
        grads = T.autograd.grad(inner, list(params.values()), create_graph=True)
        fast = {k: v - 0.1 * g for (k, v), g in zip(params.items(), grads)}
        outer = T.nn.functional.cross_entropy(T.func.functional_call(m, fast, (x * 2,)), y)
        opt.zero_grad()
        outer.backward()
        opt.step()
        return outer.detach()
    return m, {"dpsgd": dpsgd, "maml": maml}


@pytest.mark.parametrize("step", ["dpsgd", "maml"])
def test_compiled_training_step_of_transforms(step):
    runs = []
    for T, compiled in ((torch, False), (llgrad, False), (llgrad, True)):
        m, steps = _build(T)
        f = llgrad.compile(steps[step], fullgraph=True) if compiled else steps[step]
        out = []
        for s in range(4):
            rng = np.random.default_rng(s)
            x = T.tensor(rng.standard_normal((5, 3)).astype(np.float32))
            out.append(f(x, T.tensor(rng.integers(0, 2, 5))).detach().numpy())
        runs.append(out + [p.detach().numpy() for p in m.parameters()])
        if compiled:
            assert f.n_traces == 1
    for got in runs[1:]:
        for g, w in zip(got, runs[0]):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
