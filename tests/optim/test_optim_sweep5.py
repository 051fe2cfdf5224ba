"""Sweep 5 of llgrad.optim against torch.optim: the learning-rate scheduler's warning when
its first step() precedes the optimiser's (and when optimizer.step was replaced after the
scheduler was made), Adam's checks of a tensor lr, and the optimiser's TypeError for a
tensor passed as params."""
import warnings

import pytest

import llgrad

torch = pytest.importorskip("torch")


def _run(lib, fn):
    """fn(lib) -> (result or (error type, first line), [(category, message)])."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            out = fn(lib)
        except Exception as e:      # noqa: BLE001 (compared with torch's)
            out = (type(e).__name__, str(e).split("\n")[0].replace("torch", "llgrad"))
    return out, [(x.category.__name__, str(x.message)) for x in w]


def _same(fn):
    got, want = _run(llgrad, fn), _run(torch, fn)
    assert got == want
    return got


def _params(lib):
    return [lib.nn.Parameter(lib.ones(2, 2))]


def _sched_first(lib):
    opt = lib.optim.SGD(_params(lib), lr=0.1)
    sched = lib.optim.lr_scheduler.StepLR(opt, 2)
    sched.step()
    opt.step()
    sched.step()
    return [round(x, 6) for x in sched.get_last_lr()]


def _opt_first(lib):
    opt = lib.optim.SGD(_params(lib), lr=0.1, momentum=0.9)
    sched = lib.optim.lr_scheduler.ExponentialLR(opt, 0.5)
    for _ in range(3):
        opt.step()
        sched.step()
    return [round(x, 6) for x in sched.get_last_lr()]


def _replaced_step(lib):
    opt = lib.optim.SGD(_params(lib), lr=0.1)
    sched = lib.optim.lr_scheduler.StepLR(opt, 2)
    opt.step = lambda closure=None: None
    opt.step()
    sched.step()


def _two_schedulers(lib):
    # the second scheduler finds optimizer.step wrapped already: it wraps it no further
    opt = lib.optim.SGD(_params(lib), lr=0.1)
    s1 = lib.optim.lr_scheduler.StepLR(opt, 2)
    s2 = lib.optim.lr_scheduler.LinearLR(opt, 0.5, total_iters=2)
    opt.step()
    s1.step()
    s2.step()
    return [round(x, 6) for x in s2.get_last_lr()]


def _plateau_and_cyclic(lib):
    opt = lib.optim.SGD(_params(lib), lr=0.1, momentum=0.9)
    p = lib.optim.lr_scheduler.ReduceLROnPlateau(opt)
    p.step(1.0)                     # (no order check in ReduceLROnPlateau)
    c = lib.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, step_size_up=2)
    c.step()
    return [round(x, 6) for x in c.get_last_lr()]


@pytest.mark.parametrize("case", [_sched_first, _opt_first, _replaced_step, _two_schedulers,
                                  _plateau_and_cyclic])
def test_scheduler_step_order_warning(case):
    _same(case)


def test_scheduler_before_optimizer_warns_with_pytorch_words():
    _, warns = _same(_sched_first)
    assert len(warns) == 1 and warns[0][1].startswith(
        "Detected call of `lr_scheduler.step()` before `optimizer.step()`")


def test_scheduler_warning_names_the_users_line():
    opt = llgrad.optim.SGD(_params(llgrad), lr=0.1)
    sched = llgrad.optim.lr_scheduler.StepLR(opt, 2)
    with pytest.warns(UserWarning, match="Detected call of") as rec:
        sched.step()
    assert rec[0].filename == __file__


def test_compiled_step_with_scheduler_is_silent_and_traces_once():
    m = llgrad.nn.Linear(3, 2)
    opt = llgrad.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    sched = llgrad.optim.lr_scheduler.StepLR(opt, 2, 0.5)

    @llgrad.compile(backend="interpret")   # (the tracing is what matters here)
    def step(x):
        opt.zero_grad()
        loss = m(x).sum()
        loss.backward()
        opt.step()
        return loss

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(6):
            step(llgrad.ones(4, 3))
            sched.step()
    assert opt._opt_called is True and step.n_traces == 1
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5 ** 3)


def test_optimizer_state_dict_round_trip_keeps_the_wrapper_out():
    opt = llgrad.optim.SGD(_params(llgrad), lr=0.1)
    llgrad.optim.lr_scheduler.StepLR(opt, 2)
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"}
    opt2 = llgrad.optim.SGD(_params(llgrad), lr=0.5)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.1 and "initial_lr" in opt2.param_groups[0]


@pytest.mark.parametrize("kw", [dict(foreach=True), dict(foreach=False), dict()])
def test_adam_tensor_lr_checks(kw):
    _same(lambda lib: repr(lib.optim.Adam(_params(lib), lr=lib.tensor(0.01), **kw).defaults[
        "foreach"]))
    _same(lambda lib: lib.optim.Adam(_params(lib), lr=lib.tensor([0.01, 0.02]), **kw) and None)
    _same(lambda lib: lib.optim.AdamW(_params(lib), lr=lib.tensor(0.01), **kw) and None)


def test_params_given_as_a_tensor_names_its_type():
    _same(lambda lib: lib.optim.SGD(lib.ones(2, requires_grad=True), lr=0.1))
    _same(lambda lib: lib.optim.Adam(lib.ones(2, dtype=lib.float64, requires_grad=True)))
