"""A compiled training step under a learning-rate schedule: lr (and the momentum or betas
OneCycleLR cycles) are inputs of the compiled graph, read at each call, so the schedule does
not trace the step again; the results equal eager's (and PyTorch's); a read of the lr by the
user's code inside the step makes it a guard again; a write to it inside the step runs the
call eagerly; the groups stay dicts to the user (state_dict, copies, pickling, equality)."""
import copy
import json
import pickle
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime.hypers import ParamGroup

OPTIMISERS = {
    "sgd": lambda L, ps: L.optim.SGD(ps, lr=0.1, momentum=0.9),
    "nesterov": lambda L, ps: L.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True,
                                          weight_decay=1e-3),
    "adam": lambda L, ps: L.optim.Adam(ps, lr=1e-2, weight_decay=1e-2),
    "adamw": lambda L, ps: L.optim.AdamW(ps, lr=1e-2),
}
SCHEDULES = {
    "cosine": lambda L, o: L.optim.lr_scheduler.CosineAnnealingLR(o, T_max=20),
    "onecycle": lambda L, o: L.optim.lr_scheduler.OneCycleLR(o, max_lr=0.05, total_steps=30),
}


def _data():
    rng = np.random.default_rng(1)
    return (rng.standard_normal((16, 4)).astype(np.float32),
            rng.standard_normal((16, 2)).astype(np.float32))


def _train(lib, opt_name, sched_name, compiled, steps=12):
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.Tanh(), lib.nn.Linear(8, 2))
    if lib is not llgrad:
        model.load_state_dict({k: lib.tensor(v) for k, v in _WEIGHTS.items()})
    else:
        model.load_state_dict({k: llgrad.tensor(v) for k, v in _WEIGHTS.items()})
    opt = OPTIMISERS[opt_name](lib, model.parameters())
    sched = SCHEDULES[sched_name](lib, opt)
    x, y = (lib.tensor(a) for a in _data())

    def step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    f = llgrad.compile(step) if compiled else step
    losses = []
    for _ in range(steps):
        losses.append(f(x, y).item())
        sched.step()
    params = [p.detach().numpy().copy() for p in model.parameters()]
    return np.array(losses), params, (f.n_traces if compiled else None), opt


_WEIGHTS = {k: v.detach().numpy().copy() for k, v in
            llgrad.nn.Sequential(llgrad.nn.Linear(4, 8), llgrad.nn.Tanh(),
                                 llgrad.nn.Linear(8, 2)).state_dict().items()}


