"""Training-step edges: hooks on modules' forward and backward, optimiser step hooks,
unused and frozen parameters, NaN gradients, gradient clipping (and its non-finite error), a
tensor lr, add_param_group between calls, a parameter in two groups, SWA and a hand-written
EMA, accumulation over two calls, tied weights, and gradient hooks that read parameters,
raise, read values or write another .grad: torch, llgrad eager and llgrad.compile over six
calls (stateful_harness_s70_a11.check)."""
import math

import pytest

pytest.importorskip("torch")
from stateful_harness_s70_a11 import check, randn  # noqa: E402
from test_stateful_optim_s70_a11 import _observed, model_of  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile or two a case; the fast regressions are in
# test_stateful_regressions_s70_a11.py)


def xy(i):
    return randn(10 + i, 5, 4), randn(20 + i, 5, 2)


def module_forward_hooks(lib):
    lin = model_of(lib)
    lin[0].register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    lin[2].register_forward_hook(lambda m, args, out: out.relu())
    lin[0].register_full_backward_pre_hook(lambda m, go: (go[0] * 0.5,))

    def step(x, y):
        loss = (lin(x) - y).pow(2).sum()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: [p.grad for p in lin.parameters()])


def optimizer_step_hooks(lib):
    model = model_of(lib)
    opt = lib.optim.Adam(model.parameters(), lr=0.01)
    calls = []
    opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: calls.append("post"))

    def step(x, y):
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        return loss
    return dict(step=step, state=lambda: [_observed(model, opt), len(calls)])


