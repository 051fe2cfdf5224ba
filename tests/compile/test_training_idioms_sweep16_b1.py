"""Training programs with the step compiled by llgrad.compile, run in lockstep with the same
program in llgrad eagerly and in torch: EMA models, hand-changed lr / weight_decay and
gradient clipping."""
import copy

import pytest

torch = pytest.importorskip("torch")

from training_harness_sweep16_b import batches, build, classifier_step, lockstep  # noqa: E402


def ema_program(T, compile_fn):
    model = build(T)
    ema = copy.deepcopy(model).requires_grad_(False)
    opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = compile_fn(classifier_step(T))
    for k, (x, y) in enumerate(batches(T)):
        loss = step(model, opt, x, y)
        with T.no_grad():
            if k % 2:
                for pe, p in zip(ema.parameters(), model.parameters()):
                    pe.mul_(0.9).add_(p, alpha=0.1)
            else:
                pes = list(ema.parameters())
                T._foreach_lerp_(pes, list(model.parameters()), 0.2)
        yield dict(loss=loss, model=model, ema=ema, opt=opt, step_fn=step)


def test_ema_model_from_deepcopy_updated_under_no_grad():
    steps, last, warned = lockstep(ema_program)
    assert steps == 5 and not warned
    assert last["step_fn"].n_traces == 1


def manual_hyper_program(T, compile_fn):
    model = build(T)
    opt = T.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)
    step = compile_fn(classifier_step(T))
    for k, (x, y) in enumerate(batches(T, 6)):
        for group in opt.param_groups:
            group["lr"] = 0.01 * (k + 1)
            group["weight_decay"] = 0.1 / (k + 1)
        yield dict(loss=step(model, opt, x, y), model=model, opt=opt, step_fn=step)


def test_lr_and_weight_decay_changed_by_hand():
    steps, last, warned = lockstep(manual_hyper_program)
    assert steps == 6 and not warned and last["step_fn"].n_traces == 1


def clip_program(kind):
    def program(T, compile_fn):
        model = build(T)
        opt = T.optim.Adam(model.parameters(), lr=0.05)
        step = compile_fn(classifier_step(T, clip=kind))
        for x, y in batches(T):
            yield dict(loss=step(model, opt, x, y), model=model, opt=opt, step_fn=step)
    return program


@pytest.mark.parametrize("kind", ["norm", "value"])
def test_gradient_clipping_in_the_step(kind):
    steps, last, warned = lockstep(clip_program(kind))
    assert steps == 5 and not warned and last["step_fn"].n_traces == 1


def returned_norm_program(read_item):
    """The norm returned by clip_grad_norm_ drives Python both inside the step (skip the
    update of a batch whose norm is large) and outside (lr decay)."""
    def program(T, compile_fn):
        model = build(T)
        F = T.nn.functional
        opt = T.optim.SGD(model.parameters(), lr=0.5)

        def step(model, opt, x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            norm = T.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            if (norm.item() if read_item else norm) < 0.6:
                opt.step()
            return loss.detach(), norm
        step = compile_fn(step)
        for x, y in batches(T, 8):
            loss, norm = step(model, opt, x, y)
            if norm.item() > 0.7:
                for group in opt.param_groups:
                    group["lr"] *= 0.9
            yield dict(loss=loss, norm=norm, model=model, opt=opt, step_fn=step)
    return program


def test_returned_clip_norm_used_in_python():
    steps, last, warned = lockstep(returned_norm_program(read_item=False))
    assert steps == 8       # (opt.step() writes in place: the branch stays Python)
    assert all("tensor-dependent control flow left as Python" in w for w in warned)
    assert last["step_fn"].n_traces <= 3      # the condition's outcome is guarded


def test_clip_norm_item_in_a_condition_inside_the_step():
    steps, last, warned = lockstep(returned_norm_program(read_item=True))
    assert steps == 8


def test_clip_norm_item_in_a_condition_does_not_retrace_per_value():
    steps, last, warned = lockstep(returned_norm_program(read_item=True), with_torch=False)
    assert last["step_fn"].n_traces <= 3
