"""Sweep 8: every optimizer over its options (weight_decay, momentum, nesterov, amsgrad,
maximize, decoupled weight decay, foreach None/False/True, two param groups) for five steps
of a seeded model, and every lr_scheduler (chained, sequential, ReduceLROnPlateau) for
twelve steps, against torch: parameters, optimizer state and param_groups, learning rates,
get_last_lr, last_epoch, state_dict keys, and a state_dict round-trip into fresh objects
that then carry on as the originals do."""
import itertools
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

X = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
Y = np.random.default_rng(1).standard_normal((6, 2)).astype(np.float32)

OPTIMIZERS = {
    "SGD": [dict(lr=0.1), dict(lr=0.1, momentum=0.9),
            dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1),
            dict(lr=0.1, momentum=0.9, dampening=0.5), dict(lr=0.1, maximize=True, momentum=0.5)],
    "Adam": [dict(), dict(lr=0.01, amsgrad=True), dict(weight_decay=0.1, maximize=True),
             dict(betas=(0.8, 0.9), eps=1e-6), dict(decoupled_weight_decay=True, weight_decay=0.1)],
    "AdamW": [dict(), dict(amsgrad=True, weight_decay=0.5), dict(maximize=True)],
    "Adagrad": [dict(), dict(lr_decay=0.1, weight_decay=0.1, initial_accumulator_value=0.5),
                dict(maximize=True)],
    "Adadelta": [dict(), dict(rho=0.5, weight_decay=0.1), dict(maximize=True, lr=0.5)],
    "Adamax": [dict(), dict(weight_decay=0.1), dict(maximize=True)],
    "NAdam": [dict(), dict(momentum_decay=0.01, weight_decay=0.1),
              dict(decoupled_weight_decay=True, weight_decay=0.1), dict(maximize=True)],
    "RAdam": [dict(), dict(weight_decay=0.1), dict(decoupled_weight_decay=True, weight_decay=0.1),
              dict(maximize=True)],
    "RMSprop": [dict(), dict(momentum=0.9, centered=True), dict(weight_decay=0.1, alpha=0.9),
                dict(maximize=True, momentum=0.5)],
    "Rprop": [dict(), dict(etas=(0.3, 1.5), step_sizes=(1e-4, 1)), dict(maximize=True)],
    "ASGD": [dict(), dict(lambd=1e-3, alpha=0.5, t0=2, weight_decay=0.1), dict(maximize=True)],
    "Adafactor": [dict(), dict(lr=0.1, weight_decay=0.1), dict(maximize=True, beta2_decay=-0.5)],
}


def _model(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(4, 5), lib.nn.Tanh(), lib.nn.Linear(5, 2))


def _step(lib, model, opt):
    opt.zero_grad()
    loss = ((model(lib.tensor(X)) - lib.tensor(Y)) ** 2).mean()
    loss.backward()
    opt.step()


def _state(opt):
    """(state as {(index, name): NumPy value or number}, param_groups without params)."""
    sd = opt.state_dict()
    state = {(i, k): (v.detach().numpy().copy() if hasattr(v, "detach") else v)
             for i, s in sd["state"].items() for k, v in s.items()}
    groups = [{k: v for k, v in g.items() if k != "params"} for g in sd["param_groups"]]
    return state, groups, [g["params"] for g in sd["param_groups"]]


def _train(lib, name, kw, groups, steps=5):
    model = _model(lib)
    params = list(model.parameters()) if not groups else [
        {"params": model[0].parameters()}, {"params": model[2].parameters(), "lr": 0.05}]
    opt = getattr(lib.optim, name)(params, **kw)
    for _ in range(steps):
        _step(lib, model, opt)
    out = [[p.detach().numpy().copy() for p in model.parameters()], _state(opt)]
    # a fresh optimizer given the state carries on as this one does
    fresh = getattr(lib.optim, name)(params if not groups else [
        {"params": model[0].parameters()}, {"params": model[2].parameters()}], **kw)
    fresh.load_state_dict(opt.state_dict())
    for _ in range(2):
        _step(lib, model, fresh)
    out.append([p.detach().numpy().copy() for p in model.parameters()])
    return out


