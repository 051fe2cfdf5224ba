"""PyTorch's checks and inference rules for the Python numbers creation functions store:
the overflow errors of tensor(..., dtype=) and full(), the dtype NumPy float scalars
give torch.tensor, and arange's integer results of float bounds."""
import math

import numpy as np

from ..ir import promotion
from . import dtypes, trace_state
from .sym_int import SymInt


def int_arg(fn, name, v):
    """v as an int: PyTorch's TypeError for a float or a string (eye(2.5), eye("2"))."""
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{fn}(): argument '{name}' must be int, not {type(v).__name__}")
    return v.__index__()


def int_bounds(name, *bounds):
    """randint's low and high as ints: PyTorch's TypeError for a float or a string (int()
    would read 2.5 as 2 and "2" as 2)."""
    for v in bounds:
        if not hasattr(v, "__index__"):
            raise TypeError(f"{name}() received an invalid combination of arguments - got "
                            f"a bound of type {type(v).__name__}, but expected int")
    return tuple(int(v) for v in bounds)


def _float_leaves(data, size):
    """Which of the numbers in nested lists data (in NumPy's order) are floats; all of
    them when data is not such lists of size numbers."""
    seen, stack = [], [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
        else:
            seen.append(isinstance(x, (float, np.floating)))
    return np.array(seen).reshape(-1) if len(seen) == size else np.ones(size, bool)


def check_fits(arr, d, data=None):
    """PyTorch's overflow check of Python numbers (data, read into arr) given an integer
    dtype: an unsigned one takes an int down to -max, wrapping it, but no negative float
    (-0.5 too: the float is checked before it is truncated); Python complexes into a real
    dtype are its TypeError (NumPy would drop the imaginary parts)."""
    if arr.dtype.kind == "c" and d._cat in (1, 2):
        raise TypeError("must be real number, not complex" if d._cat == 2 else
                        "'complex' object cannot be interpreted as an integer")
    if d._cat != 1 or arr.size == 0 or arr.dtype.kind not in "iuf":
        return
    info = np.iinfo(d.np)
    lo, least = info.min, arr.min()
    if info.min == 0:
        lo = -info.max if arr.dtype.kind in "iu" else 0
        if lo == 0 and least < 0:       # (the ints among floats may wrap, if no float is < 0)
            lo = 0 if (arr.ravel()[_float_leaves(data, arr.size)] < 0).any() else -info.max
    with np.errstate(invalid="ignore"):
        if not (np.isfinite(arr).all() and least >= lo and arr.max() <= info.max):
            raise RuntimeError(f"value cannot be converted to type {d.name} without overflow")


_PLAIN = {float, int, bool}


def _leaf_name(x, floating):
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype.name
    if isinstance(x, bool):
        return "bool"
    return "int64" if isinstance(x, int) else floating if isinstance(x, float) else None


def leaf_dtype(data, floating):
    """The dtype torch.tensor infers for nested lists that hold NumPy scalars or arrays
    (each its own dtype, promoted by PyTorch's rule with the Python numbers: int64, bool,
    the default float `floating`), as a NumPy dtype; None when they hold none."""
    if set(map(type, data)) <= _PLAIN:      # (the common case, at C speed)
        return None
    found, numpy, stack = None, False, [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
            continue
        numpy = numpy or isinstance(x, (np.ndarray, np.generic))
        name = _leaf_name(x, floating)
        if name is not None:
            found = name if found is None else promotion.promote_types(found, name)
    return np.dtype(found) if numpy and found is not None else None


def sequence_error(data):
    """PyTorch's error for nested lists that are not a rectangle: the first sequence (in
    order) whose length differs from the first one's at its depth."""
    shape, x = [], data
    while isinstance(x, (list, tuple)):
        shape.append(len(x))
        x = x[0] if len(x) else None
    first = x
    stack = [(data, 0)]
    while stack:
        x, d = stack.pop()
        if d == len(shape):
            if isinstance(x, (list, tuple)):    # (a sequence where a number belongs)
                return TypeError(f"must be real number, not {type(x).__name__}"
                                 if isinstance(first, float) else
                                 f"'{type(x).__name__}' object cannot be interpreted as an "
                                 "integer")
            continue
        if not isinstance(x, (list, tuple)):
            return TypeError("not a sequence")
        if len(x) != shape[d]:
            return ValueError(f"expected sequence of length {shape[d]} at dim {d} (got "
                              f"{len(x)})")
        stack.extend((y, d + 1) for y in reversed(x))
    return None


def number_error(data, scalar=False):
    """PyTorch's error for nested lists NumPy cannot read as int64 or float: the first
    leaf that is not a number, else an int beyond int64. A string first in its list is
    read as one more dimension (PyTorch sizes the data by its first elements)."""
    x, depth = data, 0
    while isinstance(x, (list, tuple)) and len(x):
        x, depth = x[0], depth + 1
    if depth > scalar and isinstance(x, str):
        return ValueError(f"too many dimensions '{type(x).__name__}'")
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
        elif isinstance(x, (str, bytes)):
            return TypeError(f"new(): invalid data type '{type(x).__name__}'")
        elif not isinstance(x, (int, float, np.generic)):
            return RuntimeError(f"Could not infer dtype of {type(x).__name__}")
    return ValueError("Overflow when unpacking long long")


def leaf_type_error(data, want):
    """PyTorch's TypeError for a leaf of data that is no number, read into the dtype want
    (tensor([None], dtype=float32)); None when every leaf is a number."""
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
        elif not isinstance(x, (int, float, np.generic)):
            n = type(x).__name__
            return TypeError(f"must be real number, not {n}" if want.is_floating_point else
                             f"'{n}' object cannot be interpreted as an integer")
    return None


def beyond_int64(arr, data):
    """Whether NumPy's array arr of nested lists data holds ints beyond int64 (or what is
    not a number): PyTorch reads an int as int64 and overflows, where NumPy makes [1, 2**63]
    floats."""
    if arr.dtype.kind in "uO":
        return True
    if arr.dtype.kind != "f" or not bool((np.abs(arr) >= 2.0 ** 63).any()):
        return False
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, (float, np.floating)):
            return False
    return True


def int_array(value, floating, float_dtype):
    """A Python int as a 0-d int64 array (as a float_dtype one where floating is wanted),
    with PyTorch's error beyond int64."""
    if -2 ** 63 <= value < 2 ** 63:
        return np.array(value, dtype=np.int64)
    if floating:
        return np.array(float(value), dtype=float_dtype)
    raise ValueError("Overflow when unpacking long long")


_C_NAMES = {"int64": "int64_t", "int32": "int", "int16": "int16_t", "int8": "int8_t",
            "uint8": "uint8_t", "float32": "float", "float16": "c10::Half",
            "bfloat16": "c10::BFloat16", "float64": "double"}


def scalar_default(what, value):
    """The dtype a number fill value gives what (full, ...) by default, after PyTorch's
    TypeError for a fill value that is not a number (None, a string, a list)."""
    if value is None or isinstance(value, _NOT_NUMBERS):
        raise TypeError(f"{what}(): argument 'fill_value' (position 2) must be Number, not "
                        f"{type(value).__name__}")
    return dtypes.default_for_scalar(value)


def fill_number(value, what="full"):
    """value, full()'s fill value, or for a tensor a Python number of its kind (which picks
    the default dtype, as a number would: int64 for an integer tensor, not its own dtype),
    after PyTorch's TypeError for a tensor it does not read as a number: one of a
    dimension, or one that requires grad."""
    if not hasattr(value, "_dtype"):
        return value
    if value.ndim or value.requires_grad:
        raise TypeError(f"{what}(): argument 'fill_value' (position 2) must be Number, not Tensor")
    return (False, 0, 0.0, 0j)[value._dtype._cat]


# the largest finite values of the float dtypes PyTorch checks a fill value against
_FLOAT_MAX = {n: float(np.finfo(n).max) for n in ("float32", "float16")}
_FLOAT_MAX["bfloat16"] = float.fromhex("0x1.fep127")     # (NumPy has no finfo of it)

# what a fill value never is (NumPy would fail deep inside with words of its own)
_NOT_NUMBERS = (str, bytes, list, tuple, dict, set)


def fill_value_fits(value, d):
    """PyTorch's overflow check of a Python number stored into a tensor of dtype d (an
    unsigned type takes a negative number down to -max, wrapping it); the value to store."""
    if type(value) is int and not -2 ** 63 <= value < 2 ** 64:     # (PyTorch's Scalar)
        raise OverflowError("int too big to convert" if value > 0 else
                            "can't convert negative int to unsigned")
    if type(value) in (int, float) and d.is_floating_point:     # (the common case first)
        top = _FLOAT_MAX.get(d.name)
        # (inf and nan always fit a float dtype: a matcher's cost[r, :] = inf took the
        # slow path below, np.finfo and all, twice per write)
        if top is None or -top <= value <= top or not math.isfinite(value):
            return value
    if value is None or isinstance(value, _NOT_NUMBERS):
        raise TypeError(f"expected a Number, not {type(value).__name__}")
    if hasattr(value, "_dtype") and value._data.size == 1 and d.name in _C_NAMES and \
            not np.can_cast(value._data.dtype, d.np, "safe"):
        # (a one-element tensor read as its number, where it may not fit: a value of d's
        # dtype or a narrower one always does, and is not read, so a trace keeps it data)
        fill_value_fits(value.item(), d)
    if isinstance(value, complex) and d.name in _C_NAMES:     # (llgrad has no complex dtype)
        if value.imag:      # (PyTorch's words; its real part otherwise)
            raise RuntimeError(f"value cannot be converted to type {_C_NAMES[d.name]} without "
                               "overflow")
        value = value.real
    if d.name == "bool" and type(value) is int:     # (NumPy's cast overflows past int64)
        return value != 0
    if d.name not in _C_NAMES or isinstance(value, bool) or hasattr(value, "_dtype"):
        return value
    info = np.finfo(d.np) if d.is_floating_point else np.iinfo(d.np)
    if d.is_floating_point:
        bad = np.isfinite(value) and abs(value) > _FLOAT_MAX.get(d.name, float(info.max))
    elif value != value or value in (np.inf, -np.inf):
        bad = True
    elif isinstance(value, (float, np.floating)):   # (no wrapping: -0.5 overflows uint8)
        bad = not (info.min <= value <= info.max)
    else:
        v = int(value)
        bad = not (-(info.max if info.min == 0 else -info.min) <= v <= info.max)
        value = v % (info.max + 1) if info.min == 0 and v < 0 else value
    if bad:
        raise RuntimeError(f"value cannot be converted to type {_C_NAMES[d.name]} without "
                           "overflow")
    return value


def tensor_scalars(data, is_tensor):
    """data (nested lists) with each tensor in it (is_tensor) as its one element, a NumPy
    scalar of its dtype: torch.tensor([t1, t2]) takes one-element tensors as numbers and
    refuses others; a size a trace read (SymInt) as its int; data itself when it holds
    neither."""
    if set(map(type, data)) <= _PLAIN:      # (the common case, at C speed)
        return data
    out, changed = [], False
    for x in data:
        if is_tensor(x):
            if x._data.size != 1:       # (PyTorch reads an integer one through __index__)
                if x._dtype.is_floating_point:
                    raise ValueError("only one element tensors can be converted to Python "
                                     "scalars")
                raise TypeError("only integer tensors of a single element can be converted to "
                                "an index")
            # (item(): inside a compiled function, a read of the value the trace guards)
            x, changed = x._data.dtype.type(x.item()), True
        elif type(x) is SymInt:
            x, changed = x.plain(), True
        elif isinstance(x, (list, tuple)):
            y = tensor_scalars(x, is_tensor)
            changed = changed or y is not x
            x = y
        out.append(x)
    return out if changed else data


def int_arange(start, end, step, d):
    """PyTorch's integer arange of float bounds: int64 truncates all three first; narrower
    types count the values in float64 and step from the truncated start by the truncated
    step (which may be 0)."""
    if d is dtypes.int64:
        start, end, istep = int(start), int(end), int(step)
        if istep == 0:
            raise ValueError("step must be nonzero")
        return np.arange(start, end, istep, dtype=np.int64)
    n = max(math.ceil((end - start) / step), 0)
    return (int(start) + int(step) * np.arange(n, dtype=np.int64)).astype(d.np)


def int_bounds_fit(t, *bounds):
    """PyTorch's overflow check of Python number bounds (clamp's min / max) for the tensor t
    (checked only: the bounds stay as given); the first bound."""
    d = t._dtype
    if d._cat == 1 or d.name in ("float16", "float32", "bfloat16"):    # (clamp(min=-1e39))
        for b in bounds:
            if type(b) is int or type(b) is float and d._cat == 2:
                fill_value_fits(b, d)
    return bounds[0]


def requiring_grad(t):
    """t made to require grad, as a creation function's requires_grad=True (PyTorch's error
    for a dtype that cannot)."""
    if t._dtype._cat < 2:
        raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                           "gradients")
    return t.requires_grad_(True)


