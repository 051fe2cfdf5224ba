"""nn.DataParallel (as PyTorch runs it without accelerators: the module itself, in-process)
and the deprecated nn.Container: forward, gradients and training equal to the bare module's,
`.module`, state_dict keys with the "module." prefix loading into and from torch's
DataParallel, repr, a compiled training step equal to eager; Container's warning and
submodules."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F

RNG = np.random.default_rng(3)


def _torch():
    return pytest.importorskip("torch")


def _model():
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))


def test_forward_gradients_and_attributes_are_the_modules():
    llgrad.manual_seed(0)
    model = _model()
    dp = nn.DataParallel(model, device_ids=[0, 1], output_device=0, dim=0)
    assert dp.module is model and dp.device_ids == []
    assert nn.parallel.DataParallel is nn.DataParallel
    x = llgrad.randn(5, 4)
    out = dp(x)
    out.sum().backward()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    ref = model(x)
    ref.sum().backward()
    np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
    for g, p in zip(grads, model.parameters()):
        np.testing.assert_array_equal(g, p.grad.numpy())
    assert [n for n, _ in dp.named_parameters()] == ["module." + n for n, _ in
                                                       model.named_parameters()]
    dp.eval()
    assert not model.training
    kw = nn.DataParallel(nn.Bilinear(2, 3, 4))
    a, b = llgrad.randn(2, 2), llgrad.randn(2, 3)
    np.testing.assert_array_equal(kw(a, input2=b).detach().numpy(),
                                  kw.module(a, b).detach().numpy())


def test_state_dict_and_repr_interchange_with_torch():
    torch = _torch()
    model = _model()
    tmodel = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8),
                                 torch.nn.ReLU(), torch.nn.Linear(8, 3))
    dp, tdp = nn.DataParallel(model), torch.nn.DataParallel(tmodel)
    sd = dp.state_dict()
    tsd = tdp.state_dict()
    assert list(sd) == list(tsd)
    assert all(k.startswith("module.") for k in sd)
    tdp.load_state_dict({k: torch.tensor(v.numpy()) for k, v in sd.items()})
    x = RNG.standard_normal((6, 4)).astype(np.float32)
    dp.eval()
    tdp.eval()
    np.testing.assert_allclose(dp(llgrad.tensor(x)).detach().numpy(),
                               tdp(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    dp2 = nn.DataParallel(_model())
    dp2.load_state_dict({k: llgrad.tensor(v.numpy()) for k, v in tsd.items()})
    for (k, a), b in zip(dp2.state_dict().items(), tsd.values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
    assert repr(dp) == repr(tdp).replace("torch.", "")


def test_compiled_training_step_equals_eager():
    x = llgrad.randn(16, 4)
    y = llgrad.tensor(RNG.integers(0, 3, 16))
    results = []
    for compiled in (False, True):
        llgrad.manual_seed(0)
        model = nn.DataParallel(_model())
        opt = llgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        run = llgrad.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error")              # no graph break
            losses = [run(x, y).item() for _ in range(4)]
        results.append((losses, {k: v.numpy().copy() for k, v in model.state_dict().items()}))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5)
    for k in results[0][1]:
        np.testing.assert_allclose(results[0][1][k], results[1][1][k], rtol=1e-4, atol=1e-6,
                                   err_msg=k)
    compiled_model = llgrad.compile(nn.DataParallel(_model()))
    assert tuple(compiled_model(x).shape) == (16, 3)


def test_container_warns_and_holds_its_modules():
    torch = _torch()
    with pytest.warns(FutureWarning, match="`nn.Container` is deprecated"):
        c = nn.Container(fc=nn.Linear(2, 3), act=nn.ReLU())
    with pytest.warns(FutureWarning):
        tc = torch.nn.Container(fc=torch.nn.Linear(2, 3), act=torch.nn.ReLU())
    assert repr(c) == repr(tc)
    assert list(c.state_dict()) == list(tc.state_dict()) == ["fc.weight", "fc.bias"]
    assert isinstance(c, nn.Module) and c.fc.out_features == 3
