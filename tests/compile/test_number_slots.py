"""Numbers a compiled function changes in the Python state it reaches at each call (a
hand-written optimiser's `self.t += 1`, a global step counter, a dict of running figures)
become inputs of the graph after the first trace, and each call writes them back
(compile/symbolic_slots.py): such steps compile after two traces instead of running eagerly
from the recompile limit on. Every case runs the function eagerly and compiled side by side
on equal state and compares results and state after every call."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn


class HandAdam:
    """Adam as courses write it: a step count on the object, bias corrections from it."""

    def __init__(self, params, lr=1e-2, b1=0.9, b2=0.999):
        self.params, self.lr, self.b1, self.b2, self.t = list(params), lr, b1, b2, 0
        self.m = [llgrad.zeros_like(p) for p in self.params]
        self.v = [llgrad.zeros_like(p) for p in self.params]

    def step(self):
        self.t += 1
        with llgrad.no_grad():
            for p, m, v in zip(self.params, self.m, self.v):
                m.mul_(self.b1).add_(p.grad, alpha=1 - self.b1)
                v.mul_(self.b2).addcmul_(p.grad, p.grad, value=1 - self.b2)
                m_hat = m / (1 - self.b1 ** self.t)
                v_hat = v / (1 - self.b2 ** self.t)
                p.sub_(self.lr * m_hat / (v_hat.sqrt() + 1e-8))
                p.grad = None


def _model_and_data():
    llgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 2))
    rng = np.random.default_rng(3)
    x = llgrad.tensor(rng.standard_normal((6, 5)).astype(np.float32))
    y = llgrad.tensor(rng.standard_normal((6, 2)).astype(np.float32))
    return model, x, y


def _training_step(model, opt, halve_every=None):
    def step(x, y):
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        if halve_every is not None and opt.t % halve_every == halve_every - 1:
            for p in opt.params:
                p.grad.mul_(0.5)
        opt.step()
        return loss.detach()
    return step


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)


@pytest.mark.filterwarnings("error")        # (no call may run eagerly)
def test_hand_written_adam_step_count():
    runs = []
    for compiled in (False, True):
        model, x, y = _model_and_data()
        opt = HandAdam(model.parameters())

        step = _training_step(model, opt)
        f = llgrad.compile(step, backend="llvm") if compiled else step
        losses = [f(x, y).numpy().copy() for _ in range(14)]
        runs.append((losses, opt.t, [p.detach().numpy().copy() for p in model.parameters()]))
        if compiled:
            assert f.n_traces <= 2
    (la, ta, pa), (lb, tb, pb) = runs
    assert ta == tb == 14 and type(tb) is int
    _close(la, lb)
    for p, q in zip(pa, pb):
        _close(p, q)


@pytest.mark.filterwarnings("error")
def test_global_counter_and_a_dict_of_running_figures():
    space = {"llgrad": llgrad}
    exec("step_no = 0\n"
         "def f(x, w, figures):\n"
         "    global step_no\n"
         "    step_no += 1\n"
         "    figures['seen'] += x.shape[0]\n"
         "    figures['decay'] *= 0.9\n"
         "    return (x * w).sum() * 0.5 ** step_no + figures['decay']\n", space)
    w = llgrad.ones(3)
    outs = []
    for compiled in (False, True):
        space["step_no"] = 0
        figures = {"seen": 0, "decay": 1.0}
        f = llgrad.compile(space["f"], backend="llvm") if compiled else space["f"]
        outs.append(([f(llgrad.ones(2, 3), w, figures).item() for _ in range(10)],
                     space["step_no"], dict(figures)))
        if compiled:
            assert f.n_traces <= 2
    assert outs[0] == outs[1]
    assert type(outs[1][2]["seen"]) is int and type(outs[1][2]["decay"]) is float


@pytest.mark.filterwarnings("error")
def test_the_counter_changed_between_calls_is_read_at_each_call():
    class Scaled:
        def __init__(self):
            self.t = 0

    results = []
    for compiled in (False, True):
        s = Scaled()

        def f(x):
            s.t += 1
            return x * (0.5 ** s.t) + (s.t % 3 == 0)
        g = llgrad.compile(f, backend="llvm") if compiled else f
        got = []
        for k in range(9):
            if k == 5:
                s.t = 20                    # (set by the caller: the next call reads it)
            got.append(g(llgrad.ones(2)).numpy().tolist())
        results.append((got, s.t))
    assert results[0] == results[1]


def test_a_counter_read_as_a_python_value_is_guarded_again():
    """`range(self.t)` reads the number: the trace with the stand-in is given up and the
    counter is guarded by value, as before this feature (a call per value: eager's results,
    eagerly from the recompile limit on)."""
    class Counter:
        n = 0
    results = []
    for compiled in (False, True):
        c = Counter()

        def f(x):
            c.n += 1
            return sum(x * k for k in range(c.n))
        g = llgrad.compile(f, backend="llvm") if compiled else f
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results.append([g(llgrad.ones(2)).numpy().tolist() for _ in range(10)] + [c.n])
    assert results[0] == results[1]


@pytest.mark.filterwarnings("error")
def test_counter_with_a_branch_on_its_outcome():
    """`if self.t % k == 0` compares the stand-in with a number: the outcome is guarded, one
    trace per outcome, not per value."""
    results = []
    for compiled in (False, True):
        model, x, y = _model_and_data()
        opt = HandAdam(model.parameters())

        step = _training_step(model, opt, halve_every=4)
        f = llgrad.compile(step, backend="llvm") if compiled else step
        results.append([f(x, y).item() for _ in range(12)])
        if compiled:
            assert f.n_traces <= 4
    _close(results[0], results[1])


def test_a_function_reading_the_clock_runs_eagerly():
    """A number from the clock, written into the state or computed with, would be the traced
    call's in every compiled call: such a function runs eagerly, with a warning."""
    import time

    class Timer:
        last = 0.0
    t = Timer()

    def f(x):
        t0 = time.perf_counter()
        y = x * 2
        t.last = time.perf_counter() - t0 + 1.0
        return y
    g = llgrad.compile(f, backend="llvm")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        seen = set()
        for _ in range(4):
            g(llgrad.ones(2))
            seen.add(t.last)
    assert len(seen) > 1
    assert any("reads the clock" in str(c.message) for c in caught)
