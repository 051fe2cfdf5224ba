"""The lean call path (runtime/fastpath.py) must select exactly the specialisation the full
guard walk selects: every guard that the walk would change must change the flat key."""
import numpy as np
import pytest

import llgrad
from llgrad.runtime.fastpath import fast_key


def _counted():
    calls = []

    def f(x, s):
        calls.append(1)
        return (x * s).tanh().sum()
    return f, calls


@pytest.mark.parametrize("backend", ["llvm", "interpret"])
def test_each_guard_change_retraces_and_repeats_do_not(backend):
    f, calls = _counted()
    cf = llgrad.compile(f, backend=backend)
    base = np.linspace(-0.5, 1, 12).reshape(3, 4)
    variants = [
        ("float64", lambda: llgrad.tensor(base), 2.0),
        ("float32", lambda: llgrad.tensor(base.astype(np.float32)), 2.0),
        ("shape", lambda: llgrad.tensor(base[:2]), 2.0),
        ("strides", lambda: llgrad.tensor(base).t(), 2.0),
        ("requires_grad", lambda: llgrad.tensor(base, requires_grad=True), 2.0),
        ("scalar", lambda: llgrad.tensor(base), 3.0),
        ("int scalar", lambda: llgrad.tensor(base), 3),
    ]
    for k, (what, make, s) in enumerate(variants):
        for repeat in range(3):
            x = make()
            out = cf(x, s)
            want = np.tanh(x.detach().numpy() * s).sum()
            np.testing.assert_allclose(out.item(), want, rtol=1e-6, err_msg=what)
            assert cf.n_traces == k + 1, (what, repeat)


def test_grad_mode_and_existing_grad_are_part_of_the_key():
    f, _ = _counted()
    cf = llgrad.compile(f)
    x = llgrad.tensor(np.arange(4.0), requires_grad=True)
    cf(x, 1.0).backward()
    cf(x, 1.0).backward()                    # .grad now exists: a new specialisation
    np.testing.assert_allclose(x.grad.numpy(), 2 * (1 - np.tanh(np.arange(4.0)) ** 2))
    n = cf.n_traces
    with llgrad.no_grad():
        out = cf(x, 1.0)
    assert not out.requires_grad and cf.n_traces == n + 1


def test_calls_the_flat_key_cannot_describe_take_the_full_walk():
    x = llgrad.ones(3)
    assert fast_key((x, x)) is None                  # one tensor twice
    assert fast_key(([x],)) is None                  # a container
    assert fast_key((x, "a string")) is None
    key, tensors = fast_key((x, 2.0))
    assert tensors == [x] and key[-2:] == (True, False)
    cf = llgrad.compile(lambda a, b: a * b)
    np.testing.assert_array_equal(cf(x, x).numpy(), np.ones(3))
    np.testing.assert_array_equal(cf(x, x).numpy(), np.ones(3))
    assert cf.n_traces == 1
