"""Checkpoints and optimizer changes around a compiled training step, in lockstep with the
same program in llgrad eagerly and in torch: state_dict()s of model, optimizer and scheduler
saved mid-training (to a BytesIO or a file), loaded into a fresh model and optimizer and
training continued compiled; llgrad checkpoints loaded by torch and torch's by llgrad;
hyper-parameters changed by hand (momentum, nesterov, betas, eps, weight_decay), a tensor
lr, optimizer state cleared, a layer replaced, parameters pruned through .data, the model
moved to float64, weight tying and SWA averaging."""
import copy
import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from training_harness_sweep16_b import (batches, build, classifier_step, close,  # noqa: E402
                                        close_modules, close_optimizers, compiled,
                                        load_from_torch, lockstep)


def checkpoint_program(to_file, tmp_path):
    def program(T, compile_fn):
        model = build(T)
        opt = T.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        sched = T.optim.lr_scheduler.StepLR(opt, 2, 0.5)
        step = compile_fn(classifier_step(T))
        data = batches(T, 6)
        for x, y in data[:3]:
            yield dict(loss=step(model, opt, x, y), model=model, opt=opt, step_fn=step)
            sched.step()
        target = tmp_path / f"{T.__name__}-{compile_fn.__name__}.pt" if to_file else io.BytesIO()
        T.save({"model": model.state_dict(), "opt": opt.state_dict(),
                "sched": sched.state_dict(), "epoch": 3}, target)
        if not to_file:
            target.seek(0)
        ckpt = T.load(target)
        fresh = build(T)
        fresh.load_state_dict(ckpt["model"])
        opt = T.optim.SGD(fresh.parameters(), lr=0.05, momentum=0.9)
        opt.load_state_dict(ckpt["opt"])
        sched = T.optim.lr_scheduler.StepLR(opt, 2, 0.5)
        sched.load_state_dict(ckpt["sched"])
        assert ckpt["epoch"] == 3
        for x, y in data[3:]:
            yield dict(loss=step(fresh, opt, x, y), model=fresh, opt=opt, step_fn=step)
            sched.step()
    return program


@pytest.mark.parametrize("to_file", [False, True], ids=["bytesio", "file"])
def test_checkpoint_mid_training_then_continue_compiled(to_file, tmp_path):
    steps, last, warned = lockstep(checkpoint_program(to_file, tmp_path))
    assert steps == 6 and not warned and last["step_fn"].n_traces <= 3


def _trained_pair(steps=2):
    """A torch and an llgrad model and Adam after `steps` steps (llgrad's compiled)."""
    tm, lm = build(torch), build(llgrad)
    topt = torch.optim.Adam(tm.parameters(), lr=0.05)
    lopt = llgrad.optim.Adam(lm.parameters(), lr=0.05)
    tstep, lstep = classifier_step(torch), compiled(classifier_step(llgrad))
    for (tx, ty), (lx, ly) in zip(batches(torch, steps), batches(llgrad, steps)):
        close(tstep(tm, topt, tx, ty), lstep(lm, lopt, lx, ly), "loss", 1e-5)
    return (tm, topt, tstep), (lm, lopt, lstep)


def _continue(a, b):
    (am, aopt, astep), (bm, bopt, bstep) = a, b
    close_modules(am, bm, "loaded", 1e-5, grads=False)
    close_optimizers(aopt, bopt, "loaded", 1e-5)
    ta, tb = (batches(torch if isinstance(am, torch.nn.Module) else llgrad, 3)[2],
              batches(torch if isinstance(bm, torch.nn.Module) else llgrad, 3)[2])
    close(astep(am, aopt, *ta), bstep(bm, bopt, *tb), "loss after loading", 1e-5)
    close_modules(am, bm, "after a step", 1e-5)
    close_optimizers(aopt, bopt, "after a step", 1e-5)


def test_llgrad_checkpoint_loads_in_torch():
    torch_run, llgrad_run = _trained_pair()
    buf = io.BytesIO()
    llgrad.save({"model": llgrad_run[0].state_dict(), "opt": llgrad_run[1].state_dict()}, buf)
    buf.seek(0)
    ckpt = torch.load(buf, weights_only=True)
    model = build(torch)
    model.load_state_dict(ckpt["model"])
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    opt.load_state_dict(ckpt["opt"])
    _continue(llgrad_run, (model, opt, torch_run[2]))