@pytest.mark.parametrize("sched_name", sorted(SCHEDULES))
@pytest.mark.parametrize("opt_name", sorted(OPTIMISERS))
def test_a_schedule_does_not_trace_the_step_again(opt_name, sched_name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # (no recompile limit, no fallback)
        got = _train(llgrad, opt_name, sched_name, compiled=True)
    want = _train(llgrad, opt_name, sched_name, compiled=False)
    assert got[2] <= 2          # (the first step makes .grad and the state: one more trace)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-7)
    for a, b in zip(got[1], want[1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.torch
@pytest.mark.parametrize("opt_name", ["nesterov", "adamw"])
def test_a_compiled_step_under_onecycle_matches_torch(opt_name):
    torch = pytest.importorskip("torch")
    got = _train(llgrad, opt_name, "onecycle", compiled=True)
    want = _train(torch, opt_name, "onecycle", compiled=False)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-6)
    for a, b in zip(got[1], want[1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


# the other optimisers read their lr at each call too (their betas/momentum stay guards)
LR_ONLY = {
    "nadam": lambda L, ps: L.optim.NAdam(ps, lr=1e-2, weight_decay=1e-3),
    "nadamw": lambda L, ps: L.optim.NAdam(ps, lr=1e-2, weight_decay=1e-2,
                                          decoupled_weight_decay=True),
    "radam": lambda L, ps: L.optim.RAdam(ps, lr=1e-2, weight_decay=1e-3),
    "rmsprop": lambda L, ps: L.optim.RMSprop(ps, lr=1e-2),
    "rmsprop_momentum": lambda L, ps: L.optim.RMSprop(ps, lr=1e-2, momentum=0.9,
                                                      centered=True),
    "adagrad": lambda L, ps: L.optim.Adagrad(ps, lr=0.1, lr_decay=0.01),
    "adamax": lambda L, ps: L.optim.Adamax(ps, lr=1e-2),
    "adadelta": lambda L, ps: L.optim.Adadelta(ps, lr=0.5),
}


@pytest.mark.parametrize("opt_name", sorted(LR_ONLY))
def test_a_schedule_does_not_trace_the_other_optimisers_again(opt_name, monkeypatch):
    monkeypatch.setitem(OPTIMISERS, opt_name, LR_ONLY[opt_name])
    test_a_schedule_does_not_trace_the_step_again(opt_name, "cosine")


@pytest.mark.torch
@pytest.mark.parametrize("opt_name", ["nadam", "radam", "rmsprop_momentum", "adagrad"])
def test_the_other_optimisers_under_a_schedule_match_torch(opt_name, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setitem(OPTIMISERS, opt_name, LR_ONLY[opt_name])
    got = _train(llgrad, opt_name, "cosine", compiled=True)
    want = _train(torch, opt_name, "cosine", compiled=False)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-6)
    for a, b in zip(got[1], want[1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def _setup():
    llgrad.manual_seed(0)
    w = llgrad.nn.Parameter(llgrad.tensor([[0.5, -1.0]]))
    opt = llgrad.optim.SGD([w], lr=0.1)
    x = llgrad.tensor([[1.0, 2.0], [3.0, -1.0]])
    return w, opt, x


def test_the_lr_read_by_the_step_itself_is_an_input(monkeypatch):
    """The user's own read of the lr inside the step is a stand-in of its input
    (runtime/hypers.py): each new lr runs the same entry, with eager's numbers."""
    # (builds on the caller's thread: in the background mode calls made while an entry
    # builds run eagerly instead of tracing, and the count below is the traces')
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    for compiled in (False, True):
        w, opt, x = _setup()

        def step(x):
            opt.zero_grad()
            loss = (x @ w.t()).pow(2).mean()
            loss.backward()
            opt.step()
            return loss * opt.param_groups[0]["lr"]     # (the user's own read)
        f = llgrad.compile(step) if compiled else step
        out = []
        for k in range(5):
            out.append(f(x).item())
            opt.param_groups[0]["lr"] = 0.1 / (k + 2)
        if compiled:
            assert f.n_traces <= 2          # (not a trace per lr, as a guard would be)
            np.testing.assert_allclose(out, want, rtol=1e-6)
            np.testing.assert_allclose(w.detach().numpy(), w_want, rtol=1e-6)
        else:
            want, w_want = out, w.detach().numpy().copy()


def test_a_scheduler_stepped_inside_the_step_gives_eager_results():
    """The scheduler's lr write is replayed (tests/compile/test_hyper_writes.py), its step
    counter (last_epoch) is a number input written back (compile/symbolic_slots.py), the
    lr it reads a stand-in: the step stays compiled, with eager's numbers."""
    results = []
    for compiled in (False, True):
        w, opt, x = _setup()
        sched = llgrad.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

        def step(x):
            opt.zero_grad()
            loss = (x @ w.t()).pow(2).mean()
            loss.backward()
            opt.step()
            sched.step()                    # (writes param_groups[0]['lr'])
            return loss
        f = llgrad.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            losses = [f(x).item() for _ in range(4)]
        results.append((losses, opt.param_groups[0]["lr"], w.detach().numpy().copy()))
        if compiled:
            assert f.entries and f.n_traces <= 3
    assert results[0][0] == results[1][0] and results[0][1] == results[1][1]
    np.testing.assert_array_equal(results[0][2], results[1][2])


def test_momentum_turned_on_traces_again():
    out = []
    for compiled in (False, True):
        w, opt, x = _setup()

        def step(x):
            opt.zero_grad()
            loss = (x @ w.t()).pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        f = llgrad.compile(step) if compiled else step
        losses = []
        for k in range(6):
            opt.param_groups[0]["momentum"] = 0.0 if k < 3 else 0.5 + 0.1 * k
            losses.append(f(x).item())
        out.append((losses, w.detach().numpy().copy()))
    np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-6)
    np.testing.assert_allclose(out[1][1], out[0][1], rtol=1e-6)


def test_groups_stay_dicts():
    w, opt, _ = _setup()
    g = opt.param_groups[0]
    assert isinstance(g, dict) and type(g) is ParamGroup and g.dynamic == {"lr", "momentum"}
    assert g == dict(g) and {**g}["lr"] == 0.1 and g.get("lr") == 0.1
    assert repr(g) == repr(dict(g))
    json.dumps({k: v for k, v in g.items() if k != "params"})
    sd = opt.state_dict()
    assert type(sd["param_groups"][0]) is dict
    opt2 = llgrad.optim.SGD([w], lr=0.5)
    opt2.load_state_dict(sd)
    assert type(opt2.param_groups[0]) is ParamGroup and opt2.param_groups[0]["lr"] == 0.1
    for other in (copy.deepcopy(opt), pickle.loads(pickle.dumps(opt))):
        assert type(other.param_groups[0]) is ParamGroup
        assert other.param_groups[0].dynamic == g.dynamic and other.param_groups[0]["lr"] == 0.1
    g.update(lr=0.3)
    assert g["lr"] == 0.3 and g.setdefault("lr", 1.0) == 0.3
    opt.add_param_group({"params": [llgrad.nn.Parameter(llgrad.ones(2))], "lr": 0.01})
    assert type(opt.param_groups[1]) is ParamGroup


def test_llgrads_own_read_of_the_lr_inside_the_step_is_a_guard_too():
    """optimizer.state_dict() inside the step reads the lr through the group (llgrad's
    code, not the guard machinery): a guard, so a new lr is not served a stale value."""
    results = []
    for compiled in (False, True):
        w = llgrad.nn.Parameter(llgrad.tensor([[0.5, -1.0]]))
        opt = llgrad.optim.SGD([w], lr=0.02)
        x = llgrad.tensor([[1.0, 2.0]])

        def step(x):
            opt.zero_grad()
            loss = ((x @ w.t()) - 3).pow(2).mean()
            loss.backward()
            opt.step()
            return loss * opt.state_dict()["param_groups"][0]["lr"]
        f = llgrad.compile(step) if compiled else step
        out = []
        for k in range(5):
            out.append(f(x).item())
            opt.param_groups[0]["lr"] = 0.02 / (k + 2)
        results.append(out)
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)


def test_a_tensor_if_in_the_step_leaves_the_groups_untouched():
    """The branch eager does not take is traced with its Python effects put back (the
    snapshot restores every container, the optimiser's groups among them): that restore is
    not a write of the lr inside the step (it ran the step eagerly, with a warning)."""
    results = []
    for compiled in (False, True):
        w, opt, x = _setup()
        sched = llgrad.optim.lr_scheduler.ExponentialLR(opt, gamma=0.7)

        def step(x):
            opt.zero_grad()
            loss = (x @ w.t()).pow(2).mean()
            if loss > 1.0:                  # (a tensor condition: both branches traced)
                loss = loss * 0.5
            loss.backward()
            opt.step()
            return loss
        f = llgrad.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            losses = []
            for _ in range(6):
                losses.append(f(x).item())
                sched.step()
        results.append((losses, w.detach().numpy().copy()))
        if compiled:
            assert f.n_traces <= 2 and f.entries
    assert min(results[0][0]) < 1.0 < max(results[0][0])    # (both branches ran)
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-6)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-6)
