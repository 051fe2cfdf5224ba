"""Per-sample gradients: vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y) for an MLP and
a small conv net written with functional_call, against an explicit loop of ordinary
autograd (no torch needed) and against torch.func with the same weights; the same eagerly
and inside llgrad.compile (compiled == eager, and a function compile cannot trace falls back
to eager with its warning)."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.func as F
import llgrad.nn as nn
import llgrad.nn.functional as LF
from func_helpers import load_torch


def mlp():
    llgrad.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).double()


def convnet():
    llgrad.manual_seed(1)
    return nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(3 * 3 * 3, 4)).double()


def data(shape, classes, n=6, seed=0):
    rng = np.random.default_rng(seed)
    return (llgrad.tensor(rng.standard_normal((n,) + shape)),
            llgrad.tensor(rng.integers(0, classes, n)))


def per_sample_grads(model, x, y):
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, xb, yb):
        out = F.functional_call(model, p, (xb.unsqueeze(0),))
        return LF.cross_entropy(out, yb.unsqueeze(0))
    return F.vmap(F.grad(loss), in_dims=(None, 0, 0))(params, x, y)


def loop_grads(model, x, y):
    """The oracle: ordinary autograd, one sample at a time."""
    out = {k: [] for k, _ in model.named_parameters()}
    for b in range(x.shape[0]):
        for p in model.parameters():
            p.grad = None
        LF.cross_entropy(model(x[b:b + 1]), y[b:b + 1]).backward()
        for k, p in model.named_parameters():
            out[k].append(p.grad.clone())
    for p in model.parameters():
        p.grad = None
    return {k: llgrad.stack(v) for k, v in out.items()}


@pytest.mark.parametrize("make, shape", [(mlp, (4,)), (convnet, (1, 6, 6))])
def test_per_sample_gradients_equal_a_loop(make, shape):
    model = make()
    x, y = data(shape, 3 if make is mlp else 4)
    got = per_sample_grads(model, x, y)
    want = loop_grads(model, x, y)
    assert set(got) == set(want)
    for k in want:
        assert got[k].shape == (6,) + tuple(dict(model.named_parameters())[k].shape)
        np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), atol=1e-12)
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("make, shape", [(mlp, (4,)), (convnet, (1, 6, 6))])
def test_per_sample_gradients_match_torch_func(make, shape):
    torch = load_torch()
    model = make()
    x, y = data(shape, 3 if make is mlp else 4)
    tmodel = (torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
              if make is mlp else
              torch.nn.Sequential(torch.nn.Conv2d(1, 3, 3, padding=1), torch.nn.ReLU(),
                                  torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                                  torch.nn.Linear(27, 4))).double()
    tmodel.load_state_dict({k: torch.tensor(v.numpy()) for k, v in model.state_dict().items()})
    tparams = {k: v.detach() for k, v in tmodel.named_parameters()}

    def tloss(p, xb, yb):
        out = torch.func.functional_call(tmodel, p, (xb.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(out, yb.unsqueeze(0))
    want = torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0, 0))(
        tparams, torch.tensor(x.numpy()), torch.tensor(y.numpy()))
    got = per_sample_grads(model, x, y)
    for k in want:
        np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), atol=1e-12)


def test_per_sample_gradients_of_a_closure_over_the_model():
    model = mlp()
    x, y = data((4,), 3)

    def loss(xb, yb):          # the parameters are reached through the closure: per-sample
        return LF.cross_entropy(model(xb.unsqueeze(0)), yb.unsqueeze(0))    # input grads
    gx = F.vmap(F.grad(loss))(x, y)
    for b in range(6):
        xb = x[b].detach().requires_grad_()
        LF.cross_entropy(model(xb.unsqueeze(0)), y[b:b + 1]).backward()
        np.testing.assert_allclose(gx[b].detach().numpy(), xb.grad.numpy(), atol=1e-12)


def _mlp_loss(params, x, y):
    h = LF.linear(x, params["w1"], params["b1"]).tanh()
    return LF.cross_entropy(LF.linear(h, params["w2"]), y)


def _mlp_params():
    rng = np.random.default_rng(3)
    return {"w1": llgrad.tensor(rng.standard_normal((8, 4)).astype(np.float32)),
            "b1": llgrad.tensor(rng.standard_normal(8).astype(np.float32)),
            "w2": llgrad.tensor(rng.standard_normal((3, 8)).astype(np.float32))}


def _sample_loss(params, x, y):
    return _mlp_loss(params, x.unsqueeze(0), y.unsqueeze(0))


def full_grad(params, x, y):
    return F.grad(_mlp_loss)(params, x, y)


def sample_grads(params, x, y):
    return F.vmap(F.grad(_sample_loss), in_dims=(None, 0, 0))(params, x, y)


@pytest.mark.parametrize("fn", [full_grad, sample_grads])
@pytest.mark.parametrize("backend", ["llvm", "interpret"])
def test_compiled_equals_eager(fn, backend):
    params = _mlp_params()
    rng = np.random.default_rng(4)
    x = llgrad.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    y = llgrad.tensor(rng.integers(0, 3, 5))
    eager = fn(params, x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no fallback, no graph break
        cf = llgrad.compile(fn, backend=backend)
        first, second = cf(params, x, y), cf(params, x, y)
    x2 = llgrad.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    third, eager2 = cf(params, x2, y), fn(params, x2, y)
    for k in eager:
        np.testing.assert_allclose(first[k].numpy(), eager[k].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(second[k].numpy(), eager[k].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(third[k].numpy(), eager2[k].numpy(), rtol=1e-5, atol=1e-6)
    explained = str(llgrad.explain(fn, params, x, y))
    assert "1 graph(s), 0 graph break(s)" in explained


def test_compile_falls_back_to_eager_for_what_it_cannot_trace():
    def leaky(params, x, y):        # reads a tensor's data with NumPy inside the transform
        def loss(p, xb, yb):
            scale = float(np.abs(xb.detach().numpy()).max())
            return _mlp_loss(p, xb, yb) * scale
        return F.grad(loss)(params, x, y)
    params = _mlp_params()
    rng = np.random.default_rng(5)
    x = llgrad.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    y = llgrad.tensor(rng.integers(0, 3, 5))
    eager = leaky(params, x, y)
    cf = llgrad.compile(leaky)
    with pytest.warns(UserWarning, match="running eagerly"):
        got = cf(params, x, y)
    for k in eager:
        np.testing.assert_allclose(got[k].numpy(), eager[k].numpy(), rtol=1e-6)


def test_compiled_per_sample_gradients_through_functional_call():
    model = mlp()
    x, y = data((4,), 3)

    def loss(p, xb, yb):
        return LF.cross_entropy(F.functional_call(model, p, (xb.unsqueeze(0),)),
                                yb.unsqueeze(0))

    def step(p, xs, ys):
        return F.vmap(F.grad(loss), in_dims=(None, 0, 0))(p, xs, ys)
    want = loop_grads(model, x, y)
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cf = llgrad.compile(step)
        cf(params, x, y)
        got = cf(params, x, y)
    for k in want:
        np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), atol=1e-12)
    assert "1 graph(s), 0 graph break(s)" in str(llgrad.explain(step, params, x, y))
    # parameters that share memory with the module's own (inputs too, through the closure):
    # read only, they compile as well
    aliased = {k: v.detach() for k, v in model.named_parameters()}
    cf2 = llgrad.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = cf2(aliased, x, y)
        got = cf2(aliased, x, y)
    assert cf2.entries
    for k in want:
        np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), atol=1e-12)
