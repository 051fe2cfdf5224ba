"""Steps that re-traced without need (s76 task O: the remaining harness programs).

An optimiser whose step an LR scheduler wraps (lr_scheduler's _track_step_called, as
PyTorch's: the wrapper sets `optimizer._opt_called = True`) and whose state was already
made (loaded from a checkpoint, or warmed before compiling) was traced on its first call:
that run created `_opt_called`, a new attribute the next call's guard walk saw, so the
kept trace served no later call and the step traced again (`guard failed: ... .grad is
None`, the key one attribute longer). Such an optimiser counts as fresh
(side_effects.fresh_optimizer): the first call runs eagerly, the next one traces once."""
import warnings

import numpy as np
import pytest

import llgrad

nn, F = llgrad.nn, llgrad.nn.functional


def _resume(compiled, scheduler=True):
    llgrad.manual_seed(0)
    rng = np.random.default_rng(0)
    x = llgrad.tensor(rng.standard_normal((6, 4)).astype(np.float32))
    y = llgrad.tensor(rng.integers(0, 3, (6,)))

    def make():
        model = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3))
        opt = llgrad.optim.Adam(model.parameters(), lr=1e-2)
        sched = llgrad.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5) \
            if scheduler else None
        return model, opt, sched

    model, opt, _ = make()      # (trained eagerly: the checkpoint's optimiser has state)
    for _ in range(2):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    model2, opt2, sched2 = make()
    model2.load_state_dict(model.state_dict())
    opt2.load_state_dict(opt.state_dict())

    def train_step(x, y):
        opt2.zero_grad()
        loss = F.cross_entropy(model2(x), y)
        loss.backward()
        opt2.step()
        return loss.item()

    fn = llgrad.compile(train_step) if compiled else train_step
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (no "lr_scheduler.step() before optimizer.step()")
        for _ in range(4):
            out.append(fn(x, y))
            if sched2 is not None:
                sched2.step()
                out.append(sched2.get_last_lr())
    out.append([p.detach().numpy().copy() for p in model2.parameters()])
    return fn, opt2, out


def _close(a, b):
    if isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
    else:
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_loaded_optimiser_with_a_scheduler_traces_once():
    _, opt_e, eager = _resume(False)
    cf, opt_c, got = _resume(True)
    # (the first call eager, setting _opt_called; the second traced; the rest run it)
    assert cf.n_traces == 1 and len(cf.entries) == 1, (cf.n_traces, len(cf.entries))
    assert cf.graph_breaks == []
    assert opt_c._opt_called is True and opt_e._opt_called is True
    _close(eager, got)


@pytest.mark.slow
def test_loaded_optimiser_without_a_scheduler_traces_its_first_call():
    """No scheduler: nothing new on the first call, which is traced and kept."""
    _, _, eager = _resume(False, scheduler=False)
    cf, opt_c, got = _resume(True, scheduler=False)
    assert cf.n_traces == 1 and len(cf.entries) == 1, (cf.n_traces, len(cf.entries))
    assert not hasattr(opt_c, "_opt_called")
    _close(eager, got)
