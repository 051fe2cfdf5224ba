"""llgrad.optim: hand-computed steps, zero_grad and state_dict semantics (always), and
trajectories, state dicts and learning-rate sequences against torch.optim (when installed).
Both libraries start from the same parameters and compute their own losses, so each step's
gradients are those of the same problem in each library."""
import functools
import pickle

import numpy as np
import pytest

import llgrad
import llgrad.optim as optim

RNG = np.random.default_rng(0)
SHAPES = {"w1": (4, 5), "b1": (5,), "w2": (5, 3), "b2": (3,), "unused": (2,)}
INIT = {k: RNG.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}
X = RNG.standard_normal((8, 4)).astype(np.float32)
Y = RNG.standard_normal((8, 3)).astype(np.float32)


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


def groups_of(params, grouped):
    if not grouped:
        return params
    return [{"params": params[:2]}, {"params": params[2:], "lr": 0.03}]


def train(lib, opt, params, steps, sched=None):
    x, y = lib.tensor(X), lib.tensor(Y)
    traj = []
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(params, x, y).backward()
        opt.step()
        if sched is not None:
            sched.step()
        traj.append([p.detach().numpy().copy() for p in params])
    return traj


def numpy_of(t):
    return t.detach().numpy()


def assert_traj_close(a, b):
    for step, (ps, qs) in enumerate(zip(a, b)):
        for i, (p, q) in enumerate(zip(ps, qs)):
            np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6,
                                       err_msg=f"step {step + 1}, parameter {i}")


CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.5)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.5, weight_decay=0.1, maximize=True)),
    ("SGD", dict(lr=0.05, weight_decay=0.1)),
    ("Adam", dict()),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6)),
    ("Adam", dict(lr=0.01, betas=(0.3, 0.5))),
    ("Adam", dict(lr=0.01, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.05, maximize=True)),
    ("AdamW", dict()),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, amsgrad=True)),
    ("AdamW", dict(lr=0.01, weight_decay=0.0, maximize=True)),
]
CASE_IDS = [f"{n}-" + "-".join(f"{k}={v}" for k, v in kw.items()) for n, kw in CASES]


# ---- against torch -------------------------------------------------------------------------------

@pytest.mark.parametrize("grouped", [False, True], ids=["one-group", "two-groups"])
@pytest.mark.parametrize("name,kwargs", CASES, ids=CASE_IDS)
def test_trajectory_and_state_dict_match_torch(name, kwargs, grouped):
    torch = _torch()
    runs = {}
    for lib in (llgrad, torch):
        params = make_params(lib)
        opt = getattr(lib.optim, name)(groups_of(params, grouped), **kwargs)
        runs[lib.__name__] = (params, opt, train(lib, opt, params, 10))
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
            np.testing.assert_allclose(numpy_of(value), tvalue.numpy(), rtol=1e-5, atol=3e-7,
                                       err_msg=f"state[{i}][{key!r}]")


@pytest.mark.parametrize("name,kwargs", CASES, ids=CASE_IDS)
def test_update_rule_on_identical_gradients_matches_torch(name, kwargs):
    """The optimiser alone: bitwise-identical gradients each step (a fixed random sequence
    plus 0.5 * p, computed in NumPy). What remains are roundings: PyTorch's CPU kernels fuse
    the multiply-add of add(alpha)/addcmul/addcdiv/lerp, NumPy rounds twice."""
    torch = _torch()
    rng = np.random.default_rng(1)
    grads = [[rng.standard_normal(a.shape).astype(np.float32) for a in INIT.values()]
             for _ in range(10)]
    trajs = []
    for lib in (llgrad, torch):
        params = make_params(lib)
        opt = getattr(lib.optim, name)(params, **kwargs)
        traj = []
        for step_grads in grads:
            for p, g in zip(params, step_grads):
                p.grad = lib.tensor(g + np.float32(0.5) * p.detach().numpy())
            opt.step()
            traj.append([p.detach().numpy().copy() for p in params])
        trajs.append(traj)
    for ps, qs in zip(*trajs):
        for p, q in zip(ps, qs):
            np.testing.assert_allclose(p, q, rtol=1e-6, atol=1e-7)


