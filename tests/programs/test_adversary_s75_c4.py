"""Session 75 (c4), adversarial: what a compiled step does to its own state, call after
call: a one-shot hook removing itself, hooks registered inside the step, a parameter
added to a group's list, .grad assigned (a transposed view) or .data made non-contiguous,
weights tied, the default dtype switched, inference mode, the seed reset inside, draws of
a NumPy generator, hooks flipping requires_grad or a Dropout's training flag, a Sequential
shortened, global backward hooks, saved-tensor hooks, a hook raising on its third call:
torch, llgrad eager and llgrad.compile call by call (test_adversary_s75_c.run_case)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from stateful_harness_s70_a11 import randn  # noqa: E402
from test_adversary_s75_c import net, observed, run_case, train_step  # noqa: E402

pytestmark = pytest.mark.torch


def one_shot_forward_hook(lib):
    m = net(lib)
    log = []
    h = []

    def hook(mod, a, out):
        log.append("once")
        h[0].remove()
        return out * 2
    h.append(m[0].register_forward_hook(hook))
    return dict(step=train_step(lib, m), state=lambda: observed(m, log))


def hook_registered_inside_step(lib):
    m = net(lib)
    log = []

    def step(x, y):
        m[2].register_forward_hook(lambda mod, a, o: log.append(len(log)) or o + 0.1)
        loss = (m(x) - y).pow(2).mean()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: observed(m, log))


def param_hook_registered_inside_step(lib):
    m = net(lib)

    def step(x, y):
        m[0].weight.register_hook(lambda g: g * 0.5)
        loss = (m(x) - y).pow(2).mean()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: observed(m))


def params_list_appended_directly(lib):
    m = net(lib)
    opt = lib.optim.SGD(list(m[0].parameters()), lr=0.1)

    def between(i):
        if i == 1:
            opt.param_groups[0]["params"].append(m[2].weight)
    return dict(step=train_step(lib, m, opt), state=lambda: observed(m), between=between)


def grad_assigned_between(lib):
    m = net(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)

    def between(i):
        if i == 0:
            m[0].weight.grad = lib.ones(3, 4)
        if i == 2:
            m[2].weight.grad = lib.ones(3, 2).t()
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def data_set_noncontiguous(lib):
    m = net(lib)

    def between(i):
        if i == 1:
            m[0].weight.data = lib.tensor(randn(740, 4, 3)).t()
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def weights_tied_between(lib):
    m = lib.nn.Sequential(lib.nn.Linear(4, 4), lib.nn.Tanh(), lib.nn.Linear(4, 4))
    with lib.no_grad():
        for k, p in enumerate(m.parameters()):
            p.copy_(lib.tensor(randn(741 + k, *p.shape) * 0.5))

    def between(i):
        if i == 1:
            m[2].weight = m[0].weight
    def step(x, y):
        loss = (m(x)[:, :2] - y).pow(2).mean()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: observed(m), between=between)


def default_dtype_changed(lib):
    lib.set_default_dtype(lib.float32)
    w = lib.tensor(randn(742, 4, 2), requires_grad=True)

    def step(x, y):
        b = lib.ones(2) * 0.1
        out = x @ w + b
        loss = (out - y).pow(2).mean()
        loss.backward()
        return loss, b.dtype == lib.float64

    def between(i):
        lib.set_default_dtype(lib.float64 if i % 2 == 0 else lib.float32)
    prog = dict(step=step, state=lambda: [w.grad], between=between)
    prog["cleanup"] = lambda: lib.set_default_dtype(lib.float32)
    return prog


def inference_mode_toggled(lib):
    m = net(lib)
    ctx = {"on": False}

    def step(x, y):
        if ctx["on"]:
            with lib.inference_mode():
                return (m(x) - y).pow(2).mean()
        loss = (m(x) - y).pow(2).mean()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: observed(m),
                between=lambda i: ctx.update(on=not ctx["on"]))


def seed_inside_step(lib):
    m = net(lib)
    m.insert(1, lib.nn.Dropout(0.3))
    s = [1]

    def step(x, y):
        lib.manual_seed(s[0])
        loss = (m(x) - y).pow(2).mean()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: observed(m),
                between=lambda i: s.__setitem__(0, s[0] + (i % 2)))


def numpy_random_in_step(lib):
    m = net(lib)
    rng = np.random.default_rng(0)

    def step(x, y):
        k = float(rng.random())
        loss = ((m(x) - y) * k).pow(2).mean()
        loss.backward()
        return loss, k
    return dict(step=step, state=lambda: observed(m))


def hook_requires_grad_toggle_in_hook(lib):
    m = net(lib)

    def hook(mod, args):
        mod.weight.requires_grad_(not mod.weight.requires_grad)
    m[2].register_forward_pre_hook(hook)
    return dict(step=train_step(lib, m), state=lambda: observed(m))


def training_flag_flipped_in_forward_hook(lib):
    m = net(lib)
    m.insert(1, lib.nn.Dropout(0.999))

    def hook(mod, args):
        m[1].train(not m[1].training)
    m[0].register_forward_pre_hook(hook)
    m.eval()
    return dict(step=train_step(lib, m), state=lambda: observed(m, [m[1].training]))


def sequential_item_deleted(lib):
    m = net(lib)
    m.append(lib.nn.Tanh())

    def between(i):
        if i == 1:
            del m[3]
        if i == 2:
            m.append(lib.nn.ReLU())
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def global_full_backward_hook(lib):
    m = net(lib)
    log, hs = [], []

    def between(i):
        if i == 0:
            hs.append(lib.nn.modules.module.register_module_full_backward_hook(
                lambda mod, gi, go: log.append(type(mod).__name__)))
        if i == 2:
            hs.pop().remove()
    prog = dict(step=train_step(lib, m), state=lambda: observed(m, log), between=between)
    prog["cleanup"] = lambda: [h.remove() for h in hs]
    return prog
global_full_backward_hook.warns = "global module hooks"


def saved_tensors_hooks_around(lib):
    m = net(lib)
    log = []
    on = {"v": False}

    def step(x, y):
        if on["v"]:
            with lib.autograd.graph.saved_tensors_hooks(lambda t: log.append(1) or t * 1,
                                                        lambda t: t):
                loss = (m(x) - y).pow(2).mean()
        else:
            loss = (m(x) - y).pow(2).mean()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: observed(m, [len(log) > 0]),
                between=lambda i: on.update(v=not on["v"]))


def hook_raises_on_third_call(lib):
    m = net(lib)
    n = [0]

    def hook(mod, a, o):
        n[0] += 1
        if n[0] == 3:
            raise ValueError("third")
        return o
    m[0].register_forward_hook(hook)
    return dict(step=train_step(lib, m), state=lambda: observed(m, n))


def post_acc_hook_zeroes_other_grad(lib):
    m = net(lib)

    def hook(p):
        if m[0].weight.grad is not None:
            m[0].weight.grad = m[0].weight.grad * 0 + 1
    m[2].weight.register_post_accumulate_grad_hook(hook)
    return dict(step=train_step(lib, m), state=lambda: observed(m))


param_hook_registered_inside_step.warns = "a hook registered inside"
seed_inside_step.warns = "manual_seed()"
numpy_random_in_step.warns = "numpy.random.Generator"
saved_tensors_hooks_around.warns = "saved_tensors_hooks"


CASES = [one_shot_forward_hook, hook_registered_inside_step,
         param_hook_registered_inside_step, params_list_appended_directly,
         grad_assigned_between, data_set_noncontiguous, weights_tied_between,
         default_dtype_changed, inference_mode_toggled, seed_inside_step,
         numpy_random_in_step, hook_requires_grad_toggle_in_hook,
         training_flag_flipped_in_forward_hook, sequential_item_deleted,
         global_full_backward_hook, saved_tensors_hooks_around, hook_raises_on_third_call,
         post_acc_hook_zeroes_other_grad]


@pytest.mark.slow       # (a sweep: the fix's own case runs by default)
@pytest.mark.parametrize("make", CASES, ids=[f.__name__ for f in CASES])
def test_state_changed_between_calls(make):
    run_case(make)
