"""Session 75 (c), adversarial: a compiled training step or function called several times
while the program changes state between the calls: hooks added, removed or replaced
(forward pre/post with kwargs and always_call, full backward and backward pre hooks, a
parameter's gradient hook, post-accumulate hooks, global module hooks; c2: modules changed,
train/eval, Dropout's p, a submodule replaced, freezing and unfreezing, a parameter or
its .data reassigned, a buffer registered later, a state_dict loaded, re-initialised by
apply, moved to float64): torch, llgrad eager and llgrad.compile call by call
(stateful_harness_s70_a11.check), the hooks' own logs observed. The other s75 c files use
this one's run_case: a case function may carry `.warns` (the fallback reason its compiled
calls must name), `.args` (call i's arguments; xy by default) and return a "cleanup" (what
puts back global state it changed: global hooks, the grad mode, the default dtype)."""
import pytest

pytest.importorskip("torch")
from stateful_harness_s70_a11 import check, randn  # noqa: E402

pytestmark = pytest.mark.torch


def xy(i):
    return randn(750 + i, 5, 4), randn(760 + i, 5, 2)


def net(lib, seed=0):
    m = lib.nn.Sequential(lib.nn.Linear(4, 3), lib.nn.Tanh(), lib.nn.Linear(3, 2))
    with lib.no_grad():
        for k, p in enumerate(m.parameters()):
            p.copy_(lib.tensor(randn(700 + seed + k, *p.shape) * 0.5))
    return m


def train_step(lib, m, opt=None, log=None):
    def step(x, y):
        if opt is not None:
            opt.zero_grad()
        out = m(x)
        loss = (out - y).pow(2).mean()
        loss.backward()
        if opt is not None:
            opt.step()
        return loss, out
    return step


def observed(m, log=None, opt=None):
    seen = [list(m.parameters()), [p.grad for p in m.parameters()]]
    if log is not None:
        seen.append(list(log))
    return seen


# ---- hooks ----------------------------------------------------------------------------------

def fwd_pre_kwargs_hook_added_then_removed(lib):
    m = net(lib)
    log, handles = [], []

    def pre(mod, args, kwargs):
        log.append(("pre", len(args), sorted(kwargs)))
        return (args[0] * 0.5,), kwargs

    def between(i):
        if i == 0:
            handles.append(m[0].register_forward_pre_hook(pre, with_kwargs=True))
        elif i == 2:
            handles.pop().remove()
    return dict(step=train_step(lib, m), state=lambda: observed(m, log), between=between)


def fwd_hook_kwargs_always_call_replaced(lib):
    m = net(lib)
    log, handles = [], []
    k = [1.0]

    def make_hook(c):
        def post(mod, args, kwargs, out):
            log.append(("post", c))
            return out * c
        return post

    def between(i):
        if handles:
            handles.pop().remove()
        k[0] += 0.5
        handles.append(m[2].register_forward_hook(make_hook(k[0]), with_kwargs=True,
                                                  always_call=True))
    return dict(step=train_step(lib, m), state=lambda: observed(m, log), between=between)


def fwd_hook_prepend_order_changes(lib):
    m = net(lib)
    log = []
    m[0].register_forward_hook(lambda mod, a, o: log.append("first") or o + 1)

    def between(i):
        if i == 1:
            m[0].register_forward_hook(lambda mod, a, o: log.append("pre") or o * 2,
                                       prepend=True)
    return dict(step=train_step(lib, m), state=lambda: observed(m, log), between=between)


def full_backward_hook_added_later(lib):
    m = net(lib)
    log = []

    def hook(mod, gin, gout):
        log.append(("bw", [None if g is None else tuple(g.shape) for g in gin]))
        return (gin[0] * 0.25,)

    def between(i):
        if i == 1:
            m[2].register_full_backward_hook(hook)
    return dict(step=train_step(lib, m), state=lambda: observed(m, log), between=between)


def full_backward_pre_hook_removed(lib):
    m = net(lib)
    log = []
    h = [m[2].register_full_backward_pre_hook(
        lambda mod, gout: log.append("bpre") or (gout[0] * 3,))]

    def between(i):
        if i == 1:
            h[0].remove()
    return dict(step=train_step(lib, m), state=lambda: observed(m, log), between=between)


