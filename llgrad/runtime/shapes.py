"""Argument normalisation shared by tensor methods: dims, shapes, slices (PyTorch's rules
and error messages)."""
import operator

import numpy as np

from ..ir.geometry import geometry_span
from . import size_reads, trace_state
from .sym_int import SymInt

_ONE_SIZE = (int, SymInt)      # (x.view(B): one size, not a sequence of them)


def norm_dim(dim, ndim):
    if type(dim) is not int:
        if isinstance(dim, bool):   # (PyTorch's int argument refuses one: x.sum(True))
            raise TypeError("dim must be an int, not bool")
        dim = _dim_int(dim)
    return _in_range(dim, ndim)


def _in_range(dim, ndim):
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim % n if ndim else 0


def _dim_int(dim):
    """A dim given as a NumPy int or a 0-d tensor as an int; PyTorch's TypeError for a str,
    None or float (not Python's comparison error, or a float dim)."""
    try:
        return operator.index(dim)
    except TypeError:
        raise TypeError(f"dim must be an int, not {type(dim).__name__}") from None


def norm_dims(dim, ndim):
    """None -> None (all dims); int or sequence -> sorted tuple of non-negative dims."""
    if dim is None:
        return None
    if isinstance(dim, (int, str, float)) or hasattr(dim, "__index__"):     # (np.int64(1))
        return (norm_dim(dim, ndim),)
    # (a bool in a tuple of dims is PyTorch's 0 or 1: x.mean((0, True)))
    dims = tuple(sorted(_in_range(d if type(d) is int else _dim_int(d), ndim) for d in dim))
    if len(set(dims)) != len(dims):
        d = next(d for i, d in enumerate(dims) if d in dims[:i])
        raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return dims if dims else None


def unpack_shape(args):
    if type(args) is tuple or type(args) is list:
        for a in args:      # (the common call, x.view(2, 8): plain ints, nothing to convert)
            if type(a) is not int:
                break
        else:
            return tuple(args)
    if len(args) == 1 and not isinstance(args[0], _ONE_SIZE) and getattr(args[0], "ndim", 1):
        if isinstance(args[0], (str, bytes, float)) or args[0] is None:
            raise TypeError(f"sizes must be a tuple of ints, not {type(args[0]).__name__}")
        return tuple(_size(a, i) for i, a in enumerate(args[0]))
    return tuple(_size(a, i) for i, a in enumerate(args))     # (a 0-d tensor: one int)


def _size(a, i):
    """a as a size: PyTorch's TypeError for a float, string, None or float tensor (int()
    would read 2.5 as 2 and "4" as 4)."""
    if type(a) is int:
        return a
    try:
        return operator.index(a)
    except TypeError:
        raise TypeError(f"sizes must be a tuple of ints, but found element of type "
                        f"{type(a).__name__} at pos {i}") from None


def infer_shape(shape, numel):
    shape = list(shape)
    known, inferred = 1, False
    for i, s in enumerate(shape):     # (in order, as PyTorch's: the first bad entry is named)
        if s == -1:
            if inferred:
                raise RuntimeError("only one dimension can be inferred")
            inferred = True
        elif s < 0:
            raise RuntimeError(f"invalid shape dimension {s} at index {i} of shape {shape}")
        else:
            known *= s
    if -1 in shape:
        if known == 0 and numel == 0:
            raise RuntimeError(f"cannot reshape tensor of 0 elements into shape {shape} because "
                               "the unspecified dimension size -1 can be any value and is "
                               "ambiguous")
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape[shape.index(-1)] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def unflatten_shape(sizes, n, dim):
    """infer_shape for Tensor.unflatten(dim, sizes) of a dim of size n, with its messages."""
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    try:
        return infer_shape(sizes, n)
    except RuntimeError as e:
        if not str(e).startswith("shape '"):       # (infer_shape's own checks: wrapped)
            raise RuntimeError(f"unflatten got an unexpected error:\n{e}") from None
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the "
                           f"size of dim {dim} ({n}) in the input tensor") from None


