"""Sweep 6 of llgrad.optim against torch.optim: every optimiser class both libraries have,
over the option combinations torch supports (maximize, amsgrad, nesterov, momentum and
dampening, weight_decay, decoupled_weight_decay, centered, foreach=False, capturable and
differentiable False, lr as a tensor), five steps with two parameter groups of different
learning rates; state_dict() (key names, values) and load_state_dict of torch's state in
the middle of a run; zero_grad(set_to_none); add_param_group; repr. Then every learning-rate
scheduler, alone and chained (SequentialLR, ChainedScheduler): get_last_lr and the groups'
lr (and momentum) over 20 steps, state_dict() and its round trip."""
import copy
import itertools
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(0)
_P0 = [_RNG.standard_normal((4, 3)).astype(np.float32), _RNG.standard_normal(4).astype(np.float32),
       _RNG.standard_normal((2, 2)).astype(np.float32)]
_X = _RNG.standard_normal((3, 5)).astype(np.float32)
_C = _RNG.standard_normal((4, 5)).astype(np.float32)


def _params(lib):
    return [lib.nn.Parameter(lib.tensor(p.copy())) for p in _P0]


def _loss(lib, ps):
    w, b, v = ps
    y = w @ lib.tensor(_X) + b[:, None]
    return (y * y * lib.tensor(np.abs(_C))).sum() * 0.1 + (v.sin() + (v - 0.5) ** 2).sum()


def _groups(lib, ps, lr_tensor=False):
    lr0, lr1 = (lib.tensor(0.01), lib.tensor(0.02)) if lr_tensor else (0.01, 0.02)
    return [{"params": ps[:2], "lr": lr0}, {"params": ps[2:], "lr": lr1}]


def _combos(**options):
    keys = list(options)
    return [dict(zip(keys, vals)) for vals in itertools.product(*options.values())]


def _valid(name, kw):
    if name == "SGD" and kw.get("nesterov") and (kw.get("momentum", 0) <= 0
                                                 or kw.get("dampening", 0) != 0):
        return False
    if name == "Adam" and kw.get("decoupled_weight_decay") and not kw.get("weight_decay"):
        return False
    return True


_BASE = dict(maximize=[False, True], weight_decay=[0.0, 0.1])
CONFIGS = []
for _name, _extra in [
        ("SGD", dict(momentum=[0.0, 0.9], dampening=[0.0, 0.2], nesterov=[False, True])),
        ("Adam", dict(amsgrad=[False, True], decoupled_weight_decay=[False, True])),
        ("AdamW", dict(amsgrad=[False, True])),
        ("Adamax", {}), ("Adadelta", dict(rho=[0.9, 0.5])),
        ("Adagrad", dict(lr_decay=[0.0, 0.1], initial_accumulator_value=[0.0, 0.3])),
        ("NAdam", dict(decoupled_weight_decay=[False, True], momentum_decay=[0.004, 0.01])),
        ("RAdam", dict(decoupled_weight_decay=[False, True])),
        ("RMSprop", dict(momentum=[0.0, 0.5], centered=[False, True])),
        ("ASGD", dict(t0=[1e6, 2.0], lambd=[1e-4, 0.1])),
        ("Adafactor", dict(beta2_decay=[-0.8, -0.5])),
        ("Rprop", dict(etas=[(0.5, 1.2), (0.3, 1.5)], step_sizes=[(1e-6, 50), (1e-3, 0.05)]))]:
    opts = dict(_BASE, **_extra)
    if _name == "Rprop":
        opts.pop("weight_decay")
    for _kw in _combos(**opts):
        if _valid(_name, _kw):
            CONFIGS.append((_name, _kw))
for _name in ["SGD", "Adam", "AdamW", "Adamax", "Adadelta", "Adagrad", "NAdam", "RAdam",
              "RMSprop", "ASGD", "Rprop", "Adafactor"]:
    _kw = {"foreach": False}
    if _name not in ("Adagrad", "SGD", "Adafactor"):
        _kw["capturable"] = False
    if _name != "Adafactor":
        _kw["differentiable"] = False
    CONFIGS.append((_name, _kw))
    CONFIGS.append((_name, {"lr_tensor": True}))
