"""llgrad.testing: torch.testing's assert_close and make_tensor, with PyTorch's default
tolerances per dtype, its rules (shape, dtype, stride, NaN) and its messages."""
import collections.abc
import math
import warnings

import numpy as np

from .ir import bfloat16 as _bf16
from .runtime.creation import empty as _empty, randint as _randint
from .runtime.dtype_info import finfo as _finfo, iinfo as _iinfo
from .runtime.dtypes import from_name, promote_types as _promote_types
from .runtime.tensor import Tensor

__all__ = ["assert_close", "assert_allclose", "make_tensor"]

# (rtol, atol) by dtype name, as torch.testing._comparison.default_tolerances
_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7)}


def _tolerances(names, rtol, atol):
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got "
                         f"no {'rtol' if rtol is None else 'atol'}.")
    if rtol is not None:
        return rtol, atol
    tols = [_TOLERANCES.get(n, (0.0, 0.0)) for n in names]
    return max(t[0] for t in tols), max(t[1] for t in tols)


class _Failure(AssertionError):
    pass


def _fail(text, msg, located=False):
    """located: the failure is not to name its item (PyTorch's Booleans mismatch does not)."""
    if isinstance(msg, str):        # (a str replaces the message, its location included)
        text, located = msg, True
    f = _Failure(text)              # (a callable msg gets it located: see assert_close)
    f.located = located
    raise f


def _compare_numbers(actual, expected, rtol, atol, equal_nan, check_dtype, msg):
    if isinstance(actual, bool) or isinstance(expected, bool):
        if actual != expected:
            _fail(f"Booleans mismatch: {actual} is not {expected}", msg, located=True)
        return
    if check_dtype and type(actual) is not type(expected):
        _fail(f"The (d)types do not match: {type(actual)} != {type(expected)}.", msg)
    floats = isinstance(actual, (float, complex)) or isinstance(expected, (float, complex))
    rtol, atol = _tolerances(["float64"] if floats else ["int64"], rtol, atol)
    if actual == expected or (equal_nan and actual != actual and expected != expected):
        return
    diff = abs(actual - expected)
    if diff <= atol + rtol * abs(expected) and math.isfinite(diff):     # (an infinity is
        return                                  # close to itself alone, not within inf)
    rel = diff / abs(expected) if expected != 0 else math.inf
    equal = rtol == 0 and atol == 0
    _fail(f"Scalars are not {'equal' if equal else 'close'}!\n\nExpected {expected} but got "
          f"{actual}.\nAbsolute difference: {diff}" + ("" if equal else f" (up to {atol} allowed)")
          + f"\nRelative difference: {rel}" + ("" if equal else f" (up to {rtol} allowed)"), msg)


def _as_array(x):
    if isinstance(x, Tensor):       # (bfloat16: its float32 values; NumPy has no bfloat16)
        return x.detach()._data.astype(np.float32) if x.dtype.name == "bfloat16" else \
            x.detach().numpy()
    return np.asarray(x)


