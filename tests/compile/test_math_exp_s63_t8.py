"""math.exp of a Python number the compiled function reads from its state and changes each
call (the DQN tutorial's epsilon `EPS_END + (EPS_START - EPS_END) * math.exp(-1. *
steps_done / EPS_DECAY)`): traced as an op (runtime/symbolic_math.py), not guarded by value,
so the function compiles once more and not once per call; its number is math.exp's to the
bit in compiled code too (glibc's exp, not the vectorised approximation), and math's
OverflowError comes as eagerly."""
import math
import warnings

import numpy as np
import pytest

import llgrad


def _epsilon_greedy(decay):
    counters = {"steps_done": 0}

    def select(u, greedy, random_actions):
        eps = 0.05 + (0.9 - 0.05) * math.exp(-1. * counters["steps_done"] / decay)
        counters["steps_done"] += 1
        return (llgrad.where(u > eps, greedy, random_actions),
                eps * llgrad.ones((), dtype=llgrad.float64))

    return select


def test_math_exp_of_a_moving_counter_compiles_once_and_equals_eager():
    n, rng = 40, np.random.default_rng(0)
    args = [(llgrad.tensor(rng.random(5)), llgrad.tensor(rng.integers(0, 2, 5)),
             llgrad.tensor(rng.integers(0, 2, 5))) for _ in range(n)]
    eager = _epsilon_greedy(200.0)
    want = [eager(*a) for a in args]
    compiled = llgrad.compile(_epsilon_greedy(200.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (a recompile-limit warning fails the test)
        got = [compiled(*a) for a in args]
    assert compiled.n_traces <= 2, compiled.n_traces
    for (a, e), (b, f) in zip(want, got):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert e.item() == f.item()         # (bit for bit: glibc's exp, as math.exp)
    # (decay 200: math.exp and NumPy's / the vectorised exp differ at steps 2, 9, 14, 25)
    assert [f.item() for _, f in got] == \
        [0.05 + 0.85 * math.exp(-1. * k / 200.0) for k in range(n)]


def test_math_exp_overflow_raises_as_eager():
    state = {"x": 690}

    def f(t):
        y = t * math.exp(state["x"])
        state["x"] += 5
        return y

    compiled = llgrad.compile(f)
    for _ in range(4):                  # (690 .. 705: 700 on is math's own call, by value)
        compiled(llgrad.ones(2))
    with pytest.raises(OverflowError):
        compiled(llgrad.ones(2))        # (710: math.exp's "math range error", as eagerly)
