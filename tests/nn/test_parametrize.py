"""nn.utils.parametrize, parametrizations.weight_norm / spectral_norm and the hook form
utils.weight_norm: state_dict keys, reprs, values and gradients against torch (when
installed) from the same weights (spectral_norm from the same u and v), right_inverse on
assignment, cached(), removal, errors, and compiled training equal to eager."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from llgrad.nn.utils import parametrize

RNG = np.random.default_rng(8)
X = RNG.standard_normal((5, 3))
XC = RNG.standard_normal((2, 2, 5, 5))


def _torch():
    return pytest.importorskip("torch")


def _copy_state(dst, src):
    dst.load_state_dict({k: llgrad.tensor(v.detach().numpy()) for k, v in src.state_dict().items()})


def test_weight_norm_matches_torch():
    torch = _torch()
    t = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 4).double(), dim=0)
    ours = nn.utils.parametrizations.weight_norm(nn.Linear(3, 4).double(), dim=0)
    assert list(ours.state_dict()) == list(t.state_dict())
    assert repr(ours) == repr(t)
    _copy_state(ours, t)
    a, b = t(torch.tensor(X)), ours(llgrad.tensor(X))
    np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-12)
    a.pow(2).sum().backward()
    b.pow(2).sum().backward()
    for (n, p), (m, q) in zip(t.named_parameters(), ours.named_parameters()):
        assert n == m
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-10, atol=1e-13)
    ours.weight = llgrad.ones(4, 3, dtype=llgrad.float64)       # right_inverse: g, v
    np.testing.assert_allclose(ours.weight.detach().numpy(), np.ones((4, 3)), rtol=1e-12)
    np.testing.assert_allclose(ours.parametrizations.weight.original0.detach().numpy(),
                               np.full((4, 1), np.sqrt(3.0)))


@pytest.mark.parametrize("make,dim", [(lambda L: L.nn.Linear(3, 4), None),
                                      (lambda L: L.nn.Conv2d(2, 3, 3), None),
                                      (lambda L: L.nn.ConvTranspose2d(2, 3, 3), None),
                                      (lambda L: L.nn.Linear(3, 4), 1)])
def test_spectral_norm_matches_torch(make, dim):
    torch = _torch()
    t = torch.nn.utils.parametrizations.spectral_norm(make(torch).double(), dim=dim)
    ours = nn.utils.parametrizations.spectral_norm(make(llgrad).double(), dim=dim)
    assert list(ours.state_dict()) == list(t.state_dict())
    _copy_state(ours, t)
    x = X if isinstance(t, torch.nn.Linear) else XC
    for mode in ("eval", "train", "train"):
        getattr(t, mode)(), getattr(ours, mode)()
        a, b = t(torch.tensor(x)), ours(llgrad.tensor(x))
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(ours.parametrizations.weight[0]._u.numpy(),
                                   t.parametrizations.weight[0]._u.numpy(), rtol=1e-9, atol=1e-12)


def test_hook_weight_norm_matches_torch_and_warns():
    torch = _torch()
    with pytest.warns(FutureWarning, match="deprecated in favor of"):
        ours = nn.utils.weight_norm(nn.Linear(3, 4).double())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = torch.nn.utils.weight_norm(torch.nn.Linear(3, 4).double())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in t.named_parameters()]
    _copy_state(ours, t)
    np.testing.assert_allclose(ours(llgrad.tensor(X)).detach().numpy(),
                               t(torch.tensor(X)).detach().numpy(), rtol=1e-12)
    nn.utils.remove_weight_norm(ours)
    assert [n for n, _ in ours.named_parameters()] == ["bias", "weight"]
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
        nn.utils.remove_weight_norm(ours)


class _Symmetric(nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(0, 1)

    def right_inverse(self, a):
        return a.triu()


def test_register_cache_remove_and_errors():
    m = nn.Linear(3, 3)
    parametrize.register_parametrization(m, "weight", _Symmetric())
    w = m.weight.detach().numpy()
    np.testing.assert_array_equal(w, w.T)
    assert parametrize.is_parametrized(m) and parametrize.is_parametrized(m, "weight")
    assert parametrize.type_before_parametrizations(m) is nn.Linear
    with parametrize.cached():
        assert m.weight is m.weight
    assert m.weight is not m.weight
    parametrize.remove_parametrizations(m, "weight")
    assert type(m) is nn.Linear and not parametrize.is_parametrized(m)
    np.testing.assert_array_equal(m.weight.detach().numpy(), w)
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized"):
        parametrize.register_parametrization(m, "nope", _Symmetric())
    with pytest.raises(ValueError, match="may not change the shape of the tensor"):
        parametrize.register_parametrization(m, "weight", _Flatten())
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        parametrize.remove_parametrizations(m, "weight")


class _Flatten(nn.Module):
    def forward(self, x):
        return x.reshape(-1)


def test_compiled_training_equals_eager():
    x = llgrad.tensor(X.astype(np.float32))

    def run(compiled):
        llgrad.manual_seed(3)
        model = nn.Sequential(nn.utils.parametrizations.weight_norm(nn.Linear(3, 8)), nn.Tanh(),
                              nn.utils.parametrizations.spectral_norm(nn.Linear(8, 2)))
        opt = llgrad.optim.SGD(model.parameters(), lr=0.1)

        def step():
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            return loss.detach()
        fn = llgrad.compile(step) if compiled else step
        losses = [fn().item() for _ in range(5)]
        return losses, [t.detach().numpy().copy() for t in model.state_dict().values()]
    eager, compiled = run(False), run(True)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-5)
    for a, b in zip(compiled[1], eager[1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("transposed", [False, True])
def test_fuse_conv_bn_eval_equals_the_pair(transposed):
    llgrad.manual_seed(1)
    conv = (nn.ConvTranspose2d if transposed else nn.Conv2d)(2, 3, 3).double()
    bn = nn.BatchNorm2d(3).double()
    bn(conv(llgrad.tensor(XC)))                 # running statistics away from 0 and 1
    conv.eval(), bn.eval()
    fused = nn.utils.fuse_conv_bn_eval(conv, bn, transpose=transposed)
    np.testing.assert_allclose(fused(llgrad.tensor(XC)).detach().numpy(),
                               bn(conv(llgrad.tensor(XC))).detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    with pytest.raises(AssertionError, match="Fusion only for eval!"):
        nn.utils.fuse_conv_bn_eval(conv.train(), bn)


def test_fuse_linear_bn_eval_and_skip_init():
    lin, bn = nn.Linear(3, 4).double(), nn.BatchNorm1d(4).double()
    bn(lin(llgrad.tensor(X)))
    lin.eval(), bn.eval()
    fused = nn.utils.fuse_linear_bn_eval(lin, bn)
    np.testing.assert_allclose(fused(llgrad.tensor(X)).detach().numpy(),
                               bn(lin(llgrad.tensor(X))).detach().numpy(), rtol=1e-10)
    m = nn.utils.skip_init(nn.Linear, 5, 2)
    assert tuple(m.weight.shape) == (2, 5)
    with pytest.raises(RuntimeError, match="Module must support a 'device' arg"):
        nn.utils.skip_init(nn.ReLU)


@pytest.mark.parametrize("make", [lambda L: L.nn.Linear(3, 4), lambda L: L.nn.Conv2d(2, 3, 3),
                                  lambda L: L.nn.ConvTranspose2d(2, 3, 3)])
def test_hook_spectral_norm_matches_torch(make):
    torch = _torch()
    t = torch.nn.utils.spectral_norm(make(torch).double())
    ours = nn.utils.spectral_norm(make(llgrad).double())
    assert list(ours.state_dict()) == list(t.state_dict())
    _copy_state(ours, t)
    x = X if isinstance(t, torch.nn.Linear) else XC
    for mode in ("train", "train", "eval"):
        getattr(t, mode)(), getattr(ours, mode)()
        a, b = t(torch.tensor(x)), ours(llgrad.tensor(x))
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(ours.weight_u.numpy(), t.weight_u.numpy(), rtol=1e-9,
                                   atol=1e-12)
    a.sum().backward()
    b.sum().backward()
    np.testing.assert_allclose(ours.weight_orig.grad.numpy(), t.weight_orig.grad.numpy(),
                               rtol=1e-9, atol=1e-12)
    nn.utils.remove_spectral_norm(ours)
    assert [n for n, _ in ours.named_parameters()] == ["bias", "weight"]
    with pytest.raises(ValueError, match="spectral_norm of 'weight' not found"):
        nn.utils.remove_spectral_norm(ours)
