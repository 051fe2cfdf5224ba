"""A Python number the caller changes between calls, in a dict that the compiled step and a
helper it calls both capture (DINO's `state` read by train_step and by its loss function):
the guard walk names the number at each path that reaches the dict; each of those names
resolves to its holder (attr_writes.Slots.aliases), so the number becomes a graph input
after one more trace, as in a dict captured by the step alone (the control)."""
import warnings

import pytest

import llgrad


def _make(shared):
    lin = llgrad.nn.Linear(3, 1)
    state = {"scale": 1.0}

    def helper_reading_state(y):
        return y * 2.0 if "scale" in state else y

    def plain_helper(y):
        return y * 2.0

    helper = helper_reading_state if shared else plain_helper

    def step(x):
        return (helper(lin(x)) * state["scale"]).sum()

    return llgrad.compile(step), state, lin


def _run(shared, n_calls=6):
    step, state, lin = _make(shared)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(n_calls):
            state["scale"] = 1.0 + i
            out.append(float(step(llgrad.ones(2, 3)).detach()))
    with llgrad.no_grad():
        expected = [float((lin(llgrad.ones(2, 3)) * 2.0 * (1.0 + i)).sum())
                    for i in range(n_calls)]
    return step, out, expected


def test_number_in_a_dict_only_the_step_captures():
    step, out, expected = _run(shared=False)
    assert out == pytest.approx(expected, rel=1e-6)
    assert step.n_traces <= 2


def test_number_in_a_dict_a_helper_captures_too():
    # (each other path of the dict names the same slot: attr_writes.Slots.aliases)
    step, out, expected = _run(shared=True)
    assert out == pytest.approx(expected, rel=1e-6)     # (right either way: eager's numbers)
    assert step.n_traces <= 2
