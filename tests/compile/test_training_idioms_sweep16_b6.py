"""Optimizer update rules and gradient-clipping variants as torch runs them, inside a
compiled training step in lockstep with the same program in llgrad eagerly and in torch."""
import pytest

torch = pytest.importorskip("torch")

from training_harness_sweep16_b import batches, build, classifier_step, lockstep  # noqa: E402


@pytest.mark.parametrize("kw", [dict(foreach=True), dict(foreach=True, weight_decay=0.1),
                                dict(foreach=True, maximize=True), dict(foreach=False)],
                         ids=["foreach", "foreach_weight_decay", "foreach_maximize", "for_loop"])
def test_nesterov_sgd_leaves_grad_as_torch_does(kw):
    """torch's foreach=True SGD adds Nesterov's momentum into .grad in place (unless it
    copied the grads for maximize or weight decay): the .grad a program sees after the step,
    and what a next backward accumulates onto, follow it."""
    def program(T, compile_fn):
        model = build(T)
        opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, **kw)
        F = T.nn.functional

        def step(model, opt, x, y):
            F.cross_entropy(model(x), y).backward()     # (no zero_grad: .grad accumulates)
            opt.step()
        step = compile_fn(step)
        for x, y in batches(T, 4):
            step(model, opt, x, y)
            yield dict(model=model, opt=opt, step_fn=step)
    steps, last, warned = lockstep(program)
    assert steps == 4 and not warned and last["step_fn"].n_traces <= 2


OPTIMIZERS = [("Adam", dict(lr=0.05, foreach=True)),
              ("AdamW", dict(lr=0.05, amsgrad=True, foreach=False)),
              ("NAdam", dict(lr=0.05, decoupled_weight_decay=True, weight_decay=0.1)),
              ("RAdam", dict(lr=0.05, weight_decay=0.1)),
              ("Adamax", dict(lr=0.05)), ("Adadelta", dict(lr=1.0)),
              ("ASGD", dict(lr=0.05, t0=2)), ("Rprop", dict(lr=0.05)),
              ("Adagrad", dict(lr=0.1, lr_decay=0.01)),
              ("Adam", dict(lr=0.05, maximize=True, weight_decay=0.1, amsgrad=True))]


@pytest.mark.parametrize("name,kw", [
    pytest.param(n, kw, id=f"{n}-{i}", marks=[pytest.mark.slow] if i % 2 else [])
    for i, (n, kw) in enumerate(OPTIMIZERS)])
def test_optimizers_under_an_exponential_lr_schedule(name, kw):
    def program(T, compile_fn):
        model = build(T)
        opt = getattr(T.optim, name)(model.parameters(), **kw)
        sched = T.optim.lr_scheduler.ExponentialLR(opt, 0.9)
        step = compile_fn(classifier_step(T))
        for x, y in batches(T, 4):
            yield dict(loss=step(model, opt, x, y), model=model, opt=opt, step_fn=step)
            sched.step()
    steps, last, warned = lockstep(program)
    assert steps == 4 and not warned
    if name not in ("ASGD", "Rprop"):       # (their lr is a traced constant: a new trace)
        assert last["step_fn"].n_traces <= 2


@pytest.mark.parametrize("variant", ["inf_foreach", "total_norm", "two_groups"])
def test_clipping_variants_return_the_norm(variant):
    def program(T, compile_fn):
        model = build(T)
        F, U = T.nn.functional, T.nn.utils
        opt = T.optim.SGD(model.parameters(), lr=0.3)

        def step(model, opt, x, y):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            ps = list(model.parameters())
            if variant == "inf_foreach":
                norm = U.clip_grad_norm_(ps, 0.05, norm_type=float("inf"), foreach=True)
            elif variant == "total_norm":
                norm = U.get_total_norm([p.grad for p in ps], 2.0)
                U.clip_grads_with_norm_(ps, 0.1, norm)
            else:
                norm = U.clip_grad_norm_(ps[:2], 0.1) + U.clip_grad_norm_(ps[2:], 0.1,
                                                                          norm_type=1)
            opt.step()
            return norm
        step = compile_fn(step)
        for x, y in batches(T, 4):
            yield dict(norm=step(model, opt, x, y), model=model, opt=opt, step_fn=step)
    steps, last, warned = lockstep(program)
    assert steps == 4 and not warned and last["step_fn"].n_traces == 1
