"""A checkpoint segment that sets a module attribute to a tensor it computes from other
values (torch.nn.utils.prune's forward pre-hook: `module.weight = weight_orig * weight_mask`)
compiles: its recomputation in backward sets the same values again. One that computes the
new value from the attribute's old one (`self.w = self.w * 2`) still runs eagerly."""
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.nn.utils import prune


def _train(lib, prune_mod, compiled, x, y, state):
    nn, F = lib.nn, lib.nn.functional
    m = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1))
    m.load_state_dict({k: lib.tensor(v.copy()) for k, v in state.items()})
    prune_mod.l1_unstructured(m[2], "weight", amount=0.5)
    opt = lib.optim.SGD(m.parameters(), lr=0.05)

    def train_step(x, y):
        out = lib.utils.checkpoint.checkpoint(m, x, use_reentrant=False)
        loss = F.mse_loss(out.squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    step = llgrad.compile(train_step) if compiled else train_step
    losses = []
    for _ in range(4):
        losses.append(float(step(lib.tensor(x), lib.tensor(y))))
        if compiled:
            step.wait()
    return step, losses, m[2].weight.detach().numpy().copy(), \
        m[2].weight_orig.detach().numpy().copy()


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    state = {"0.weight": rng.standard_normal((6, 4)).astype(np.float32) * 0.5,
             "0.bias": rng.standard_normal(6).astype(np.float32) * 0.1,
             "2.weight": rng.standard_normal((1, 6)).astype(np.float32) * 0.5,
             "2.bias": np.zeros(1, np.float32)}
    return x, x.prod(1), state


@pytest.mark.torch
def test_pruned_module_in_checkpoint_compiles_as_torch():
    torch = pytest.importorskip("torch")
    import torch.nn.utils.prune as torch_prune
    x, y, state = _data()
    _, ref, ref_w, ref_orig = _train(torch, torch_prune, False, x, y, state)
    _, eager, eager_w, _ = _train(llgrad, prune, False, x, y, state)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (a fallback to eager warns)
        step, got, w, orig = _train(llgrad, prune, True, x, y, state)
    assert step.graph_breaks == [] and step.entries and step.n_traces == 1
    np.testing.assert_allclose(eager, ref, rtol=1e-5)
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    # (the attribute the hook set: the last forward's value, as eager's recomputation left)
    np.testing.assert_allclose(w, ref_w, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(w, eager_w, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(orig, ref_orig, rtol=1e-5, atol=1e-7)


def test_segment_reading_the_attribute_it_sets_still_runs_eagerly():
    nn = llgrad.nn

    class Doubler(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.w = llgrad.ones(3)

        def forward(self, x):
            self.w = self.w * 2         # (the recomputation doubles it again)
            return self.lin(x) * self.w

    def run(compiled):
        llgrad.manual_seed(0)
        m = Doubler()
        opt = llgrad.optim.SGD(m.parameters(), lr=0.01)

        def train_step(x):
            loss = llgrad.utils.checkpoint.checkpoint(m, x, use_reentrant=False).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss.detach()
        step = llgrad.compile(train_step) if compiled else train_step
        x = llgrad.ones(2, 3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = [float(step(x)) for _ in range(3)]
        return step, out, m.w.numpy().copy()
    _, ref, ref_w = run(False)
    step, got, w = run(True)
    assert any("checkpoint segment that changes Python state" in r for r in step.graph_breaks)
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    np.testing.assert_array_equal(w, ref_w)     # (4 ** 3: doubled twice a step)
