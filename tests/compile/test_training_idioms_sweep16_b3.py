"""Training programs with a compiled step that change the model between steps, run in
lockstep with the same program in llgrad eagerly and in torch: freezing and unfreezing
(requires_grad_ toggles, an optimizer over a filter, a param group added mid-training),
train()/eval() switches with an evaluation loop under no_grad / inference_mode and early
stopping on a float, re-initialised layers, zero_grad(set_to_none=False) and dropout under
manual_seed."""
import pytest

torch = pytest.importorskip("torch")

from training_harness_sweep16_b import batches, build, classifier_step, lockstep  # noqa: E402


def freeze_program(T, compile_fn):
    model = build(T)
    opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = compile_fn(classifier_step(T))
    for k, (x, y) in enumerate(batches(T, 6)):
        if k in (2, 4):
            model[0].requires_grad_(k == 4)
        yield dict(loss=step(model, opt, x, y), model=model, opt=opt, step_fn=step)


def test_freeze_and_unfreeze_a_layer_mid_training():
    steps, last, warned = lockstep(freeze_program)
    assert steps == 6 and not warned
    # (each trace sees another requires_grad or .grad state of the frozen layer)
    assert last["step_fn"].n_traces == 4


def filtered_program(T, compile_fn):
    model = build(T)
    model[0].weight.requires_grad_(False)
    opt = T.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=0.05)
    step = compile_fn(classifier_step(T))
    for k, (x, y) in enumerate(batches(T, 6)):
        if k == 3:
            model[0].weight.requires_grad_(True)
            opt.add_param_group({"params": [model[0].weight], "lr": 0.01})
        yield dict(loss=step(model, opt, x, y), model=model, opt=opt, step_fn=step)


def test_optimizer_over_a_filter_then_a_param_group_added():
    steps, last, warned = lockstep(filtered_program)
    assert steps == 6 and not warned and last["step_fn"].n_traces == 3


def evaluation_program(mode):
    def program(T, compile_fn):
        model = build(T, bn=True)
        opt = T.optim.SGD(model.parameters(), lr=0.1)
        step = compile_fn(classifier_step(T))
        evaluate = compile_fn(lambda model, x: (model(x).argmax(1), model(x).sum()))
        best, bad = float("inf"), 0
        for epoch in range(6):
            model.train()
            for x, y in batches(T, 2, seed=epoch):
                loss = step(model, opt, x, y)
            model.eval()
            with (T.no_grad() if mode == "no_grad" else T.inference_mode()):
                total = 0.0
                for x, _ in batches(T, 2, seed=10):
                    _, score = evaluate(model, x)
                    total += score.item()
            yield dict(loss=loss, score=T.tensor(total), model=model, opt=opt, step_fn=step,
                       eval_fn=evaluate)
            if total < best - 1e-3:
                best, bad = total, 0
            else:
                bad += 1
                if bad >= 2:        # early stopping on a Python float
                    break
    return program


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_train_eval_switch_with_an_evaluation_loop(mode):
    steps, last, warned = lockstep(evaluation_program(mode))
    assert steps >= 3 and not warned
    assert last["step_fn"].n_traces == 1 and last["eval_fn"].n_traces == 1


def one_function_program(T, compile_fn):
    """One compiled forward for training, evaluation under no_grad and inference_mode."""
    model = build(T, dropout=0.5, bn=True)
    F = T.nn.functional
    opt = T.optim.SGD(model.parameters(), lr=0.1)
    forward = compile_fn(lambda model, x, y: F.cross_entropy(model(x), y))
    for k, (x, y) in enumerate(batches(T, 5)):
        model.train()
        T.manual_seed(k)
        opt.zero_grad()
        loss = forward(model, x, y)
        loss.backward()
        opt.step()
        model.eval()
        with T.no_grad():
            plain = forward(model, x, y)
        with T.inference_mode():
            inference = forward(model, x, y)
        yield dict(loss=loss, plain=plain, inference=inference, model=model, opt=opt,
                   step_fn=forward)


def test_one_compiled_forward_in_train_and_eval_modes():
    # (torch's dropout draws other numbers: llgrad eager is the reference)
    steps, last, warned = lockstep(one_function_program, with_torch=False)
    assert steps == 5 and not warned and last["step_fn"].n_traces == 3


def dropout_program(T, compile_fn):
    model = build(T, dropout=0.3)
    opt = T.optim.SGD(model.parameters(), lr=0.1)
    step = compile_fn(classifier_step(T))
    for k, (x, y) in enumerate(batches(T)):
        T.manual_seed(100 + k)
        yield dict(loss=step(model, opt, x, y), model=model, opt=opt, step_fn=step)


def test_dropout_under_manual_seed_matches_eager():
    steps, last, warned = lockstep(dropout_program, with_torch=False)
    assert steps == 5 and not warned and last["step_fn"].n_traces == 1


def reinit_program(how):
    def program(T, compile_fn):
        model = build(T)
        opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
        step = compile_fn(classifier_step(T))

        def init(module):
            if isinstance(module, T.nn.Linear):
                with T.no_grad():
                    module.weight.fill_(0.05)
                    module.bias.zero_()
        for k, (x, y) in enumerate(batches(T)):
            if k == 2 and how == "apply":
                model.apply(init)
            elif k == 2:
                T.manual_seed(7)
                model[2].reset_parameters()
            yield dict(loss=step(model, opt, x, y), model=model, opt=opt, step_fn=step)
    return program


@pytest.mark.parametrize("how", ["apply", "reset_parameters"])
def test_layer_reinitialised_mid_training(how):
    # (reset_parameters draws from the generator: llgrad eager is the reference)
    steps, last, warned = lockstep(reinit_program(how), with_torch=how == "apply")
    assert steps == 5 and not warned and last["step_fn"].n_traces == 1


def keep_grads_program(T, compile_fn):
    model = build(T)
    F = T.nn.functional
    opt = T.optim.RMSprop(model.parameters(), lr=0.01, weight_decay=0.01)

    def step(model, opt, x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss.detach()
    step = compile_fn(step)
    for x, y in batches(T):
        yield dict(loss=step(model, opt, x, y), model=model, opt=opt, step_fn=step)


def test_zero_grad_keeping_zeroed_tensors():
    steps, last, warned = lockstep(keep_grads_program)
    assert steps == 5 and not warned and last["step_fn"].n_traces == 1
