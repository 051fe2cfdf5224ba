"""Gradient accumulation in training programs with a compiled step, in lockstep with the
same program in llgrad eagerly and in torch: backward over several micro-batches before the
optimizer's step, the loss divided by their count, outside and inside the compiled step."""
import pytest

torch = pytest.importorskip("torch")

from training_harness_sweep16_b import batches, build, lockstep  # noqa: E402


def accumulation_program(T, compile_fn):
    model = build(T)
    F = T.nn.functional
    opt = T.optim.Adam(model.parameters(), lr=0.05)

    def micro_step(model, x, y, count):
        loss = F.cross_entropy(model(x), y) / count
        loss.backward()
        return loss.detach()
    micro_step = compile_fn(micro_step)
    data = batches(T, 8)
    for start in (0, 4):
        opt.zero_grad()
        total = sum(micro_step(model, x, y, 4).item() for x, y in data[start:start + 4])
        opt.step()
        yield dict(loss=T.tensor(total), model=model, opt=opt, step_fn=micro_step)


def test_gradient_accumulation_over_micro_batches():
    steps, last, warned = lockstep(accumulation_program)
    assert steps == 2 and not warned
    assert last["step_fn"].n_traces == 2      # without, then with an existing .grad


def accumulation_inside_program(T, compile_fn):
    model = build(T)
    F = T.nn.functional
    opt = T.optim.Adagrad(model.parameters(), lr=0.1)

    def step(model, opt, xs, ys):
        opt.zero_grad()
        total = 0.0
        for x, y in zip(xs, ys):
            loss = F.cross_entropy(model(x), y) / len(xs)
            loss.backward()
            total += loss.item()
        T.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.3, norm_type=1.0)
        opt.step()
        return total
    step = compile_fn(step)
    data = batches(T, 9)
    for start in (0, 3, 6):
        part = data[start:start + 3]
        total = step(model, opt, [x for x, _ in part], [y for _, y in part])
        yield dict(loss=T.tensor(total), model=model, opt=opt, step_fn=step)


def test_several_backwards_in_one_compiled_step():
    steps, last, warned = lockstep(accumulation_inside_program)
    assert steps == 3 and not warned


def test_running_item_sum_inside_the_step_does_not_retrace():
    steps, last, warned = lockstep(accumulation_inside_program, with_torch=False)
    # one trace: the step clears .grad before its backwards (zero_grad), so the entry traced
    # with every .grad None serves the calls that come with them (compile/guard_values.grad_free)
    assert last["step_fn"].n_traces == 1
