"""Session 75 (c7), adversarial: grads made views of one flat buffer, anomaly mode toggled,
nn.functional patched, one layer moved to float64, optimizer state_dict reloaded, grads
scaled between calls, retain_grad toggled, ReduceLROnPlateau; values that live outside a
function's code and closure: default arguments of hooks (a new lambda with k=k, __defaults__
and __kwdefaults__ edited, functools.partial), a helper's __code__ swapped, a closure cell
set, a method's defaults, a helper exec'd into a dict of globals (regression: that dict
holds the builtins, whose frozen importlib code counted as the user's and made the call
run eagerly): torch, llgrad eager and llgrad.compile call by call."""
import copy
import functools
import pytest

pytest.importorskip("torch")
from stateful_harness_s70_a11 import randn  # noqa: E402
from test_adversary_s75_c import net, observed, run_case, train_step  # noqa: E402

pytestmark = pytest.mark.torch


def grads_as_views_of_flat_buffer(lib):
    m = net(lib)
    flat = lib.zeros(sum(p.numel() for p in m.parameters()))

    def between(i):
        if i == 1:
            o = 0
            for p in m.parameters():
                p.grad = flat[o:o + p.numel()].view(p.shape)
                o += p.numel()
        if i == 3:
            flat.mul_(0.5)
    return dict(step=train_step(lib, m), state=lambda: observed(m, [flat]), between=between)


def anomaly_mode_toggled_nan(lib):
    w = lib.tensor(randn(755, 4, 2), requires_grad=True)
    on = [False]

    def step(x, y):
        with lib.autograd.set_detect_anomaly(on[0]):
            out = (x @ w).abs().sqrt() * 0 + (x @ w) * 0
            loss = (out - y).pow(2).mean() + lib.zeros(()).sqrt()
            loss.backward()
        return loss
    return dict(step=step, state=lambda: [w.grad], between=lambda i: on.__setitem__(0, i % 2 == 0))


def functional_patched_between(lib):
    m = net(lib)
    F = lib.nn.functional
    orig = F.gelu

    def step(x, y):
        loss = (F.gelu(m(x)) - y).pow(2).mean()
        loss.backward()
        return loss

    def between(i):
        F.gelu = (lambda t, approximate="none": t * 2) if i == 1 else orig
    prog = dict(step=step, state=lambda: observed(m), between=between)
    prog["cleanup"] = lambda: setattr(F, "gelu", orig)
    return prog


def param_to_double_one_layer(lib):
    m = net(lib)

    def step(x, y):
        h = m[1](m[0](x))
        loss = (m[2](h.to(m[2].weight.dtype)) - y.to(m[2].weight.dtype)).pow(2).mean()
        loss.backward()
        return loss

    def between(i):
        if i == 1:
            m[2].double()
            m[2].zero_grad(set_to_none=True)
    return dict(step=step, state=lambda: observed(m), between=between)


def hook_sets_grad_mode(lib):
    m = net(lib)
    flag = [True]

    def pre(mod, a):
        if not flag[0]:
            return (a[0].detach(),)
    m[2].register_forward_pre_hook(pre)
    return dict(step=train_step(lib, m), state=lambda: observed(m),
                between=lambda i: flag.__setitem__(0, not flag[0]))


def optimizer_state_dict_reloaded(lib):
    m = net(lib)
    opt = lib.optim.Adam(m.parameters(), lr=0.05)
    saved = {}

    def between(i):
        if i == 0:
            saved["sd"] = copy.deepcopy(opt.state_dict())
        if i == 2:
            opt.load_state_dict(saved["sd"])
    return dict(step=train_step(lib, m, opt), state=lambda: observed(m), between=between)


