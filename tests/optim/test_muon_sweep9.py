"""Sweep 9: optim.Muon (missing before). PyTorch orthogonalises the update in bfloat16;
llgrad rounds float32 to bfloat16 after each of those operations, so its steps give
PyTorch's numbers (but where an input an ulp off rounds to the neighbouring bfloat16); a
compiled step gives eager's."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from llgrad.optim.muon import _bf16  # noqa: E402


def test_bf16_rounding_as_torch():
    rng = np.random.default_rng(0)
    v = (rng.standard_normal(20000) * 10.0 ** rng.integers(-40, 38, 20000)).astype(np.float32)
    v = np.concatenate([v, np.array([0, -0.0, np.inf, -np.inf, 1.00390625, 1.005859375,
                                     3.3895e38, 1e-39, 1e-45, 2 ** -126], np.float32)])
    want = torch.tensor(v).bfloat16().float().numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # (overflow to inf, as bfloat16 rounds)
        got = _bf16(llgrad.tensor(v)).numpy()
    np.testing.assert_array_equal(got, want)


def _train(lib, kw, groups, shape, compiled=False):
    lib.manual_seed(0)
    w = lib.nn.Parameter(lib.randn(*shape))
    w2 = lib.nn.Parameter(lib.randn(3, 5))
    params = [{"params": [w]}, {"params": [w2], "lr": 0.05, "nesterov": False}] if groups \
        else [w, w2]
    o = lib.optim.Muon(params, **kw)
    x, z = lib.randn(5, shape[0]), lib.randn(4, 3)

    def step(x, z):
        o.zero_grad()
        loss = (x @ w).tanh().pow(2).sum() + (z @ w2).sin().sum()
        loss.backward()
        o.step()
        return loss

    if compiled:
        step = lib.compile(step)
    losses = [step(x, z).item() for _ in range(3)]
    sd = o.state_dict()
    return (losses, w.detach().numpy().copy(), w2.detach().numpy().copy(),
            repr(sd["param_groups"]).replace("torch", "llgrad"),
            [sorted(s) for s in sd["state"].values()])


@pytest.mark.parametrize("kw,groups,shape", [
    ({"lr": 0.02}, False, (6, 4)), ({"lr": 0.02}, True, (4, 6)),
    ({"lr": 0.1, "weight_decay": 0.0, "momentum": 0.9, "nesterov": False}, False, (4, 6)),
    ({"lr": 0.02, "adjust_lr_fn": "match_rms_adamw", "ns_steps": 3}, True, (6, 4)),
    ({"lr": 0.02, "ns_coefficients": (2.0, -1.5, 0.5), "eps": 1e-3}, False, (6, 4))])
def test_muon_steps_as_torch(kw, groups, shape):
    a, b = _train(torch, kw, groups, shape), _train(llgrad, kw, groups, shape)
    # (an input an ulp off may round to the neighbouring bfloat16: 2^-8 of an update)
    np.testing.assert_allclose(b[0], a[0], rtol=1e-4)
    np.testing.assert_allclose(b[1], a[1], rtol=1e-4, atol=2e-4)
    np.testing.assert_allclose(b[2], a[2], rtol=1e-4, atol=2e-4)
    assert b[3:] == a[3:]


@pytest.mark.slow
def test_muon_compiled_step_as_eager():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = _train(llgrad, {"lr": 0.02}, True, (6, 4), compiled=True)
    e = _train(llgrad, {"lr": 0.02}, True, (6, 4))
    np.testing.assert_allclose(c[0], e[0], rtol=1e-4)
    np.testing.assert_allclose(c[1], e[1], rtol=1e-4, atol=2e-4)


def _errors(lib):
    out = []
    M = lib.optim.Muon
    w, b = lib.nn.Parameter(lib.ones(2, 3)), lib.nn.Parameter(lib.ones(3))
    w.grad = lib.ones(2, 3)
    for f in (lambda: M([w], lr=-1), lambda: M([w], momentum=-1),
              lambda: M([w], weight_decay=-1), lambda: M([w], adjust_lr_fn="x"),
              lambda: M([w, b]), lambda: M([w], lr=lib.tensor([0.1, 0.2])),
              lambda: M([w]).defaults, lambda: M([w], ns_steps=100).step(),
              lambda: M([w], ns_coefficients=(1, 2)).step()):
        try:
            out.append(f())
        except ValueError as e:
            out.append(str(e))
    return str(out).replace("torch", "llgrad")


def test_muon_errors_as_torch():
    assert _errors(llgrad) == _errors(torch)