CONFIGS.append(("SGD", {"momentum": 0.9, "lr_tensor": True, "weight_decay": 0.1}))


def _ids(configs):
    return [f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for n, kw in configs]


def _make(lib, name, kw, ps):
    kw = dict(kw)
    lr_tensor = kw.pop("lr_tensor", False)
    if name == "SGD" and not lr_tensor:
        kw.setdefault("lr", 0.01)
    return getattr(lib.optim, name)(_groups(lib, ps, lr_tensor), **kw)


def _step(lib, opt, ps, set_to_none=True):
    opt.zero_grad(set_to_none=set_to_none)
    loss = _loss(lib, ps)
    loss.backward()
    opt.step()


def _value(v):
    if hasattr(v, "detach"):
        return ("tensor", str(v.dtype).split(".")[-1], tuple(v.shape),
                v.detach().double().numpy())
    if isinstance(v, (list, tuple)):
        return type(v).__name__, [_value(x) for x in v]
    if isinstance(v, dict):
        return "dict", {k: _value(x) for k, x in v.items()}
    return v


def _close(a, b, what):
    if isinstance(b, tuple) and b and b[0] == "tensor":
        assert a[:3] == b[:3], (what, a[:3], b[:3])
        # (gradients differ from torch's by an ulp: a state's error is relative to its scale)
        scale = float(np.abs(b[3]).max()) if b[3].size else 0.0
        np.testing.assert_allclose(a[3], b[3], rtol=2e-5, atol=max(1e-6, 1e-4 * scale),
                                   err_msg=str(what))
    elif isinstance(b, tuple) and len(b) == 2 and b[0] in ("list", "tuple"):
        assert a[0] == b[0] and len(a[1]) == len(b[1]), (what, a, b)
        for i, (x, y) in enumerate(zip(a[1], b[1])):
            _close(x, y, (what, i))
    elif isinstance(b, tuple) and len(b) == 2 and b[0] == "dict":
        assert list(a[1]) == list(b[1]), (what, list(a[1]), list(b[1]))
        for k in b[1]:
            _close(a[1][k], b[1][k], (what, k))
    elif isinstance(b, float):
        assert isinstance(a, float) and np.isclose(a, b, rtol=1e-6, atol=1e-9), (what, a, b)
    else:
        assert type(a) is type(b) and a == b, (what, a, b)


def _same_state(lopt, topt, what):
    _close(_value(lopt.state_dict()), _value(topt.state_dict()), what)


def _to_llgrad(v):
    if isinstance(v, torch.Tensor):
        return llgrad.tensor(v.detach().numpy())
    if isinstance(v, dict):
        return {k: _to_llgrad(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v)(_to_llgrad(x) for x in v)
    return v


@pytest.mark.parametrize("name, kw", CONFIGS, ids=_ids(CONFIGS))
def test_optimizer_against_torch(name, kw):
    tps, lps = _params(torch), _params(llgrad)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        topt, lopt = _make(torch, name, kw, tps), _make(llgrad, name, kw, lps)
    assert repr(lopt).replace("llgrad", "torch") == repr(topt)
    _same_state(lopt, topt, "initial")
    for i in range(5):
        _step(torch, topt, tps, set_to_none=i % 2 == 0)
        _step(llgrad, lopt, lps, set_to_none=i % 2 == 0)
        for j, (a, b) in enumerate(zip(lps, tps)):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=2e-5,
                                       atol=1e-6, err_msg=f"step {i} param {j}")
        _same_state(lopt, topt, ("state", i))
    topt.zero_grad(set_to_none=False)
    lopt.zero_grad(set_to_none=False)
    assert [p.grad.abs().sum().item() for p in lps] == [0.0] * 3
    lopt.zero_grad()
    assert all(p.grad is None for p in lps)


