"""More training idioms around and inside a compiled step, in lockstep with the same program
in llgrad eagerly and in torch: tensors taken from state_dict() / optimizer state before the
steps stay views of what the steps update, an EMA updated inside the step and one averaging
BatchNorm buffers outside it, SWA's AveragedModel / SWALR / update_bn, tied weights,
.grad.data clamped in place, a non-finite gradient norm raising, and a stop flag returned
from a loss's .item()."""
import copy

import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from training_harness_sweep16_b import (batches, build, classifier_step, compiled,  # noqa: E402
                                        load_from_torch, lockstep)


def aliases_program(T, compile_fn):
    model = build(T)
    opt = T.optim.Adam(model.parameters(), lr=0.05)
    step = compile_fn(classifier_step(T))
    state = model.state_dict()
    row = model[0].weight[1]
    data = batches(T)
    step(model, opt, *data[0])
    exp_avg = opt.state[model[0].weight]["exp_avg"]
    for x, y in data[1:]:
        yield dict(loss=step(model, opt, x, y), state=list(state.values()), row=row,
                   exp_avg=exp_avg, model=model, opt=opt, step_fn=step)


def test_views_taken_before_the_steps_see_the_updates():
    steps, last, warned = lockstep(aliases_program)
    assert steps == 4 and not warned
    assert last["state"][0]._base is not None or last["state"][0].data_ptr() == \
        last["model"][0].weight.data_ptr()


def ema_inside_program(T, compile_fn):
    model = build(T)
    F = T.nn.functional
    ema = copy.deepcopy(model).requires_grad_(False)
    opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)

    def step(model, ema, opt, x, y, decay):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        with T.no_grad():
            for pe, p in zip(ema.parameters(), model.parameters()):
                pe.lerp_(p, 1 - decay)
        return loss.detach()
    step = compile_fn(step)
    for k, (x, y) in enumerate(batches(T, 6)):
        decay = min(0.99, (1 + k) / (10 + k))       # a warm-up decay: a new float each step
        yield dict(loss=step(model, ema, opt, x, y, decay), model=model, ema=ema, opt=opt,
                   step_fn=step)


def test_ema_updated_inside_the_step_with_a_changing_decay():
    steps, last, warned = lockstep(ema_inside_program)
    assert steps == 6 and not warned and last["step_fn"].n_traces <= 3


def ema_buffers_program(T, compile_fn):
    model = build(T, bn=True)
    ema = copy.deepcopy(model)
    opt = T.optim.SGD(model.parameters(), lr=0.1)
    step = compile_fn(classifier_step(T))
    for x, y in batches(T, 4):
        loss = step(model, opt, x, y)
        with T.no_grad():
            current = model.state_dict()
            for k, v in ema.state_dict().items():
                if v.dtype.is_floating_point:
                    v.mul_(0.9).add_(current[k].detach(), alpha=0.1)
                else:
                    v.copy_(current[k])     # num_batches_tracked
        yield dict(loss=loss, model=model, ema=ema, opt=opt, step_fn=step)


def test_ema_over_state_dict_with_batchnorm_buffers():
    steps, last, warned = lockstep(ema_buffers_program)
    assert steps == 4 and not warned and last["step_fn"].n_traces == 1


def swa_program(T, compile_fn):
    model = build(T, bn=True)
    U = T.optim.swa_utils
    swa = U.AveragedModel(model)
    opt = T.optim.SGD(model.parameters(), lr=0.1)
    sched = U.SWALR(opt, swa_lr=0.05, anneal_epochs=2)
    step = compile_fn(classifier_step(T))
    for x, y in batches(T):
        loss = step(model, opt, x, y)
        swa.update_parameters(model)
        sched.step()
        yield dict(loss=loss, model=model, opt=opt, swa=swa, step_fn=step,
                   averaged=swa.n_averaged)
    U.update_bn([x for x, _ in batches(T, 3)], swa)
    yield dict(loss=loss, model=model, opt=opt, swa=swa, step_fn=step,
               averaged=swa.n_averaged)


def test_swa_averaged_model_and_update_bn():
    steps, last, warned = lockstep(swa_program)
    assert steps == 6 and not warned and last["step_fn"].n_traces == 1


