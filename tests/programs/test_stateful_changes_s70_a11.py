"""What a program changes between calls of a compiled step that the step's trace read: a
number a hook reads, a hook replaced, an optimiser's options (weight_decay, momentum,
dampening, eps, betas, maximize, nesterov, amsgrad), its state reset or edited, a
parameter's data replaced, a model's state_dict loaded, the grad mode around the call:
torch, llgrad eager and llgrad.compile over six calls (stateful_harness_s70_a11.check)."""
import pytest

pytest.importorskip("torch")
from stateful_harness_s70_a11 import check, randn  # noqa: E402
from test_stateful_optim_s70_a11 import _observed, model_of  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile or two a case; the fast regressions are in
# test_stateful_regressions_s70_a11.py)


def xy(i):
    return randn(10 + i, 5, 4), randn(20 + i, 5, 2)


def hook_reads_number_changed(lib):
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)
    box = [1.0]
    w.register_hook(lambda g: g * box[0])

    def step(x, y):
        loss = (x @ w - y).pow(2).sum()
        loss.backward()
        return loss

    def between(i):
        box[0] = 0.5 * (i + 2)
    return dict(step=step, state=lambda: [w.grad], between=between)


def hook_reads_tensor_changed(lib):
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)
    mask = lib.ones(4, 2)
    w.register_hook(lambda g: g * mask)

    def step(x, y):
        loss = (x @ w - y).pow(2).sum()
        loss.backward()
        return loss

    def between(i):
        mask[i % 4] = 0.0
    return dict(step=step, state=lambda: [w.grad], between=between)


def hook_replaced(lib):
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)
    handles = [w.register_hook(lambda g: g * 2)]

    def step(x, y):
        loss = (x @ w - y).pow(2).sum()
        loss.backward()
        return loss

    def between(i):
        handles.pop().remove()
        k = i + 3
        handles.append(w.register_hook(lambda g: g * k if k % 2 else -g))
    return dict(step=step, state=lambda: [w.grad], between=between)


def post_accumulate_hook_reads_lr(lib):
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)
    cfg = {"lr": 0.1}

    def hook(p):
        with lib.no_grad():
            p.sub_(p.grad * cfg["lr"])
        p.grad = None
    w.register_post_accumulate_grad_hook(hook)

    def step(x, y):
        loss = (x @ w - y).pow(2).mean()
        loss.backward()
        return loss

    def between(i):
        cfg["lr"] = 0.1 / (i + 2)
    return dict(step=step, state=lambda: [w, w.grad], between=between)


def option_changed(opt_name, key, values, **kw):
    def make(lib):
        model = model_of(lib)
        opt = getattr(lib.optim, opt_name)(model.parameters(), **kw)

        def step(x, y):
            opt.zero_grad()
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
            return loss

        def between(i):
            for g in opt.param_groups:
                g[key] = values[i % len(values)]
        return dict(step=step, state=lambda: _observed(model, opt), between=between)
    make.__name__ = f"{opt_name}_{key}"
    return make


