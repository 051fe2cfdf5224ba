"""PyTorch's memory formats on strided tensors: the channels_last (4-d) and channels_last_3d
(5-d) layouts that clone / contiguous / to / the *_like functions make and is_contiguous
checks, and the format ATen suggests for a tensor's strides (to(memory_format=f) is the
tensor itself when nothing else changes and the tensor already looks like f)."""
import warnings

from ..ir.ops_copy import CHANNELS_LAST
from . import dtypes
from .user_frames import user_stacklevel

_RANK = {"channels_last": 4, "channels_last_3d": 5}


def op_format(memory_format, ndim):
    """The clone / to_dtype ops' memory_format attribute for a torch memory format asked of
    a tensor of ndim dimensions (None: preserve_format)."""
    if memory_format is None or memory_format == "preserve_format":
        return "preserve"
    if memory_format == "contiguous_format":
        return "contiguous"
    for name, rank in _RANK.items():
        if memory_format == name:
            if ndim != rank:
                raise RuntimeError(f"required rank {rank} tensor to use {name} format")
            return name
    raise TypeError(f"memory_format must be a llgrad.memory_format, not {memory_format!r}")


def channels_contiguous(shape, strides, memory_format):
    """Whether (shape, strides) is dense in memory_format's order, size-1 dimensions aside
    (ATen's compute_channels_last_contiguous_2d / _3d: False at any other rank)."""
    order = CHANNELS_LAST[op_format(memory_format, len(shape))] \
        if len(shape) == _RANK[memory_format] else ()
    expected = 1
    for d in reversed(order):
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return bool(order)


def _strides_like(shape, strides, order):
    # ATen's is_channels_last_strides_2d_s4 / _3d_s5, its ambiguous cases (a size-1 or
    # zero-stride C, N111) read as row-major
    low = 0
    if strides[1] == 0:
        return False
    for d in reversed(order):
        if shape[d] == 0 or strides[d] < low or d == 0 and low == strides[1]:
            return False
        low = strides[d] * (shape[d] if shape[d] > 1 else 1)
    return True


def suggested(x):
    """ATen's suggest_memory_format of x, named as op_format names it: the channels_last
    format its strides look like, else "contiguous"."""
    shape, strides = tuple(x.shape), x.stride()
    for name, order in CHANNELS_LAST.items():
        if len(shape) == len(order) and _strides_like(shape, strides, order):
            return name
    return "contiguous"


def format_to(x, dtype, memory_format, copy=False):
    """x.to(dtype, memory_format=memory_format, copy=copy): x itself when neither the dtype
    nor (by ATen's suggestion) the format changes, else a copy (ToCopyBackward0)."""
    fmt = op_format(memory_format, x.dim())
    if dtype is x._dtype and not copy and fmt in ("preserve", suggested(x)):
        return x
    real_cast_warning(x, dtype)
    return x._op("to_dtype", dtype=dtype.name, memory_format=fmt)


def real_cast_warning(x, dtype):
    """PyTorch's warning, at the user's line, where a cast drops imaginary parts."""
    if x._dtype.is_complex and not dtype.is_complex and dtype is not dtypes.bool_:
        warnings.warn("Casting complex values to real discards the imaginary part",
                      UserWarning, stacklevel=user_stacklevel())


def clone(self, memory_format=None):
    """As torch.Tensor.clone: a copy laid out in memory_format (preserve_format: self's
    dense layout)."""
    return self._op("clone", memory_format=op_format(memory_format, self.dim()))


def contiguous(self, memory_format=None):
    """As torch.Tensor.contiguous: self when already dense in memory_format (row-major by
    default), else a copy laid out so (CloneBackward0)."""
    if self.is_contiguous(memory_format):
        return self
    if memory_format == "preserve_format":
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    return self._op("clone", memory_format=op_format(memory_format or "contiguous_format",
                                                     self.dim()))
