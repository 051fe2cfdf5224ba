"""The optimisers RMSprop, Adagrad, Adadelta, Adamax, NAdam and RAdam and the schedulers
LambdaLR, MultiStepLR, ExponentialLR, LinearLR, OneCycleLR, SequentialLR and
ReduceLROnPlateau: 20-step trajectories, state dicts and learning-rate sequences against
torch.optim (when installed), argument errors as PyTorch words them, and the optimisers
inside a compiled training step (equal to eager, without re-tracing per step)."""
import functools
import math
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.optim as optim

RNG = np.random.default_rng(0)
SHAPES = {"w1": (4, 5), "b1": (5,), "w2": (5, 3), "b2": (3,), "unused": (2,)}
INIT = {k: RNG.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}
X = RNG.standard_normal((8, 4)).astype(np.float32)
Y = RNG.standard_normal((8, 3)).astype(np.float32)
STEPS = 20


def _torch():
    return pytest.importorskip("torch")


def make_params(lib, arrays=None):
    arrays = [INIT[k] for k in SHAPES] if arrays is None else arrays
    return [lib.tensor(np.array(a, dtype=np.float32), requires_grad=True) for a in arrays]


def loss_fn(params, x, y):
    """A small MLP with a quadratic penalty; the last parameter is unused (grad None)."""
    w1, b1, w2, b2, _ = params
    h = (x @ w1 + b1).tanh()
    return ((h @ w2 + b2 - y) ** 2).mean() + 0.05 * (w1 * w1).sum()


def groups_of(params, grouped, lr2=0.03):
    if not grouped:
        return params
    return [{"params": params[:2]}, {"params": params[2:], "lr": lr2}]


def lr2_of(name):
    """The second group's lr: RMSprop's steps are ~lr / sqrt(1 - alpha) from the start, so a
    large one makes parameters jump across zero and the float32 trajectories (each library
    rounding its own way) drift apart faster than rtol=1e-5 allows."""
    return 0.003 if name == "RMSprop" else 0.03


def train(lib, opt, params, steps, sched=None, metric=False):
    x, y = lib.tensor(X), lib.tensor(Y)
    traj = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(params, x, y)
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step(loss.item()) if metric else sched.step()
        traj.append([p.detach().numpy().copy() for p in params]
                    + [[float(g["lr"]) for g in opt.param_groups]])
    return traj


def assert_traj_close(a, b):
    assert len(a) == len(b)
    for step, (ps, qs) in enumerate(zip(a, b)):
        for i, (p, q) in enumerate(zip(ps, qs)):
            np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6,
                                       err_msg=f"step {step + 1}, parameter {i}")


CASES = [
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.001, momentum=0.9, centered=True)),
    ("RMSprop", dict(lr=0.002, momentum=0.5, maximize=True)),
    ("Adagrad", dict()),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.1)),
    ("Adagrad", dict(lr=0.05, eps=1e-6, maximize=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1)),
    ("Adadelta", dict(maximize=True)),
    ("Adamax", dict()),
    ("Adamax", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1)),
    ("Adamax", dict(lr=0.01, maximize=True)),
    ("NAdam", dict()),
    ("NAdam", dict(lr=0.01, momentum_decay=0.01, weight_decay=0.1)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("NAdam", dict(lr=0.01, betas=(0.5, 0.9), maximize=True)),
    ("RAdam", dict()),
    ("RAdam", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.01, maximize=True)),
]
CASE_IDS = [f"{n}-" + "-".join(f"{k}={v}" for k, v in kw.items()) for n, kw in CASES]


# ---- against torch -------------------------------------------------------------------------------

