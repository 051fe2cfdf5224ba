"""nn.Module.compile() (torch 2.2's in-place form of torch.compile(module)): later calls
run the compiled forward, hooks around it, results and gradients as eager's; a deep copy
or a pickle of the module compiles its own forward."""
import copy
import pickle

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn


def _model():
    llgrad.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))


def _train(model, steps=4):
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        x = llgrad.tensor(rng.standard_normal((5, 4)).astype(np.float32))
        y = llgrad.tensor(rng.integers(0, 3, 5))
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("kwargs", [{}, {"mode": "reduce-overhead"}, {"fullgraph": True},
                                    {"dynamic": False, "backend": "inductor"}])
def test_compiled_in_place_trains_as_eager(kwargs):
    eager, compiled = _model(), _model()
    hooks = []
    compiled.register_forward_hook(lambda m, i, o: hooks.append(o.shape))
    assert compiled.compile(**kwargs) is None
    np.testing.assert_allclose(_train(compiled), _train(eager), rtol=1e-6)
    for a, b in zip(compiled.parameters(), eager.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)
    assert len(hooks) == 4
    assert compiled.forward.fn.n_traces >= 1


def test_copies_and_pickles_compile_their_own_forward():
    model = _model()
    model.compile()
    x = llgrad.ones(2, 4)
    model(x)
    clone = copy.deepcopy(model)
    with llgrad.no_grad():
        clone[0].weight.fill_(0.5)
    assert clone.forward.module is clone
    assert not np.allclose(clone(x).detach().numpy(), model(x).detach().numpy())
    again = pickle.loads(pickle.dumps(model))
    assert again.forward.module is again
    np.testing.assert_allclose(again(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-5)
    assert "forward" not in model.state_dict()


def test_like_torch():
    torch = pytest.importorskip("torch")
    m = torch.nn.Linear(4, 2)
    assert m.compile() is None and hasattr(nn.Module, "compile")
