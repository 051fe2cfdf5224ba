"""llgrad.optim.swa_utils against torch.optim.swa_utils: AveragedModel's averages (SWA, EMA,
avg_fn and multi_avg_fn forms, with and without buffers) over several updates fed the same
model weights, its state_dict layout and forward; SWALR's learning rates and state; update_bn's
running statistics, momenta and mode."""
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.optim import swa_utils

torch = pytest.importorskip("torch")


def _net(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.ReLU(),
                             lib.nn.Linear(4, 2))


def _copy_into(lm, tm):
    lm.load_state_dict({k: llgrad.tensor(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})


CASES = [("swa", {}, False), ("swa", {}, True),
         ("ema_multi", {"multi_avg_fn": "get_ema_multi_avg_fn"}, False),
         ("ema_multi", {"multi_avg_fn": "get_ema_multi_avg_fn"}, True),
         ("ema", {"avg_fn": "get_ema_avg_fn"}, False),
         ("ema", {"avg_fn": "get_ema_avg_fn"}, True),
         ("swa_multi", {"multi_avg_fn": "get_swa_multi_avg_fn"}, False)]


@pytest.mark.parametrize("name,fns,use_buffers", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_averaged_model_matches_torch(name, fns, use_buffers):
    tm, lm = _net(torch), _net(llgrad)
    _copy_into(lm, tm)
    ta = torch.optim.swa_utils.AveragedModel(
        tm, use_buffers=use_buffers, **{k: getattr(torch.optim.swa_utils, v)()
                                        for k, v in fns.items()})
    la = swa_utils.AveragedModel(lm, use_buffers=use_buffers,
                                 **{k: getattr(swa_utils, v)() for k, v in fns.items()})
    opt = torch.optim.SGD(tm.parameters(), lr=0.1)
    rng = np.random.default_rng(1)
    for _ in range(6):
        x = rng.standard_normal((8, 3)).astype(np.float32)
        opt.zero_grad()
        tm(torch.tensor(x)).pow(2).sum().backward()
        opt.step()
        _copy_into(lm, tm)                      # (the same weights to average, each step)
        ta.update_parameters(tm)
        la.update_parameters(lm)
    tsd, lsd = ta.state_dict(), la.state_dict()
    assert list(lsd) == list(tsd)
    assert list(lsd)[:2] == ["n_averaged", "module.0.weight"]
    assert lsd["n_averaged"].dtype == llgrad.int64 and int(lsd["n_averaged"]) == 6
    for k in tsd:     # (equal; a lerp of PyTorch's rounds with one FMA: 1 ulp at most)
        np.testing.assert_allclose(lsd[k].numpy(), tsd[k].numpy(), rtol=1.2e-7, atol=6e-8,
                                   err_msg=k)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    ta.eval()
    la.eval()
    np.testing.assert_allclose(la(llgrad.tensor(x)).detach().numpy(),
                               ta(torch.tensor(x)).detach().numpy(), rtol=1e-6, atol=1e-6)
    assert la.module is not lm and la.module[0].weight is not lm[0].weight


def test_averaged_model_errors_and_functions():
    m = llgrad.nn.Linear(2, 2)
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn"):
        swa_utils.AveragedModel(m, avg_fn=swa_utils.get_swa_avg_fn(),
                                multi_avg_fn=swa_utils.get_swa_multi_avg_fn())
    for fn in (swa_utils.get_ema_avg_fn, swa_utils.get_ema_multi_avg_fn):
        with pytest.raises(ValueError, match=r"Invalid decay value 1.5"):
            fn(1.5)
    a, p = llgrad.tensor([1.0, 2.0]), llgrad.tensor([3.0, 6.0])
    np.testing.assert_allclose(swa_utils.get_swa_avg_fn()(a, p, 1).numpy(), [2.0, 4.0])
    np.testing.assert_allclose(swa_utils.get_ema_avg_fn(0.5)(a, p, 1).numpy(), [2.0, 4.0])
    assert sorted(swa_utils.__all__) == sorted(torch.optim.swa_utils.__all__)


def _swalr_lrs(lib, **kw):
    p1, p2 = lib.nn.Parameter(lib.zeros(2)), lib.nn.Parameter(lib.zeros(2))
    opt = lib.optim.SGD([{"params": [p1]}, {"params": [p2], "lr": 0.5}], lr=0.1)
    sched = lib.optim.swa_utils.SWALR(opt, **kw)
    lrs = [sched.get_last_lr()]
    for _ in range(7):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
    return lrs, sorted(sched.state_dict()), [g["swa_lr"] for g in opt.param_groups]


@pytest.mark.parametrize("strategy", ["cos", "linear"])
@pytest.mark.parametrize("anneal_epochs", [0, 1, 3, 10])
def test_swalr_matches_torch(strategy, anneal_epochs):
    for swa_lr in (0.05, [0.05, 0.01]):
        kw = dict(swa_lr=swa_lr, anneal_epochs=anneal_epochs, anneal_strategy=strategy)
        assert _swalr_lrs(llgrad, **kw) == _swalr_lrs(torch, **kw)


def test_swalr_errors_state_and_warning():
    opt = llgrad.optim.SGD([llgrad.nn.Parameter(llgrad.zeros(1))], lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear'"):
        swa_utils.SWALR(opt, swa_lr=0.1, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
        swa_utils.SWALR(opt, swa_lr=0.1, anneal_epochs=-1)
    s = swa_utils.SWALR(opt, swa_lr=0.01, anneal_strategy="linear")
    state = s.state_dict()
    assert "optimizer" not in state and "anneal_func" not in state
    s2 = swa_utils.SWALR(opt, swa_lr=0.01)
    s2.load_state_dict(state)
    assert s2.anneal_func is swa_utils.SWALR._linear_anneal
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s.get_lr()
    assert "get_last_lr()" in str(w[0].message)


def test_update_bn_matches_torch():
    def net(lib):
        lib.manual_seed(0)
        return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4, momentum=0.3),
                                 lib.nn.ReLU(), lib.nn.Linear(4, 2))
    tm, lm = net(torch), net(llgrad)
    _copy_into(lm, tm)
    tm.eval()
    lm.eval()
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((5, 3)).astype(np.float32) for _ in range(4)]
    torch.optim.swa_utils.update_bn([(torch.tensor(d), 0) for d in data], tm)
    swa_utils.update_bn([(llgrad.tensor(d), 0) for d in data], lm)
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(lm.state_dict()[k].numpy(), v.numpy(), rtol=1e-6,
                                   atol=1e-7, err_msg=k)
    assert int(lm[1].num_batches_tracked) == 4
    assert lm[1].momentum == 0.3 and not lm.training
    lm.train()
    swa_utils.update_bn([llgrad.tensor(d) for d in data], lm)       # (plain inputs)
    assert lm.training
    plain = llgrad.nn.Linear(2, 2)
    swa_utils.update_bn([llgrad.ones(1, 2)], plain)                  # (no BatchNorm: no-op)
