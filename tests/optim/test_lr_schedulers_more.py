"""MultiplicativeLR, ConstantLR, PolynomialLR, CyclicLR, CosineAnnealingWarmRestarts and
ChainedScheduler against torch.optim.lr_scheduler (when installed): the lr sequences, the
momentum / beta1 that CyclicLR cycles, step(epoch), the state_dict keys and values, bad
arguments; and a compiled training step whose tensor lr a scheduler moves without a
re-trace."""
import math
import warnings

import numpy as np
import pytest

import llgrad

RNG = np.random.default_rng(1)
W = RNG.standard_normal((4, 3)).astype(np.float32)


def _torch():
    return pytest.importorskip("torch")


def _opt(lib, name="SGD", **kw):
    p = [lib.tensor(W.copy(), requires_grad=True), lib.tensor(W[0].copy(), requires_grad=True)]
    kw = dict(dict(lr=0.1, momentum=0.9) if name == "SGD" else dict(lr=0.01), **kw)
    return getattr(lib.optim, name)([{"params": p[:1]}, {"params": p[1:], "lr": 0.05}], **kw)


def _decay(epoch):
    return 0.95 if epoch % 2 else 0.9


SCHEDULERS = [
    ("MultiplicativeLR", dict(lr_lambda=_decay)),
    ("ConstantLR", dict()),
    ("ConstantLR", dict(factor=0.5, total_iters=3)),
    ("PolynomialLR", dict(total_iters=8, power=2.0)),
    ("PolynomialLR", dict()),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=4)),
    ("CyclicLR", dict(base_lr=[0.01, 0.02], max_lr=0.2, step_size_up=3, step_size_down=5,
                      mode="triangular2")),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=2, mode="exp_range", gamma=0.9)),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=3, cycle_momentum=False,
                      scale_fn=lambda x: 0.5 ** x, scale_mode="iterations")),
    ("CosineAnnealingWarmRestarts", dict(T_0=3)),
    ("CosineAnnealingWarmRestarts", dict(T_0=2, T_mult=2, eta_min=0.001)),
]


def _sequence(lib, name, kwargs, opt_name="SGD", steps=20):
    opt = _opt(lib, opt_name)
    sched = getattr(lib.optim.lr_scheduler, name)(opt, **kwargs)
    seq = []
    for _ in range(steps):
        opt.step()
        sched.step()
        group = opt.param_groups[0]
        seq.append((sched.get_last_lr(), group.get("momentum"), group.get("betas")))
    return seq, sched