def full_backward_pre_hook_on_outer_toggled(lib):
    m = net(lib)
    log = []
    h = []

    def between(i):
        if i % 2 == 0:
            h.append(m.register_full_backward_pre_hook(
                lambda mod, gout: log.append(i) or (gout[0].clamp(-0.1, 0.1),)))
        else:
            h.pop().remove()
    return dict(step=train_step(lib, m), state=lambda: observed(m, log), between=between)


def param_grad_clip_hook_added(lib):
    m = net(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.3, momentum=0.5)
    hs = []

    def between(i):
        if i == 0:
            hs.extend(p.register_hook(lambda g: g.clamp(-0.05, 0.05)) for p in m.parameters())
        if i == 3:
            for h in hs:
                h.remove()
    return dict(step=train_step(lib, m, opt), state=lambda: observed(m), between=between)


def post_accumulate_hook_added_then_removed(lib):
    m = net(lib)
    log, hs = [], []

    def hook(p):
        log.append(tuple(p.shape))
        with lib.no_grad():
            p.add_(p.grad, alpha=-0.1)

    def between(i):
        if i == 0:
            hs.extend(p.register_post_accumulate_grad_hook(hook) for p in m.parameters())
        if i == 2:
            hs.pop(0).remove()
    return dict(step=train_step(lib, m), state=lambda: observed(m, log), between=between)


def global_forward_hook_registered_later(lib):
    m = net(lib)
    log = []
    hs = []

    def hook(mod, args, out):
        log.append(type(mod).__name__)
        return None

    def between(i):
        if i == 1:
            hs.append(lib.nn.modules.module.register_module_forward_hook(hook))
        if i == 3:
            hs.pop().remove()

    def state():
        return observed(m, log)
    prog = dict(step=train_step(lib, m), state=state, between=between)
    prog["cleanup"] = lambda: [h.remove() for h in hs]
    return prog


def global_forward_pre_hook_changes_input(lib):
    m = net(lib)
    hs = []

    def pre(mod, args):
        if isinstance(mod, lib.nn.Linear):
            return (args[0] + 0.1,)

    def between(i):
        if i == 0:
            hs.append(lib.nn.modules.module.register_module_forward_pre_hook(pre))
        if i == 2:
            hs.pop().remove()
    prog = dict(step=train_step(lib, m), state=lambda: observed(m), between=between)
    prog["cleanup"] = lambda: [h.remove() for h in hs]
    return prog


def hook_closure_counter_read_in_step(lib):
    m = net(lib)
    count = {"n": 0}

    def hook(mod, args, out):
        count["n"] += 1
        return out * (1 + count["n"] % 3)
    m[0].register_forward_hook(hook)

    def step(x, y):
        loss = (m(x) - y).pow(2).mean()
        loss.backward()
        return loss, count["n"]
    return dict(step=step, state=lambda: observed(m, [count["n"]]),
                between=lambda i: count.update(n=count["n"] + 10 * (i % 2)))


global_forward_hook_registered_later.warns = "global module hooks"
global_forward_pre_hook_changes_input.warns = "global module hooks"

HOOKS = [fwd_pre_kwargs_hook_added_then_removed, fwd_hook_kwargs_always_call_replaced,
         fwd_hook_prepend_order_changes, full_backward_hook_added_later,
         full_backward_pre_hook_removed, full_backward_pre_hook_on_outer_toggled,
         param_grad_clip_hook_added, post_accumulate_hook_added_then_removed,
         global_forward_hook_registered_later, global_forward_pre_hook_changes_input,
         hook_closure_counter_read_in_step]


def run_case(make, **kw):
    made = []

    def tracked(lib):
        prog = make(lib)
        made.append(prog)
        return prog
    tracked.__name__ = make.__name__
    try:
        check(tracked, getattr(make, "args", xy), calls=kw.pop("calls", 5),
              compiled_warns=getattr(make, "warns", None), **kw)
    finally:
        for prog in made:
            if "cleanup" in prog:
                prog["cleanup"]()


@pytest.mark.slow       # (a sweep: the fix's own case, test_adversary_s75_c7.py, runs by default)
@pytest.mark.parametrize("make", HOOKS, ids=[f.__name__ for f in HOOKS])
def test_hooks_changed_between_calls(make):
    run_case(make)
