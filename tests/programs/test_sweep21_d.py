"""Sweep 21 (D): a learning-rate schedule stepped inside the compiled training step, the
Hugging Face habit, for more calls than the recompile limit. The cosine schedulers
(CosineAnnealingLR, CosineAnnealingWarmRestarts, OneCycleLR's and SWALR's cos annealing) take
math.cos of their step counter: that read the counter's number, so each call traced again
and the ninth ran eagerly with a warning; OneCycleLR with Adam writes
`group["betas"] = (momentum, *group["betas"][1:])`, a tuple write that stopped every trace;
SequentialLR (warm-up, then cosine) shared its scheduler's list of last lrs, which no
compiled call can replay (each would write a copy): no trace was ever kept; CyclicLR
took math.floor of its counter, a trace per step too.
Each now keeps a trace per phase of the schedule for all the calls, with torch's numbers."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

STEPS = 14      # (past the recompile limit of 8)


def _scheduled(make_opt, make_sched, max_entries):
    def program(torch, env):
        nn, F = torch.nn, torch.nn.functional
        model = env.init(nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)))
        opt = make_opt(torch, model)
        sched = make_sched(torch, opt)
        x, y = env.randn(10, 3), env.randn(10, 1)

        def train_step(x, y):
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            sched.step()
            return loss.item(), sched.get_last_lr()[0]

        step = env.step(train_step)
        env.rec("hist", [step(x, y) for _ in range(STEPS)])
        env.rec("group", {k: v for k, v in opt.param_groups[0].items() if k != "params"})
        env.rec("params", list(model.parameters()))
        if env.compiled:
            entries = len(step.entries)
            assert entries <= max_entries, f"{entries} traces for {STEPS} calls"
    return program


def _sgd(torch, model):
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def _adam(torch, model):
    return torch.optim.Adam(model.parameters(), lr=1e-3)


CASES = {
    "cosine_annealing": (_sgd, lambda t, o: t.optim.lr_scheduler.CosineAnnealingLR(o, T_max=5), 3),
    # (T_i, which the restart test reads, is a number until the first restart changes it:
    # a restart and a plain step before, the same two after; the counters are inputs from
    # the first trace, which is kept)
    "cosine_warm_restarts": (_adam, lambda t, o: t.optim.lr_scheduler.CosineAnnealingWarmRestarts(
        o, T_0=3, T_mult=2, eta_min=1e-4), 4),
    "one_cycle_sgd": (_sgd, lambda t, o: t.optim.lr_scheduler.OneCycleLR(
        o, max_lr=0.1, total_steps=STEPS), 3),
    "one_cycle_adam_betas": (_adam, lambda t, o: t.optim.lr_scheduler.OneCycleLR(
        o, max_lr=1e-2, total_steps=STEPS, pct_start=0.25), 3),
    "swalr_cos": (_sgd, lambda t, o: t.optim.swa_utils.SWALR(
        o, swa_lr=0.01, anneal_epochs=6, anneal_strategy="cos"), 5),
    "warmup_then_cosine": (_adam, lambda t, o: t.optim.lr_scheduler.SequentialLR(o, [
        t.optim.lr_scheduler.LinearLR(o, 0.1, 1.0, 3),
        t.optim.lr_scheduler.CosineAnnealingLR(o, T_max=8)], milestones=[3]), 5),
    "chained": (_sgd, lambda t, o: t.optim.lr_scheduler.ChainedScheduler([
        t.optim.lr_scheduler.ExponentialLR(o, 0.95),
        t.optim.lr_scheduler.CosineAnnealingLR(o, T_max=6)]), 4),
    "cyclic_triangular2": (_sgd, lambda t, o: t.optim.lr_scheduler.CyclicLR(
        o, 1e-3, 0.05, step_size_up=2, step_size_down=3, mode="triangular2"), 4),
    "cyclic_exp_range_adam": (_adam, lambda t, o: t.optim.lr_scheduler.CyclicLR(
        o, 1e-3, 1e-2, step_size_up=3, mode="exp_range", gamma=0.9), 4),
    "one_cycle_adam_linear": (_adam, lambda t, o: t.optim.lr_scheduler.OneCycleLR(
        o, max_lr=1e-2, total_steps=STEPS, anneal_strategy="linear", three_phase=True), 4),
    # (`epoch in milestones` hashed the counter: a trace per step; a milestone listed twice
    # multiplies by gamma twice)
    "multistep": (_sgd, lambda t, o: t.optim.lr_scheduler.MultiStepLR(
        o, milestones=[3, 6, 6], gamma=0.5), 4),
}


@pytest.mark.parametrize("name", CASES)
def test_schedule_in_step(name):
    run_tutorial(_scheduled(*CASES[name]))


@pytest.mark.parametrize("kind", ["cosine", "warm_restarts", "one_cycle", "cyclic"])
def test_cosine_lr_of_compiled_calls_is_python_s_to_the_bit(kind):
    """The lr a compiled call writes comes from glibc's cos of the counter (the cos op's
    libm form), the very number math.cos gives eagerly, or from the floor op for
    math.floor: equal with ==, call by call (Adam's betas too)."""
    import llgrad

    def setup():
        llgrad.manual_seed(0)
        model = llgrad.nn.Linear(3, 1)
        opt = llgrad.optim.Adam(model.parameters(), lr=0.1)
        S = llgrad.optim.lr_scheduler
        sched = {"cosine": lambda: S.CosineAnnealingLR(opt, T_max=7, eta_min=1e-3),
                 "warm_restarts": lambda: S.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2),
                 "one_cycle": lambda: S.OneCycleLR(opt, max_lr=0.3, total_steps=STEPS),
                 "cyclic": lambda: S.CyclicLR(opt, 0.01, 0.1, step_size_up=3,
                                              mode="triangular2")}[kind]()

        def step(x):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
            sched.step()
        return opt, step
    (oe, eager), (oc, compiled) = setup(), setup()
    compiled = llgrad.compile(compiled)
    x = llgrad.randn(4, 3)
    for _ in range(STEPS):
        eager(x)
        compiled(x)
        ge, gc = oe.param_groups[0], oc.param_groups[0]
        assert type(gc["lr"]) is float and gc["lr"] == ge["lr"]
        assert gc["betas"] == ge["betas"]
    assert compiled.n_traces <= 4 and compiled.entries     # (a trace per phase, not per step)