@pytest.mark.parametrize("name,kwargs", CASES, ids=CASE_IDS)
def test_trajectory_and_state_dict_match_torch(name, kwargs):
    """20 steps on two parameter groups (one parameter never gets a gradient): the same
    parameters each step, the same param_groups, state keys, dtypes and values."""
    torch = _torch()
    runs = {}
    for lib in (llgrad, torch):
        params = make_params(lib)
        opt = getattr(lib.optim, name)(groups_of(params, True, lr2_of(name)), **kwargs)
        runs[lib.__name__] = (params, opt, train(lib, opt, params, STEPS))
    (params, opt, traj), (_, topt, ttraj) = runs["llgrad"], runs["torch"]
    assert_traj_close(traj, ttraj)
    assert params[-1].grad is None and len(opt.state) == len(topt.state)

    sd, tsd = opt.state_dict(), topt.state_dict()
    assert [list(g) for g in sd["param_groups"]] == [list(g) for g in tsd["param_groups"]]
    assert sd["param_groups"] == tsd["param_groups"]
    assert list(sd["state"]) == list(tsd["state"])
    for i, tstate in tsd["state"].items():
        assert list(sd["state"][i]) == list(tstate)
        for key, tvalue in tstate.items():
            value = sd["state"][i][key]
            assert isinstance(value, llgrad.Tensor)
            assert value.dtype.name == str(tvalue.dtype).split(".")[1]
            assert tuple(value.shape) == tuple(tvalue.shape)
            np.testing.assert_allclose(value.detach().numpy(), tvalue.numpy(), rtol=1e-5,
                                       atol=1e-7, err_msg=f"state[{i}][{key!r}]")


def _to_lib(lib, sd):
    state = {i: {k: lib.tensor(np.array(v.numpy())) for k, v in s.items()}
             for i, s in sd["state"].items()}
    return {"state": state, "param_groups": [dict(g) for g in sd["param_groups"]]}


@pytest.mark.parametrize("direction", ["torch->llgrad", "llgrad->torch"])
@pytest.mark.parametrize("name,kwargs", [CASES[i] for i in (2, 5, 8, 11, 15, 18)],
                         ids=[CASE_IDS[i] for i in (2, 5, 8, 11, 15, 18)])
def test_state_dict_loads_across_libraries(name, kwargs, direction):
    """Ten steps in one library, the state dict loaded into a fresh optimiser of the other
    (made with another lr), ten more steps in both: one trajectory."""
    torch = _torch()
    src, dst = (torch, llgrad) if direction == "torch->llgrad" else (llgrad, torch)
    params = make_params(src)
    opt = getattr(src.optim, name)(groups_of(params, True, lr2_of(name)), **kwargs)
    train(src, opt, params, 10)
    dparams = make_params(dst, [p.detach().numpy() for p in params])
    dopt = getattr(dst.optim, name)(groups_of(dparams, True), **dict(kwargs, lr=123.0))
    dopt.load_state_dict(_to_lib(dst, opt.state_dict()))
    assert [g["lr"] for g in dopt.param_groups] == [g["lr"] for g in opt.param_groups]
    assert_traj_close(train(dst, dopt, dparams, 10), train(src, opt, params, 10))


BAD_ARGS = [
    ("RMSprop", dict(lr=-1.0)), ("RMSprop", dict(eps=-1.0)), ("RMSprop", dict(momentum=-1.0)),
    ("RMSprop", dict(weight_decay=-1.0)), ("RMSprop", dict(alpha=-1.0)),
    ("Adagrad", dict(lr_decay=-1.0)), ("Adagrad", dict(initial_accumulator_value=-1.0)),
    ("Adagrad", dict(eps=-1.0)), ("Adadelta", dict(rho=1.5)), ("Adadelta", dict(eps=-1.0)),
    ("Adamax", dict(betas=(1.0, 0.9))), ("Adamax", dict(betas=(0.9, -0.1))),
    ("NAdam", dict(momentum_decay=-1.0)), ("NAdam", dict(weight_decay=-1.0)),
    ("RAdam", dict(betas=(0.9, 1.0))), ("RAdam", dict(eps=-1.0)),
]


@pytest.mark.parametrize("name,kwargs", BAD_ARGS,
                         ids=[f"{n}-{kw}" for n, kw in BAD_ARGS])
def test_invalid_arguments_raise_as_torch(name, kwargs):
    torch = _torch()
    messages = []
    for lib in (llgrad, torch):
        with pytest.raises(ValueError) as info:
            getattr(lib.optim, name)(make_params(lib), **kwargs)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_tensor_lr_must_have_one_element():
    with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
        optim.RMSprop(make_params(llgrad), lr=llgrad.tensor([0.1, 0.2]))