def _compare_tensors(actual, expected, rtol, atol, equal_nan, check_dtype, check_stride, msg):
    a, e = _as_array(actual), _as_array(expected)
    if a.shape != e.shape:
        shape = "torch.Size([{}])".format
        _fail(f"The values for attribute 'shape' do not match: "
              f"{shape(', '.join(map(str, a.shape)))} != {shape(', '.join(map(str, e.shape)))}.",
              msg)
    names = [x.dtype.name if isinstance(x, Tensor) else str(y.dtype)
             for x, y in ((actual, a), (expected, e))]
    if check_dtype and (a.dtype != e.dtype or names[0] != names[1]):
        _fail(f"The values for attribute 'dtype' do not match: {actual.dtype} != "
              f"{expected.dtype}.", msg)
    if check_stride and isinstance(actual, Tensor) and actual.stride() != expected.stride():
        _fail(f"The values for attribute 'stride()' do not match: {actual.stride()} != "
              f"{expected.stride()}.", msg)
    rtol, atol = _tolerances(names, rtol, atol)
    if rtol < 0 or atol < 0:        # (torch.isclose's check, which assert_close surfaces)
        which, tol = ("atol", atol) if atol < 0 else ("rtol", rtol)
        raise RuntimeError(f"{which} must be greater than or equal to zero, but got {tol}")
    promoted = _promoted(names, a, e)
    dt = np.dtype(np.float32) if promoted == "bfloat16" else promoted
    # PyTorch computes in the promoted dtype: bfloat16 (float32 arrays here) rounded so
    bf16 = promoted == "bfloat16"
    rnd = (lambda x: _bf16.to_float32(_bf16.round_to(x))) if bf16 else (lambda x: x)
    a, e = a.astype(dt), e.astype(dt)
    if a.ndim == 0:                 # (PyTorch's scalar message: the Python values')
        a_item, e_item = a.item(), e.item()
    if dt.kind == "b":
        bad = a != e
        a, e = a.astype(np.int64), e.astype(np.int64)
    elif dt.kind in "fc":
        with np.errstate(invalid="ignore", over="ignore"):
            diff = rnd(_abs(a - e))   # (an infinity is close to itself alone)
            close = (a == e) | (np.isfinite(diff) & (diff <= rnd(atol + rnd(rtol * _abs(e)))))
        if equal_nan:
            close |= np.isnan(a) & np.isnan(e)
        bad = ~close
    else:
        bad = np.abs(a.astype(np.float64) - e) > atol + rtol * np.abs(e)
    n_bad = int(bad.sum())
    if n_bad == 0:
        return
    equal = rtol == 0 and atol == 0
    what = "equal" if equal else "close"
    if a.ndim == 0:
        diff = abs(a_item - e_item)
        rel = math.inf if e_item == 0 else diff / abs(e_item)
        _fail(f"Scalars are not {what}!\n\nExpected {e_item} but got {a_item}.\n"
              f"Absolute difference: {diff}" + ("" if equal else f" (up to {atol} allowed)")
              + f"\nRelative difference: {rel}" + ("" if equal else f" (up to {rtol} allowed)"),
              msg)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        absdiff = rnd(_abs(a - e)) if dt.kind in "fc" else np.abs(a.astype(np.int64) - e)
        rel = _rel(absdiff, e, rnd)
    # (PyTorch's: the greatest among the mismatches, a NaN first, as its max propagates it)
    absdiff[~bad], rel[~bad] = 0, 0
    at_abs = np.unravel_index(int(np.argmax(absdiff)), a.shape)
    at_rel = np.unravel_index(int(np.argmax(rel)), a.shape)
    allowed_abs = "" if equal else f" (up to {atol} allowed)"
    allowed_rel = "" if equal else f" (up to {rtol} allowed)"
    _fail(f"Tensor-likes are not {what}!\n\nMismatched elements: {n_bad} / {a.size} "
          f"({100 * n_bad / a.size:.1f}%)\n"
          f"Greatest absolute difference: {absdiff[at_abs].item()} at index "
          f"{tuple(int(i) for i in at_abs)}{allowed_abs}\n"
          f"Greatest relative difference: {rel[at_rel].item()} at index "
          f"{tuple(int(i) for i in at_rel)}{allowed_rel}", msg)


def _promoted(names, a, e):
    """The dtype PyTorch compares in: its promotion (int64 with float32 is float32, not
    NumPy's float64); "bfloat16" for that one (its values held as float32 here)."""
    try:
        d = _promote_types(from_name(names[0]), from_name(names[1]))
    except (KeyError, ValueError, TypeError, AttributeError):   # (no tensor dtype)
        return np.result_type(a.dtype, e.dtype)
    return "bfloat16" if d.name == "bfloat16" else np.dtype(d.np)


def _abs(x):
    """|x| rounded once, as PyTorch's (NumPy's complex64 abs can be an ulp off)."""
    return np.hypot(x.real, x.imag) if x.dtype.kind == "c" else np.abs(x)


def _rel(absdiff, e, rnd):
    """absdiff / |e| as PyTorch divides: in the (real) float dtype of absdiff, float32 for
    integers (each operand converted to float32 first, as its true division does)."""
    ft = absdiff.dtype if absdiff.dtype.kind == "f" else np.float32
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return rnd((absdiff.astype(ft) / _abs(e).astype(ft)).astype(ft))


def _is_tensor_like(x):
    return isinstance(x, (Tensor, np.ndarray))


def _located(path):
    return f"\n\nThe failure occurred for item {''.join(f'[{p}]' for p in path)}" if path else ""


_NUMBERS = (bool, int, float, complex, np.number, np.bool_)


