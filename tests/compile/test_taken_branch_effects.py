"""A tensor `if` whose taken branch changes Python state that the other branch leaves alone
(a counter, a list append, an object's attribute, a module's flag): a compiled call cannot
repeat that change only when its condition picks the branch, so the function is traced as
plain Python with its condition a value guard (tracer/control._stage_if). Every call, with
the condition flipping, against eager: results and state."""
import warnings

import numpy as np

import llgrad


class State:
    def __init__(self):
        self.hits, self.log, self.mode = 0, [], "none"

    def hit(self):
        self.hits += 1

    def set_mode(self, mode):
        self.mode = mode


def counts(state, x):
    if x.sum() > 0:
        state.hits += 1
    return x * 2


def appends(state, x):
    y = x + 1
    if y.mean() > 1:
        state.log.append("big")
    return y


def sets_mode(state, x):
    if x.max() > 0.5:
        state.mode = "high"
    return x.exp()


def calls_hit(state, x):            # (a method: the rewrite cannot see the write)
    if x.sum() > 0:
        state.hit()
    return x * 3


def calls_set_mode(state, x):
    y = x * 2
    if y.min() < 0:
        state.set_mode("negative")
    else:
        y = y + 1
    return y


def _run(fn, compiled):
    state = State()
    f = llgrad.compile(fn) if compiled else fn
    rng = np.random.default_rng(3)
    outs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # (the plain-Python trace is announced)
        for k in range(10):
            sign = 1.0 if k % 3 != 1 else -1.0
            x = llgrad.tensor((np.abs(rng.standard_normal(4)) * sign).astype(np.float32))
            outs.append(f(state, x).numpy().copy())
            outs.append((state.hits, list(state.log), state.mode))
    return outs


def test_taken_branch_python_effects_match_eager():
    for fn in (counts, appends, sets_mode, calls_hit, calls_set_mode):
        got, want = _run(fn, True), _run(fn, False)
        for a, b in zip(got, want):
            if isinstance(a, np.ndarray):
                np.testing.assert_allclose(a, b, rtol=1e-6)
            else:
                assert a == b, fn.__name__


def test_captured_object_changed_by_a_method_in_the_taken_branch():
    """The state the branch changes is captured (not an argument) and read after the if, and
    reset between calls by the caller: the compiled call must not apply the branch's change
    when its own condition does not pick the branch."""
    def make():
        cfg = State()
        cfg.double = False

        def turn_on():
            cfg.double = True
        cfg.turn_on = turn_on

        def step(x):
            if x.sum() > 0:
                cfg.turn_on()
            y = x + 1
            if cfg.double:          # (a Python read of the flag: a guard on its value)
                y = y * 2
            return y
        return cfg, step

    runs = []
    for compiled in (True, False):
        cfg, step = make()
        f = llgrad.compile(step) if compiled else step
        outs = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for k in range(8):
                cfg.double = False
                x = llgrad.full((3,), 1.0 if k % 2 == 0 else -1.0)
                outs.append((f(x).numpy().tolist(), cfg.double))
        runs.append(outs)
    assert runs[0] == runs[1]