def unused_and_frozen_parameters(lib):
    model = model_of(lib)
    extra = lib.nn.Parameter(lib.tensor(randn(5, 3)))
    frozen = lib.nn.Parameter(lib.tensor(randn(6, 2)), requires_grad=False)
    opt = lib.optim.Adam(list(model.parameters()) + [extra, frozen], lr=0.01, weight_decay=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = (model(x) + frozen - y).pow(2).mean()
        loss.backward()
        opt.step()
        return loss
    return dict(step=step, state=lambda: [_observed(model, opt), extra, frozen])


def nan_gradient_step(lib):
    model = model_of(lib)
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean() * (x[0, 0] > 1.0).float().log().exp()
        loss.backward()
        opt.step()
        return loss
    return dict(step=step, state=lambda: _observed(model, opt))


def clip_grad_norm_in_step(lib):
    model = model_of(lib)
    opt = lib.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = (model(x) * 3 - y).pow(2).sum()
        loss.backward()
        norm = lib.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        lib.nn.utils.clip_grad_value_(model.parameters(), 0.1)
        opt.step()
        return loss, norm
    return dict(step=step, state=lambda: _observed(model, opt))


def clip_grad_nonfinite_errors(lib):
    model = model_of(lib)

    def step(x, y):
        loss = (model(x) - y).pow(2).sum() * math.inf
        loss.backward()
        return lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
    return dict(step=step, state=lambda: [p.grad for p in model.parameters()])


def tensor_lr(lib):
    model = model_of(lib)
    lr = lib.tensor(0.01)
    opt = lib.optim.Adam(model.parameters(), lr=lr, foreach=False)

    def step(x, y):
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    def between(i):
        opt.param_groups[0]["lr"].fill_(0.01 / (i + 2))
    return dict(step=step, state=lambda: [list(model.parameters())], between=between)


def add_param_group_between(lib):
    model = model_of(lib)
    opt = lib.optim.SGD(model[0].parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    def between(i):
        if i == 1:
            opt.add_param_group({"params": model[2].parameters(), "lr": 0.05})
    return dict(step=step, state=lambda: _observed(model, opt), between=between)


def parameter_in_two_groups_errors(lib):
    model = model_of(lib)

    def step(x, y):
        lib.optim.SGD([{"params": model[0].parameters()},
                       {"params": [model[0].weight]}], lr=0.1)
        return model(x)
    return dict(step=step, state=lambda: [])


def swa_average(lib):
    model = model_of(lib)
    swa = lib.optim.swa_utils.AveragedModel(model)
    opt = lib.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        swa.update_parameters(model)
        return loss
    return dict(step=step, state=lambda: [list(swa.parameters()), swa.n_averaged])


def ema_by_hand(lib):
    model = model_of(lib)
    ema = [p.detach().clone() for p in model.parameters()]
    opt = lib.optim.AdamW(model.parameters(), lr=0.01)

    def step(x, y):
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        with lib.no_grad():
            for e, p in zip(ema, model.parameters()):
                e.lerp_(p, 0.1)
        return loss
    return dict(step=step, state=lambda: [ema])


def grad_accumulation_every_other(lib):
    model = model_of(lib)
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    box = {"i": 0}

    def step(x, y):
        loss = (model(x) - y).pow(2).mean() / 2
        loss.backward()
        return loss

    def between(i):
        if i % 2 == 1:
            opt.step()
            opt.zero_grad()
    return dict(step=step, state=lambda: _observed(model, opt), between=between)


def tied_weights(lib):
    emb = lib.nn.Embedding(6, 4)
    head = lib.nn.Linear(4, 6, bias=False)
    with lib.no_grad():
        emb.weight.copy_(lib.tensor(randn(7, 6, 4)))
    head.weight = emb.weight            # (one parameter, two uses: both gradients add)
    opt = lib.optim.AdamW(list(emb.parameters()), lr=0.01)
    ids = lib.tensor([0, 3, 5, 3, 1])

    def step(x, y):
        opt.zero_grad()
        logits = head(emb(ids) + x)
        loss = lib.nn.functional.cross_entropy(logits, lib.tensor([1, 2, 0, 4, 5]))
        loss.backward()
        opt.step()
        return loss
    return dict(step=step, state=lambda: [emb.weight, head.weight is emb.weight])


CASES = [module_forward_hooks, optimizer_step_hooks, unused_and_frozen_parameters,
         nan_gradient_step, clip_grad_norm_in_step, clip_grad_nonfinite_errors, tensor_lr,
         add_param_group_between, parameter_in_two_groups_errors, swa_average, ema_by_hand,
         grad_accumulation_every_other, tied_weights]

# (cases compile runs eagerly, and the reason its warning gives)
EAGER = {}


@pytest.mark.parametrize("make", CASES, ids=lambda f: f.__name__)
def test_training_edges(make):
    check(make, xy, compiled_warns=EAGER.get(make), atol=1e-5)


# ---- hooks that read parameters, raise, read values, write other gradients --------------

def xy_spike(i):
    """Call 4's inputs 100x larger (a gradient a hook refuses)."""
    return randn(10 + i, 5, 4) * (100 if i == 4 else 1), randn(20 + i, 5, 2)


def _train(lib, model, opt):
    def step(x, y):
        if opt is not None:
            opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        if opt is not None:
            opt.step()
        return loss
    return step


def hook_reads_param(lib):
    model = model_of(lib)
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for p in model.parameters():
        p.register_hook(lambda g, p=p: g + 0.01 * p)     # (p as the step left it)
    return dict(step=_train(lib, model, opt), state=lambda: _observed(model, opt))


def hook_raises_on_large(lib):
    model = model_of(lib)
    opt = lib.optim.SGD(model.parameters(), lr=0.1)

    def check_hook(g):
        if g.abs().max() > 50:
            raise ValueError("gradient too large")
        return g
    model[0].weight.register_hook(check_hook)
    return dict(step=_train(lib, model, opt), state=lambda: _observed(model, opt))


def hook_items(lib):
    model = model_of(lib)
    norms = []
    model[2].weight.register_hook(lambda g: norms.append(g.norm().item()))
    return dict(step=_train(lib, model, None),
                state=lambda: [len(norms), norms[-1] if norms else None, model[2].weight.grad])


def post_hook_zeroes_other(lib):
    model = model_of(lib)

    def zero_other(p):
        if model[0].bias.grad is not None:
            model[0].bias.grad.zero_()
    model[2].weight.register_post_accumulate_grad_hook(zero_other)
    return dict(step=_train(lib, model, None),
                state=lambda: [p.grad for p in model.parameters()])


@pytest.mark.parametrize("make", [hook_reads_param, hook_raises_on_large, hook_items,
                                  post_hook_zeroes_other], ids=lambda f: f.__name__)
def test_hooks_reading_state(make):
    check(make, xy_spike, atol=1e-4)


# ---- module hooks: a module used twice, two inputs, kwargs, a hook removed inside ---------

def module_used_twice(lib):
    m = model_of(lib)
    seen = []

    def hook(mod, gi, go):
        seen.append(float(go[0].sum()))
        return (gi[0] * 0.5,)
    m[0].register_full_backward_hook(hook)

    def step(x, y):
        loss = (m(x) - y).pow(2).mean() + (m(x * 2) * y).mean()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: [[p.grad for p in m.parameters()], len(seen), seen[-2:]])


def bilinear_hooks(lib):
    b = lib.nn.Bilinear(4, 2, 3)
    with lib.no_grad():
        b.weight.copy_(lib.tensor(randn(3, 3, 4, 2)))
        b.bias.copy_(lib.tensor(randn(4, 3)))
    got = []
    b.register_full_backward_hook(lambda mod, gi, go: got.append(tuple(g is None for g in gi)))
    b.register_full_backward_pre_hook(lambda mod, go: (go[0].clamp(-0.1, 0.1),))

    def step(x, y):
        x = x.requires_grad_()
        loss = b(x, y).sum()
        loss.backward()
        return loss, x.grad
    return dict(step=step, state=lambda: [b.weight.grad, got[-1] if got else None, len(got)])


def forward_hooks_with_kwargs(lib):
    m = model_of(lib)
    m[0].register_forward_hook(lambda mod, args, kwargs, out: out * 2, with_kwargs=True)
    m[2].register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] + 1,), kwargs),
                                   with_kwargs=True)
    return dict(step=_train(lib, m, None), state=lambda: [p.grad for p in m.parameters()])


def hook_removed_inside(lib):
    m = model_of(lib)

    def step(x, y):
        h = m[0].register_forward_hook(lambda mod, a, out: out.relu())
        out = m(x)
        h.remove()
        return out, m(x)
    return dict(step=step, state=lambda: [])


@pytest.mark.parametrize("make", [module_used_twice, bilinear_hooks, forward_hooks_with_kwargs,
                                  hook_removed_inside], ids=lambda f: f.__name__)
def test_module_hooks(make):
    check(make, xy, atol=1e-5)