def check_set_data(requires_grad, value):
    """PyTorch's checks of `t.data = value` (Tensor.data's setter), made before anything of
    t is replaced."""
    if getattr(value, "_storage", None) is None:
        raise TypeError(f"Variable data has to be a tensor, but got {type(value).__name__}")
    if requires_grad and not (value.dtype.is_floating_point or value.dtype.is_complex):
        raise RuntimeError("data set to a tensor that requires gradients must be floating "
                           "point or complex dtype")


def check_moved_in_place(value, own):
    """`t.data = value` (not t's own layout) with value in t's very Storage, own (`y.data =
    x[1]` with y over x) ends a trace: compile/moved_data.py replays only memory new to t,
    and a compiled call would give t a copy where eager's is a view."""
    if value._storage is own and trace_state.state.tracer is not None:
        trace_state.state.tracer.graph_break("`.data =` another view of the tensor's own "
                                             "memory")


def check_dlpack_export(t):
    """PyTorch's refusal to export a tensor that requires grad; llgrad's of a bfloat16 one,
    whose memory (32-bit words holding bfloat16 values) no DLPack dtype describes."""
    if t.requires_grad:
        raise RuntimeError("Can't export tensors that require gradient, use tensor.detach()")
    if t._dtype is dtypes.bfloat16:
        raise NotImplementedError(
            "llgrad: DLPack export of a BFloat16 tensor: llgrad keeps a bfloat16 tensor's "
            "values in 32-bit words, which no DLPack dtype describes; export t.float() instead")


_FLOAT_PERMUTATIONS = {"float16": (2 ** 11 + 1, "2049 for Half"),
                       "float32": (2 ** 24 + 1, "2^24+1 for Float"),
                       "float64": (2 ** 53 + 1, "2^53+1 for Double")}


def randperm_checks(n, dtype):
    """torch.randperm's checks, made before any draw (the stream does not move): n >= 0, no
    bool or complex result, n - 1 fits an integer dtype, a float one holds 0..n-1 exactly."""
    if n < 0:
        raise RuntimeError(f"n must be non-negative, got{n}")
    d = dtypes.to_dtype(dtype) if dtype is not None else dtypes.int64
    if d._cat not in (1, 2):
        name = dtypes.scalar_type_name(d)
        raise NotImplementedError(f"\"randperm\" not implemented for '{name}'")
    if d._cat == 1 and n - 1 > np.iinfo(d.np).max:
        c_name = {"int32": "int"}.get(d.name, d.name + "_t")
        raise RuntimeError(f"value cannot be converted to type {c_name} without overflow")
    most, text = _FLOAT_PERMUTATIONS.get(d.name, (n, ""))
    if n > most:
        raise RuntimeError(f"n cannot be greater than {text} type.")
