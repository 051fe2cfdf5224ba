"""Bitwise ops on integer and bool tensors: and, or, xor, not, the shifts, gcd and lcm, and
integer floor / trunc division. Not differentiable (PyTorch defines them on integers and
bools only: the runtime's methods refuse floats with PyTorch's messages,
llgrad/runtime/functions_bitwise.py).

gcd and lcm are PyTorch's kernels' arithmetic (Euclid with C's remainder, the lcm in C's
integer promotion). The shifts are PyTorch's: a shift by a negative amount or by the width
of the dtype or more gives 0 (left) or the sign (right: -1 for a negative value, else 0);
in range they wrap as C's do on the promoted dtype. Integer division is exact (not through
float64, which rounds above 2**53) and wraps as C's (int8 -128 // -1 is -128)."""
import numpy as np

from .optable import defop


def _binary(name, impl):
    return defop(name, impl, args=("self", "other"), kind="elementwise", promote=(0, 1))


def _shift_amount(a, b):
    bits = np.dtype(a.dtype).itemsize * 8
    b = np.asarray(b)
    ok = (b >= 0) & (b < bits)
    return ok, np.where(ok, b, 0).astype(a.dtype, copy=False)


def _shifted(a, b):
    """a as an array: a number on the left (3 << t) in the other operand's dtype, as
    PyTorch wraps it (C's cast: 300 in int8 is 44)."""
    return a if isinstance(a, np.ndarray) else np.asarray(a).astype(np.asarray(b).dtype)


def _left_shift(a, b):
    a = _shifted(a, b)
    ok, s = _shift_amount(a, b)
    return np.where(ok, np.left_shift(a, s), np.zeros((), a.dtype)).astype(a.dtype, copy=False)


def _right_shift(a, b):
    a = _shifted(a, b)
    ok, s = _shift_amount(a, b)
    sign = np.where(a < 0, np.asarray(-1).astype(a.dtype), np.zeros((), a.dtype))
    return np.where(ok, np.right_shift(a, s), sign).astype(a.dtype, copy=False)


_binary("bitwise_and", np.bitwise_and)
_binary("bitwise_or", np.bitwise_or)
_binary("bitwise_xor", np.bitwise_xor)
defop("bitwise_not", np.invert, kind="elementwise")
_binary("bitwise_left_shift", _left_shift)
_binary("bitwise_right_shift", _right_shift)
def _arrays(a, b):
    """a and b as arrays of their promoted dtype (a Python number takes the other's)."""
    if not isinstance(a, np.ndarray):
        a = np.asarray(a, np.asarray(b).dtype)
    if not isinstance(b, np.ndarray):
        b = np.asarray(b, a.dtype)
    return a, b


def _gcd(a, b):
    """PyTorch's Euclid on |a|, |b| (C's remainder: gcd(-2**63, 6) is -2, as there)."""
    a, b = _arrays(a, b)
    a, b = np.broadcast_arrays(np.abs(a), np.abs(b))
    a, b = a.copy(), b.copy()
    live = a != 0
    while live.any():
        c = a[live]
        a[live] = np.fmod(b[live], c)
        b[live] = c
        live = a != 0
    return b


def _lcm(a, b):
    """PyTorch's |a / gcd * b| (0 where the gcd is 0), in C's arithmetic: int for the dtypes
    narrower than it, wrapping."""
    a, b = _arrays(a, b)
    dt = np.result_type(a, b)
    g = _gcd(a, b)
    wide = np.int32 if dt.itemsize < 4 else dt
    q = np.where(g == -1, -a.astype(wide), a.astype(wide) // np.where(g == 0, 1, g).astype(wide))
    return np.where(g == 0, 0, np.abs(q * b.astype(wide))).astype(dt)


_binary("gcd", _gcd)
_binary("lcm", _lcm)


def _div_int(a, b, rounding_mode="floor"):
    """a // b (floor) or C's a / b (trunc) on integers; b == 0 gives 0 (the runtime raises
    PyTorch's ZeroDivisionError before)."""
    a, b = _arrays(a, b)
    if not b.all():     # (where only when a zero is there: a 0-d divisor's where cost more
        b = np.where(b == 0, np.ones((), b.dtype), b)   # than the division)
    if b.ndim == 0 and b > 0:       # (nothing to overflow: no errstate, a third of x // 4)
        q = np.floor_divide(a, b)
    else:
        with np.errstate(over="ignore"):    # (the minimum // -1 wraps, as PyTorch's, unwarned)
            q = np.floor_divide(a, b)
    if rounding_mode == "trunc":
        q = q + ((np.fmod(a, b) != 0) & ((a < 0) != (b < 0))).astype(q.dtype)
    return q.astype(np.result_type(a, b), copy=False)


defop("div_int", _div_int, args=("self", "other"), kind="elementwise", promote=(0, 1))
