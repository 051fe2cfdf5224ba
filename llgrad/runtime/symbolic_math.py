"""Math functions of llgrad's own Python arithmetic that keep a SymbolicScalar traced
(symbolic_scalar.py): math.cos, math.exp and math.floor read their argument's number (a
stand-in escapes there), so a scheduler's cosine or cycle of its step counter would make the
counter a value guard, a trace per step. The user's own calls of math.sqrt, math.cos,
math.exp and math.floor reach these while a trace runs (compile/math_stand_ins.py: a
hand-written AdamW's `math.sqrt(1 - beta2 ** state["step"])`)."""
import math

from ..ir import OPS
from .derived_number import DerivedNumber
from .dispatch import call
from .dtypes import float64, int64
from .symbolic_scalar import _FLOAT_EXACT, ROUNDING, SymbolicScalar, _checked, _require
from .symbolic_uses import _tracing


def cos(x):
    """math.cos(x): of a SymbolicScalar, glibc's float64 cos recorded as an op (the cos op's
    libm form, math.cos's number to the bit, compiled code calling the same function),
    not the number read."""
    if type(x) is not SymbolicScalar:
        return math.cos(x)
    if type(x.value) is int:
        if abs(x.value) >= _FLOAT_EXACT:
            return math.cos(x._escape("math.cos()"))
        _require(x.tensor.abs() < _FLOAT_EXACT)
    t = call(OPS["cos"], (x.tensor.to(float64),), {"libm": True})
    return _checked(x, t, math.cos(x.value))


def exp(x):
    """math.exp(x): of a SymbolicScalar, glibc's float64 exp recorded as an op (as cos: an
    epsilon-greedy `math.exp(-steps_done / EPS_DECAY)`), guarded below math's overflow."""
    if type(x) is not SymbolicScalar:
        return math.exp(x)
    if not abs(x.value) < 700:      # (math's OverflowError, a NaN: the number read)
        return math.exp(x._escape("math.exp()"))
    t = x.tensor.to(float64)
    _require(t.abs() < 700)
    return _checked(x, call(OPS["exp"], (t,), {"libm": True}), math.exp(x.value))


def floor(x):
    """math.floor(x): of a float SymbolicScalar, the floor op (exact) as an int stand-in."""
    if type(x) is not SymbolicScalar:
        return math.floor(x)
    if type(x.value) is int:
        return x
    if not abs(x.value) < _FLOAT_EXACT:
        return math.floor(x._escape("math.floor()"))
    _require(x.tensor.abs() < _FLOAT_EXACT)     # (an int64 holds it, exactly)
    return _checked(x, x.tensor.floor().to(int64), math.floor(x.value))


def sqrt(x):
    """math.sqrt(x): of a SymbolicScalar, the float64 sqrt op (correctly rounded, as C's
    sqrt and so math.sqrt's number to the bit), guarded to stay in sqrt's domain (a later
    negative number traces again and raises math's ValueError, as eager does)."""
    if type(x) is not SymbolicScalar:
        return math.sqrt(x)
    if type(x.value) is int:
        if abs(x.value) >= _FLOAT_EXACT:
            return math.sqrt(x._escape("math.sqrt()"))
        _require(x.tensor.abs() < _FLOAT_EXACT)
    if not x.value >= 0:        # (math's domain error, or a NaN's NaN: the number read)
        return math.sqrt(x._escape("math.sqrt()"))
    t = x.tensor.to(float64)
    _require(t >= 0)
    return _checked(x, t.sqrt(), math.sqrt(x.value))


_INT64_SAFE = 2.0 ** 62         # (a float whose int an int64 holds, with room: _int64_holds)


def int_of(x):
    """int(x) of a SymbolicScalar (the user's `int(correct.item())`, `int(acc.item() * n)`,
    tracer/convert.py rewrites their calls): an int is itself; a float, truncated toward
    zero (the trunc op, exact) as an int stand-in, guarded finite and well inside int64
    (else Python's big int, or its error: the number read)."""
    if type(x.value) is int:
        return x
    if not abs(x.value) < _INT64_SAFE:
        return int(x._escape("int()"))
    _require(x.tensor.abs() < _INT64_SAFE)
    return _checked(x, x.tensor.trunc().to(int64), int(x.value))


def float_of(x):
    """float(x) of a SymbolicScalar: a float is itself; an int, the float64 an int under
    2**53 is exactly (a larger one: the number read)."""
    if type(x.value) is float:
        return x
    if not abs(x.value) < _FLOAT_EXACT:
        return float(x._escape("float()"))
    _require(x.tensor.abs() < _FLOAT_EXACT)
    return _checked(x, x.tensor.to(float64), float(x.value))


def round_of(x, ndigits=None):
    """round(x) / round(x, ndigits) of a SymbolicScalar: round(float) is the round op (half
    to even, as Python's) as an int stand-in, guarded as int_of; round(int, n >= 0) is the
    int itself; round(float, n) (Python's decimal rounding) a DerivedNumber while tracing
    (not in a region: a branch's result must be traced); anything else the number read."""
    if ndigits is None and type(x.value) is float:
        if not abs(x.value) < _INT64_SAFE:
            return round(x._escape("round()"))
        _require(x.tensor.abs() < _INT64_SAFE)
        return _checked(x, x.tensor.round().to(int64), round(x.value))
    if type(x.value) is int and (ndigits is None or type(ndigits) is int and ndigits >= 0):
        return x
    if type(ndigits) is int and _tracing() is not None:
        # (Python's decimal rounding, done by each compiled call on its number: where it
        # goes is limited, runtime/derived_number.py)
        return DerivedNumber(x, lambda v: round(v, ndigits))
    return round(x._escape("round()"), ndigits)


ROUNDING.append(round_of)
