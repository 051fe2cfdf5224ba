"""`t.item()` in a compiled function's own code is a stand-in of t's value
(tracer/item_reads.py): a running total of losses kept in the state, a best loss compared
and kept, a count of correct predictions, a number returned after arithmetic, each compiled
after a trace or two instead of a trace per value. A read of its digits (a print) guards
it by value again. Each case runs eagerly and compiled side by side and compares the
results, the state and what was printed after every call."""
import contextlib
import io
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F


class State:
    pass


def _side_by_side(make, calls=8):
    runs = []
    for compiled in (False, True):
        llgrad.manual_seed(0)
        state, f = make()
        g = llgrad.compile(f, backend="llvm") if compiled else f
        printed, results, states = io.StringIO(), [], []
        with contextlib.redirect_stdout(printed):
            for i in range(calls):
                out = g(llgrad.full((4,), float(i + 1)) * llgrad.arange(4.0))
                out = out if isinstance(out, tuple) else (out,)
                results.append([(type(o).__name__, o) if isinstance(o, (int, float))
                                else o.detach().numpy().tolist() for o in out])
                states.append(sorted((k, type(v).__name__, v) for k, v in vars(state).items()
                                     if isinstance(v, (int, float))))
        runs.append((results, states, printed.getvalue(), g))
    (ra, sa, pa, _), (rb, sb, pb, g) = runs
    assert pa == pb
    # (numbers of the same type, equal to float32 rounding: a compiled training step rounds
    # as eager's within a few ulps; counts exactly)
    for a, b in zip(ra + sa, rb + sb):
        _close(a, b)
    return g


def _close(a, b):
    if isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
    elif isinstance(a, float):
        assert type(b) is float and b == pytest.approx(a, rel=1e-5, abs=1e-6)
    else:
        assert type(a) is type(b) and a == b


@pytest.mark.filterwarnings("error")        # (no call may run eagerly)
def test_a_running_total_and_a_best_value():
    def make():
        s = State()
        s.total, s.best, s.seen = 0.0, 1e9, 0

        def f(x):
            v = (x * x).mean()
            s.total += v.item()
            s.seen += 1
            if v.item() < s.best:
                s.best = v.item()
            return v
        return s, f
    assert _side_by_side(make).n_traces <= 2


@pytest.mark.filterwarnings("error")
def test_a_count_of_correct_predictions_in_a_training_step():
    def make():
        model = nn.Linear(4, 3)
        opt = llgrad.optim.SGD(model.parameters(), lr=0.1)
        s = State()
        s.correct, s.loss_sum = 0, 0.0
        y = llgrad.tensor([0, 1, 2, 1])

        def f(x):
            opt.zero_grad()
            out = model(x.reshape(1, 4).expand(4, 4) * 0.1)
            loss = F.cross_entropy(out, y)
            loss.backward()
            opt.step()
            s.correct += (out.argmax(1) == y).sum().item()
            s.loss_sum += loss.item() * y.shape[0]
            return loss.detach()
        return s, f
    assert _side_by_side(make).n_traces <= 3


@pytest.mark.filterwarnings("error")
def test_a_number_returned_after_arithmetic():
    def make():
        s = State()

        def f(x):
            v = (x * 2).sum()
            return x * 3, v.item() / 4
        return s, f
    assert _side_by_side(make).n_traces == 1


def test_a_printed_item_is_guarded_by_value_again():
    def make():
        s = State()

        def f(x):
            v = (x * 2).sum()
            print(f"v = {v.item():.3f}")
            return v
        return s, f
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _side_by_side(make, calls=4)


@pytest.mark.filterwarnings("error")
def test_a_branch_on_an_item_is_an_outcome_guard():
    def make():
        s = State()

        def f(x):
            m = x.mean()
            return x * (2.0 if m.item() > 3.0 else -1.0)
        return s, f
    assert _side_by_side(make).n_traces <= 2


def test_library_code_still_reads_numbers():
    """llgrad's own .item() calls (here: the step count an optimiser's state keeps as a
    tensor read back) are not stand-ins: compiled == eager."""
    def make():
        model = nn.Linear(4, 2)
        opt = llgrad.optim.Adam(model.parameters(), lr=0.1)
        s = State()

        def f(x):
            opt.zero_grad()
            loss = model(x.reshape(1, 4)).pow(2).sum()
            loss.backward()
            opt.step()
            return loss.detach()
        return s, f
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_equal(_side_by_side(make).n_traces <= 3, True)