def _same_state(a, b, tol):
    (sa, ga, pa), (sb, gb, pb) = a, b
    assert sorted(sa) == sorted(sb)
    for key, x in sa.items():
        y = sb[key]
        if isinstance(x, np.ndarray):
            assert isinstance(y, np.ndarray) and x.dtype == y.dtype and x.shape == y.shape, key
            np.testing.assert_allclose(y, x, rtol=tol, atol=1e-6, err_msg=str(key))
        else:
            assert x == pytest.approx(y), key
    assert ga == gb
    assert pa == pb


def _cases():
    return [(n, kw, fe, g) for n, kws in OPTIMIZERS.items() for kw in kws
            for fe, g in itertools.product((None, False, True), (False, True))]


@pytest.mark.parametrize("name,kw,foreach,groups", _cases(), ids=str)
def test_optimizer_against_torch(name, kw, foreach, groups):
    kw = dict(kw) if foreach is None else dict(kw, foreach=foreach)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = _train(torch, name, kw, groups)
        got = _train(llgrad, name, kw, groups)
    # (maximize climbs the loss: a few ulps of difference grow with the steps)
    tol = 1e-3 if kw.get("maximize") else 1e-5
    for a, b in zip(got[0] + got[2], want[0] + want[2]):
        np.testing.assert_allclose(a, b, rtol=tol, atol=1e-6)
    _same_state(want[1], got[1], tol)


def _opt(lib, groups):
    lib.manual_seed(0)
    m = lib.nn.Linear(2, 2)
    if groups == 2:
        return lib.optim.SGD([{"params": [m.weight]}, {"params": [m.bias], "lr": 0.5}], lr=0.1,
                             momentum=0.9)
    return lib.optim.Adam(m.parameters(), lr=0.1)


SCHEDULERS = {
    "StepLR": lambda S, o: S.StepLR(o, 3, gamma=0.5),
    "MultiStepLR": lambda S, o: S.MultiStepLR(o, [2, 5, 5], gamma=0.3),
    "ConstantLR": lambda S, o: S.ConstantLR(o, factor=0.25, total_iters=4),
    "LinearLR": lambda S, o: S.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=5),
    "ExponentialLR": lambda S, o: S.ExponentialLR(o, gamma=0.9),
    "PolynomialLR": lambda S, o: S.PolynomialLR(o, total_iters=6, power=2.0),
    "CosineAnnealingLR": lambda S, o: S.CosineAnnealingLR(o, T_max=4, eta_min=0.01),
    "CosineAnnealingWarmRestarts": lambda S, o: S.CosineAnnealingWarmRestarts(
        o, T_0=3, T_mult=2, eta_min=0.001),
    "CyclicLR": lambda S, o: S.CyclicLR(o, base_lr=0.01, max_lr=[0.1, 0.2][:len(o.param_groups)],
                                        step_size_up=3, mode="triangular2"),
    "CyclicLR-exp_range": lambda S, o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2,
                                                  step_size_down=3, mode="exp_range", gamma=0.9),
    "OneCycleLR": lambda S, o: S.OneCycleLR(o, max_lr=[0.5, 1.0][:len(o.param_groups)],
                                            total_steps=12, pct_start=0.25,
                                            anneal_strategy="linear", three_phase=True),
    "OneCycleLR-cos": lambda S, o: S.OneCycleLR(o, max_lr=0.5, epochs=3, steps_per_epoch=4),
    "LambdaLR": lambda S, o: S.LambdaLR(o, [lambda e: 0.9 ** e, lambda e: 1 / (e + 1)][
        :len(o.param_groups)]),
    "MultiplicativeLR": lambda S, o: S.MultiplicativeLR(o, lambda e: 0.95),
    "SequentialLR": lambda S, o: S.SequentialLR(o, [S.LinearLR(o, 0.1, total_iters=3),
                                                    S.ExponentialLR(o, 0.8)], milestones=[3]),
    "SequentialLR-3": lambda S, o: S.SequentialLR(o, [
        S.ConstantLR(o, 0.5, total_iters=2), S.StepLR(o, 2), S.CosineAnnealingLR(o, 4)],
        milestones=[2, 5]),
    "ChainedScheduler": lambda S, o: S.ChainedScheduler([S.ConstantLR(o, 0.5, total_iters=3),
                                                         S.ExponentialLR(o, 0.9)]),
    "ChainedScheduler-optimizer": lambda S, o: S.ChainedScheduler(
        [S.StepLR(o, 2), S.MultiStepLR(o, [3])], optimizer=o),
}