def test_adagrad_makes_its_state_at_construction():
    params = make_params(llgrad)
    opt = optim.Adagrad(params, initial_accumulator_value=0.5)
    assert len(opt.state) == len(params)
    s = opt.state[params[0]]
    assert list(s) == ["step", "sum"] and s["step"].item() == 0.0
    np.testing.assert_array_equal(s["sum"].numpy(), np.full(SHAPES["w1"], 0.5, np.float32))


def test_old_checkpoints_with_number_steps_are_converted():
    params = make_params(llgrad)
    opt = optim.NAdam(params, lr=0.01)
    train(llgrad, opt, params, 2)
    sd = opt.state_dict()
    for s in sd["state"].values():
        s["step"], s["mu_product"] = float(s["step"].item()), float(s["mu_product"].item())
    fresh = optim.NAdam(params, lr=0.01)
    fresh.load_state_dict(sd)
    for s in fresh.state.values():
        assert isinstance(s["step"], llgrad.Tensor) and isinstance(s["mu_product"], llgrad.Tensor)
    train(llgrad, fresh, params, 1)


# ---- compiled training steps --------------------------------------------------------------------

COMPILED = [("RMSprop", dict(lr=0.003, momentum=0.9, centered=True, weight_decay=0.1)),
            ("Adagrad", dict(lr=0.1, lr_decay=0.01)),
            ("Adadelta", dict(weight_decay=0.1)),
            ("Adamax", dict(lr=0.01)),
            ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
            ("RAdam", dict(lr=0.01, weight_decay=0.1))]


@pytest.mark.parametrize("name,kwargs", COMPILED, ids=[n for n, _ in COMPILED])
def test_compiled_training_step_equals_eager(name, kwargs):
    """zero_grad / forward / backward / clip_grad_norm_ / step under llgrad.compile: the
    parameters and state follow the eager run (within float32 rounding: fused loops round
    differently) over 8 steps, and the step is traced at most twice (before and after the
    state exists): the step count and RAdam's rectification switch (after step 5) are
    tensors, not value guards."""
    x, y = llgrad.tensor(X), llgrad.tensor(Y)

    def step(params, opt):
        opt.zero_grad()
        loss = loss_fn(params, x, y)
        loss.backward()
        norm = llgrad.nn.utils.clip_grad_norm_(params, 5.0)
        opt.step()
        return loss.detach(), norm

    compiled = llgrad.compile(step)
    close = functools.partial(np.testing.assert_allclose, rtol=1e-5, atol=1e-6)
    runs = []
    for fn in (step, compiled):
        params = make_params(llgrad)
        opt = getattr(optim, name)(params, **kwargs)
        with warnings.catch_warnings():
            warnings.simplefilter("error")          # no graph break, no recompile warning
            out = [[v.item() for v in fn(params, opt)] for _ in range(8)]
        runs.append((out, [p.detach().numpy().copy() for p in params], opt.state_dict()))
    (out, params, sd), (cout, cparams, csd) = runs
    assert compiled.n_traces <= 2
    close(out, cout)
    for p, q in zip(params, cparams):
        close(p, q)
    for i, state in sd["state"].items():
        for key, value in state.items():
            close(value.numpy(), csd["state"][i][key].numpy())


def test_compiled_step_with_a_tensor_lr_and_a_scheduler_does_not_retrace():
    """A learning rate held in a tensor is filled in place by the scheduler (as PyTorch
    does): the compiled step reads it at each call, so a changing schedule traces nothing
    new, and the run equals the eager one."""
    x, y = llgrad.tensor(X), llgrad.tensor(Y)

    def step(params, opt):
        opt.zero_grad()
        loss = loss_fn(params, x, y)
        loss.backward()
        opt.step()
        return loss.detach()

    compiled = llgrad.compile(step)
    runs = []
    for fn in (step, compiled):
        params = make_params(llgrad)
        opt = optim.NAdam(params, lr=llgrad.tensor(0.02))
        lr = opt.param_groups[0]["lr"]
        sched = optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=12,
                                              cycle_momentum=False)
        losses = []
        for _ in range(12):
            losses.append(fn(params, opt).item())
            sched.step() if len(losses) < 12 else None
        assert opt.param_groups[0]["lr"] is lr               # filled in place
        runs.append((losses, [p.detach().numpy().copy() for p in params]))
    assert compiled.n_traces <= 2
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-5, atol=1e-6)
    for p, q in zip(runs[0][1], runs[1][1]):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)