def _compare(actual, expected, path, kw):
    try:
        if actual is None or expected is None:
            if not (actual is None and expected is None):
                _fail(f"None mismatch: {actual} is not {expected}", kw["msg"])
        elif _is_tensor_like(actual) and _is_tensor_like(expected) and \
                isinstance(actual, Tensor) == isinstance(expected, Tensor):
            _compare_tensors(actual, expected, kw["rtol"], kw["atol"], kw["equal_nan"],
                             kw["check_dtype"], kw["check_stride"], kw["msg"])
        elif isinstance(actual, _NUMBERS) and isinstance(expected, _NUMBERS):
            actual, expected = (x.item() if isinstance(x, np.generic) else x
                                for x in (actual, expected))
            _compare_numbers(actual, expected, kw["rtol"], kw["atol"], kw["equal_nan"],
                             kw["check_dtype"], kw["msg"])
        elif isinstance(actual, collections.abc.Mapping) and \
                isinstance(expected, collections.abc.Mapping):
            if set(actual) != set(expected):
                raise AssertionError(f"The keys of the mappings do not match:\n"
                                     f"Missing keys in the actual mapping: "
                                     f"{sorted(set(expected) - set(actual), key=str)}\n"
                                     f"Additional keys in the actual mapping: "
                                     f"{sorted(set(actual) - set(expected), key=str)}")
            for k in expected:
                _compare(actual[k], expected[k], path + [repr(k)], kw)
        elif isinstance(actual, collections.abc.Sequence) and not isinstance(actual, str) and \
                isinstance(expected, collections.abc.Sequence) and not isinstance(expected, str):
            if len(actual) != len(expected):
                raise AssertionError(f"The length of the sequences mismatch: {len(actual)} != "
                                     f"{len(expected)}")
            for i, (a, e) in enumerate(zip(actual, expected)):
                _compare(a, e, path + [str(i)], kw)
        else:
            raise TypeError(f"No comparison pair was able to handle inputs of type "
                            f"{type(actual)} and {type(expected)}." + _located(path))
    except _Failure as f:
        if not getattr(f, "located", False):
            f = _Failure(f"{f}{_located(path)}")
            f.located = True
        raise f from None


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None,
                 equal_nan=False, check_device=True, check_dtype=True, check_layout=True,
                 check_stride=False, msg=None):
    """Raise AssertionError unless actual and expected are close, as torch.testing.assert_close:
    |actual - expected| <= atol + rtol * |expected| elementwise, tensors of one shape and
    (check_dtype) dtype, sequences and mappings item by item."""
    kw = dict(rtol=rtol, atol=atol, equal_nan=equal_nan, check_dtype=check_dtype,
              check_stride=check_stride, msg=msg)
    try:
        _compare(actual, expected, [], kw)
    except _Failure as f:
        raise AssertionError(msg(str(f)) if callable(msg) else str(f)) from None


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """The deprecated torch.testing.assert_allclose: assert_close without the dtype check."""
    warnings.warn("`torch.testing.assert_allclose()` is deprecated since 1.12 and will be "
                  "removed in a future release. Please use `torch.testing.assert_close()` "
                  "instead. You can find detailed upgrade instructions in "
                  "https://github.com/pytorch/pytorch/issues/61844.", FutureWarning,
                  stacklevel=2)
    if not isinstance(actual, Tensor):
        actual = Tensor._from_array(np.asarray(actual))
    if not isinstance(expected, Tensor):
        expected = Tensor._from_array(np.asarray(expected, dtype=_as_array(actual).dtype))
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan,
                 check_dtype=False, msg=msg or None)


def _low_high(dtype, low, high, lowest, highest, default_low, default_high, integral):
    low = default_low if low is None else low
    high = default_high if high is None else high
    if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
        raise ValueError(f"`low` and `high` cannot be NaN, but got low={low} and high={high}")
    if low >= high and not (low == high and not integral):
        raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    if high < lowest or low >= highest:
        raise ValueError(f"The value interval specified by `low` and `high` is [{low}, {high}), "
                         f"but {dtype} only supports [{lowest}, {highest})")
    low, high = min(max(low, lowest), highest), min(max(high, lowest), highest)
    return (math.ceil(low), math.ceil(high)) if integral else (low, high)


def make_tensor(*shape, dtype, device=None, low=None, high=None, requires_grad=False,
                noncontiguous=False, exclude_zero=False, memory_format=None):
    """A tensor of shape filled with uniform values in [low, high) (integers: [low, high)),
    as torch.testing.make_tensor: drawn as it draws them (randint, uniform_) from the
    global generator, so the values and the generator's state after are PyTorch's."""
    if len(shape) == 1 and isinstance(shape[0], collections.abc.Sequence):
        shape = shape[0]
    shape = tuple(shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(f"The parameters `noncontiguous` and `memory_format` are mutually "
                         f"exclusive, but got noncontiguous={noncontiguous} and "
                         f"memory_format={memory_format}")
    dtype = dtype if hasattr(dtype, "np") else from_name(str(dtype))
    kind = dtype.np.kind
    if requires_grad and kind in "biu":
        raise ValueError(f"`requires_grad=True` is not supported for boolean and integral "
                         f"dtypes, but got dtype={dtype}")
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:
        shape = shape[:-1] + (2 * shape[-1],)
    if kind == "b":
        low, high = _low_high(dtype, low, high, 0, 2, 0, 2, True)
        result = _randint(low, high, shape, dtype=dtype)
    elif kind in "iu":
        info = _iinfo(dtype)
        low, high = _low_high(dtype, low, high, info.min,
                              info.max + (1 if dtype.np != np.int64 else 0), -9, 10, True)
        result = _randint(low, high, shape, dtype=dtype)
    elif kind == "f":
        info = _finfo(dtype)
        low, high = _low_high(dtype, low, high, info.min, info.max, -9, 9, False)
        result = _empty(shape, dtype=dtype)
        if high - low >= info.max:
            result.uniform_(low / 2, high / 2).mul_(2)
        else:
            result.uniform_(low, high)
    else:
        raise TypeError(f"The requested dtype '{dtype}' is not supported by "
                        "torch.testing.make_tensor().")
    if noncontiguous:
        result = result[..., 1::2]
    elif memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if exclude_zero:
        result[result == 0] = 1 if kind in "biu" else _finfo(dtype).tiny
    if kind == "f":
        result.requires_grad = requires_grad
    return result