def tied_model(T):
    class Tied(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.hidden = T.nn.Embedding(7, 4), T.nn.Linear(4, 4)
            self.out = T.nn.Linear(4, 7, bias=False)
            self.out.weight = self.emb.weight
        def forward(self, i):
            return self.out(self.hidden(self.emb(i)).tanh())
    return Tied()


def tied_program(T, compile_fn):
    torch.manual_seed(0)
    model = tied_model(torch)
    if T is llgrad:
        reference, model = model, tied_model(llgrad)
        load_from_torch(model, reference)
    opt = T.optim.Adam(model.parameters(), lr=0.05)
    step = compile_fn(classifier_step(T))
    for x, y in batches(T, 4):
        tokens = (x[:, 0].abs() * 3).long().clamp(0, 6)
        yield dict(loss=step(model, opt, tokens, (y * 2)), model=model, opt=opt, step_fn=step)


def test_tied_embedding_and_output_weights():
    steps, last, warned = lockstep(tied_program)
    assert steps == 4 and not warned and last["step_fn"].n_traces == 1
    assert last["model"].out.weight is last["model"].emb.weight


def clamp_program(T, compile_fn):
    model = build(T)
    F = T.nn.functional
    opt = T.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)

    def step(model, opt, x, y):
        model.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        for p in model.parameters():
            p.grad.data.clamp_(-0.03, 0.03)
        opt.step()
        return loss.detach()
    step = compile_fn(step)
    for x, y in batches(T, 4):
        yield dict(loss=step(model, opt, x, y), model=model, opt=opt, step_fn=step)


def test_grad_data_clamped_in_place():
    steps, last, warned = lockstep(clamp_program)
    assert steps == 4 and not warned and last["step_fn"].n_traces == 1


def nonfinite_program(T, compile_fn):
    model = build(T)
    F = T.nn.functional
    opt = T.optim.SGD(model.parameters(), lr=0.1)

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        T.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
        opt.step()
        return loss.detach()
    step = compile_fn(step)
    for k, (x, y) in enumerate(batches(T, 4)):
        if k == 2:
            x = x.clone()
            x[0, 0] = float("inf")
        try:
            loss, raised = step(model, opt, x, y), 0
        except RuntimeError:
            loss, raised = T.tensor(-1.0), 1
        yield dict(loss=loss, raised=T.tensor(raised), model=model, opt=opt, step_fn=step)


@pytest.mark.filterwarnings("ignore:invalid value encountered")
def test_nonfinite_gradient_norm_raises_and_skips_the_update():
    steps, last, warned = lockstep(nonfinite_program)
    assert steps == 4


def stop_flag_program(T, compile_fn):
    model = build(T)
    F = T.nn.functional
    opt = T.optim.SGD(model.parameters(), lr=0.5)

    def step(model, opt, x, y, threshold):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item() < threshold, loss.item()
    step = compile_fn(step)
    x, y = batches(T, 1)[0]
    for _ in range(12):
        stop, loss = step(model, opt, x, y, 0.7)
        yield dict(loss=T.tensor(loss), stop=T.tensor(stop), model=model, opt=opt,
                   step_fn=step)
        if stop:
            break


def test_early_stop_flag_from_item_returned_by_the_step():
    steps, last, warned = lockstep(stop_flag_program)
    assert 1 < steps < 12 and not warned and last["step_fn"].n_traces == 1


def _lt(x, limit):
    return (x * 2).sum().item() < limit, -x.sum().item()


def _le(x, limit):
    return (x * 2).sum().item() <= limit


def _gt(x, limit):
    return [(x * 2).sum().item() > limit]


def _ge(x, limit):
    flag = (x * 2).sum().item() >= limit
    return flag


def _eq(x, limit):
    return {"hit": x.sum().item() * 2 == limit}


def _ne(x, limit):
    return (x * 2).sum().item() != limit, (x * 2).sum().item() / 2


def _same(a, b):
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and all(_same(u, v) for u, v in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and (a == b or (a != a and b != b))


@pytest.mark.parametrize("flag", [_lt, _le, _gt, _ge, _eq, _ne], ids=lambda f: f.__name__)
def test_returned_comparison_of_an_item_is_an_output(flag):
    step = compiled(flag)
    for value in (0.25, 1.0, 1.5, float("nan"), 1.0, -0.0, 3.0):
        x = llgrad.full((2,), value)
        assert _same(step(x, 4.0), flag(x, 4.0)), value
    assert step.n_traces == 1       # not one trace per loss value
    limit = llgrad.tensor(4.0)      # (a tensor on the other side: the number is guarded)
    assert _same(step(llgrad.full((2,), 2.0), limit), flag(llgrad.full((2,), 2.0), limit))