LOAD_CASES = [CASES[i] for i in (1, 3, 7, 12, 15)]
LOAD_IDS = [CASE_IDS[i] for i in (1, 3, 7, 12, 15)]


def _to_lib(lib, sd):
    """A state dict with its tensors rebuilt in `lib` (what saving and loading a file does)."""
    state = {i: {k: lib.tensor(np.array(v.numpy())) for k, v in s.items()}
             for i, s in sd["state"].items()}
    return {"state": state, "param_groups": [dict(g) for g in sd["param_groups"]]}


@pytest.mark.parametrize("direction", ["torch->llgrad", "llgrad->torch"])
@pytest.mark.parametrize("name,kwargs", LOAD_CASES, ids=LOAD_IDS)
def test_state_dict_loads_across_libraries(name, kwargs, direction):
    """Five steps in one library, its state dict loaded into a fresh optimizer of the other
    (constructed with a different lr), five more steps in both: the same trajectory."""
    torch = _torch()
    src, dst = (torch, llgrad) if direction == "torch->llgrad" else (llgrad, torch)
    params = make_params(src)
    opt = getattr(src.optim, name)(groups_of(params, True), **kwargs)
    train(src, opt, params, 5)
    dparams = make_params(dst, [p.detach().numpy() for p in params])
    dopt = getattr(dst.optim, name)(groups_of(dparams, True), **dict(kwargs, lr=123.0))
    dopt.load_state_dict(_to_lib(dst, opt.state_dict()))
    assert [g["lr"] for g in dopt.param_groups] == [g["lr"] for g in opt.param_groups]
    assert_traj_close(train(dst, dopt, dparams, 5), train(src, opt, params, 5))


SCHEDULERS = [
    ("StepLR", dict(step_size=3)),
    ("StepLR", dict(step_size=7, gamma=0.5)),
    ("CosineAnnealingLR", dict(T_max=10)),
    ("CosineAnnealingLR", dict(T_max=7, eta_min=0.01)),
]


@pytest.mark.parametrize("name,kwargs", SCHEDULERS,
                         ids=[f"{n}-{sorted(kw.items())}" for n, kw in SCHEDULERS])
def test_scheduler_lr_sequence_matches_torch(name, kwargs):
    torch = _torch()
    out = {}
    for lib in (llgrad, torch):
        params = make_params(lib)
        opt = lib.optim.SGD([{"params": params[:2]}, {"params": params[2:], "lr": 0.05}],
                            lr=0.1)
        sched = getattr(lib.optim.lr_scheduler, name)(opt, **kwargs)
        seq = [sched.get_last_lr()]
        for _ in range(25):
            opt.step()
            sched.step()
            seq.append(sched.get_last_lr())
            assert seq[-1] == [g["lr"] for g in opt.param_groups]
        out[lib.__name__] = (seq, sched.state_dict(), opt.param_groups)
    (seq, sd, groups), (tseq, tsd, tgroups) = out["llgrad"], out["torch"]
    assert len(seq) == 26
    if name == "StepLR":
        assert seq == tseq
    else:   # the closed form against PyTorch's recursive form: equal up to rounding
        for lrs, tlrs in zip(seq, tseq):
            assert lrs == pytest.approx(tlrs, rel=1e-12, abs=1e-15)
    assert list(sd) == list(tsd)
    assert {k: v for k, v in sd.items() if k != "_last_lr"} == \
        {k: v for k, v in tsd.items() if k != "_last_lr"}
    assert [g["initial_lr"] for g in groups] == [g["initial_lr"] for g in tgroups]


@pytest.mark.parametrize("name,kwargs,sched_name,sched_kwargs", [
    ("SGD", dict(lr=0.1, momentum=0.9), "StepLR", dict(step_size=3, gamma=0.5)),
    ("Adam", dict(lr=0.05), "CosineAnnealingLR", dict(T_max=4, eta_min=0.001)),
    ("AdamW", dict(lr=0.05, amsgrad=True), "StepLR", dict(step_size=2)),
])
def test_training_with_scheduler_matches_torch(name, kwargs, sched_name, sched_kwargs):
    torch = _torch()
    trajs = []
    for lib in (llgrad, torch):
        params = make_params(lib)
        opt = getattr(lib.optim, name)(params, **kwargs)
        sched = getattr(lib.optim.lr_scheduler, sched_name)(opt, **sched_kwargs)
        trajs.append(train(lib, opt, params, 10, sched))
    assert_traj_close(*trajs)