def _close(a, b):
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
    elif a is None or b is None:
        assert a is b
    else:
        assert a == pytest.approx(b, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("name,kwargs", SCHEDULERS, ids=[f"{n}-{i}" for i, (n, _) in
                                                         enumerate(SCHEDULERS)])
def test_lr_sequence_matches_torch(name, kwargs):
    torch = _torch()
    ours, sched = _sequence(llgrad, name, kwargs)
    theirs, tsched = _sequence(torch, name, kwargs)
    _close(ours, theirs)
    sd, tsd = sched.state_dict(), tsched.state_dict()
    assert sorted(sd) == sorted(tsd)
    for k in tsd:
        if not callable(tsd[k]) and k != "lr_lambdas":
            _close(sd[k], tsd[k]) if isinstance(tsd[k], (int, float, list)) \
                and not isinstance(tsd[k], bool) else None


def test_cyclic_lr_cycles_adam_beta1_as_torch():
    torch = _torch()
    kw = dict(base_lr=0.001, max_lr=0.01, step_size_up=3)
    _close(_sequence(llgrad, "CyclicLR", kw, "Adam")[0], _sequence(torch, "CyclicLR", kw, "Adam")[0])


def test_cyclic_lr_needs_momentum():
    opt = llgrad.optim.Adagrad([llgrad.zeros(2, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        llgrad.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1)
    with pytest.raises(ValueError, match="mode is invalid"):
        llgrad.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, mode="sine", cycle_momentum=False)


@pytest.mark.parametrize("epochs", [[0.5, 1.0, 2.5, 3.9, 7.0, 13.2], [5, 1, 9]])
def test_warm_restarts_step_to_epoch_matches_torch(epochs):
    torch = _torch()
    out = []
    for lib in (llgrad, torch):
        opt = _opt(lib)
        sched = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2)
        seq = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for e in epochs:
                sched.step(e)
                seq.append((sched.get_last_lr(), sched.T_i, sched.T_cur, sched.last_epoch))
        out.append(seq)
    _close(*out)
    with pytest.raises(ValueError, match="Expected non-negative epoch"):
        llgrad.optim.lr_scheduler.CosineAnnealingWarmRestarts(_opt(llgrad), T_0=2).step(-1)


@pytest.mark.parametrize("bad,match", [(dict(T_0=0), "positive integer T_0"),
                                       (dict(T_0=2.5), "positive integer T_0"),
                                       (dict(T_0=2, T_mult=0), "integer T_mult >= 1"),
                                       (dict(T_0=2, eta_min="0"), "float or int eta_min")])
def test_warm_restarts_bad_arguments(bad, match):
    with pytest.raises(ValueError, match=match):
        llgrad.optim.lr_scheduler.CosineAnnealingWarmRestarts(_opt(llgrad), **bad)


def test_chained_scheduler_matches_torch_and_saves_its_schedulers():
    torch = _torch()
    out = []
    for lib in (llgrad, torch):
        opt = _opt(lib)
        s = lib.optim.lr_scheduler
        chained = s.ChainedScheduler([s.ConstantLR(opt, factor=0.1, total_iters=2),
                                      s.ExponentialLR(opt, gamma=0.9)])
        seq = []
        for _ in range(6):
            opt.step()
            chained.step()
            seq.append(chained.get_last_lr())
        out.append((seq, sorted(chained.state_dict()), len(chained.state_dict()["_schedulers"])))
    _close(out[0][0], out[1][0])
    assert out[0][1:] == out[1][1:]


def test_chained_scheduler_refuses_plateau_and_mixed_optimizers():
    s = llgrad.optim.lr_scheduler
    opt, other = _opt(llgrad), _opt(llgrad)
    with pytest.raises(ValueError, match="at least one scheduler"):
        s.ChainedScheduler([])
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        s.ChainedScheduler([s.ReduceLROnPlateau(opt)])
    with pytest.raises(ValueError, match="same optimizer"):
        s.ChainedScheduler([s.ConstantLR(opt), s.ConstantLR(other)])


def test_multiplicative_lr_checks_its_lambdas():
    s = llgrad.optim.lr_scheduler
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
        s.MultiplicativeLR(_opt(llgrad), [_decay])
    with pytest.raises(TypeError, match="lr_lambda should be a function"):
        s.MultiplicativeLR(_opt(llgrad), 0.9)
    with pytest.raises(ValueError, match="between 0 and 1"):
        s.ConstantLR(_opt(llgrad), factor=2.0)


def test_compiled_step_follows_a_cyclic_tensor_lr_without_retracing():
    """A tensor lr moved by CyclicLR is read by the compiled step at each call."""
    xs = RNG.standard_normal((5, 4)).astype(np.float32)

    def run(compiled):
        w = llgrad.tensor(W.copy(), requires_grad=True)
        opt = llgrad.optim.SGD([w], lr=llgrad.tensor(0.01), momentum=0.9)
        sched = llgrad.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, step_size_up=2,
                                                    cycle_momentum=False)
        x = llgrad.tensor(xs)

        def step():
            opt.zero_grad()
            loss = (x @ w).tanh().sum()
            loss.backward()
            opt.step()
            return loss.detach()
        fn = llgrad.compile(step) if compiled else step
        losses = []
        for _ in range(7):
            losses.append(fn().item())
            sched.step()
        return losses, w.detach().numpy(), getattr(fn, "n_traces", None)
    eager, compiled = run(False), run(True)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-5)
    np.testing.assert_allclose(compiled[1], eager[1], rtol=1e-5, atol=1e-6)
    assert compiled[2] <= 2 and not math.isnan(compiled[0][-1])