OPTIONS = [
    option_changed("SGD", "weight_decay", [0.1, 0.0, 0.5], lr=0.1, momentum=0.9),
    option_changed("SGD", "momentum", [0.5, 0.0, 0.9], lr=0.1),
    option_changed("SGD", "dampening", [0.5, 0.1], lr=0.1, momentum=0.9),
    option_changed("SGD", "nesterov", [True, False], lr=0.1, momentum=0.9),
    option_changed("SGD", "maximize", [True, False], lr=0.1, momentum=0.9),
    option_changed("Adam", "weight_decay", [0.1, 0.0, 0.3], lr=0.01),
    option_changed("Adam", "eps", [1e-3, 1e-8], lr=0.01),
    option_changed("Adam", "betas", [(0.5, 0.6), (0.9, 0.999)], lr=0.01),
    option_changed("Adam", "amsgrad", [True], lr=0.01),
    option_changed("Adam", "maximize", [True, False], lr=0.01),
    option_changed("AdamW", "weight_decay", [0.5, 0.0], lr=0.01),
    option_changed("RMSprop", "alpha", [0.5, 0.9], lr=0.01, momentum=0.5),
    option_changed("RMSprop", "centered", [True, False], lr=0.01),
    option_changed("RMSprop", "momentum", [0.5, 0.0], lr=0.01),
    option_changed("AdamW", "amsgrad", [True, False], lr=0.01),
    option_changed("Adagrad", "lr_decay", [0.1, 0.0], lr=0.1),
    option_changed("Adadelta", "rho", [0.5, 0.9], lr=1.0),
    option_changed("NAdam", "momentum_decay", [0.01, 0.004], lr=0.01),
    option_changed("Rprop", "etas", [(0.3, 1.5), (0.5, 1.2)], lr=0.01),
    option_changed("Adamax", "betas", [(0.5, 0.6), (0.9, 0.999)], lr=0.01),
]


def state_reset(opt_name, **kw):
    def make(lib):
        model = model_of(lib)
        opt = getattr(lib.optim, opt_name)(model.parameters(), **kw)

        def step(x, y):
            opt.zero_grad()
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
            return loss

        def between(i):
            if i == 2:
                opt.state.clear()
            if i == 3:
                for s in opt.state.values():
                    for v in s.values():
                        if lib.is_tensor(v) and v.dim() > 0:
                            v.mul_(0.5)
        return dict(step=step, state=lambda: _observed(model, opt), between=between)
    make.__name__ = f"{opt_name}_state_reset"
    return make


def data_replaced(lib):
    model = model_of(lib)
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    def between(i):
        model[0].weight.data = model[0].weight.data.clone() * 0.9
    return dict(step=step, state=lambda: _observed(model, opt), between=between)


def state_dict_loaded(lib):
    model = model_of(lib)
    opt = lib.optim.Adam(model.parameters(), lr=0.01)
    saved = {}

    def step(x, y):
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    def between(i):
        if i == 1:
            saved["m"] = {k: v.clone() for k, v in model.state_dict().items()}
            saved["o"] = opt.state_dict()
        if i == 3:
            model.load_state_dict(saved["m"])
            opt.load_state_dict(saved["o"])
    return dict(step=step, state=lambda: _observed(model, opt), between=between)


def called_under_no_grad(lib):
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)
    lib.set_grad_enabled(True)      # (the previous run left it off)

    def step(x, y):
        out = (x @ w - y).pow(2).sum()
        return out, out.requires_grad

    def between(i):
        lib.set_grad_enabled(i % 2 == 1)
    return dict(step=step, state=lambda: [w.grad], between=between)


def model_dtype_changed(lib):
    model = model_of(lib)
    box = {"dt": lib.float32}

    def step(x, y):
        return (model(x.to(box["dt"])) - y.to(box["dt"])).pow(2).mean()

    def between(i):
        box["dt"] = lib.float64 if i % 2 == 0 else lib.float32
        model.to(box["dt"])
    return dict(step=step, state=lambda: [list(model.parameters())], between=between)


CASES = [hook_reads_number_changed, hook_reads_tensor_changed, hook_replaced,
         post_accumulate_hook_reads_lr, *OPTIONS, state_reset("SGD", lr=0.1, momentum=0.9),
         state_reset("Adam", lr=0.01), state_reset("RMSprop", lr=0.01, centered=True),
         data_replaced, state_dict_loaded, called_under_no_grad, model_dtype_changed]

# (cases compile runs eagerly, and the reason its warning gives)
EAGER = {}


@pytest.mark.parametrize("make", CASES, ids=lambda f: f.__name__)
def test_changes_between_calls(make):
    try:
        check(make, xy, compiled_warns=EAGER.get(make), atol=1e-5)
    finally:
        import llgrad
        import torch
        llgrad.set_grad_enabled(True)
        torch.set_grad_enabled(True)
