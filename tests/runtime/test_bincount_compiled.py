"""bincount inside llgrad.compile is traced (index_add_ into its bins): with minlength
above every value (a class count) one trace serves any values; a larger value traces again
(its length is a value guard); weights sum as eager's; compiled == eager, no warning."""
import warnings

import numpy as np
import pytest

import llgrad


def _calls(fn, inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return [[t.numpy().copy() for t in fn(*args)] for args in inputs]


def test_bincount_compiled_equals_eager_and_keeps_its_trace():
    def f(x, w):
        return (llgrad.bincount(x, minlength=5), llgrad.bincount(x, weights=w, minlength=5),
                llgrad.bincount(x, weights=w.double()), llgrad.bincount(x) * 2)

    rng = np.random.default_rng(0)
    inputs = [(llgrad.tensor(rng.integers(0, 5, 12)), llgrad.tensor(rng.random(12, np.float32)))
              for _ in range(4)]
    inputs[2][0][3] = 4                  # (the same largest value: the same lengths)
    for x, _ in inputs:
        x[0] = 4
    compiled = llgrad.compile(f)
    want, got = _calls(f, inputs), _calls(compiled, inputs)
    assert compiled.n_traces == 1
    for a, b in zip(want, got):
        for u, v in zip(a, b):
            assert u.dtype == v.dtype and u.shape == v.shape
            np.testing.assert_allclose(v, u, rtol=1e-6)


def test_bincount_compiled_retraces_for_a_longer_result():
    compiled = llgrad.compile(lambda x: llgrad.bincount(x, minlength=3) + 0)
    for values, n in (([0, 1, 2], 3), ([0, 1], 3), ([0, 7], 8)):
        assert compiled(llgrad.tensor(values)).shape == (n,)
    assert compiled.n_traces == 2


def test_bincount_negative_raises_inside_compile():
    compiled = llgrad.compile(lambda x: llgrad.bincount(x) + 0)
    with pytest.raises(RuntimeError, match="non-negative"):
        compiled(llgrad.tensor([1, -1]))
