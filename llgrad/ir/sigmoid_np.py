"""sigmoid on NumPy arrays as PyTorch computes it, for the op table's impls (sigmoid, silu,
glu, the RNN cells) and the constants the LLVM lowering (codegen/lowerings/vecmath.py) takes.

PyTorch's CPU kernel is 1 / (1 + exp(-x)): where exp(-x) overflows (x <= ZERO_AT of the
dtype) the result is exactly 0, not the subnormal exp(x) that the overflow-free form
exp(-|x|) / (1 + exp(-|x|)) gives (float32 sigmoid(-100) is 0 in PyTorch, 3.8e-44 in the
free form: a BCE on it then reads log(3.8e-44) = -99.98 where PyTorch clamps log(0) to
-100). Everywhere else the free form is used: both branches are exact."""
import numpy as np

# the greatest x of each dtype whose exp(-x) overflows (log of the dtype's max, rounded up
# to the dtype; float16 and bfloat16 are computed in float32, as PyTorch does)
ZERO_AT = {"float32": float.fromhex("-0x1.62e43p+6"),          # -88.72283935546875
           "float64": float.fromhex("-0x1.62e42fefa39f0p+9")}  # -709.7827128933841

_INTO = (np.dtype(np.float32), np.dtype(np.float64))
_ZERO_AT_CHAR = {np.dtype(name).char: v for name, v in ZERO_AT.items()}


def sigmoid(x):
    """sigmoid of a float32, float64 or complex array, PyTorch's numbers."""
    if x.dtype in _INTO and x.flags.c_contiguous:
        # (sigmoid_into's in-place ufuncs: the same bits and row-major layout, without
        # np.where's and dtype.name's costs: a quarter less time on a small eager tensor)
        return sigmoid_into(x, np.empty(x.shape, x.dtype))
    if x.dtype.kind == "c":
        return 1 / (1 + np.exp(-x))     # (no sign to split on)
    z = np.exp(-np.abs(x))
    zero_at = ZERO_AT.get(x.dtype.name)
    if zero_at is not None:
        z = np.where(x <= zero_at, 0, z)    # (NaN compares false: stays NaN)
    d = 1 + z           # (once: both branches divide by it)
    return np.where(x >= 0, 1 / d, z / d).astype(np.result_type(x), copy=False)


def sigmoid_into(x, out):
    """out = sigmoid(x), bit for bit as sigmoid(x): where(x >= 0, 1, z) / (1 + z), the where
    as max(z, x >= 0) (z <= 1; NaN stays NaN). out may be x."""
    pos = np.greater_equal(x, 0)
    zero_at = _ZERO_AT_CHAR.get(x.dtype.char)     # (dtype.name is a ~2 us Python property)
    under = None if zero_at is None else np.less_equal(x, zero_at)
    np.abs(x, out=out)
    np.negative(out, out=out)
    np.exp(out, out=out)
    if under is not None:
        np.putmask(out, under, 0)
    den = out + 1
    np.maximum(out, pos, out=out)
    np.divide(out, den, out=out)
    return out
