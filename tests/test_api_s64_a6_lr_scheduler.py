"""Every torch.optim.lr_scheduler scheduler against PyTorch over 50 steps: the learning
rates (and momenta / betas the cyclic ones drive) equal torch's exactly, get_last_lr too,
and a state_dict / load_state_dict round trip at step 17 continues the same sequence."""

import pytest

import llgrad

torch = pytest.importorskip("torch")


def _optimizer(L, name="SGD", **kw):
    p, q = L.nn.Parameter(L.zeros(2)), L.nn.Parameter(L.zeros(1))
    return getattr(L.optim, name)([{"params": [p]}, {"params": [q], "lr": 0.05}], lr=0.1, **kw)


def _lin(o, L, **kw):
    return L.optim.lr_scheduler.LinearLR(o, **kw)


S = {   # name: (optimizer, its options, scheduler factory, steps with a metric)
    "StepLR": ("SGD", {}, lambda L, o: L.optim.lr_scheduler.StepLR(o, 7, gamma=0.3), False),
    "MultiStepLR": ("SGD", {}, lambda L, o: L.optim.lr_scheduler.MultiStepLR(
        o, [3, 10, 10, 40], gamma=0.5), False),
    "ConstantLR": ("SGD", {}, lambda L, o: L.optim.lr_scheduler.ConstantLR(
        o, factor=0.3, total_iters=9), False),
    "LinearLR": ("SGD", {}, lambda L, o: _lin(o, L, start_factor=0.1, end_factor=0.9,
                                              total_iters=17), False),
    "ExponentialLR": ("SGD", {}, lambda L, o: L.optim.lr_scheduler.ExponentialLR(o, 0.93), False),
    "PolynomialLR": ("SGD", {}, lambda L, o: L.optim.lr_scheduler.PolynomialLR(
        o, total_iters=30, power=1.7), False),
    "PolynomialLR_default": ("SGD", {}, lambda L, o: L.optim.lr_scheduler.PolynomialLR(o), False),
    "CosineAnnealingLR": ("SGD", {}, lambda L, o: L.optim.lr_scheduler.CosineAnnealingLR(
        o, T_max=13, eta_min=0.001), False),
    "CosineAnnealingWarmRestarts": ("SGD", {}, lambda L, o:
                                    L.optim.lr_scheduler.CosineAnnealingWarmRestarts(
                                        o, T_0=5, T_mult=2, eta_min=0.01), False),
    "LambdaLR": ("SGD", {}, lambda L, o: L.optim.lr_scheduler.LambdaLR(
        o, [lambda e: 0.9 ** e, lambda e: 1 / (e + 1)]), False),
    "MultiplicativeLR": ("SGD", {}, lambda L, o: L.optim.lr_scheduler.MultiplicativeLR(
        o, lambda e: 0.95), False),
    "OneCycleLR": ("SGD", {"momentum": 0.9}, lambda L, o: L.optim.lr_scheduler.OneCycleLR(
        o, max_lr=[1.0, 0.5], total_steps=51), False),
    "OneCycleLR_linear_three_phase_adam": ("Adam", {}, lambda L, o:
                                           L.optim.lr_scheduler.OneCycleLR(
                                               o, max_lr=0.3, epochs=5, steps_per_epoch=11,
                                               anneal_strategy="linear", three_phase=True,
                                               pct_start=0.2), False),
    "CyclicLR_triangular2": ("SGD", {"momentum": 0.9}, lambda L, o: L.optim.lr_scheduler.CyclicLR(
        o, 0.01, 0.1, step_size_up=4, mode="triangular2"), False),
    "CyclicLR_exp_range": ("SGD", {"momentum": 0.9}, lambda L, o: L.optim.lr_scheduler.CyclicLR(
        o, [0.01, 0.02], [0.1, 0.3], step_size_up=3, step_size_down=6, mode="exp_range",
        gamma=0.95), False),
    "CyclicLR_scale_fn_adam": ("Adam", {}, lambda L, o: L.optim.lr_scheduler.CyclicLR(
        o, 0.01, 0.1, step_size_up=5, scale_fn=lambda x: 1 / (x + 1),
        scale_mode="iterations"), False),
    "ReduceLROnPlateau": ("SGD", {}, lambda L, o: L.optim.lr_scheduler.ReduceLROnPlateau(
        o, factor=0.5, patience=2, cooldown=1, min_lr=[0.001, 0.002]), True),
    "ReduceLROnPlateau_max_abs": ("SGD", {}, lambda L, o: L.optim.lr_scheduler.ReduceLROnPlateau(
        o, mode="max", threshold_mode="abs", threshold=0.1, patience=1, eps=1e-3), True),
    "SequentialLR": ("SGD", {}, lambda L, o: L.optim.lr_scheduler.SequentialLR(
        o, [_lin(o, L, start_factor=0.1, total_iters=5), L.optim.lr_scheduler.ExponentialLR(o, 0.9),
            L.optim.lr_scheduler.StepLR(o, 3)], milestones=[5, 20]), False),
    "SequentialLR_warmup_cosine": ("SGD", {}, lambda L, o: L.optim.lr_scheduler.SequentialLR(
        o, [L.optim.lr_scheduler.ConstantLR(o, 0.5, total_iters=4),
            L.optim.lr_scheduler.CosineAnnealingLR(o, 20)], milestones=[4]), False),
    "ChainedScheduler": ("SGD", {}, lambda L, o: L.optim.lr_scheduler.ChainedScheduler(
        [L.optim.lr_scheduler.ConstantLR(o, 0.5, total_iters=4),
         L.optim.lr_scheduler.ExponentialLR(o, 0.9),
         L.optim.lr_scheduler.MultiStepLR(o, [10, 20])]), False),
}


