"""Adversarial comparison with PyTorch 2.13 (sweep 19, d2): torch.testing.assert_close's
infinities and Python number types, checked against torch's own verdicts and messages."""
import math

import pytest

import llgrad

torch = pytest.importorskip("torch")


def _verdict(T, actual, expected, **kw):
    wrap = (lambda v: T.tensor(v)) if isinstance(actual, list) else (lambda v: v)
    try:
        T.testing.assert_close(wrap(actual), wrap(expected), **kw)
    except AssertionError as e:
        return str(e).replace("llgrad.", "torch.")     # (dtype names: each library's own)
    return "ok"


@pytest.mark.parametrize("actual, expected", [
    (5.0, math.inf), (math.inf, -math.inf), (-math.inf, math.inf), (1e300, math.inf),
    (math.inf, math.inf), (math.inf, 1e308), (-math.inf, -math.inf),
    ([5.0, 1.0], [math.inf, 1.0]), ([math.inf], [-math.inf]), ([1e30], [math.inf]),
    ([math.inf, 2.0], [math.inf, 2.0]), ([-math.inf], [3.0]), ([1.0, math.inf], [1.0, 7.0])])
def test_assert_close_infinities(actual, expected):
    # an infinity is close only to itself: |a - e| = inf is never within atol + rtol * inf
    # (llgrad passed 5.0 against inf, and inf against -inf)
    assert _verdict(llgrad, actual, expected) == _verdict(torch, actual, expected)


@pytest.mark.parametrize("actual, expected, kw", [
    (1, 1.0, {}), (1.0, 1, {}), (1, 1.0, {"check_dtype": False}), (2, 2, {}),
    (2.5, 2.5, {}), ([1, 2], [1.0, 2.0], {})])
def test_assert_close_python_number_types(actual, expected, kw):
    # Python numbers of different types fail the dtype check, as tensors of different dtypes
    want = _verdict(torch, actual, expected, **kw)
    got = _verdict(llgrad, actual, expected, **kw)
    assert got == want


@pytest.mark.parametrize("actual, expected, kw", [
    ([math.nan, 1.0, 5.0], [math.nan, 2.0, 5.0], {"equal_nan": True}),
    ([math.nan, 1.0, 5.0], [math.nan, 2.0, 5.0], {}),
    ([1.0, 5.0, 2.0], [1.1, math.inf, 0.0], {}), ([0.0, 1.0, 3.0], [0.0, 0.0, 1.0], {}),
    ([math.nan, 2.0], [1.0, math.nan], {}), ([1, 5], [2, 0], {})])
def test_assert_close_message_names_the_greatest_mismatch(actual, expected, kw):
    # the greatest absolute / relative difference among the mismatched elements, a NaN
    # taken first (PyTorch's max propagates it; llgrad skipped NaNs and counted matches)
    assert _verdict(llgrad, actual, expected, **kw) == _verdict(torch, actual, expected, **kw)


@pytest.mark.parametrize("dtype, value", [
    ("float16", 1e6), ("float16", 65504.0), ("float16", 65520.0), ("float16", math.inf),
    ("float32", 1e39), ("int8", 300), ("int8", -128), ("uint8", -1), ("uint8", 255),
    ("uint8", 256), ("int64", 2.5), ("bool", 2), ("int32", -0.5)])
def test_constant_pad_value_must_fit_the_dtype(dtype, value):
    # F.pad's value is a float PyTorch stores with its overflow check (a float16 pad of 1e6
    # is an error, not inf; int8's 300 a RuntimeError; uint8's -1 is not wrapped as fill_'s)
    def f(T):
        try:
            out = T.nn.functional.pad(T.zeros(2, dtype=getattr(T, dtype)), (1, 1), value=value)
        except RuntimeError as e:
            return str(e)
        return out.tolist()
    assert f(llgrad) == f(torch)
