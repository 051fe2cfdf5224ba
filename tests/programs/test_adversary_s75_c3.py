"""Session 75 (c3), adversarial: optimisers and Python state changed between calls of a
compiled step: lr / momentum / betas edited in param_groups, add_param_group, zero_grad
(set_to_none=False), the state cleared, a scheduler stepped; a global float, a list
appended to, a dict of tensors, a closure variable rebound, a call counter on self, the
input's shape or dtype changing, a flag flipping control flow, the grad mode around the
call, the seed reset: torch, llgrad eager and llgrad.compile call by call
(test_adversary_s75_c.run_case)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from stateful_harness_s70_a11 import randn  # noqa: E402
from test_adversary_s75_c import net, observed, run_case, train_step  # noqa: E402

pytestmark = pytest.mark.torch


def opt_observed(m, opt):
    sd = opt.state_dict()
    groups = [{k: g[k] for k in sorted(g)} for g in sd["param_groups"]]
    return observed(m) + [{k: sd["state"][k] for k in sorted(sd["state"])}, groups]


def sgd_lr_momentum_edited(lib):
    m = net(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)

    def between(i):
        g = opt.param_groups[0]
        g["lr"] = g["lr"] * 0.5
        g["momentum"] = 0.9 if i % 2 else 0.0
    return dict(step=train_step(lib, m, opt), state=lambda: opt_observed(m, opt),
                between=between)


def adam_betas_and_weight_decay_edited(lib):
    m = net(lib)
    opt = lib.optim.Adam(m.parameters(), lr=0.01)

    def between(i):
        g = opt.param_groups[0]
        g["betas"] = (0.5 + 0.1 * i, 0.9)
        g["weight_decay"] = 0.1 * i
        if i == 2:
            g["amsgrad"] = True
    return dict(step=train_step(lib, m, opt), state=lambda: opt_observed(m, opt),
                between=between)


def adamw_add_param_group_later(lib):
    m = net(lib)
    opt = lib.optim.AdamW(m[0].parameters(), lr=0.02)

    def between(i):
        if i == 1:
            opt.add_param_group({"params": list(m[2].parameters()), "lr": 0.05,
                                 "weight_decay": 0.0})
    return dict(step=train_step(lib, m, opt), state=lambda: opt_observed(m, opt),
                between=between)


def zero_grad_keeps_zeros_then_none(lib):
    m = net(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    mode = {"none": False}

    def step(x, y):
        opt.zero_grad(set_to_none=mode["none"])
        loss = (m(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        return loss
    return dict(step=step, state=lambda: opt_observed(m, opt),
                between=lambda i: mode.update(none=i % 2 == 1))


def grads_accumulate_without_zero(lib):
    m = net(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.05)

    def between(i):
        if i == 2:
            opt.zero_grad(set_to_none=False)
    return dict(step=train_step(lib, m, opt=None), state=lambda: observed(m),
                between=between)


def optimizer_state_cleared(lib):
    m = net(lib)
    opt = lib.optim.Adam(m.parameters(), lr=0.05)

    def between(i):
        if i in (1, 3):
            opt.state.clear()
    return dict(step=train_step(lib, m, opt), state=lambda: opt_observed(m, opt),
                between=between)


def one_param_state_deleted(lib):
    m = net(lib)
    opt = lib.optim.RMSprop(m.parameters(), lr=0.01, momentum=0.5)

    def between(i):
        if i == 1:
            del opt.state[m[0].weight]
    return dict(step=train_step(lib, m, opt), state=lambda: opt_observed(m, opt),
                between=between)


def scheduler_stepped_between(lib):
    m = net(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.2, momentum=0.5)
    sched = lib.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.3)
    return dict(step=train_step(lib, m, opt),
                state=lambda: opt_observed(m, opt) + [sched.get_last_lr()],
                between=lambda i: sched.step())


def scheduler_stepped_inside_step(lib):
    m = net(lib)
    opt = lib.optim.Adam(m.parameters(), lr=0.05)
    sched = lib.optim.lr_scheduler.LambdaLR(opt, lambda e: 1.0 / (1 + e))

    def step(x, y):
        loss = train_step(lib, m, opt)(x, y)
        sched.step()
        return loss
    return dict(step=step, state=lambda: opt_observed(m, opt) + [sched.get_last_lr()])


def optimizer_replaced_in_holder(lib):
    m = net(lib)
    box = {"opt": lib.optim.SGD(m.parameters(), lr=0.1)}

    def step(x, y):
        box["opt"].zero_grad()
        loss = (m(x) - y).pow(2).mean()
        loss.backward()
        box["opt"].step()
        return loss

    def between(i):
        if i == 1:
            box["opt"] = lib.optim.Adam(m.parameters(), lr=0.01)
    return dict(step=step, state=lambda: opt_observed(m, box["opt"]), between=between)


OPTIMS = [sgd_lr_momentum_edited, adam_betas_and_weight_decay_edited,
          adamw_add_param_group_later, zero_grad_keeps_zeros_then_none,
          grads_accumulate_without_zero, optimizer_state_cleared, one_param_state_deleted,
          scheduler_stepped_between, scheduler_stepped_inside_step,
          optimizer_replaced_in_holder]


@pytest.mark.slow       # (a sweep: the fix's own case, test_adversary_s75_c7.py, runs by default)
@pytest.mark.parametrize("make", OPTIMS, ids=[f.__name__ for f in OPTIMS])
def test_optimizers_changed_between_calls(make):
    run_case(make, atol=1e-5)


# ---- Python state read by the step ------------------------------------------------------------

SCALE = 1.0


def global_float_rebound(lib):
    globals().update(SCALE=1.0)
    m = net(lib)

    def step(x, y):
        loss = ((m(x) - y) * SCALE).pow(2).mean()
        loss.backward()
        return loss

    def between(i):
        global SCALE
        SCALE = 1.0 + 0.5 * (i + 1)
    prog = dict(step=step, state=lambda: observed(m), between=between)
    prog["cleanup"] = lambda: globals().update(SCALE=1.0)
    return prog


def list_appended_and_summed(lib):
    m = net(lib)
    extra = []

    def step(x, y):
        out = m(x)
        for t in extra:
            out = out + t
        extra.append(out.detach().mean(0))
        loss = (out - y).pow(2).mean()
        loss.backward()
        return loss, len(extra)
    return dict(step=step, state=lambda: observed(m, extra))


def dict_of_tensors_edited(lib):
    m = net(lib)
    d = {"a": lib.ones(2)}

    def step(x, y):
        out = m(x)
        for k in sorted(d):
            out = out * d[k]
        loss = (out - y).pow(2).mean()
        loss.backward()
        return loss

    def between(i):
        if i == 0:
            d["b"] = lib.tensor([2.0, 0.5])
        if i == 1:
            d["a"] = lib.tensor([0.1, 0.2])
        if i == 2:
            d["a"].mul_(3.0)
        if i == 3:
            del d["b"]
    return dict(step=step, state=lambda: observed(m, [d]), between=between)


def closure_rebound(lib):
    m = net(lib)
    k = 2.0
    act = lib.tanh

    def step(x, y):
        loss = (act(m(x)) * k - y).pow(2).mean()
        loss.backward()
        return loss

    def between(i):
        nonlocal k, act
        k = k + 1.0
        act = lib.sigmoid if i % 2 == 0 else lib.relu
    return dict(step=step, state=lambda: observed(m), between=between)


def counter_attr_on_self(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(4, 2)
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            y = self.fc(x)
            return y * self.calls if self.calls % 2 else y - self.calls
    m = M()
    with lib.no_grad():
        m.fc.weight.copy_(lib.tensor(randn(730, 2, 4)))
        m.fc.bias.zero_()

    def between(i):
        if i == 2:
            m.calls = 10
    return dict(step=train_step(lib, m), state=lambda: observed(m, [m.calls]),
                between=between)


def flag_flips_control_flow(lib):
    m = net(lib)
    cfg = {"detach": False}

    def step(x, y):
        h = m[1](m[0](x))
        if cfg["detach"]:
            h = h.detach()
        loss = (m[2](h) - y).pow(2).mean()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: observed(m),
                between=lambda i: cfg.update(detach=not cfg["detach"]))


def grad_mode_off_around_call(lib):
    lib.set_grad_enabled(True)
    m = net(lib)

    def step(x, y):
        out = m(x)
        loss = (out - y).pow(2).mean()
        if lib.is_grad_enabled():
            loss.backward()
        return loss, out.requires_grad

    def between(i):
        lib.set_grad_enabled(i % 2 == 0)
    prog = dict(step=step, state=lambda: observed(m), between=between)
    prog["cleanup"] = lambda: lib.set_grad_enabled(True)
    return prog


def seed_reset_between(lib):
    m = net(lib)
    m.insert(1, lib.nn.Dropout(0.5))

    def step(x, y):
        noise = lib.rand(5, 2)
        loss = (m(x) + noise - y).pow(2).mean()
        loss.backward()
        return loss, noise

    def between(i):
        if i % 2 == 1:
            lib.manual_seed(7)
    lib.manual_seed(7)
    return dict(step=step, state=lambda: observed(m), between=between)


def shapes(i):
    n = [5, 5, 3, 7, 3][i]
    return randn(770 + i, n, 4), randn(780 + i, n, 2)


def dtypes(i):
    x, y = randn(790 + i, 5, 4), randn(795 + i, 5, 2)
    return (x.astype(np.float64), y.astype(np.float64)) if i in (1, 2) else (x, y)


def batch_size_changes(lib):
    m = net(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    return dict(step=train_step(lib, m, opt), state=lambda: observed(m))


def input_dtype_changes(lib):
    w = lib.tensor(randn(731, 4, 2), requires_grad=True)

    def step(x, y):
        out = x @ w.to(x.dtype)
        loss = (out - y).pow(2).mean()
        loss.backward()
        return loss, out
    return dict(step=step, state=lambda: [w.grad])


batch_size_changes.args = shapes
input_dtype_changes.args = dtypes

PYSTATE = [global_float_rebound, list_appended_and_summed, dict_of_tensors_edited,
           closure_rebound, counter_attr_on_self, flag_flips_control_flow,
           grad_mode_off_around_call, seed_reset_between, batch_size_changes,
           input_dtype_changes]


@pytest.mark.slow       # (a sweep: the fix's own case, test_adversary_s75_c7.py, runs by default)
@pytest.mark.parametrize("make", PYSTATE, ids=[f.__name__ for f in PYSTATE])
def test_python_state_changed_between_calls(make):
    run_case(make)