def test_torch_checkpoint_loads_in_llgrad_and_continues_compiled():
    torch_run, llgrad_run = _trained_pair()
    buf = io.BytesIO()
    torch.save({"model": torch_run[0].state_dict(), "opt": torch_run[1].state_dict()}, buf)
    buf.seek(0)
    ckpt = llgrad.load(buf)
    model = build(llgrad)
    model.load_state_dict(ckpt["model"])
    opt = llgrad.optim.Adam(model.parameters(), lr=0.05)
    opt.load_state_dict(ckpt["opt"])
    _continue(torch_run, (model, opt, llgrad_run[2]))
    assert llgrad_run[2].n_traces == 2          # the fresh model meets the same guards


HYPER_CHANGES = {
    "sgd_momentum_nesterov": ("SGD", {2: {"momentum": 0.9}, 4: {"nesterov": True,
                                                                "dampening": 0.0}}),
    "sgd_weight_decay_maximize": ("SGD", {1: {"weight_decay": 0.1}, 3: {"maximize": True}}),
    "adam_betas_eps": ("Adam", {2: {"betas": (0.5, 0.9)}, 3: {"eps": 1e-2}}),
    "adam_weight_decay": ("Adam", {2: {"weight_decay": 0.1}}),
    "rmsprop_alpha": ("RMSprop", {2: {"alpha": 0.5}}),
}


@pytest.mark.parametrize("case", sorted(HYPER_CHANGES))
def test_hyper_parameters_changed_by_hand(case):
    name, changes = HYPER_CHANGES[case]

    def program(T, compile_fn):
        model = build(T)
        kw = {"SGD": dict(lr=0.1, momentum=0.5), "Adam": dict(lr=0.05),
              "RMSprop": dict(lr=0.01, momentum=0.3)}[name]
        opt = getattr(T.optim, name)(model.parameters(), **kw)
        step = compile_fn(classifier_step(T))
        for k, (x, y) in enumerate(batches(T, 6)):
            opt.param_groups[0].update(changes.get(k, {}))
            yield dict(loss=step(model, opt, x, y), model=model, opt=opt, step_fn=step)
    steps, last, warned = lockstep(program)
    assert steps == 6 and not warned and last["step_fn"].n_traces <= 3


def test_amsgrad_switched_on_mid_training_raises_as_torch_does():
    errors = []
    for T, fn in ((torch, classifier_step(torch)), (llgrad, classifier_step(llgrad)),
                  (llgrad, compiled(classifier_step(llgrad)))):
        model = build(T)
        opt = T.optim.Adam(model.parameters(), lr=0.05)
        data = batches(T, 2)
        fn(model, opt, *data[0])
        opt.param_groups[0]["amsgrad"] = True
        before = copy.deepcopy(model.state_dict())
        with pytest.raises(KeyError, match="max_exp_avg_sq") as info:
            fn(model, opt, *data[1])
        errors.append(info.value)
        for k, v in model.state_dict().items():     # the update did not start
            np.testing.assert_array_equal(v.numpy(), before[k].numpy())
    assert len(errors) == 3


def state_program(change):
    def program(T, compile_fn):
        model = build(T)
        lr = T.tensor(0.05) if change == "tensor_lr" else 0.05
        opt = T.optim.Adam(model.parameters(), lr=lr)
        step = compile_fn(classifier_step(T))
        for k, (x, y) in enumerate(batches(T, 5)):
            if k == 2 and change == "tensor_lr":
                opt.param_groups[0]["lr"].fill_(0.01)
            elif k == 3 and change == "clear_state":
                opt.state.clear()
            elif k == 2 and change == "replace_layer":
                T.manual_seed(3)
                model[2] = T.nn.Linear(8, 3)
                if T is llgrad:
                    torch.manual_seed(3)
                    load_from_torch(model[2], torch.nn.Linear(8, 3))
                opt = T.optim.Adam(model.parameters(), lr=0.05)
            elif k >= 2 and change == "prune_data":
                w = model[0].weight
                w.data = w.data * (w.detach().abs() > 0.2).float()
            elif k == 2 and change == "double":
                model.double()
                opt = T.optim.Adam(model.parameters(), lr=0.05)
            if change == "double" and k >= 2:
                x = x.double()
            yield dict(loss=step(model, opt, x, y), model=model, opt=opt, step_fn=step)
    return program


@pytest.mark.parametrize("change", ["tensor_lr", "clear_state", "replace_layer",
                                    "prune_data", "double"])
def test_model_and_optimizer_changed_between_steps(change):
    steps, last, warned = lockstep(state_program(change))
    assert steps == 5 and not warned and last["step_fn"].n_traces <= 3

