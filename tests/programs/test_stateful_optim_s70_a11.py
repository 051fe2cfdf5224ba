"""Every torch.optim optimiser with its options (momentum, nesterov, dampening,
weight_decay, amsgrad, maximize, centered, foreach / fused where torch takes them on CPU),
param groups with their own lrs, lr schedulers stepping inside and outside the step, the lr
changed between calls, a state_dict round trip and zero_grad both ways: parameters, their
.grad and the optimiser's state_dict after each of six training steps, torch, llgrad eager
and the step compiled with llgrad.compile (stateful_harness_s70_a11.check)."""
import math

import pytest

pytest.importorskip("torch")
from stateful_harness_s70_a11 import check, randn  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case; the fast regressions are in
# test_stateful_regressions_s70_a11.py)


def xy(i):
    return randn(10 + i, 5, 4), randn(20 + i, 5, 2)


def model_of(lib, bias=True):
    m = lib.nn.Sequential(lib.nn.Linear(4, 3, bias=bias), lib.nn.Tanh(),
                          lib.nn.Linear(3, 2, bias=bias))
    with lib.no_grad():
        for k, p in enumerate(m.parameters()):
            p.copy_(lib.tensor(randn(100 + k, *p.shape) * 0.5))
    return m


def _observed(model, opt):
    sd = opt.state_dict()
    state = {k: sd["state"][k] for k in sorted(sd["state"])}
    groups = [{k: g[k] for k in sorted(g) if k not in ("params",)} for g in sd["param_groups"]]
    return [list(model.parameters()), [p.grad for p in model.parameters()], state, groups]


def program(opt_name, groups=None, set_to_none=True, sched=None, sched_inside=True,
            between=None, bias=True, **opt_kw):
    """A make(lib): a model, opt_name(params, **opt_kw), a step that zeroes, backs up and
    steps (and steps sched when sched_inside); between(lib, holder, i) runs between calls."""
    def make(lib):
        model = model_of(lib, bias)
        params = list(model.parameters()) if groups is None else groups(model)
        holder = {"opt": getattr(lib.optim, opt_name)(params, **opt_kw)}
        if sched is not None:
            holder["sched"] = sched(lib, holder["opt"])

        def step(x, y):
            opt = holder["opt"]
            opt.zero_grad(set_to_none=set_to_none)
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
            if sched is not None and sched_inside:
                holder["sched"].step()
            return loss

        def between_calls(i):
            if sched is not None and not sched_inside:
                holder["sched"].step()
            if between is not None:
                between(lib, holder, i)
        return dict(step=step, state=lambda: _observed(model, holder["opt"]),
                    between=between_calls)
    make.__name__ = opt_name
    return make


OPTIMIZERS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.5, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, maximize=True)),
    ("SGD", dict(lr=0.1, momentum=0.9, foreach=True)),
    ("SGD", dict(lr=0.1, momentum=0.9, foreach=False)),
    ("SGD", dict(lr=0.1, momentum=0.9, fused=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, betas=(0.8, 0.9), eps=1e-6)),
    ("Adam", dict(lr=0.01, maximize=True, foreach=False)),
    ("Adam", dict(lr=0.01, foreach=True)),
    ("Adam", dict(lr=0.01, fused=True)),
    ("Adam", dict(lr=0.01, amsgrad=True, fused=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, amsgrad=True, weight_decay=0.05)),
    ("AdamW", dict(lr=0.01, fused=True)),
    ("AdamW", dict(lr=0.01, maximize=True, foreach=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.5)),
    ("Adagrad", dict(lr=0.1, maximize=True, foreach=True)),
    ("Adagrad", dict(lr=0.1, fused=True)),
    ("Adadelta", dict(lr=1.0)),
    ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1, maximize=True)),
    ("Adamax", dict(lr=0.02)),
    ("Adamax", dict(lr=0.02, weight_decay=0.1, foreach=True)),
    ("NAdam", dict(lr=0.01)),
    ("NAdam", dict(lr=0.01, momentum_decay=0.01, weight_decay=0.1,
                   decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.01)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, alpha=0.9, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, maximize=True, foreach=True)),
    ("Rprop", dict(lr=0.01)),
    ("Rprop", dict(lr=0.01, etas=(0.3, 1.5), step_sizes=(1e-4, 0.1), maximize=True)),
    ("ASGD", dict(lr=0.05)),
    ("ASGD", dict(lr=0.05, lambd=1e-2, alpha=0.5, t0=2, weight_decay=0.1)),
    ("Adafactor", dict(lr=0.01)),
    ("Adafactor", dict(lr=0.01, weight_decay=0.1, maximize=True)),
]


def _id(case):
    name, kw = case
    return name + "-" + "-".join(f"{k}={v}" for k, v in kw.items())


@pytest.mark.parametrize("case", OPTIMIZERS, ids=[_id(c) for c in OPTIMIZERS])
def test_optimizer_steps(case):
    name, kw = case
    check(program(name, **kw), xy, atol=1e-5)