# ---- schedulers ----------------------------------------------------------------------------------

class _Warmup:
    """A callable object as lr_lambda: its __dict__ is what state_dict saves."""

    def __init__(self, n):
        self.n = n

    def __call__(self, epoch):
        return min(1.0, (epoch + 1) / self.n)


def _make_scheduler(lib, opt, name, kwargs):
    S = lib.optim.lr_scheduler
    if name == "SequentialLR":
        first, second = kwargs["parts"]
        return S.SequentialLR(opt, [getattr(S, first[0])(opt, **first[1]),
                                    getattr(S, second[0])(opt, **second[1])],
                              milestones=kwargs["milestones"])
    if name == "LambdaLR" and kwargs.get("per_group"):
        return S.LambdaLR(opt, [lambda e: 0.9 ** e, _Warmup(4)])
    if name == "LambdaLR":
        return S.LambdaLR(opt, lambda e: 1.0 / (1 + e))
    return getattr(S, name)(opt, **kwargs)


SCHEDULERS = [
    ("LambdaLR", dict()),
    ("LambdaLR", dict(per_group=True)),
    ("MultiStepLR", dict(milestones=[3, 7, 7, 15])),
    ("MultiStepLR", dict(milestones=[5, 10], gamma=0.5)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("LinearLR", dict()),
    ("LinearLR", dict(start_factor=0.1, end_factor=0.8, total_iters=12)),
    ("OneCycleLR", dict(max_lr=0.5, total_steps=30)),
    ("OneCycleLR", dict(max_lr=[0.5, 0.2], epochs=3, steps_per_epoch=10,
                        anneal_strategy="linear", three_phase=True)),
    ("OneCycleLR", dict(max_lr=0.4, total_steps=26, pct_start=0.5, base_momentum=0.8,
                        max_momentum=0.9, div_factor=10.0, final_div_factor=100.0)),
    ("SequentialLR", dict(parts=[("LinearLR", dict(start_factor=0.2, total_iters=4)),
                                 ("ExponentialLR", dict(gamma=0.8))], milestones=[5])),
    ("SequentialLR", dict(parts=[("ExponentialLR", dict(gamma=0.9)),
                                 ("MultiStepLR", dict(milestones=[4, 8]))], milestones=[10])),
]
SCHED_IDS = [f"{n}-{i}" for i, (n, _) in enumerate(SCHEDULERS)]


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
@pytest.mark.parametrize("name,kwargs", SCHEDULERS, ids=SCHED_IDS)
def test_scheduler_sequence_matches_torch(name, kwargs, opt_name):
    """25 steps on two parameter groups: get_last_lr() and the groups' lr (and OneCycleLR's
    momentum / betas) equal PyTorch's, and so do state_dict()'s keys and values."""
    torch = _torch()
    out = {}
    for lib in (llgrad, torch):
        params = make_params(lib)
        groups = [{"params": params[:2]}, {"params": params[2:], "lr": 0.05}]
        opt = lib.optim.SGD(groups, lr=0.1, momentum=0.9) if opt_name == "SGD" else \
            lib.optim.Adam(groups, lr=0.1)
        sched = _make_scheduler(lib, opt, name, kwargs)
        seq = [(sched.get_last_lr(), [g.get("momentum", g.get("betas")) for g in
                                      opt.param_groups])]
        for _ in range(25 if name != "OneCycleLR" else sched.total_steps - 1):
            opt.step()
            sched.step()
            seq.append((sched.get_last_lr(), [g.get("momentum", g.get("betas"))
                                              for g in opt.param_groups]))
            assert seq[-1][0] == [g["lr"] for g in opt.param_groups]
        out[lib.__name__] = (seq, sched.state_dict(), opt.param_groups)
    (seq, sd, groups), (tseq, tsd, tgroups) = out["llgrad"], out["torch"]
    assert seq == tseq
    assert list(sd) == list(tsd)
    strip = ("_schedulers", "lr_lambdas")
    assert {k: v for k, v in sd.items() if k not in strip} == \
        {k: v for k, v in tsd.items() if k not in strip}
    if name == "SequentialLR":
        for a, b in zip(sd["_schedulers"], tsd["_schedulers"]):
            assert a == b
    if name == "LambdaLR":
        assert sd["lr_lambdas"] == tsd["lr_lambdas"]
    for g, tg in zip(groups, tgroups):
        assert {k: v for k, v in g.items() if k != "params"} == \
            {k: v for k, v in tg.items() if k != "params"}


PLATEAU = [dict(), dict(mode="max", factor=0.5, patience=2),
           dict(patience=1, threshold=0.1, threshold_mode="abs", cooldown=2),
           dict(factor=0.3, patience=0, min_lr=[0.01, 0.002], eps=1e-4)]


@pytest.mark.parametrize("kwargs", PLATEAU, ids=[str(k) for k in PLATEAU])
def test_reduce_lr_on_plateau_matches_torch(kwargs):
    torch = _torch()
    metrics = [1.0, 0.9, 0.95, 0.95, 0.89, 0.9, 0.91, 0.92, 0.93, 0.5, 0.51, 0.52, 0.6, 0.7,
               0.2, 0.21, 0.22, 0.23, 0.24, 0.25, 0.26, 0.27, 0.28, 0.29, 0.3]
    if kwargs.get("mode") == "max":
        metrics = [-m for m in metrics]
    out = []
    for lib in (llgrad, torch):
        params = make_params(lib)
        opt = lib.optim.SGD([{"params": params[:2]}, {"params": params[2:], "lr": 0.05}],
                            lr=0.1)
        sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
        seq = []
        for m in metrics:
            sched.step(m)
            seq.append((sched.get_last_lr(), sched.num_bad_epochs, sched.cooldown_counter))
        out.append((seq, sched.state_dict()))
    assert out[0][0] == out[1][0]
    assert out[0][1] == out[1][1]


@pytest.mark.parametrize("name,kwargs,sched_name,sched_kwargs,metric", [
    ("Adam", dict(lr=0.05), "OneCycleLR", dict(max_lr=0.05, total_steps=STEPS + 1), False),
    ("RMSprop", dict(lr=0.001, momentum=0.5), "OneCycleLR",
     dict(max_lr=0.003, total_steps=STEPS + 1, anneal_strategy="linear"), False),
    ("NAdam", dict(lr=0.02), "ReduceLROnPlateau", dict(patience=1, factor=0.5), True),
    ("RAdam", dict(lr=0.05), "LinearLR", dict(start_factor=0.5, total_iters=10), False),
    ("Adamax", dict(lr=0.05), "MultiStepLR", dict(milestones=[5, 12]), False),
])
def test_training_with_scheduler_matches_torch(name, kwargs, sched_name, sched_kwargs,
                                               metric):
    torch = _torch()
    trajs = []
    for lib in (llgrad, torch):
        params = make_params(lib)
        opt = getattr(lib.optim, name)(params, **kwargs)
        sched = getattr(lib.optim.lr_scheduler, sched_name)(opt, **sched_kwargs)
        trajs.append(train(lib, opt, params, STEPS, sched, metric))
    assert_traj_close(*trajs)


def test_tensor_lr_schedules_match_torch():
    """A tensor lr: the same values as PyTorch's, filled in place; get_last_lr() copies."""
    torch = _torch()
    seqs = []
    for lib in (llgrad, torch):
        params = make_params(lib)
        opt = lib.optim.Adam(params, lr=lib.tensor(0.1))
        lr = opt.param_groups[0]["lr"]
        S = lib.optim.lr_scheduler
        sched = S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.5, total_iters=3),
                                     S.ExponentialLR(opt, gamma=0.7)], milestones=[4])
        seq = []
        for _ in range(10):
            opt.step()
            sched.step()
            last = sched.get_last_lr()[0]
            assert isinstance(last, lib.Tensor) and last is not lr
            seq.append(float(last))
        assert opt.param_groups[0]["lr"] is lr
        seqs.append(seq)
    np.testing.assert_allclose(seqs[0], seqs[1], rtol=1e-6)


