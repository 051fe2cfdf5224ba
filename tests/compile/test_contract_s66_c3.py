"""Compile-contract adversary s66 (c3): state changed between compiled calls of a training step
(param groups added and their hyper-parameters changed, schedulers stepped inside and outside,
layers frozen and unfrozen, optimizer state loaded and its hooks added), checkpoint segments
with Python effects, a tensor `if` whose branch rebinds a global, and a step that returns the
model's own parameters. Each program runs
with torch (the oracle), llgrad eagerly and llgrad.compile in lockstep
(contract_harness_sweep7.runs): every observation of every call must match."""
import warnings

import pytest
from contract_harness_sweep7 import runs

import llgrad

torch = pytest.importorskip("torch")


def _mlp(T):
    T.manual_seed(0)
    return T.nn.Sequential(T.nn.Linear(3, 4), T.nn.Tanh(), T.nn.Linear(4, 2))


def _x(T, i):
    return T.arange(6.0).reshape(2, 3) / (i + 1) - 1


def _sgd_step(T, m, opt):
    def step(x):
        opt.zero_grad(); l = m(x).pow(2).sum(); l.backward(); opt.step()
        return l
    return step


# -- a training step that returns the model's own parameters (found here: after the
# second compiled call each returned parameter had a FreedBackward grad_fn, was no longer a
# leaf, and the next backward through the model raised; after .backward() and after
# autograd.grad alike) --

def returns_its_parameters(T, C, see):
    m = _mlp(T)
    opt = T.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def step(x):
        opt.zero_grad(); l = m(x).pow(2).sum(); l.backward(); opt.step()
        return l, list(m.parameters()), m[0].weight, m[0].weight.grad
    s = C(step)
    for i in range(5):
        l, ps, w, g = s(_x(T, i))
        see(l, ps, [p is q for p, q in zip(ps, m.parameters())], w is m[0].weight,
            g is m[0].weight.grad, [p.is_leaf for p in m.parameters()],
            [p.grad_fn is None for p in m.parameters()])
    w.sum().backward()          # (the parameter returned is still the leaf that gets .grad)
    see(m[0].weight.grad)


def grad_step_returns_its_parameter(T, C, see):
    """The same through autograd.grad (which frees the graph) and a hand-written update."""
    m = _mlp(T)
    ps = list(m.parameters())

    def step(x):
        l = m(x).pow(2).sum()
        gs = T.autograd.grad(l, ps)
        with T.no_grad():
            for p, g in zip(ps, gs):
                p.sub_(0.1 * g)
        return l, m[0].weight, gs[0]
    s = C(step)
    for i in range(5):
        l, w, g = s(_x(T, i))
        see(l, w is m[0].weight, [p.is_leaf for p in ps], [p.grad_fn is None for p in ps], g)
        try:
            l.backward()
        except RuntimeError as e:
            see(e)
    w.sum().backward()
    see(m[0].weight.grad)


def returns_its_input(T, C, see):
    w = T.ones(3, requires_grad=True)

    def step(x):
        l = (x * w).pow(2).sum(); l.backward()
        return l, x, w
    s = C(step)
    for i in range(4):
        x = T.arange(3.0).requires_grad_()
        l, xr, wr = s(x)
        see(l, xr is x, wr is w, x.is_leaf, x.grad_fn is None, x.grad, w.grad)
        (xr * 2).sum().backward()
        see(x.grad)


# -- optimizer and scheduler state changed between calls --

def param_groups_changed(T, C, see):
    m = _mlp(T)
    opt = T.optim.SGD(m[0].parameters(), lr=0.1, momentum=0.9)
    s = C(_sgd_step(T, m, opt))
    for i in range(6):
        if i == 2:
            opt.add_param_group({"params": list(m[2].parameters()), "lr": 0.05})
        if i == 3:
            opt.param_groups[0]["lr"] = 0.2
            opt.param_groups[1]["momentum"] = 0.5
        if i == 4:
            opt.param_groups[0]["weight_decay"] = 0.1
            opt.param_groups[1]["nesterov"] = True
            opt.param_groups[1]["maximize"] = True
        see(s(_x(T, i)), list(m.parameters()))


def adam_hypers_and_state_loaded(T, C, see):
    m = _mlp(T)
    opt = T.optim.Adam(m.parameters(), lr=0.1)
    s = C(_sgd_step(T, m, opt))
    saved = None
    for i in range(7):
        if i == 2:
            opt.param_groups[0]["betas"] = (0.5, 0.9)
            sd = opt.state_dict()
            saved = {"param_groups": sd["param_groups"], "state": {
                k: {n: v.clone() for n, v in st.items()} for k, st in sd["state"].items()}}
        if i == 3:
            opt.param_groups[0]["eps"] = 1e-3
            opt.state[m[0].weight]["exp_avg"].zero_()
        if i == 4:
            opt.load_state_dict(saved)
        if i == 5:
            opt.state.clear()
        see(s(_x(T, i)), list(m.parameters()))


def schedulers_inside_and_outside(T, C, see):
    m = _mlp(T)
    opt = T.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    inner = T.optim.lr_scheduler.StepLR(opt, 2, 0.5)
    k = [1.0]
    outer = T.optim.lr_scheduler.LambdaLR(opt, lambda e: k[0] / (e + 1))

    def step(x):
        opt.zero_grad(); l = m(x).pow(2).sum(); l.backward(); opt.step(); inner.step()
        return l, opt.param_groups[0]["lr"]
    s = C(step)
    for i in range(6):
        if i == 3:
            k[0] = 3.0
        see(s(_x(T, i)), list(m.parameters()), inner.get_last_lr())
        outer.step()


