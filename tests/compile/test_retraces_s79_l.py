"""Traces a user would not expect, each call still eager's result.

ReduceLROnPlateau.step(loss) inside the compiled step turns the loss into a Python float
each call: once that site has shown it changes every call (volatile_guards.settle), the
keys the scheduler's numbers make next (its count of bad epochs made a dynamic input, its
lr halved) run eagerly untraced, not a trace each up to the recompile limit. An int
argument that range() or reshape reads is traced once with a stand-in that is thrown away
(symbolic_args.retry): that trace is not counted against the recompile limit."""
import warnings

import numpy as np
import pytest

import llgrad


def _plateau(lib, steps, compiled):
    """The losses, lrs and bad-epoch counts of `steps` calls of a training step that steps
    ReduceLROnPlateau with its loss tensor; its parameters; the compiled step (or None)."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    rng = np.random.default_rng(0)
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.5))
    opt = lib.optim.SGD(model.parameters(), lr=0.3, momentum=0.9)
    sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1,
                                                     threshold=5e-2)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        sched.step(loss.detach())
        return loss.detach()
    step = llgrad.compile(train_step) if compiled else train_step
    x = lib.tensor(rng.standard_normal((10, 3)).astype(np.float32))
    y = lib.tensor(rng.standard_normal((10, 1)).astype(np.float32))
    rows = []
    for _ in range(steps):
        loss = step(x, y)
        if compiled:
            step.wait()     # (the next call runs native code, in the background mode too)
        rows.append((loss.item(), opt.param_groups[0]["lr"], sched.num_bad_epochs))
    params = [p.detach().numpy().copy() for p in model.parameters()]
    return rows, params, step if compiled else None


@pytest.mark.slow
def test_plateau_stepped_with_the_loss_inside_the_step_settles_across_its_keys():
    want, want_params, _ = _plateau(llgrad, 30, False)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got, params, cf = _plateau(llgrad, 30, True)
    notes = [str(x.message) for x in w if "llgrad.compile" in str(x.message)]
    assert got == want      # (eager's losses, lrs and counts, each step)
    for a, b in zip(params, want_params):
        np.testing.assert_array_equal(a, b)
    assert len({lr for _, lr, _ in want}) >= 3     # (the lr changed: new keys came)
    assert cf.n_traces <= 4, (cf.n_traces, notes)
    assert not any("recompile limit" in n for n in notes), notes
    assert any("changes from call to call" in n for n in notes), notes


@pytest.mark.slow
def test_plateau_in_step_matches_torch():
    torch = pytest.importorskip("torch")
    want, want_params, _ = _plateau(torch, 30, False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, params, _ = _plateau(llgrad, 30, True)
    np.testing.assert_allclose([r[0] for r in got], [r[0] for r in want], rtol=1e-5)
    assert [r[1:] for r in got] == [r[1:] for r in want]
    for a, b in zip(params, want_params):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


class _Tracker:
    """A plateau scheduler's state: numbers its step changes after reading the loss."""

    def __init__(self):
        self.best, self.bad, self.scale = float("inf"), 0, 1.0

    def step(self, loss):
        value = float(loss)
        if value < self.best - 0.05:
            self.best, self.bad = value, 0
        else:
            self.bad += 1
        if self.bad > 1:
            self.scale, self.bad = self.scale * 0.5, 0


def _tracked(x, w, tracker):
    loss = ((x * w).sum() - 1).square() * tracker.scale
    loss.backward()
    tracker.step(loss.detach())
    return loss.detach()


def test_a_key_differing_from_a_settled_one_only_in_numbers_is_not_traced():
    xs = [llgrad.tensor(np.float32([1, -1]) * (1 + 0.3 * np.sin(i))) for i in range(20)]
    runs = []
    for compiled in (False, True):
        w, tracker = llgrad.tensor([0.5, 0.25], requires_grad=True), _Tracker()
        f = llgrad.compile(_tracked) if compiled else _tracked
        with warnings.catch_warnings(record=True) as notes:
            warnings.simplefilter("always")
            rows = []
            for x in xs:
                w.grad = None
                loss = f(x, w, tracker)
                if compiled:
                    f.wait()
                rows.append((loss.item(), w.grad.numpy().tolist(), tracker.scale, tracker.bad))
        runs.append((rows, f, [str(n.message) for n in notes]))
    (want, _, _), (got, cf, notes) = runs
    assert got == want
    assert len({r[2] for r in want}) >= 3       # (the scale changed: new keys came)
    assert cf.n_traces <= 4, (cf.n_traces, notes)
    assert not any("recompile limit" in n for n in notes), notes
    assert any("changes from call to call" in n for n in notes), notes


def _repeat(x, n):
    y = x
    for _ in range(n):
        y = y * 1.5 + 1
    return y.sum()


def _rows(x, n):
    return (x.reshape(n, -1) * 2).square().sum(0)


@pytest.mark.parametrize("fn", [_repeat, _rows])
def test_an_int_read_by_range_or_reshape_costs_no_trace_of_the_limit(fn):
    # (values 3, 4, 6: the trace of 4 with a stand-in is done again with the value; with
    # recompile_limit=3 the three values are compiled, none runs eagerly with the warning)
    cf = llgrad.compile(fn, recompile_limit=3)
    x = llgrad.tensor(np.linspace(-1, 1, 12).astype(np.float32), requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in (3, 4, 6, 3, 4, 6, 2):
            out = cf(x, n)
            cf.wait()
            (g,) = llgrad.autograd.grad(out.sum(), x)
            want = fn(x, n)
            (wg,) = llgrad.autograd.grad(want.sum(), x)
            np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-6)
            np.testing.assert_allclose(g.numpy(), wg.numpy(), rtol=1e-6)
    notes = [str(x.message) for x in w if "llgrad.compile" in str(x.message)]
    assert cf.n_traces == 4 and len(cf.entries) == 3, (cf.n_traces, notes)  # (2: the limit)
    assert any("recompile limit" in n for n in notes), notes
    assert not cf.graph_breaks
