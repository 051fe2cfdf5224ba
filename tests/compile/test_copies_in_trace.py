"""Copies of a tensor's values made inside a compiled function must be the call's values:
copy.deepcopy (and pickle) of a tensor read the array as the trace saw it, so a compiled
call returned the traced call's values (a wrong answer); such a call now runs eagerly,
with a warning that names the user's line."""
import copy
import warnings

import numpy as np

import llgrad
import llgrad.nn as nn


def _deepcopy_scaled(x, s):
    return copy.deepcopy(x) * s


def test_deepcopy_of_a_tensor_gives_the_calls_values():
    f = llgrad.compile(_deepcopy_scaled)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(4):
            x, s = llgrad.arange(3.0) + k, llgrad.tensor(float(k + 1))
            np.testing.assert_array_equal(f(x, s).numpy(), _deepcopy_scaled(x, s).numpy())
    text = [str(w.message) for w in caught if "deepcopy" in str(w.message)]
    assert text and "test_copies_in_trace.py" in text[0]


def test_deepcopy_of_a_model_inside_a_step():
    llgrad.manual_seed(0)
    net = nn.Linear(3, 2)

    def target_values(x):
        target = copy.deepcopy(net)         # (a DQN's target network, refreshed each call)
        return target(x).sum()

    f = llgrad.compile(target_values)
    x = llgrad.ones(4, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            with llgrad.no_grad():
                net.weight.add_(0.5)
            np.testing.assert_allclose(f(x).item(), target_values(x).item(), rtol=1e-6)
