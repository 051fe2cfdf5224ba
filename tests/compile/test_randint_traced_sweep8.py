"""torch.randint inside a compiled step (negative sampling, random crops) is traced as a
draw of the default generator: compiled calls give torch's numbers for the seed and leave
the generator where eager leaves it, with no fallback to eager."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _draws(lib, compile_it):
    def step(x):
        neg = lib.randint(0, 20, (2, 5))
        small = lib.randint(3, 9, (4,), dtype=lib.int32)
        flt = lib.randint(10, (3,), dtype=lib.float32)
        return x[neg[0]] * x[neg[1]], neg, small, flt
    f = llgrad.compile(step) if compile_it else step
    lib.manual_seed(0)
    x = lib.arange(20.0)
    out = [f(x) for _ in range(3)]
    return out + [lib.rand(2)]          # (the generator after the calls)


def test_randint_in_a_compiled_step_draws_torchs_numbers():
    want = _draws(torch, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _draws(llgrad, True)
    for w, g in zip(want, got):
        for a, b in zip(w if isinstance(w, tuple) else [w], g if isinstance(g, tuple) else [g]):
            assert str(b.dtype).split(".")[1] == str(a.dtype).split(".")[1]
            np.testing.assert_array_equal(b.numpy(), a.numpy())