def test_muon_on_matrices():
    check(program("Muon", bias=False, lr=0.02), xy, atol=1e-5)


def _two_groups(model):
    return [{"params": model[0].parameters(), "lr": 0.1},
            {"params": model[2].parameters(), "lr": 0.01, "momentum": 0.5}]


def _halve_lr(lib, holder, i):
    for g in holder["opt"].param_groups:
        g["lr"] *= 0.5


def _reload(lib, holder, i):
    if i == 2:          # (a fresh optimiser loads the state mid-run; the step reads it)
        opt = holder["opt"]
        sd = opt.state_dict()
        holder["opt"] = type(opt)(opt.param_groups[0]["params"], lr=1.0)
        holder["opt"].load_state_dict(sd)


def _step_lr(lib, opt):
    return lib.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)


SCHEDULES = {
    "groups": program("SGD", groups=_two_groups, lr=0.05, momentum=0.9),
    "groups_adam": program("Adam", groups=lambda m: [
        {"params": m[0].parameters()}, {"params": m[2].parameters(), "lr": 0.001,
                                        "betas": (0.5, 0.6)}], lr=0.02),
    "lr_halved_between": program("SGD", between=_halve_lr, lr=0.1, momentum=0.9),
    "adam_lr_halved_between": program("Adam", between=_halve_lr, lr=0.01),
    "adamw_lr_halved_between": program("AdamW", between=_halve_lr, lr=0.01, amsgrad=True),
    "rmsprop_lr_halved_between": program("RMSprop", between=_halve_lr, lr=0.01,
                                         momentum=0.5),
    "zero_grad_to_zeros": program("SGD", set_to_none=False, lr=0.1, momentum=0.9),
    "adam_zero_grad_to_zeros": program("Adam", set_to_none=False, lr=0.01),
    "state_dict_round_trip": program("Adam", between=_reload, lr=0.01),
    "sgd_state_dict_round_trip": program("SGD", between=_reload, lr=0.1, momentum=0.9),
    "steplr_inside": program("SGD", sched=_step_lr, lr=0.1, momentum=0.9),
    "steplr_outside": program("SGD", sched=_step_lr, sched_inside=False, lr=0.1),
    "exponential": program("Adam", sched=lambda lib, o: lib.optim.lr_scheduler.ExponentialLR(
        o, gamma=0.7), lr=0.01),
    "cosine": program("SGD", sched=lambda lib, o: lib.optim.lr_scheduler.CosineAnnealingLR(
        o, T_max=4, eta_min=0.001), lr=0.1, momentum=0.9),
    "onecycle": program("SGD", sched=lambda lib, o: lib.optim.lr_scheduler.OneCycleLR(
        o, max_lr=0.2, total_steps=10), lr=0.1, momentum=0.9),
    "onecycle_adam": program("Adam", sched=lambda lib, o: lib.optim.lr_scheduler.OneCycleLR(
        o, max_lr=0.02, total_steps=10), lr=0.01),
    "lambda": program("AdamW", sched=lambda lib, o: lib.optim.lr_scheduler.LambdaLR(
        o, lambda k: min(1.0, (k + 1) / 3)), lr=0.01),
    "multistep": program("SGD", sched=lambda lib, o: lib.optim.lr_scheduler.MultiStepLR(
        o, milestones=[1, 3], gamma=0.3), lr=0.1),
    "linear": program("SGD", sched=lambda lib, o: lib.optim.lr_scheduler.LinearLR(
        o, start_factor=0.25, total_iters=3), lr=0.1, momentum=0.9),
    "cyclic": program("SGD", sched=lambda lib, o: lib.optim.lr_scheduler.CyclicLR(
        o, base_lr=0.01, max_lr=0.1, step_size_up=2), lr=0.1, momentum=0.9),
    "sequential": program("SGD", sched=lambda lib, o: lib.optim.lr_scheduler.SequentialLR(
        o, [lib.optim.lr_scheduler.ConstantLR(o, factor=0.5, total_iters=2),
            lib.optim.lr_scheduler.ExponentialLR(o, gamma=0.9)], milestones=[2]), lr=0.1),
    "warm_restarts": program("Adam", sched=lambda lib, o:
                             lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=2),
                             lr=0.01),
    "polynomial": program("SGD", sched=lambda lib, o: lib.optim.lr_scheduler.PolynomialLR(
        o, total_iters=4, power=2.0), lr=0.1),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_groups_schedules_and_state(name):
    check(SCHEDULES[name], xy, atol=1e-5)


def warmup_inside(opt_name, fn, **kw):
    """The step sets every group's lr from a counter it keeps (a hand-written warm-up)."""
    def make(lib):
        model = model_of(lib)
        opt = getattr(lib.optim, opt_name)(model.parameters(), **kw)
        st = {"it": 0}
        def step(x, y):
            st["it"] += 1
            for g in opt.param_groups:
                g["lr"] = fn(st["it"])
            opt.zero_grad()
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        return dict(step=step, state=lambda: [_observed(model, opt), st["it"]])
    make.__name__ = opt_name + "_warmup"
    return make