@pytest.mark.parametrize("name, kw", CONFIGS[::3], ids=_ids(CONFIGS[::3]))
def test_optimizer_load_state_dict_of_torch_and_add_param_group(name, kw):
    tps, lps = _params(torch), _params(llgrad)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        topt = _make(torch, name, kw, tps)
        for _ in range(3):
            _step(torch, topt, tps)
        for a, b in zip(lps, tps):
            with llgrad.no_grad():
                a.copy_(llgrad.tensor(b.detach().numpy()))
        lopt = _make(llgrad, name, kw, lps)
        lopt.load_state_dict(_to_llgrad(topt.state_dict()))
    _same_state(lopt, topt, "loaded")
    extra_t = torch.nn.Parameter(torch.ones(3))
    extra_l = llgrad.nn.Parameter(llgrad.ones(3))
    topt.add_param_group({"params": [extra_t], "lr": 0.05})
    lopt.add_param_group({"params": [extra_l], "lr": 0.05})
    for i in range(2):
        for lib, opt, ps, extra in ((torch, topt, tps, extra_t), (llgrad, lopt, lps, extra_l)):
            opt.zero_grad()
            (_loss(lib, ps) + (extra * extra).sum()).backward()
            opt.step()
        for j, (a, b) in enumerate(zip(lps + [extra_l], tps + [extra_t])):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=2e-5,
                                       atol=1e-6, err_msg=f"step {i} param {j}")
    _same_state(lopt, topt, "after add_param_group")


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_against_torch(line_search):
    out = {}
    for lib in (torch, llgrad):
        ps = _params(lib)
        opt = lib.optim.LBFGS(ps, lr=0.5, max_iter=4, history_size=3,
                              line_search_fn=line_search)

        def closure(lib=lib, ps=ps, opt=opt):
            opt.zero_grad()
            loss = _loss(lib, ps)
            loss.backward()
            return loss
        losses = [float(opt.step(closure)) for _ in range(3)]
        sd = opt.state_dict()
        out[lib] = (losses, [p.detach().numpy().copy() for p in ps],
                    sorted(sd["state"][0]), sorted(sd["param_groups"][0]))
    np.testing.assert_allclose(out[llgrad][0], out[torch][0], rtol=1e-4)
    for a, b in zip(out[llgrad][1], out[torch][1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert out[llgrad][2:] == out[torch][2:]


def test_every_torch_optimizer_is_covered():
    names = {n for n in dir(torch.optim) if isinstance(getattr(torch.optim, n), type)
             and issubclass(getattr(torch.optim, n), torch.optim.Optimizer)}
    covered = {n for n, _ in CONFIGS} | {"LBFGS", "Optimizer"}
    left = {"SparseAdam": "tests/test_api_s63_a6_sparse_grad.py", "Muon": "new in torch 2.9"}
    assert sorted(names - covered - set(left)) == []


# ---- learning-rate schedulers ----

def _sched_configs():
    S = "lr_scheduler"
    return [
        ("StepLR", lambda lib, o: getattr(lib.optim, S).StepLR(o, 3, gamma=0.5)),
        ("MultiStepLR", lambda lib, o: getattr(lib.optim, S).MultiStepLR(o, [2, 5, 5, 9], 0.5)),
        ("ConstantLR", lambda lib, o: getattr(lib.optim, S).ConstantLR(o, 0.25, total_iters=4)),
        ("LinearLR", lambda lib, o: getattr(lib.optim, S).LinearLR(o, 0.1, 0.9, total_iters=7)),
        ("ExponentialLR", lambda lib, o: getattr(lib.optim, S).ExponentialLR(o, 0.8)),
        ("PolynomialLR", lambda lib, o: getattr(lib.optim, S).PolynomialLR(o, 8, power=2.0)),
        ("CosineAnnealingLR", lambda lib, o: getattr(lib.optim, S).CosineAnnealingLR(o, 6, 1e-3)),
        ("CosineAnnealingWarmRestarts",
         lambda lib, o: getattr(lib.optim, S).CosineAnnealingWarmRestarts(o, 3, T_mult=2,
                                                                         eta_min=1e-3)),
        ("LambdaLR", lambda lib, o: getattr(lib.optim, S).LambdaLR(
            o, [lambda e: 0.9 ** e, lambda e: 1 / (e + 1)])),
        ("MultiplicativeLR", lambda lib, o: getattr(lib.optim, S).MultiplicativeLR(
            o, lambda e: 0.95)),
        ("CyclicLR", lambda lib, o: getattr(lib.optim, S).CyclicLR(
            o, [0.01, 0.02], 0.1, step_size_up=3, step_size_down=2)),
        ("CyclicLR-triangular2", lambda lib, o: getattr(lib.optim, S).CyclicLR(
            o, 0.01, [0.1, 0.2], step_size_up=2, mode="triangular2", cycle_momentum=False)),
        ("CyclicLR-exp_range", lambda lib, o: getattr(lib.optim, S).CyclicLR(
            o, 0.01, 0.1, step_size_up=2, mode="exp_range", gamma=0.9, base_momentum=0.7,
            max_momentum=0.95)),
        ("CyclicLR-scale_fn", lambda lib, o: getattr(lib.optim, S).CyclicLR(
            o, 0.01, 0.1, step_size_up=2, scale_fn=lambda x: 0.5 ** x, scale_mode="iterations")),
        ("OneCycleLR", lambda lib, o: getattr(lib.optim, S).OneCycleLR(o, [0.1, 0.2],
                                                                       total_steps=21)),
        ("OneCycleLR-linear-3phase", lambda lib, o: getattr(lib.optim, S).OneCycleLR(
            o, 0.1, epochs=3, steps_per_epoch=7, anneal_strategy="linear", three_phase=True,
            pct_start=0.4, div_factor=10, final_div_factor=100)),
        ("ReduceLROnPlateau", lambda lib, o: getattr(lib.optim, S).ReduceLROnPlateau(
            o, patience=1, factor=0.5, min_lr=[0.001, 0.004], cooldown=1)),
        ("ReduceLROnPlateau-max-abs", lambda lib, o: getattr(lib.optim, S).ReduceLROnPlateau(
            o, mode="max", patience=0, threshold=0.1, threshold_mode="abs")),
        ("SequentialLR", lambda lib, o: getattr(lib.optim, S).SequentialLR(
            o, [getattr(lib.optim, S).LinearLR(o, 0.1, total_iters=4),
                getattr(lib.optim, S).ExponentialLR(o, 0.8),
                getattr(lib.optim, S).StepLR(o, 2)], milestones=[5, 12])),
        ("ChainedScheduler", lambda lib, o: getattr(lib.optim, S).ChainedScheduler(
            [getattr(lib.optim, S).ConstantLR(o, 0.5, total_iters=4),
             getattr(lib.optim, S).ExponentialLR(o, 0.9),
             getattr(lib.optim, S).MultiStepLR(o, [6, 10])])),
        ("ChainedScheduler-optimizer", lambda lib, o: getattr(lib.optim, S).ChainedScheduler(
            [getattr(lib.optim, S).LinearLR(o, 0.5, total_iters=3),
             getattr(lib.optim, S).CosineAnnealingLR(o, 8)], optimizer=o)),
        ("SequentialLR-warmup-cosine", lambda lib, o: getattr(lib.optim, S).SequentialLR(
            o, [getattr(lib.optim, S).LinearLR(o, 0.01, total_iters=5),
                getattr(lib.optim, S).CosineAnnealingLR(o, 10, eta_min=1e-4)], milestones=[5])),
        ("CosineAnnealingLR-long", lambda lib, o: getattr(lib.optim, S).CosineAnnealingLR(o, 3)),
        ("SequentialLR-of-chained", lambda lib, o: getattr(lib.optim, S).SequentialLR(
            o, [getattr(lib.optim, S).ConstantLR(o, 0.1, total_iters=2),
                getattr(lib.optim, S).PolynomialLR(o, 6)], milestones=[3])),
    ]


SCHEDS = _sched_configs()
_METRICS = [1.0, 0.9, 0.95, 0.96, 0.97, 0.5, 0.6, 0.61, 0.62, 0.63, 0.3, 0.31, 0.4, 0.41,
            0.42, 0.43, 0.44, 0.1, 0.2, 0.3]


def _sched_run(lib, make, steps, state=None, warm=0, lr_tensor=False):
    ps = _params(lib)
    lr0, lr1 = (lib.tensor(0.1), lib.tensor(0.2)) if lr_tensor else (0.1, 0.2)
    opt = lib.optim.SGD([{"params": ps[:2], "lr": lr0}, {"params": ps[2:], "lr": lr1}],
                        lr=0.1, momentum=0.9)
    sched = make(lib, opt)
    if state is not None:           # a resumed run: the optimiser's state, then the schedule's
        opt.load_state_dict(state[0])
        sched.load_state_dict(state[1])
    trail = []
    for i in range(warm, warm + steps):
        opt.step()
        if type(sched).__name__ == "ReduceLROnPlateau":
            sched.step(_METRICS[i])
        else:
            sched.step()
        trail.append(([float(x) for x in sched.get_last_lr()],
                      [float(g["lr"]) for g in opt.param_groups],
                      [g.get("momentum") for g in opt.param_groups],
                      [g.get("betas") for g in opt.param_groups]))
    return sched, trail


def _plain(sd):
    """A scheduler's state_dict without callables (lambdas differ by identity)."""
    out = {}
    for k, v in sd.items():
        if callable(v) and not isinstance(v, (int, float)):
            out[k] = "callable"
        elif isinstance(v, list):
            out[k] = [_plain(x) if isinstance(x, dict) else ("callable" if callable(x) else x)
                      for x in v]
        elif isinstance(v, dict):
            out[k] = _plain(v)
        else:
            out[k] = v
    return out


def _close_trail(a, b):
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b)):
        for u, v in zip(x, y):
            assert (u is None) == (v is None), i
            if u is not None:
                np.testing.assert_allclose(np.array(u, dtype=float), np.array(v, dtype=float),
                                           rtol=1e-9, atol=1e-12, err_msg=f"step {i}")