def test_scheduler_errors_and_warnings():
    params = make_params(llgrad)
    opt = optim.SGD(params, lr=0.1)
    S = optim.lr_scheduler
    with pytest.raises(ValueError, match="Expected 1 lr_lambdas, but got 2"):
        S.LambdaLR(opt, [lambda e: 1, lambda e: 1])
    with pytest.raises(ValueError, match="Starting multiplicative factor expected"):
        S.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match="Factor should be < 1.0."):
        S.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="mode foo is unknown!"):
        S.ReduceLROnPlateau(opt, mode="foo")
    with pytest.raises(ValueError, match="You must define either total_steps OR"):
        S.OneCycleLR(opt, max_lr=0.1)
    with pytest.raises(ValueError, match="Expected float between 0 and 1 pct_start"):
        S.OneCycleLR(opt, max_lr=0.1, total_steps=10, pct_start=2)
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        S.OneCycleLR(optim.Adagrad(params), max_lr=0.1, total_steps=10)
    one = S.OneCycleLR(opt, max_lr=0.1, total_steps=2)
    for _ in range(2):
        opt.step()
        one.step()
    with pytest.raises(ValueError, match="Tried to step 3 times. The specified number of "
                                         "total steps is 2"):
        one.step()
    plateau = S.ReduceLROnPlateau(optim.SGD(params, lr=0.1), patience=0)
    plateau.step(llgrad.tensor(1.0))            # a 0-d tensor metric, as loss.detach()
    plateau.step(llgrad.tensor(2.0))
    assert plateau.get_last_lr() == [pytest.approx(0.01)]
    opt = optim.SGD(params, lr=0.1)
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        S.SequentialLR(opt, [S.ExponentialLR(opt, 0.9), S.ReduceLROnPlateau(opt)], [3])
    with pytest.raises(ValueError, match="expects number of schedulers provided to be one more"):
        S.SequentialLR(opt, [S.ExponentialLR(opt, 0.9)], [3])
    with pytest.raises(KeyError, match="param 'initial_lr' is not specified in param_groups"):
        S.MultiStepLR(optim.SGD(params, lr=0.1), [2], last_epoch=3)
    sched = S.ExponentialLR(opt, 0.5)
    with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step\\(\\)`"):
        sched.step(3)                       # the closed form: 0.1 * 0.5 ** 3
    assert sched.get_last_lr() == [pytest.approx(0.1 * 0.5 ** 3)]
    with pytest.warns(UserWarning, match="get_last_lr"):
        sched.get_lr()


def test_scheduler_state_dict_round_trip():
    params = make_params(llgrad)
    opt = optim.SGD(params, lr=0.1, momentum=0.9)
    S = optim.lr_scheduler
    sched = S.LambdaLR(opt, _Warmup(5))
    for _ in range(3):
        opt.step()
        sched.step()
    sd = sched.state_dict()
    assert sd["lr_lambdas"] == [{"n": 5}] and "optimizer" not in sd
    warm = _Warmup(99)
    other = S.LambdaLR(optim.SGD(params, lr=0.1), warm)
    other.load_state_dict(sd)
    assert warm.n == 5 and other.last_epoch == 3 and other.get_last_lr() == sched.get_last_lr()
    plateau = S.ReduceLROnPlateau(opt, mode="max")
    plateau.step(1.0)
    again = S.ReduceLROnPlateau(opt)
    again.load_state_dict(plateau.state_dict())
    assert again.mode == "max" and again.best == 1.0 and math.isinf(again.mode_worse)