WARMUPS = [warmup_inside("SGD", lambda t: 0.1 * min(1.0, t / 3), momentum=0.9, lr=0.1),
         warmup_inside("Adam", lambda t: 0.01 * min(1.0, t / 3), lr=0.01),
         warmup_inside("AdamW", lambda t: 0.01 * 0.5 * (1 + math.cos(math.pi * t / 6)), lr=0.01),
         warmup_inside("RMSprop", lambda t: 0.01 / t ** 0.5, lr=0.01),
         warmup_inside("Adagrad", lambda t: 0.1 * 0.9 ** t, lr=0.1),
         warmup_inside("NAdam", lambda t: 0.01 * t, lr=0.01)]


@pytest.mark.parametrize("make", WARMUPS, ids=lambda f: f.__name__)
def test_lr_set_inside_the_step(make):
    check(make, xy, atol=1e-5)


def _plateau(lib):
    model = model_of(lib)
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0)

    def step(x, y):
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    def between(i):
        sched.step(1.0)         # (never better: the lr halves every call)
    return dict(step=step, state=lambda: _observed(model, opt), between=between)


def test_reduce_on_plateau_between_calls():
    check(_plateau, xy, atol=1e-5)


def _lbfgs(**kw):
    def make(lib):
        # (float64: LBFGS's line search and curvature pairs amplify float32 rounding of
        # sums taken in another order to 1e-4 in six calls; in float64 eager == torch to 1e-12)
        model = model_of(lib).double()
        opt = lib.optim.LBFGS(model.parameters(), **kw)

        def step(x, y):
            x, y = x.double(), y.double()

            def closure():
                opt.zero_grad()
                loss = (model(x) - y).pow(2).mean()
                loss.backward()
                return loss
            return opt.step(closure)
        return dict(step=step, state=lambda: [list(model.parameters())])
    make.__name__ = "LBFGS"
    return make


@pytest.mark.parametrize("kw", [dict(lr=0.5, max_iter=4, history_size=3),
                                dict(lr=1, max_iter=5, line_search_fn="strong_wolfe")],
                         ids=["plain", "strong_wolfe"])
def test_lbfgs_with_closure(kw):
    # (compile runs LBFGS.step eagerly, saying so: its line search is steered by the losses)
    check(_lbfgs(**kw), xy, rtol=1e-9, atol=1e-9, compiled_warns="LBFGS.step")


# ---- schedulers read and reloaded, two optimisers, a GAN's alternating steps ---------------

def sched_returns_last_lr(lib):
    model = model_of(lib)
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = lib.optim.lr_scheduler.StepLR(opt, 2, 0.5)

    def step(x, y):
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        sched.step()
        return loss, sched.get_last_lr()
    return dict(step=step, state=lambda: [_observed(model, opt),
                                          sched.state_dict()["last_epoch"]])


def sched_state_reloaded(lib):
    model = model_of(lib)
    opt = lib.optim.Adam(model.parameters(), lr=0.01)
    sched = lib.optim.lr_scheduler.ExponentialLR(opt, 0.8)
    saved = {}

    def step(x, y):
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        sched.step()
        return loss

    def between(i):
        if i == 1:
            saved["s"], saved["o"] = sched.state_dict(), opt.state_dict()
        if i == 3:
            opt.load_state_dict(saved["o"])
            sched.load_state_dict(saved["s"])
    return dict(step=step, state=lambda: [_observed(model, opt), sched.get_last_lr()],
                between=between)


def two_optimizers(lib):
    model = model_of(lib)
    o1 = lib.optim.SGD(model[0].parameters(), lr=0.1, momentum=0.9)
    o2 = lib.optim.Adam(model[2].parameters(), lr=0.01)

    def step(x, y):
        o1.zero_grad()
        o2.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        o1.step()
        o2.step()
        return loss
    return dict(step=step, state=lambda: [_observed(model, o1), _observed(model, o2)])


def gan_alternating(lib):
    g, d = model_of(lib), lib.nn.Linear(2, 1)
    with lib.no_grad():
        d.weight.copy_(lib.tensor(randn(9, 1, 2)))
        d.bias.fill_(0.1)
    og, od = lib.optim.Adam(g.parameters(), lr=0.01), lib.optim.SGD(d.parameters(), lr=0.05)
    softplus = lib.nn.functional.softplus

    def step(x, y):
        od.zero_grad()
        ld = softplus(-d(y)).mean() + softplus(d(g(x).detach())).mean()
        ld.backward()
        od.step()
        og.zero_grad()
        lg = softplus(-d(g(x))).mean()
        lg.backward()
        og.step()
        return ld, lg
    return dict(step=step, state=lambda: [list(g.parameters()), list(d.parameters()),
                                          [p.grad for p in d.parameters()]])


@pytest.mark.parametrize("make", [sched_returns_last_lr, sched_state_reloaded, two_optimizers,
                                  gan_alternating], ids=lambda f: f.__name__)
def test_schedulers_and_several_optimizers(make):
    check(make, xy, atol=1e-5)