def optimizer_hooks_added_and_removed(T, C, see):
    m, log = _mlp(T), []
    opt = T.optim.SGD(m.parameters(), lr=0.1)
    s = C(_sgd_step(T, m, opt))

    def clamp(o, a, kw):
        with T.no_grad():
            for p in m.parameters():
                p.clamp_(-0.2, 0.2)
    handles = []
    for i in range(6):
        if i == 1:
            handles.append(opt.register_step_pre_hook(lambda o, a, kw: log.append("pre")))
        if i == 2:
            handles.append(opt.register_step_post_hook(clamp))
        if i == 4:
            for h in handles:
                h.remove()
        see(s(_x(T, i)), list(m.parameters()), list(log))


def layers_frozen_and_unfrozen(T, C, see):
    m = _mlp(T)
    opt = T.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def step(x):
        opt.zero_grad(); out = m(x); l = out.pow(2).sum()
        if l.requires_grad:
            l.backward(); opt.step()
        return l, out
    s = C(step)
    for i in range(8):
        if i == 2:
            m[0].requires_grad_(False)
        if i == 4:
            m[0].requires_grad_(True)
            m[2].weight.requires_grad_(False)
        if i == 5:
            m.requires_grad_(False)
        if i == 6:
            m.requires_grad_(True)
        l, out = s(_x(T, i))
        see(l, out, out.grad_fn is None, list(m.parameters()),
            [p.grad for p in m.parameters()])


def raises_on_the_third_call(T, C, see):
    m, n = _mlp(T), [0]
    buf = T.zeros(3)
    opt = T.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def step(x):
        n[0] += 1
        buf.add_(x.sum(0))
        opt.zero_grad(); l = m(x).pow(2).sum(); l.backward()
        if x.abs().max().item() > 10:
            raise FloatingPointError("input out of range")
        opt.step()
        return l
    s = C(step)
    for i in range(6):
        try:
            see(s(_x(T, i) * (100 if i in (2, 4) else 1)))
        except FloatingPointError as e:
            see(e)
        see(buf, list(m.parameters()), [p.grad for p in m.parameters()], n[0])


PROGRAMS = [returns_its_parameters, grad_step_returns_its_parameter, returns_its_input,
            param_groups_changed, adam_hypers_and_state_loaded, schedulers_inside_and_outside,
            optimizer_hooks_added_and_removed, layers_frozen_and_unfrozen,
            raises_on_the_third_call]


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_compiled_equals_eager_and_torch(prog):
    assert runs(prog, torch) == []


@pytest.mark.parametrize("prog", [returns_its_parameters, grad_step_returns_its_parameter],
                         ids=lambda p: p.__name__)
def test_native_equals_eager_and_torch(prog):
    assert runs(prog, torch, backend="llvm") == []


# -- checkpoint segments: Python effects run again by backward's recomputation --

_BUMPS = 0


def _bump():
    global _BUMPS
    _BUMPS += 1


def _checkpointed(T, C, see, effect):
    global _BUMPS
    m = _mlp(T)
    m.calls, log, _BUMPS, k = 0, [], 0, 0

    def segment(x):
        nonlocal k
        if effect == "append":
            log.append(x.shape[0])
        elif effect == "count":
            m.calls += 1
        elif effect == "global":    # (a helper that rebinds a global name)
            _bump()
        elif effect == "nonlocal":
            k += 1
        return m(x)

    def step(x):
        h = T.utils.checkpoint.checkpoint(segment, x, use_reentrant=False)
        l = h.pow(2).sum(); l.backward()
        return l
    s = C(step)
    for i in range(4):
        see(s(_x(T, i)), m[0].weight.grad, len(log), m.calls, _BUMPS, k)


@pytest.mark.parametrize("effect", ["append", "count", "global", "nonlocal"])
def test_checkpoint_segment_with_python_effects_runs_eagerly_with_warning(effect):
    """Eager runs the segment twice per step (forward, and again in backward): a compiled
    call, which ran it once, used to append once and count once, silently."""
    own = runs(lambda T, C, see: _checkpointed(T, C, see, effect), torch)
    assert len(own) == 1 and "checkpoint segment that changes Python state" in own[0]
    assert "test_contract_s66_c3.py:" in own[0]      # (the user's line: the checkpoint call)


def test_checkpoint_segment_without_python_effects_still_compiles():
    assert runs(lambda T, C, see: _checkpointed(T, C, see, None), torch) == []
    m = _mlp(llgrad)
    step = llgrad.compile(lambda x: llgrad.utils.checkpoint.checkpoint(
        m, x, use_reentrant=False).pow(2).sum(), backend="interpret")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(4):
            step(_x(llgrad, i)).backward()
    assert step.n_traces == 1 and not step.graph_breaks


# -- a tensor-dependent `if` whose branch rebinds a global name through a helper: the
# compiled call bumped it on every call, the branch taken or not (and the trace of the
# branch eager does not take left it bumped) --

def _branch_bumps(T, C, see):
    global _BUMPS
    _BUMPS = 0
    w = T.ones(3, requires_grad=True)

    def step(x):
        y = x * w
        if y.sum() > 0:
            _bump()
            y = y * 2
        else:
            y = y * 3
        l = y.sum(); l.backward()
        return l
    s = C(step)
    for i in range(6):
        see(s(T.ones(3) * (1 if i % 2 else -1)), w.grad, _BUMPS)


def test_a_tensor_branch_rebinding_a_global_runs_as_eager():
    own = runs(_branch_bumps, torch)
    assert len(own) == 1 and "left as Python" in own[0] and "what _BUMPS names" in own[0]