# ---- without torch ----------------------------------------------------------------------------

def _quadratic_step(opt, p):
    """loss = sum(p**2) / 2, so the gradient is p."""
    opt.zero_grad()
    ((p * p).sum() / 2).backward()
    opt.step()


def test_sgd_momentum_two_steps_by_hand():
    p = llgrad.tensor([1.0, -2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    _quadratic_step(opt, p)
    # g = [1, -2]; buf = g; p = p - 0.1 * buf
    np.testing.assert_allclose(numpy_of(p), [0.9, -1.8], rtol=1e-6)
    np.testing.assert_allclose(numpy_of(opt.state[p]["momentum_buffer"]), [1.0, -2.0])
    _quadratic_step(opt, p)
    # g = [0.9, -1.8]; buf = 0.9 * [1, -2] + g = [1.8, -3.6]; p = [0.9, -1.8] - 0.1 * buf
    np.testing.assert_allclose(numpy_of(p), [0.72, -1.44], rtol=1e-6)
    np.testing.assert_allclose(numpy_of(opt.state[p]["momentum_buffer"]), [1.8, -3.6],
                               rtol=1e-6)


def test_sgd_nesterov_weight_decay_two_steps_by_hand():
    p = llgrad.tensor([2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1, momentum=0.5, nesterov=True, weight_decay=0.5)
    _quadratic_step(opt, p)
    # g = 2 + 0.5 * 2 = 3; buf = 3; step = g + 0.5 * buf = 4.5; p = 2 - 0.45
    np.testing.assert_allclose(numpy_of(p), [1.55], rtol=1e-6)
    _quadratic_step(opt, p)
    # g = 1.55 * 1.5 = 2.325; buf = 1.5 + 2.325 = 3.825; step = 2.325 + 1.9125 = 4.2375
    np.testing.assert_allclose(numpy_of(p), [1.55 - 0.42375], rtol=1e-6)


def test_adam_two_steps_by_hand():
    # with a constant gradient g the bias-corrected moments are g and g**2 at every step, so
    # each step moves p by lr * g / (|g| + eps) = lr * sign(g)
    p = llgrad.tensor([1.0, 1.0], requires_grad=True)
    g = np.array([2.0, -0.5], dtype=np.float32)
    opt = optim.Adam([p], lr=0.1)
    for expected in ([0.9, 1.1], [0.8, 1.2]):
        p.grad = llgrad.tensor(g)
        opt.step()
        np.testing.assert_allclose(numpy_of(p), expected, rtol=1e-6)
    state = opt.state[p]
    assert list(state) == ["step", "exp_avg", "exp_avg_sq"]
    assert isinstance(state["step"], llgrad.Tensor) and state["step"].dtype == llgrad.float32
    assert state["step"].shape == () and state["step"].item() == 2.0
    # m = 0.9 * 0.1 g + 0.1 g = 0.19 g;  v = 0.999 * 0.001 g^2 + 0.001 g^2 = 0.001999 g^2
    np.testing.assert_allclose(numpy_of(state["exp_avg"]), 0.19 * g, rtol=1e-6)
    np.testing.assert_allclose(numpy_of(state["exp_avg_sq"]), 0.001999 * g * g, rtol=1e-5)


def test_adamw_decays_before_the_adam_step():
    p = llgrad.tensor([1.0, 1.0], requires_grad=True)
    opt = optim.AdamW([p], lr=0.1, weight_decay=0.5, amsgrad=True)
    p.grad = llgrad.tensor([2.0, -0.5])
    opt.step()
    # p * (1 - 0.1 * 0.5) - 0.1 * sign(g)
    np.testing.assert_allclose(numpy_of(p), [0.95 - 0.1, 0.95 + 0.1], rtol=1e-6)
    assert list(opt.state[p]) == ["step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"]
    assert opt.defaults["weight_decay"] == 0.5 and optim.AdamW([p]).defaults["weight_decay"] == 0.01


def test_zero_grad_none_and_zeros():
    p = llgrad.tensor([1.0, 2.0], requires_grad=True)
    q = llgrad.tensor([3.0], requires_grad=True)
    opt = optim.SGD([p, q], lr=0.1)
    (p.sum() * 2).backward()
    g = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is g and numpy_of(p.grad).tolist() == [0.0, 0.0]
    assert q.grad is None                       # never had a gradient: stays None
    opt.zero_grad()
    assert p.grad is None and q.grad is None


def test_zero_grad_detaches_a_grad_with_history():
    p = llgrad.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    (p * p).sum().backward(create_graph=True)
    assert p.grad.grad_fn is not None
    opt.zero_grad(set_to_none=False)
    assert p.grad.grad_fn is None and not p.grad.requires_grad
    assert numpy_of(p.grad).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("name,kwargs", [("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.1)),
                                         ("Adam", dict()), ("AdamW", dict())])
def test_parameters_without_grad_are_skipped_zero_grads_are_not(name, kwargs):
    p = llgrad.tensor([1.0, 2.0], requires_grad=True)
    q = llgrad.tensor([3.0, 4.0], requires_grad=True)
    opt = getattr(optim, name)([p, q], **kwargs)
    p.grad = llgrad.zeros(2)
    opt.step()
    assert q not in opt.state and numpy_of(q).tolist() == [3.0, 4.0]
    assert p in opt.state
    if name == "SGD" or name == "AdamW":        # weight decay moves p even at zero gradient
        assert numpy_of(p).tolist() != [1.0, 2.0]
    assert list(opt.state_dict()["state"]) == [0]


def test_step_updates_in_place_without_recording():
    p = llgrad.tensor([1.0, 2.0], requires_grad=True)
    ptr, version = p.data_ptr(), p._version
    opt = optim.Adam([p], lr=0.1, weight_decay=0.1)
    (p * p).sum().backward()
    opt.step()
    assert p.data_ptr() == ptr and p._version > version
    assert p.is_leaf and p.grad_fn is None and p.requires_grad
    assert all(not t.requires_grad for t in opt.state[p].values())
    assert llgrad.is_grad_enabled()


def test_step_closure_runs_with_grad_enabled():
    p = llgrad.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.5)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with llgrad.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 5.0
    np.testing.assert_allclose(numpy_of(p), [0.0, 0.0])


def test_param_groups_defaults_and_state_dict_format():
    a, b, c = (llgrad.tensor([float(i)], requires_grad=True) for i in range(3))
    opt = optim.SGD([{"params": [a, b]}, {"params": c, "lr": 0.5}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["params"][0] is c and opt.param_groups[1]["momentum"] == 0.9
    opt.add_param_group({"params": [llgrad.tensor([5.0], requires_grad=True)],
                         "momentum": 0.0})
    assert opt.param_groups[2]["lr"] == 0.1
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([a * 2], lr=0.1)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([a], lr=0.1, nesterov=True)
    for t in (a, c):
        t.grad = llgrad.ones(1)
    opt.step()
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2], [3]]
    assert list(sd["state"]) == [0, 2]
    assert sd["state"][0]["momentum_buffer"] is opt.state[a]["momentum_buffer"]
    assert "params" in opt.param_groups[0]       # packing does not touch the live groups
    assert opt.param_groups[0]["params"][0] is a


@pytest.mark.parametrize("name,kwargs", [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
                                         ("Adam", dict(lr=0.05, amsgrad=True)),
                                         ("AdamW", dict(lr=0.05))])
def test_state_dict_round_trip_continues_identically(name, kwargs):
    params = make_params(llgrad)
    opt = getattr(optim, name)(groups_of(params, True), **kwargs)
    train(llgrad, opt, params, 5)
    saved = pickle.loads(pickle.dumps(opt.state_dict()))      # as saving to a file does
    params2 = make_params(llgrad, [p.detach().numpy() for p in params])
    opt2 = getattr(optim, name)(groups_of(params2, True), **dict(kwargs, lr=7.0))
    opt2.load_state_dict(saved)
    assert [g["lr"] for g in opt2.param_groups] == [g["lr"] for g in opt.param_groups]
    assert all(g2["params"][0] is p for g2, p in zip(opt2.param_groups, (params2[0], params2[2])))
    assert set(map(id, opt2.state)) == {id(p) for p in params2[:4]}
    a, b = train(llgrad, opt, params, 5), train(llgrad, opt2, params2, 5)
    for ps, qs in zip(a, b):
        for p, q in zip(ps, qs):
            np.testing.assert_array_equal(p, q)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        getattr(optim, name)(params2, **kwargs).load_state_dict(saved)


def test_load_state_dict_casts_state_to_the_parameter_dtype():
    p = llgrad.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.Adam([p])
    p.grad = llgrad.ones(2)
    opt.step()
    q = llgrad.tensor([1.0, 2.0], dtype=llgrad.float64, requires_grad=True)
    opt2 = optim.Adam([q])
    opt2.load_state_dict(opt.state_dict())
    assert opt2.state[q]["exp_avg"].dtype == llgrad.float64
    assert opt2.state[q]["step"].dtype == llgrad.float32


def test_schedulers_by_hand():
    p = llgrad.tensor([1.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    lrs = [sched.get_last_lr()[0]]
    for _ in range(4):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    assert lrs == [0.1, 0.1, 0.05, 0.05, 0.025]
    assert opt.param_groups[0]["initial_lr"] == 0.1
    assert sched.state_dict()["last_epoch"] == 4 and "optimizer" not in sched.state_dict()

    opt = optim.SGD([p], lr=1.0)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2)
    lrs = [sched.get_last_lr()[0]]
    for _ in range(4):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    assert lrs == pytest.approx([1.0, 0.5, 0.0, 0.5, 1.0], abs=1e-15)

    restored = optim.lr_scheduler.CosineAnnealingLR(optim.SGD([p], lr=1.0), T_max=2)
    restored.load_state_dict(sched.state_dict())
    assert restored.last_epoch == 4 and restored.get_last_lr() == sched.get_last_lr()
    with pytest.warns(UserWarning, match="get_last_lr"):
        sched.get_lr()
    with pytest.raises(TypeError, match="not an Optimizer"):
        optim.lr_scheduler.StepLR(object(), step_size=1)


@pytest.mark.parametrize("name,kwargs", [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
                                         ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1)),
                                         ("AdamW", dict(lr=0.05))])
@pytest.mark.parametrize("backend", ["interpret", "llvm"])
def test_compiled_training_step_records_the_update(name, kwargs, backend):
    """A whole training step (zero_grad, backward, step) under llgrad.compile: the in-place
    updates are traced, the step count is read as a tensor (no value guard, so no retrace
    per step), and the parameters follow the eager run: bit for bit when interpreted (the
    same NumPy calls), within float32 rounding on llvm (fused loops round differently)."""
    x, y = llgrad.tensor(X), llgrad.tensor(Y)

    def step(params, opt):
        opt.zero_grad()
        loss = loss_fn(params, x, y)
        loss.backward()
        opt.step()
        return loss

    compiled = llgrad.compile(step, backend=backend)
    same = np.testing.assert_array_equal if backend == "interpret" else \
        functools.partial(np.testing.assert_allclose, rtol=1e-5, atol=1e-6)
    runs = []
    for fn in (step, compiled):
        params = make_params(llgrad)
        opt = getattr(optim, name)(params, **kwargs)
        losses = [fn(params, opt).item() for _ in range(6)]
        runs.append((losses, [p.detach().numpy().copy() for p in params], opt.state_dict()))
    (losses, params, sd), (closses, cparams, csd) = runs
    assert compiled.n_traces <= 2            # before and after the state exists
    same(losses, closses)
    for p, q in zip(params, cparams):
        same(p, q)
    for i, state in sd["state"].items():
        for key, value in state.items():
            same(numpy_of(value), numpy_of(csd["state"][i][key]))