def broadcast_shapes(*shapes):
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for i, n in enumerate(s):
            j = nd - len(s) + i
            if out[j] == 1:
                out[j] = n
            elif n != 1 and n != out[j]:
                _broadcast_error(shapes)
    return tuple(out)


def _broadcast_error(shapes):
    """Raise PyTorch's error for shapes that do not broadcast: its infer_size folds them
    pairwise, each pair compared from the last dimension, so the mismatch named is the
    rightmost of the first pair that fails, numbered within that pair's result."""
    out = ()
    for s in shapes:
        nd = max(len(out), len(s))
        res = [1] * nd
        for i in range(nd - 1, -1, -1):
            k = nd - 1 - i
            a = out[len(out) - 1 - k] if k < len(out) else 1
            b = s[len(s) - 1 - k] if k < len(s) else 1
            if a != b and a != 1 and b != 1:
                raise RuntimeError(f"The size of tensor a ({a}) must match the size of "
                                   f"tensor b ({b}) at non-singleton dimension {i}")
            res[i] = b if a == 1 else a
        out = tuple(res)


def norm_slice(s, n):
    """slice -> (start, stop, step) with 0 <= start <= stop <= n, as PyTorch clamps (a bound
    that is no integer, 1.5, is Python's TypeError, as in PyTorch)."""
    start, stop, step = s.indices(n)    # (Python's own clamping, in C; a step of 0 raises)
    if step < 0:        # (PyTorch: a negative step is a ValueError too)
        raise ValueError("step must be greater than zero")
    out = start, stop if stop > start else start, step
    if trace_state.state.tracer is not None:    # (clamped by size: re-checked at other sizes)
        size_reads.decided(slice_bounds, (n, s.start, s.stop, s.step), out)
    return out


def slice_bounds(n, start, stop, step):
    """norm_slice's bounds of slice(start, stop, step) on a dimension of n (a template's
    re-check of a clamp at another size, when no trace runs)."""
    return norm_slice(slice(start, stop, step), n)


def check_index_bounds(index, n, dim, error=None, low=0):
    """Raise as PyTorch's gather / scatter / index_select do for an index value outside
    [low, n) of dim (NumPy would wrap a negative one silently): a RuntimeError naming the
    first bad value, or error(bad) when given."""
    a = getattr(index, "_data", index)
    if type(a) is not np.ndarray or not a.size:     # (batched under vmap: no check here)
        return
    if a.min() < low or a.max() >= n:
        flat = a.reshape(-1)
        bad = int(flat[(flat < low) | (flat >= n)][0])
        raise (error(bad) if error else
               RuntimeError(f"index {bad} is out of bounds for dimension {dim} with size {n}"))


_TYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
               "int32": "Int", "int16": "Short", "int8": "Char", "bfloat16": "BFloat16"}


def check_condition(condition):
    """where's condition: a bool (or, deprecated, uint8) tensor, as PyTorch asks."""
    if not hasattr(condition, "_dtype"):    # (a Python bool or list: PyTorch's TypeError)
        raise TypeError(f"where(): argument 'condition' (position 1) must be Tensor, not "
                        f"{type(condition).__name__}")
    name = condition._dtype.name
    if name in _TYPE_NAMES:
        raise RuntimeError("where expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {_TYPE_NAMES[name]}")


def sliced_shape(shape, items):
    """shape after the slices among items (slices and index tensors) are applied, as PyTorch
    applies them before it indexes with the tensors."""
    shape, d = list(shape), 0
    for i in items:
        if isinstance(i, slice):
            if d < len(shape):
                shape[d] = len(range(*i.indices(shape[d])))
            d += 1
        elif i is not None:
            d += i._data.ndim if hasattr(i, "_dtype") and i._dtype._cat == 0 else 1
    return shape


def check_index_tensor(shape, t, d):
    """PyTorch's checks of an index tensor t at dim d of a tensor of this shape: its dtype,
    and a mask's shape against the dims it covers."""
    if t._dtype.name not in ("int64", "int32", "uint8", "bool"):
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    if t._dtype.name == "bool":
        shape = list(shape)
        for j, n in enumerate(t._data.shape):
            if d + j < len(shape) and n != shape[d + j]:
                raise IndexError(f"The shape of the mask {list(t._data.shape)} at index {j} "
                                 f"does not match the shape of the indexed tensor {shape} at "
                                 f"index {d + j}")


