"""Copies, casts and fills: clone, to_dtype, fill, full, arange, zero, copy."""
import numpy as np

from .geometry import contiguous_strides, fast_to_slow, iterator_strides
from .optable import defop


def _is_tensor(x):
    return hasattr(x, "_dtype")


def preserve_copy(x, dtype=None):
    """A copy of x (cast to dtype) laid out as PyTorch's preserve_format lays it out."""
    if not any(s == 0 and n > 1 for s, n in zip(x.strides, x.shape)):
        return np.array(x, dtype=dtype, copy=True, order="K")
    order = fast_to_slow(x.shape, x.strides)[::-1]     # (outermost first)
    out = np.empty([x.shape[d] for d in order], dtype or x.dtype).transpose(np.argsort(order))
    np.copyto(out, x, casting="unsafe")
    return out


def preserve_empty(x, dtype=None):
    """An uninitialised array of x's shape (and dtype) laid out as preserve_copy lays x out
    (PyTorch's empty_like)."""
    if not any(s == 0 and n > 1 for s, n in zip(x.strides, x.shape)):
        return np.empty_like(x, dtype=dtype, order="K")
    order = fast_to_slow(x.shape, x.strides)[::-1]     # (outermost first)
    return np.empty([x.shape[d] for d in order], dtype or x.dtype).transpose(np.argsort(order))


def iterator_relaid(out, operands, row_major=False):
    """out (an elementwise op's result array) laid out as PyTorch's TensorIterator lays out
    the result of operands [(shape, strides in elements)], the op's tensor operands after
    promotion (row_major: row-major whatever they are, as pow(number, tensor)); out itself
    when it already is (its size-1 dims aside)."""
    if type(out) is not np.ndarray or out.size <= 1:
        return out
    shape = out.shape
    return relaid_to(out, (None if row_major else iterator_strides(shape, operands))
                     or contiguous_strides(shape))


def relaid_to(out, want):
    """out (an array of more than one element) with the strides want (in elements): out
    itself when it has them (its size-1 dims aside), else a copy so laid out."""
    shape = out.shape
    got = [s // out.itemsize for s in out.strides]
    if all(w == g or n == 1 for w, g, n in zip(want, got, shape)):
        return out
    order = sorted(range(len(shape)), key=lambda d: -want[d])        # (slowest first)
    relaid = np.empty([shape[d] for d in order], out.dtype).transpose(np.argsort(order))
    relaid[...] = out
    return relaid


def rows_plainly(arrays, shape):
    """Whether arrays (row-major ones, size-1 dims aside, as NumPy's c_contiguous) surely
    make a row-major result of shape: all of that shape (PyTorch's fast set-up), or their
    size-1 dims' strides the row-major ones. A broadcast one whose size-1 dim has another
    stride (x.permute of a (1, 1, n) tensor) takes PyTorch's sort of the dims, where that
    stride counts: (4, 1, 1) strides (1, 4, 4) times (1, 4, 1) is (1, 4, 16) there."""
    same = plain = True
    for a in arrays:
        if not a.flags.c_contiguous:
            return False
        if a.shape != shape:
            same = False
        if plain and 1 in a.shape and a.size > 1:
            acc = a.itemsize
            for n, st in zip(reversed(a.shape), reversed(a.strides)):
                if st != acc:
                    plain = False
                    break
                acc *= n
    return same or plain


def relaid_by_arrays(out, args, row_major=False):
    """iterator_relaid with the NumPy arrays among an op's (cast) arguments as operands;
    out unchanged when every one is row-major (the common case, checked first: the result
    is row-major too) or one has a negative stride."""
    arrays = [a for a in args if type(a) is np.ndarray]
    if type(out) is not np.ndarray or rows_plainly(arrays, out.shape) or \
            any(s < 0 for a in arrays for s in a.strides):
        return out
    return iterator_relaid(out, [(a.shape, [s // a.itemsize for s in a.strides])
                                 for a in arrays], row_major)


# the dimensions of a channels_last (4-d) or channels_last_3d (5-d) tensor, slowest first
CHANNELS_LAST = {"channels_last": (0, 2, 3, 1), "channels_last_3d": (0, 2, 3, 4, 1)}


def _clone(x, memory_format="preserve", dtype=None):
    if memory_format == "contiguous":
        return np.array(x, dtype=dtype, copy=True, order="C")
    if memory_format in CHANNELS_LAST:
        order = CHANNELS_LAST[memory_format]
        out = np.empty([x.shape[d] for d in order], dtype or x.dtype).transpose(np.argsort(order))
        np.copyto(out, x, casting="unsafe")
        return out
    return preserve_copy(x, dtype)


defop("clone", _clone, vjp=lambda c, g: (g,), grad_fn="CloneBackward0", kind="elementwise",
      functions=("clone",), complex=True)
def _to_dtype(x, dtype, memory_format="preserve"):
    if x.dtype.kind == "c" and np.dtype(dtype) == np.bool_:
        return x != 0                       # (nonzero: either part, as PyTorch's)
    if x.dtype.kind == "c" and np.dtype(dtype).kind != "c":
        x = x.real          # (Tensor.to warns, at the user's line: memory_formats.py)
    return _clone(x, memory_format, dtype)


defop("to_dtype", _to_dtype, vjp=lambda c, g: (g,), grad_fn="ToCopyBackward0",
      kind="elementwise", complex=True)
defop("fill", lambda x, value: np.full_like(x, value, order="K"),
      vjp=lambda c, g: (g.new_zeros(g.shape), g.sum() if c.needs(1) else None),
      args=("self", "value"),
      # PyTorch: fill_.Scalar -> FillBackward2, fill_.Tensor -> FillBackward3 (the fill op is
      # only reached in place; the out-of-place fill.Scalar/fill.Tensor are 0 and 1)
      grad_fn=lambda ins, at: "FillBackward3" if _is_tensor(ins[1]) else "FillBackward2",
      kind="elementwise", complex=True)
defop("full", lambda shape, value, dtype: np.full(shape, value, dtype=dtype), args=(),
      kind="creation", doc="a tensor of one value (zeros, ones, new_full): no literal data", complex=True)


def _arange(start, step, size, dtype):
    # in int64, then cast: narrower integer dtypes wrap as PyTorch's; float dtypes get exact
    # values (runtime/creation.py records this op only for ranges the dtype holds exactly)
    stop = start + step * size
    values = np.arange(start, stop, step, dtype=np.int64) if -2 ** 63 <= stop < 2 ** 63 else \
        np.int64(start) + np.int64(step) * np.arange(size, dtype=np.int64)
    return values if np.dtype(dtype) == np.int64 else values.astype(dtype)


defop("arange", _arange, args=(), kind="creation",
      doc="start + step * i for i < size, integer-valued (positions, causal masks): traced, "
          "one node whose numbers are attributes, not literal data")


defop("zero", lambda x: np.zeros_like(x, order="K"), vjp=lambda c, g: (g.new_zeros(g.shape),),
      grad_fn="ZeroBackward0", kind="elementwise", complex=True)
def _copy(x, src):
    # (broadcast_to only where the shapes differ: it costs more than the copy of a small src)
    if getattr(src, "shape", None) != x.shape:
        src = np.broadcast_to(src, x.shape)
    return np.array(src, dtype=x.dtype, order="K")


defop("copy", _copy,
      vjp=lambda c, g: (g.new_zeros(g.shape), g), args=("self", "src"), grad_fn="CopyBackwards",
      kind="elementwise", complex=True)