def _schedule(lib, name, groups):
    S = lib.optim.lr_scheduler
    o = _opt(lib, groups)
    s = SCHEDULERS[name](S, o)
    out = [(s.get_last_lr(), [g["lr"] for g in o.param_groups], getattr(s, "last_epoch", None))]
    for i in range(12):
        o.step()
        s.step()
        out.append((s.get_last_lr(), [g["lr"] for g in o.param_groups],
                    getattr(s, "last_epoch", None)))
        if i == 5:
            sd = s.state_dict()
            out.append(sorted(sd))
            o2 = _opt(lib, groups)
            s2 = SCHEDULERS[name](S, o2)
            s2.load_state_dict(sd)
            out.append((s2.get_last_lr(), [g["lr"] for g in o2.param_groups],
                        getattr(s2, "last_epoch", None)))
    return out


@pytest.mark.parametrize("groups", (1, 2))
@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_scheduler_against_torch(name, groups):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = _schedule(torch, name, groups)
        got = _schedule(llgrad, name, groups)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        if isinstance(b, list):
            assert a == b
            continue
        np.testing.assert_allclose(np.array(a[0], float), np.array(b[0], float), rtol=1e-6)
        np.testing.assert_allclose(np.array(a[1], float), np.array(b[1], float), rtol=1e-6)
        assert a[2] == b[2]


@pytest.mark.parametrize("kw", [
    dict(), dict(mode="max", factor=0.5, patience=1, threshold=0.1, threshold_mode="abs",
                 cooldown=1, min_lr=[0.01, 0.05]), dict(patience=0, eps=0.05)], ids=str)
def test_reduce_lr_on_plateau_against_torch(kw):
    runs = []
    for lib in (torch, llgrad):
        o = _opt(lib, 2)
        s = lib.optim.lr_scheduler.ReduceLROnPlateau(o, **kw)
        out = []
        for metric in [1.0, 0.9, 0.95, 0.95, 0.96, 0.97, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]:
            o.step()
            s.step(metric)
            out.append((s.get_last_lr(), s.num_bad_epochs, s.cooldown_counter, s.best,
                        s.last_epoch))
        out.append(sorted(s.state_dict()))
        runs.append(out)
    assert runs[1] == runs[0]


@pytest.mark.parametrize("line_search_fn", (None, "strong_wolfe"))
def test_lbfgs_against_torch_and_silent(line_search_fn, monkeypatch):
    """Three L-BFGS steps as torch's (losses, func_evals, n_iter, weights); float() of the
    re-evaluated loss runs under no_grad as PyTorch's, so no 'Converting a tensor with
    requires_grad=True to a scalar' warning (llgrad warned from its fixed-step branch)."""
    monkeypatch.setitem(llgrad.runtime.trace_state.given_once, "scalar conversion", False)
    runs = []
    for lib in (torch, llgrad):
        model = _model(lib)[0]
        x, y = lib.tensor(X[:, :4]), lib.tensor(Y)
        opt = lib.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5, history_size=3,
                              line_search_fn=line_search_fn)

        def closure():
            opt.zero_grad()
            loss = ((model(x)[:, :2] - y) ** 2).mean()
            loss.backward()
            return loss
        out = []
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for _ in range(3):
                loss = opt.step(closure)
                st = opt.state[opt._params[0]]
                out.append((loss.item(), st["func_evals"], st["n_iter"],
                            model.weight.detach().numpy().copy()))
        assert [str(w.message) for w in seen] == [], lib.__name__
        runs.append(out)
    for a, b in zip(runs[1], runs[0]):
        assert a[1:3] == b[1:3]
        # (L-BFGS's curvature pairs amplify the sums' rounding: ~1e-5 between NumPy's and
        # PyTorch's AVX-512 reductions on some hosts)
        np.testing.assert_allclose(a[0], b[0], rtol=1e-4)
        np.testing.assert_allclose(a[3], b[3], rtol=1e-4, atol=2e-5)
