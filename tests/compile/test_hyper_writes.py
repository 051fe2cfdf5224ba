"""A compiled training step that sets its optimiser's learning rate itself (a warm-up or a
schedule written into the step: `for g in opt.param_groups: g["lr"] = ...`) compiles, and
every call gives eager's parameters and leaves eager's lr in the groups (runtime/hypers.py,
compile/attr_writes.py). Each case runs the same step eagerly and compiled on two copies of
one model and compares them after every call: the lr bit for bit (a stand-in's arithmetic is
Python's), the parameters to float32 rounding (compiled AdamW rounds as eager's within an
ulp, with or without a schedule)."""
import math
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F


def _setup(opt_kind="adamw", groups=1):
    llgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    if groups == 2:
        params = [{"params": model[0].parameters()}, {"params": model[2].parameters(), "lr": 0.5}]
    else:
        params = model.parameters()
    opt = llgrad.optim.AdamW(params, lr=1e-2) if opt_kind == "adamw" else \
        llgrad.optim.SGD(params, lr=0.1, momentum=0.9)
    return model, opt


def _data():
    rng = np.random.default_rng(1)
    return (llgrad.tensor(rng.standard_normal((5, 6)).astype(np.float32)),
            llgrad.tensor(rng.integers(0, 3, 5)))


def _close(a, b):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-7)


def _same(ma, oa, mb, ob):
    for p, q in zip(ma.parameters(), mb.parameters()):
        _close(p, q)
    for ga, gb in zip(oa.param_groups, ob.param_groups):
        assert type(ga["lr"]) is type(gb["lr"]) and ga["lr"] == gb["lr"]


def _run(make_step, calls, opt_kind="adamw", groups=1, max_traces=None):
    x, y = _data()
    (ma, oa), (mb, ob) = _setup(opt_kind, groups), _setup(opt_kind, groups)
    eager, compiled = make_step(ma, oa), llgrad.compile(make_step(mb, ob), backend="llvm")
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # (no call may fall back to eager)
        for args in calls:
            la, lb = eager(x, y, *args), compiled(x, y, *args)
            _close(la, lb)
            _same(ma, oa, mb, ob)
    if max_traces is not None:
        assert compiled.n_traces <= max_traces
    return compiled


def _loss_step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def test_warm_up_from_the_iteration_number():
    def make(model, opt):
        def step(x, y, it):
            lr = 1e-2 * min(1.0, (it + 1) / 6)
            for g in opt.param_groups:
                g["lr"] = lr
            return _loss_step(model, opt, x, y)
        return step
    # (it 0 traces with the number guarded, it 1 with it as an input, it 5 at the warm-up's
    # end: min's other branch)
    _run(make, [(i,) for i in range(12)], max_traces=4)


def test_cosine_schedule_from_a_float_argument():
    def make(model, opt):
        def step(x, y, lr):
            for g in opt.param_groups:
                g["lr"] = lr
            return _loss_step(model, opt, x, y)
        return step
    lrs = [0.5e-2 * (1 + math.cos(math.pi * i / 10)) for i in range(10)]
    _run(make, [(lr,) for lr in lrs], opt_kind="sgd", max_traces=2)


def test_scaled_per_group_and_read_back():
    def make(model, opt):
        def step(x, y, scale):
            for g in opt.param_groups:
                g["lr"] = g["initial"] * scale
            return _loss_step(model, opt, x, y) * opt.param_groups[1]["lr"]
        return step

    def setup_initial(make_step):
        def wrapped(model, opt):
            for g in opt.param_groups:
                g["initial"] = g["lr"]
            return make_step(model, opt)
        return wrapped
    _run(setup_initial(make), [(0.1 * (i + 1),) for i in range(6)], groups=2, max_traces=2)


@pytest.mark.filterwarnings("error")
def test_a_constant_written_wins_over_a_change_between_calls():
    x, y = _data()
    (ma, oa), (mb, ob) = _setup("sgd"), _setup("sgd")

    def make(model, opt):
        def step(x, y):
            opt.param_groups[0]["lr"] = 0.05
            return _loss_step(model, opt, x, y)
        return step
    eager, compiled = make(ma, oa), llgrad.compile(make(mb, ob), backend="llvm")
    for k in range(5):
        for o in (oa, ob):
            o.param_groups[0]["lr"] = 3.0 + k      # (the step sets its own before it steps)
        eager(x, y)
        compiled(x, y)
        _same(ma, oa, mb, ob)
        assert ob.param_groups[0]["lr"] == 0.05
    assert compiled.n_traces == 1