def grad_scaled_inplace_between(lib):
    m = net(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        loss = (m(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    def between(i):
        for p in m.parameters():
            p.grad.mul_(0.5 if i % 2 else 0.0)
    return dict(step=step, state=lambda: observed(m), between=between)


def retain_grad_toggle(lib):
    m = net(lib)
    keep = [False]
    box = {}

    def step(x, y):
        h = m[0](x)
        if keep[0]:
            h.retain_grad()
        loss = (m[2](m[1](h)) - y).pow(2).mean()
        loss.backward()
        box["h"] = h
        return loss, h.grad is None
    return dict(step=step, state=lambda: observed(m, [box["h"].grad]),
                between=lambda i: keep.__setitem__(0, not keep[0]))


def lr_scheduler_on_plateau(lib):
    m = net(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.5)
    sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, factor=0.5)

    def step(x, y):
        loss = train_step(lib, m, opt)(x, y)
        return loss

    return dict(step=step, state=lambda: observed(m) + [opt.param_groups[0]["lr"]],
                between=lambda i: sched.step(1.0 + (i % 2)))




def hook_default_arg_replaced(lib):
    m = net(lib)
    hs = []

    def between(i):
        if hs:
            hs.pop().remove()
        k = 0.5 * (i + 2)
        hs.append(m[0].register_forward_hook(lambda mod, a, o, k=k: o * k))
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def tensor_hook_default_arg_replaced(lib):
    m = net(lib)
    hs = []

    def between(i):
        if hs:
            hs.pop().remove()
        k = 0.5 * (i + 2)
        hs.append(m[0].weight.register_hook(lambda g, k=k: g * k))
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def hook_defaults_mutated(lib):
    m = net(lib)

    def hook(mod, a, o, k=1.0):
        return o * k
    m[0].register_forward_hook(hook)

    def between(i):
        hook.__defaults__ = (0.5 * (i + 2),)
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def partial_hook_replaced(lib):
    m = net(lib)
    hs = []

    def hook(mod, a, o, k):
        return o * k

    def between(i):
        if hs:
            hs.pop().remove()
        hs.append(m[0].register_forward_hook(functools.partial(hook, k=0.5 * (i + 2))))
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def kwdefault_of_helper(lib):
    m = net(lib)

    def scale(t, *, k=1.0):
        return t * k

    def step(x, y):
        loss = (scale(m(x)) - y).pow(2).mean()
        loss.backward()
        return loss

    def between(i):
        scale.__kwdefaults__ = {"k": 0.5 * (i + 2)}
    return dict(step=step, state=lambda: observed(m), between=between)


def helper_code_swapped(lib):
    m = net(lib)

    def act(t):
        return t.tanh()

    def step(x, y):
        loss = (act(m(x)) - y).pow(2).mean()
        loss.backward()
        return loss

    def between(i):
        if i == 1:
            act.__code__ = (lambda t: t.sigmoid()).__code__
    return dict(step=step, state=lambda: observed(m), between=between)


def step_defaults_mutated(lib):
    m = net(lib)
    holder = {}

    def step(x, y, k=1.0):
        loss = ((m(x) - y) * k).pow(2).mean()
        loss.backward()
        return loss
    holder["f"] = step

    def between(i):
        step.__defaults__ = (0.5 * (i + 2),)
    return dict(step=step, state=lambda: observed(m), between=between)


def closure_cell_contents_set(lib):
    m = net(lib)
    k = 1.0

    def step(x, y):
        loss = ((m(x) - y) * k).pow(2).mean()
        loss.backward()
        return loss

    def between(i):
        step.__closure__[[c for c in step.__code__.co_freevars].index("k")].cell_contents = i + 2.0
    return dict(step=step, state=lambda: observed(m), between=between)


def method_hook_default_on_module(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(4, 2)

        def forward(self, x, k=1.0):
            return self.fc(x) * k
    m = M()
    with lib.no_grad():
        m.fc.weight.copy_(lib.tensor(randn(756, 2, 4)))
        m.fc.bias.zero_()

    def between(i):
        M.forward.__defaults__ = (0.5 * (i + 2),)
    prog = dict(step=train_step(lib, m), state=lambda: observed(m), between=between)
    return prog


def global_in_helper_module_dict(lib):
    m = net(lib)
    g = {"k": 1.0}
    exec("def scale(t):\n    return t * k\n", g)

    def step(x, y):
        loss = (g["scale"](m(x)) - y).pow(2).mean()
        loss.backward()
        return loss

    def between(i):
        g["k"] = i + 2.0
    return dict(step=step, state=lambda: observed(m), between=between)


CASES = [grads_as_views_of_flat_buffer, anomaly_mode_toggled_nan,
         functional_patched_between, param_to_double_one_layer, hook_sets_grad_mode,
         optimizer_state_dict_reloaded, grad_scaled_inplace_between, retain_grad_toggle,
         lr_scheduler_on_plateau, hook_default_arg_replaced,
         tensor_hook_default_arg_replaced, hook_defaults_mutated, partial_hook_replaced,
         kwdefault_of_helper, helper_code_swapped, step_defaults_mutated,
         closure_cell_contents_set, method_hook_default_on_module]


@pytest.mark.slow       # (a sweep: the fix's own case runs by default)
@pytest.mark.parametrize("make", CASES, ids=[f.__name__ for f in CASES])
def test_state_changed_between_calls(make):
    run_case(make)


def test_exec_globals_holding_builtins_compiled():
    """Regression: a dict of globals made by exec() holds the builtins' dict, whose
    __loader__ is frozen importlib code calling id(); runtime/saved_tensor.users_file took
    "<frozen importlib._bootstrap>" for the user's file, so the call ran eagerly, warning
    that id() is not guarded. Compiled now, and k's changes are still seen."""
    run_case(global_in_helper_module_dict)


def flag_copied_before_train(lib):
    """The step copies a module (copy.copy reads its __dict__, the flag with it, past the
    descriptor) before model.train() sets the flag (a copy.deepcopy or pickle of one runs
    eagerly: it copies tensors' values)."""
    m = net(lib)

    def step(x, y):
        snap, top = copy.copy(m[1]), copy.copy(m)
        m.train()
        loss = (m(x) - y).pow(2).mean()
        loss.backward()
        return loss, snap.training, top.training

    return dict(step=step, state=lambda: observed(m, [m.training]),
                between=lambda i: m.train(i % 2 == 1))


def test_flag_copied_before_train_compiled():
    """Regression: guards_blind let the entry traced with the flags True serve calls
    entered in eval mode (the step's m.train() writes them), but the copies taken before
    it read them past the descriptor: the compiled calls gave True where eager gives
    False. nn.Module.__getstate__ now notes the read (training_flag.read_past)."""
    run_case(flag_copied_before_train)