def _not_a_size(a):
    return isinstance(a, (float, str, bytes)) or a is None


def creation_size(name, args, size=None):
    """The size of zeros / ones / empty / rand / randn (args: their positional arguments:
    ints, or one sequence of them; or size, the keyword), with PyTorch's argument errors."""
    if size is None:
        # (the common call, zeros(3, 4) or zeros((3, 4)): plain non-negative ints, which
        # pass every check below unchanged)
        shape = args[0] if len(args) == 1 and type(args[0]) is tuple else args
        for n in shape:
            if type(n) is not int or n < 0:
                break
        else:
            if args:
                return shape
    if size is not None:
        if args:
            raise TypeError(f"{name}() received an invalid combination of arguments: the size "
                            "given both by position and as size=")
        args = (size,)
    if not args:
        raise TypeError(f'{name}() missing 1 required positional arguments: "size"')
    if len(args) == 1 and _not_a_size(args[0]):
        raise TypeError(f"{name}(): argument 'size' (position 1) must be tuple of ints, not "
                        f"{type(args[0]).__name__}")
    if len(args) == 1 and not isinstance(args[0], _ONE_SIZE) and getattr(args[0], "ndim", 1):
        for i, a in enumerate(args[0]):
            if _not_a_size(a):
                raise TypeError(f"{name}(): argument 'size' (position 1) must be tuple of ints, "
                                f"but found element of type {type(a).__name__} at pos {i}")
    else:
        for i, a in enumerate(args):
            if _not_a_size(a):
                raise TypeError(f"{name}(): argument 'size' failed to unpack the object at pos "
                                f"{i + 1} with error \"type must be tuple of ints,but got "
                                f"{type(a).__name__}\"")
    return check_nonnegative(unpack_shape(args), name)


def check_nonnegative(shape, name):
    """shape, unless a size is negative: PyTorch's error (randint's and randn's too)."""
    if any(n < 0 for n in shape):
        if name == "zeros":
            raise RuntimeError("zeros: Dimension size must be non-negative.")
        raise RuntimeError(f"Trying to create tensor with negative dimension "
                           f"{min(shape)}: {list(shape)}")
    return shape


def check_zero_dim_index(ndim, idx):
    """PyTorch's errors for x[i] and x[a:b] (a lone int or slice) of a 0-d tensor."""
    if ndim == 0 and type(idx) is int:
        raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                         "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
    if ndim == 0 and type(idx) is slice:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")


def index_int(i):
    """An integer index (x[i]); a float raises IndexError, a string TypeError (int("1")
    would read it as 1), as PyTorch."""
    if isinstance(i, (str, bytes)):
        raise TypeError(f"new(): invalid data type '{type(i).__name__}'")
    if isinstance(i, (float, np.floating)) or not hasattr(i, "__index__"):    # (a dict...)
        name = f"numpy.{type(i).__name__}" if isinstance(i, np.generic) else type(i).__name__
        raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                         f"Variables are valid indices (got {name})")
    return int(i)


def check_as_strided(size, stride, offset, base, itemsize):
    """PyTorch's checks of as_strided(size, stride, offset) on a storage whose buffer is the
    NumPy array base, in its order (a view outside the buffer raises, never reads)."""
    storage_numel = geometry_span(base.shape, tuple(s // base.itemsize for s in base.strides), 0)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError("as_strided: Negative strides are not supported at the moment, got "
                           f"strides: {list(stride)}")
    # an empty view needs no storage at all (PyTorch's computeStorageNbytes), whatever its offset
    need = 0 if 0 in size else geometry_span(size, stride, offset)
    if need > storage_numel:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage "
                           f"offset {offset}, and itemsize {itemsize} requiring a "
                           f"storage size of {need * itemsize} are out of bounds for "
                           f"storage of size {storage_numel * itemsize}")
    if offset < 0:      # (PyTorch checks it after the bounds: a view before the buffer)
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