@pytest.mark.parametrize("write", ["betas", "tensor"])
def test_other_writes_stay_eager_s(write):
    """A tuple of numbers written into betas is replayed as a number is (OneCycleLR's
    `(momentum, *g["betas"][1:])`); a tensor lr is a tensor put into a dict, which calls
    replay as any other. Either way the values are eager's, and no call runs eagerly."""
    x, y = _data()
    (ma, oa), (mb, ob) = _setup(), _setup()

    def make(model, opt):
        def step(x, y):
            if write == "betas":
                opt.param_groups[0]["betas"] = (0.8, 0.99)
            else:
                opt.param_groups[0]["lr"] = llgrad.tensor(0.02)
            return _loss_step(model, opt, x, y)
        return step
    eager, compiled = make(ma, oa), llgrad.compile(make(mb, ob), backend="llvm")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(3):
            eager(x, y)
            compiled(x, y)
            for p, q in zip(ma.parameters(), mb.parameters()):
                _close(p, q)
    assert not any("running eagerly" in str(m.message) for m in w)
    if write == "betas":
        assert ob.param_groups[0]["betas"] == (0.8, 0.99)
        assert all(type(b) is float for b in ob.param_groups[0]["betas"])


@pytest.mark.filterwarnings("error")
def test_the_traced_call_leaves_a_float_in_the_group():
    """The call that traces with a stand-in (the number argument's second value) ends with
    the group holding eager's float, not the stand-in."""
    _, opt = _setup("sgd")
    x, y = _data()
    model = _setup("sgd")[0]
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1)

    @llgrad.compile(backend="llvm")
    def step(x, y, lr):
        opt.param_groups[0]["lr"] = lr * 0.5
        return _loss_step(model, opt, x, y)
    for lr in (0.2, 0.4, 0.6):
        step(x, y, lr)
        assert type(opt.param_groups[0]["lr"]) is float
        assert opt.param_groups[0]["lr"] == lr * 0.5


# (MultiStepLR looks its counter up in a Counter of milestones: a hash of the number, read
# by value, so it is a guard per value, as CosineAnnealingLR's math.cos of it)
_SCHEDULERS = {
    "step": lambda opt: llgrad.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5),
    "exponential": lambda opt: llgrad.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9),
    "warm-up lambda": lambda opt: llgrad.optim.lr_scheduler.LambdaLR(
        opt, lambda e: min(1.0, (e + 1) / 4)),
    "linear": lambda opt: llgrad.optim.lr_scheduler.LinearLR(opt, 0.25, 1.0, total_iters=4),
}


@pytest.mark.parametrize("kind", sorted(_SCHEDULERS))
def test_a_scheduler_stepped_inside_the_step(kind):
    """The scheduler's counters are number inputs written back (compile/symbolic_slots.py),
    the lr it reads a stand-in, its list of last lrs and the lr it writes graph values."""
    def make(model, opt):
        sched = _SCHEDULERS[kind](opt)

        def step(x, y):
            loss = _loss_step(model, opt, x, y)
            sched.step()
            return loss
        return step
    _run(make, [()] * 12, opt_kind="sgd", max_traces=4)


def test_a_decay_written_from_the_lr_read():
    def make(model, opt):
        def step(x, y):
            for g in opt.param_groups:
                g["lr"] = g["lr"] * 0.9
            return _loss_step(model, opt, x, y)
        return step
    _run(make, [()] * 8, max_traces=2)


def test_a_formatted_lr_is_guarded_by_value_again():
    """Reading the lr's digits reads its number: the stand-in's trace is given up, and each
    lr is a guard as before (eager's values either way)."""
    x, y = _data()
    (ma, oa), (mb, ob) = _setup("sgd"), _setup("sgd")
    logs = ([], [])

    def make(model, opt, log):
        def step(x, y):
            log.append(f"{opt.param_groups[0]['lr']:.4f}")
            return _loss_step(model, opt, x, y)
        return step
    eager = make(ma, oa, logs[0])
    compiled = llgrad.compile(make(mb, ob, logs[1]), backend="llvm")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(4):
            for o in (oa, ob):
                o.param_groups[0]["lr"] = 0.1 / (k + 1)
            _close(eager(x, y), compiled(x, y))
            _same(ma, oa, mb, ob)
    assert logs[0] == logs[1][-len(logs[0]):]