@pytest.mark.parametrize("name, make", SCHEDS, ids=[n for n, _ in SCHEDS])
def test_scheduler_against_torch(name, make):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts, ttrail = _sched_run(torch, make, 20)
        ls, ltrail = _sched_run(llgrad, make, 20)
    _close_trail(ltrail, ttrail)
    tsd, lsd = _plain(ts.state_dict()), _plain(ls.state_dict())
    assert list(lsd) == list(tsd)
    _close(_value(lsd), _value(tsd), "state_dict")


@pytest.mark.parametrize("name, make", SCHEDS, ids=[n for n, _ in SCHEDS])
def test_scheduler_state_dict_round_trip(name, make):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts, _ = _sched_run(torch, make, 10)
        state = (ts.optimizer.state_dict(), ts.state_dict())
        # (torch's CyclicLR.load_state_dict pops a key of the dict it is given)
        _, ttrail = _sched_run(torch, make, 10, state=copy.deepcopy(state), warm=10)
        _, ltrail = _sched_run(llgrad, make, 10, state=_to_llgrad(state), warm=10)
    _close_trail(ltrail, ttrail)


@pytest.mark.parametrize("name, make", SCHEDS, ids=[n for n, _ in SCHEDS])
def test_scheduler_of_a_tensor_lr_against_torch(name, make):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, ttrail = _sched_run(torch, make, 20, lr_tensor=True)
        _, ltrail = _sched_run(llgrad, make, 20, lr_tensor=True)
    _close_trail(ltrail, ttrail)
