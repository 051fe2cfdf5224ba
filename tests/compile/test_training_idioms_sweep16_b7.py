"""lr schedulers (StepLR, OneCycleLR, CosineAnnealingLR, ReduceLROnPlateau, LambdaLR) stepped
per batch or per epoch around a compiled training step, in lockstep with the same program in
llgrad eagerly and in torch."""
import pytest

torch = pytest.importorskip("torch")

from training_harness_sweep16_b import batches, build, classifier_step, lockstep  # noqa: E402


def scheduler_program(kind):
    def program(T, compile_fn):
        model = build(T)
        opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
        S = T.optim.lr_scheduler
        per_batch = kind in ("onecycle", "lambda")
        sched = {"step": lambda: S.StepLR(opt, 2, gamma=0.5),
                 "onecycle": lambda: S.OneCycleLR(opt, max_lr=0.5, total_steps=20),
                 "cosine": lambda: S.CosineAnnealingLR(opt, T_max=4),
                 "plateau": lambda: S.ReduceLROnPlateau(opt, patience=0, factor=0.5),
                 "lambda": lambda: S.LambdaLR(opt, lambda e: 1.0 / (1 + e))}[kind]()
        step = compile_fn(classifier_step(T))
        for epoch in range(3):
            for x, y in batches(T, 3, seed=epoch):
                loss = step(model, opt, x, y)
                if per_batch:
                    sched.step()
                yield dict(loss=loss, model=model, opt=opt, step_fn=step)
            if kind == "plateau":
                sched.step(loss.item() + epoch)
            elif not per_batch:
                sched.step()
    return program


@pytest.mark.parametrize("kind", ["step", "onecycle", "cosine", "plateau", "lambda"])
def test_lr_schedulers_do_not_retrace(kind):
    steps, last, warned = lockstep(scheduler_program(kind))
    assert steps == 9 and not warned
    assert last["step_fn"].n_traces == 1      # lr and momentum are read, not baked in