def _metric(i):
    return [1.0, 0.9, 0.95, 0.95, 0.95, 0.8, 0.8, 0.8, 0.8, 0.81][i % 10] + 0.001 * i * (i > 25)


def _sequence(L, name, resume_at=None):
    opt, okw, make, with_metric = S[name]
    o = _optimizer(L, opt, **okw)
    s = make(L, o)

    def row():
        return (s.get_last_lr(), [g["lr"] for g in o.param_groups],
                [g.get("momentum", g.get("betas")) for g in o.param_groups])
    out = [row()]
    for i in range(50):
        o.step()
        s.step(_metric(i)) if with_metric else s.step()
        out.append(row())
        if i == resume_at:
            sd, osd = s.state_dict(), o.state_dict()
            o = _optimizer(L, opt, **okw)
            s = make(L, o)
            o.load_state_dict(osd)
            s.load_state_dict(sd)
    return out


@pytest.mark.parametrize("resume_at", [None, 17], ids=["straight", "resumed"])
@pytest.mark.parametrize("name", sorted(S))
def test_lr_sequence_equals_torch(name, resume_at):
    assert _sequence(llgrad, name, resume_at) == _sequence(torch, name, resume_at)


def test_cosine_warm_restarts_fractional_epochs():
    def run(L):
        o = _optimizer(L)
        s = L.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2)
        out = []
        for e in range(6):
            for i in range(4):
                s.step(e + i / 4)
                out.append(s.get_last_lr())
        return out, s.T_cur, s.T_i
    assert run(llgrad) == run(torch)


def test_state_dict_contents_equal_torch():
    def run(L):
        o = _optimizer(L)
        step = L.optim.lr_scheduler.StepLR(o, 3)
        o.step()
        step.step()
        plateau = L.optim.lr_scheduler.ReduceLROnPlateau(o)
        plateau.step(1.0)
        seq = L.optim.lr_scheduler.SequentialLR(o, [L.optim.lr_scheduler.ConstantLR(o),
                                                    L.optim.lr_scheduler.StepLR(o, 2)], [3])
        return (sorted((k, repr(v)) for k, v in step.state_dict().items()),
                sorted((k, repr(v)) for k, v in plateau.state_dict().items()),
                sorted(seq.state_dict()), seq.state_dict()["_schedulers"])
    assert run(llgrad) == run(torch)


