"""A NumPy ufunc given a number that compile made an input (np.clip(epoch, 0, 5) in Mean
Teacher's sigmoid_rampup) ends the trace as that number's escape, so only that number is
guarded by value again: a step counter the same call bumps (global_step) stays an input.
Before, NumPy raised a TypeError for the stand-in, compile could not tell which number it
was, and guarded them all by value: every later call traced again (then, past the limit,
ran eagerly)."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


class _State:
    pass


def _program(lib, compiled):
    s = _State()
    s.step = 0
    w = lib.zeros(3)

    def f(x, epoch):
        s.step += 1
        alpha = min(1 - 1 / (s.step + 1), 0.9)
        ramp = float(np.exp(-5.0 * (1.0 - np.clip(epoch, 0.0, 3) / 3) ** 2))
        w.mul_(alpha).add_(x, alpha=1 - alpha)
        return (w * ramp).sum()

    g = llgrad.compile(f) if compiled else f
    out = [float(g(lib.full((3,), float(k)), k // 3)) for k in range(12)]
    return out, w.numpy().copy(), s.step, g


def test_numpy_reading_one_number_leaves_the_counter_an_input():
    ref, w_ref, steps_ref, _ = _program(torch, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (no recompile-limit warning, no fallback)
        got, w_got, steps_got, cf = _program(llgrad, True)
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    np.testing.assert_allclose(w_got, w_ref, rtol=1e-6)
    assert steps_got == steps_ref
    # (a trace per epoch value (4), the one that found np.clip reading epoch, the first)
    assert cf.n_traces <= 6, cf.n_traces
