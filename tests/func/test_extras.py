"""The rest of torch.func: stack_module_state (model ensembling with vmap),
replace_all_batch_norm_modules_ (vmap over batch norm in training mode), linearize,
functionalize, debug_unwrap; and `llgrad.func` as an attribute of llgrad."""
import numpy as np
import pytest

import llgrad
import llgrad.func as F
import llgrad.nn as nn
from func_helpers import load_torch, rand


def test_ensemble_with_stack_module_state():
    llgrad.manual_seed(0)
    models = [nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
              for _ in range(5)]
    params, buffers = F.stack_module_state(models)
    assert params["0.weight"].shape == (5, 4, 3) and params["0.weight"].is_leaf
    assert params["0.weight"].requires_grad
    x = rand(6, 3, seed=1)

    def call(p, b, data):
        return F.functional_call(models[0], (p, b), (data,))
    out = F.vmap(call, in_dims=(0, 0, None))(params, buffers, x)
    assert out.shape == (5, 6, 2)
    for i, m in enumerate(models):
        np.testing.assert_allclose(out[i].detach().numpy(), m(x).detach().numpy(), atol=1e-12)
    out.sum().backward()                 # the stacked parameters are leaves of their own
    assert params["0.weight"].grad.shape == (5, 4, 3)
    assert models[0][0].weight.grad is None
    with pytest.raises(RuntimeError, match="same class"):
        F.stack_module_state([nn.Linear(3, 4), nn.Tanh()])


def test_vmap_over_batch_norm_without_running_stats():
    llgrad.manual_seed(1)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).double()
    F.replace_all_batch_norm_modules_(model)
    assert model[1].running_mean is None and not model[1].track_running_stats
    x = rand(2, 5, 3, seed=2)           # 2 independent batches of 5
    out = F.vmap(model)(x)
    for b in range(2):
        np.testing.assert_allclose(out[b].detach().numpy(), model(x[b]).detach().numpy(),
                                   atol=1e-12)


def test_linearize_functionalize_debug_unwrap():
    x, t = rand(4, seed=1), rand(4, seed=2)
    out, jvp_fn = F.linearize(lambda a: a.sin() * a, x)
    np.testing.assert_allclose(out.numpy(), (x.sin() * x).numpy())
    np.testing.assert_allclose(jvp_fn(t).numpy(),
                               ((x.cos() * x + x.sin()) * t).numpy(), atol=1e-12)

    def mutate(a):
        a.add_(1)
        return a * 2
    y = x.clone()
    np.testing.assert_allclose(F.functionalize(mutate)(y).numpy(), ((x + 1) * 2).numpy())
    np.testing.assert_allclose(y.numpy(), (x + 1).numpy())
    seen = []
    F.vmap(lambda a: seen.append(F.debug_unwrap(a)) or a)(rand(3, 2))
    assert type(seen[0]) is llgrad.Tensor and seen[0].shape == (3, 2)
    assert F.debug_unwrap(x) is x


def test_llgrad_func_is_an_attribute_and_matches_torch_names():
    import llgrad as lg
    assert lg.func is F
    torch = load_torch()
    assert set(F.__all__) <= set(torch.func.__all__)
    missing = sorted(set(torch.func.__all__) - set(F.__all__))
    assert missing == []      # (rearrange: tests/test_api_s63_a6_rearrange.py)


def test_stack_module_state_matches_torch():
    torch = load_torch()
    llgrad.manual_seed(2)
    ours = [nn.Linear(3, 2).double() for _ in range(3)]
    theirs = [torch.nn.Linear(3, 2).double() for _ in range(3)]
    for o, t in zip(ours, theirs):
        t.load_state_dict({k: torch.tensor(v.numpy()) for k, v in o.state_dict().items()})
    p, b = F.stack_module_state(ours)
    tp, tb = torch.func.stack_module_state(theirs)
    x = rand(4, 3, seed=3)
    out = F.vmap(lambda pp, bb, d: F.functional_call(ours[0], (pp, bb), d),
                 in_dims=(0, 0, None))(p, b, x)
    tout = torch.func.vmap(lambda pp, bb, d: torch.func.functional_call(theirs[0], (pp, bb), d),
                           in_dims=(0, 0, None))(tp, tb, torch.tensor(x.numpy()))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), atol=1e-12)
