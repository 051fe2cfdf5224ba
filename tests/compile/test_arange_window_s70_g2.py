"""arange(p, p + n) of a Python int p that changes every call (a ring buffer's write pointer)
is traced once as arange(0, n) + p (runtime/traced_ranges.py), not once per p; compiled calls
equal eager's, and a changed length, a bad range and a float dtype behave as eagerly."""
import warnings

import numpy as np
import pytest

import llgrad

CAP = 8


class Ring:
    def __init__(self, lib):
        self.buf = lib.zeros(CAP)
        self.position = 0

    def push(self, lib, v):
        idx = lib.arange(self.position, self.position + v.shape[0]) % CAP
        self.buf[idx] = v
        self.position = (self.position + v.shape[0]) % CAP
        return idx


def _pushes(compiled):
    ring = Ring(llgrad)

    def step(v):
        idx = ring.push(llgrad, v)
        return ring.buf * 2, idx
    f = llgrad.compile(step, backend="interpret") if compiled else step
    outs = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (no recompile-limit warning, no eager call)
        for k in range(12):
            buf, idx = f(llgrad.arange(3.0) + k)
            outs.append((buf.numpy().copy(), idx.numpy().copy(), ring.position))
    return outs, f


def test_a_moving_write_pointer_is_traced_once_and_equals_eager():
    want, _ = _pushes(False)
    got, f = _pushes(True)
    for (b1, i1, p1), (b2, i2, p2) in zip(got, want):
        np.testing.assert_array_equal(b1, b2)
        np.testing.assert_array_equal(i1, i2)
        assert i1.dtype == i2.dtype == np.int64 and p1 == p2
    assert f.n_traces <= 3, f.n_traces      # (was one per position: 8 and a warning)


def _window(x, p, n, step=1):
    return x[llgrad.arange(p, p + n * step, step) % x.shape[0]] * 1


@pytest.mark.parametrize("step", [1, 2, -1])
def test_an_argument_window_of_any_step_and_length(step):
    x = llgrad.arange(10.0) ** 2
    f = llgrad.compile(_window, backend="interpret")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for p, n in [(0, 3), (1, 3), (5, 3), (7, 3), (2, 4), (9, 4), (4, 0)]:
            np.testing.assert_array_equal(f(x, p, n, step).numpy(), _window(x, p, n, step).numpy())
    assert f.n_traces <= 5, f.n_traces      # (a trace per length, not per position)


def test_a_range_against_its_step_raises_as_eagerly():
    f = llgrad.compile(lambda x, p: x[llgrad.arange(p, p - 2)], backend="interpret")
    x = llgrad.arange(5.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for p in (1, 2, 3):
            with pytest.raises(RuntimeError, match="upper bound and lower bound inconsistent"):
                f(x, p)


def test_a_float_window_keeps_eagers_values():
    def g(p):
        return llgrad.arange(p, p + 3, dtype=llgrad.float32) * 0.1
    f = llgrad.compile(g, backend="interpret")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for p in (1, 2, 3, 1 << 25):
            np.testing.assert_array_equal(f(p).numpy(), g(p).numpy())


def test_torch_gives_the_same_windows():
    torch = pytest.importorskip("torch")
    for p, n, step in [(3, 4, 1), (6, 2, -1), (1, 3, 3)]:
        got = llgrad.compile(lambda p: llgrad.arange(p, p + n * step, step),
                             backend="interpret")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for q in (p, p + 1, p + 2):
                np.testing.assert_array_equal(got(q).numpy(),
                                              torch.arange(q, q + n * step, step).numpy())