def test_custom_scheduler_subclass_equals_torch():
    def run(L):
        class Warmup(L.optim.lr_scheduler.LRScheduler):
            def __init__(self, o, warm, last_epoch=-1):
                self.warm = warm
                super().__init__(o, last_epoch)

            def get_lr(self):
                return [b * min(1.0, (self.last_epoch + 1) / self.warm) for b in self.base_lrs]
        o = _optimizer(L)
        s = Warmup(o, 5)
        out = [s.get_last_lr()]
        for _ in range(7):
            o.step()
            s.step()
            out.append(s.get_last_lr())
        return out, sorted(s.state_dict())
    assert run(llgrad) == run(torch)


def test_swalr_equals_torch():
    def run(L):
        out = []
        for strategy in ("cos", "linear"):
            o = _optimizer(L)
            s = L.optim.swa_utils.SWALR(o, swa_lr=0.05, anneal_epochs=5, anneal_strategy=strategy)
            for _ in range(8):
                o.step()
                s.step()
                out.append(s.get_last_lr())
        return out
    assert run(llgrad) == run(torch)


def test_one_cycle_past_total_steps_error_matches():
    msgs = []
    for L in (llgrad, torch):
        o = _optimizer(L)
        s = L.optim.lr_scheduler.OneCycleLR(o, 0.5, total_steps=3)
        with pytest.raises(ValueError) as e:
            for _ in range(4):
                o.step()
                s.step()
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


ADDED_GROUP = {     # schedulers stepped after optimizer.add_param_group (unfreezing layers)
    "StepLR": lambda S, o: S.StepLR(o, 2, 0.5),
    "CosineAnnealingLR": lambda S, o: S.CosineAnnealingLR(o, 3),
    "LambdaLR": lambda S, o: S.LambdaLR(o, lambda e: 0.9 ** e),
    "MultiplicativeLR": lambda S, o: S.MultiplicativeLR(o, lambda e: 0.9),
    "OneCycleLR": lambda S, o: S.OneCycleLR(o, 1.0, total_steps=20),
    "ReduceLROnPlateau": lambda S, o: S.ReduceLROnPlateau(o, patience=0),
    "CosineAnnealingWarmRestarts": lambda S, o: S.CosineAnnealingWarmRestarts(o, 3),
    "CyclicLR": lambda S, o: S.CyclicLR(o, 0.01, 0.1, 2),
    "PolynomialLR": lambda S, o: S.PolynomialLR(o, 10),
}


@pytest.mark.parametrize("name", sorted(ADDED_GROUP))
def test_param_group_added_after_the_scheduler_equals_torch(name):
    """Regression: PyTorch zips the new lrs with the param groups strictly, so a scheduler
    whose lrs come from its base_lrs raises once a group is added; llgrad scheduled the old
    groups and silently left the new group's lr as it was."""
    def run(L):
        o = L.optim.SGD([L.nn.Parameter(L.zeros(2))], lr=0.1, momentum=0.9)
        s = ADDED_GROUP[name](L.optim.lr_scheduler, o)
        out = []
        try:
            for i in range(8):
                o.step()
                if i == 3:
                    o.add_param_group({"params": [L.nn.Parameter(L.zeros(1))], "lr": 0.01})
                s.step(1.0) if name == "ReduceLROnPlateau" else s.step()
                out.append([g["lr"] for g in o.param_groups])
        except Exception as e:
            out.append((type(e).__name__, str(e), [g["lr"] for g in o.param_groups]))
        return out
    assert run(llgrad) == run(torch)
