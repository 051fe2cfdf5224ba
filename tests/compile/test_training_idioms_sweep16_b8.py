"""Training programs with a compiled step, in lockstep with the same program in llgrad
eagerly and in torch: .grad set to None by hand between steps, LBFGS with a compiled
closure, gradient hooks registered outside the step, and a compiled module (llgrad.compile
of the model) with an EMA copy."""
import copy

import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from training_harness_sweep16_b import (batches, build, classifier_step, compiled,  # noqa: E402
                                        lockstep)


def grad_reset_program(T, compile_fn):
    """No zero_grad in the step: gradients accumulate, and one .grad is dropped by hand."""
    model = build(T)
    F = T.nn.functional
    opt = T.optim.Adam(model.parameters(), lr=0.05)

    def step(model, opt, x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    step = compile_fn(step)
    for k, (x, y) in enumerate(batches(T, 6)):
        (model[0].weight if k % 2 == 0 else model[2].bias).grad = None
        yield dict(loss=step(model, opt, x, y), model=model, opt=opt, step_fn=step)


def test_grad_set_to_none_by_hand_between_steps():
    steps, last, warned = lockstep(grad_reset_program)
    assert steps == 6 and not warned and last["step_fn"].n_traces <= 3


def lbfgs_program(T, compile_fn):
    model = build(T)
    F = T.nn.functional
    opt = T.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)

    def closure_body(model, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss
    closure_body = compile_fn(closure_body)
    for x, y in batches(T, 3):
        loss = opt.step(lambda: closure_body(model, x, y))
        yield dict(loss=loss.detach(), model=model, opt=opt, step_fn=closure_body)


def test_lbfgs_with_a_compiled_closure():
    # (LBFGS's curvature pairs amplify float32 rounding: native code's gradients differ
    # from eager's in the last bit, torch's from llgrad's)
    steps, last, warned = lockstep(lbfgs_program, torch_tol=1e-3, tol=1e-3)
    # (one trace: zero_grad sets .grad to None first, so the .grad a call meets is unread)
    assert steps == 3 and not warned and last["step_fn"].n_traces == 1


def test_compiled_step_sees_state_a_hook_changes_eagerly():
    """A gradient hook registered outside the step (clamping) is traced into the compiled
    step (guards.py, backward_hooks.hooks_allowed), with the same numbers."""
    def program(T, compile_fn):
        model = build(T)
        for p in model.parameters():
            p.register_hook(lambda g: g.clamp(-0.02, 0.02))
        opt = T.optim.SGD(model.parameters(), lr=0.5)
        step = compile_fn(classifier_step(T))
        for x, y in batches(T, 3):
            yield dict(loss=step(model, opt, x, y), model=model, opt=opt, step_fn=step)
    steps, last, warned = lockstep(program)
    assert steps == 3 and not warned and len(last["step_fn"].entries) == 1
    assert isinstance(last["loss"], llgrad.Tensor)


def compiled_module_program(T, compile_fn):
    """llgrad.compile(model) (a compiled module) trained eagerly around it, an EMA made by
    deepcopy of the compiled module, eval() under no_grad, and load_state_dict mid-run."""
    raw = build(T, bn=True)
    model = llgrad.compile(raw, backend="llvm") if compile_fn is compiled else raw
    ema = copy.deepcopy(model)
    for p in ema.parameters():
        p.requires_grad_(False)
    opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    F = T.nn.functional
    for k, (x, y) in enumerate(batches(T, 6)):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        with T.no_grad():
            for a, b in zip(ema.parameters(), model.parameters()):
                a.lerp_(b, 0.3)
            for a, b in zip(ema.buffers(), model.buffers()):
                a.copy_(b)
        model.eval()
        ema.eval()
        with T.no_grad():
            scores = model(x).sum(), ema(x).sum()
        if k == 3:
            state = model.state_dict()
            model.load_state_dict({name: v * 0.5 if v.dtype.is_floating_point else v
                                   for name, v in state.items()})
        yield dict(loss=loss, scores=list(scores), model=raw, ema=getattr(ema, "_orig_mod", ema),
                   opt=opt, step_fn=model)


def test_compiled_module_with_an_ema_copy_and_a_reload():
    steps, last, warned = lockstep(compiled_module_program)
    assert steps == 6 and not warned and last["step_fn"].n_traces == 2     # train, eval
