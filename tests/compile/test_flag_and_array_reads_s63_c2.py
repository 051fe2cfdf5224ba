"""Sweep 63 (c2): reads compile used not to see, each a silent wrong answer before.

- A module's `training` read through its __dict__ (`vars(m)["training"]`, a helper's
  `m.__dict__`) before the step's m.train(): guards_blind took the flag as written first
  and let the entry traced in one mode serve the other (guards_blind.dict_readers).
- A NumPy array read both as a tensor (from_numpy of it, linked to its input) and with
  NumPy (X.max(), float(d["a"][3])) in one trace: the NumPy read was baked in
  (numpy_reads._numpy_uses now marks such an array for a contents guard).
The oracle is the same function run eagerly; the negative tests show what must stay
compiled (one trace) or still trace again."""
import warnings

import numpy as np
import pytest

import llgrad


def _compiled(fn):
    return llgrad.compile(fn, backend="interpret")


def _modes(step, m):
    """[compiled / eager result] over calls entered in train, eval, train, eval mode."""
    f = _compiled(step)
    x = llgrad.ones(1, 2)
    out = []
    for i in range(4):
        if i % 2:
            m.eval()
        got = f(x).item()
        if i % 2:
            m.eval()
        want = step(x).item()
        out.append(got / want)
    return out, f


def test_training_flag_read_through_vars_before_train():
    m = llgrad.nn.Linear(2, 1)

    def step(x):
        was = vars(m)["training"]
        m.train()
        return m(x).sum() * (2.0 if was else 3.0) + 10.0
    got, _ = _modes(step, m)
    assert got == pytest.approx([1.0] * 4)


def _was_training(m):
    return m.__dict__.get("training", True)


def test_training_flag_read_through_a_helpers_dict_before_train():
    m = llgrad.nn.Linear(2, 1)

    def step(x):
        was = _was_training(m)
        m.train()
        return m(x).sum() * (2.0 if was else 3.0) + 10.0
    got, _ = _modes(step, m)
    assert got == pytest.approx([1.0] * 4)


def test_a_step_that_sets_the_flag_first_still_serves_both_modes():
    """Negative: with no __dict__ read, the entry still serves either flag state it is
    entered with (one trace), the results eager's."""
    m = llgrad.nn.Linear(2, 1)

    def step(x):
        m.train()
        return m(x).sum() * (2.0 if m.training else 3.0) + 10.0
    got, f = _modes(step, m)
    assert got == pytest.approx([1.0] * 4)
    assert f.n_traces == 1


def _agree(fn, change, n=4):
    """fn compiled and eagerly on twin arrays, change(array) between calls -> compiled fn."""
    mine, eager = np.arange(1000.0), np.arange(1000.0)
    f = _compiled(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (a recompile limit is eager's numbers too)
        for _ in range(n):
            assert f(mine).tolist() == fn(eager).tolist()
            change(mine)
            change(eager)
            assert np.array_equal(mine, eager)
    return f


def test_array_read_as_a_tensor_and_by_its_max():
    def fn(a):
        return llgrad.from_numpy(a[:4]).sum() * float(a.max())

    def change(a):
        a *= 2
    _agree(fn, change)


def test_array_in_a_dict_read_after_a_tensor_write():
    mine, eager = {"a": np.arange(1000.0)}, {"a": np.arange(1000.0)}

    def fn(d):
        llgrad.from_numpy(d["a"][2:6]).mul_(3)
        return llgrad.ones(1) * float(d["a"][3])
    f = _compiled(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (a recompile limit is eager's numbers too)
        for _ in range(4):
            assert f(mine).tolist() == fn(eager).tolist()
            assert np.array_equal(mine["a"], eager["a"])


def test_array_read_with_numpy_through_an_alias():
    def fn(a):
        b = a
        t = llgrad.from_numpy(a[:3]).sum()
        return t + float(b[500])

    def change(a):
        a[500] += 7
    _agree(fn, change)


G = np.arange(1000.0)


def test_array_read_with_numpy_by_a_helper_in_a_closure_cell():
    def peak():
        return float(G.max())

    def fn():
        return llgrad.from_numpy(G[:3]).sum() * peak()
    f = _compiled(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (a recompile limit is eager's numbers too)
        for _ in range(4):
            assert f().item() == fn().item()
            G[7] += 1000


X = np.arange(4000, dtype=np.float32).reshape(1000, 4)


def test_an_array_read_only_through_tensor_makers_is_not_guarded_by_its_contents():
    """Negative: computed slice bounds, a keyword argument and an int() index are tensor
    makers' arguments, and len(X), X.shape read what the input's guards hold: no contents
    guard, so the array changing costs no trace."""
    def fn(i):
        a = llgrad.from_numpy(X[i * 10:(i + 1) * 10]).sum()
        b = llgrad.tensor(X[int(i) + 1], dtype=llgrad.float64).sum()
        return a + b * (len(X) + X.shape[1])
    f = _compiled(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in range(4):
            assert f(1).item() == fn(1).item()
            X[:40] *= 2
    assert f.n_traces == 1
