"""Copies, casts and fills: clone, to_dtype, fill, full, zero, copy."""
import numpy as np

from .geometry import fast_to_slow
from .optable import defop


def _is_tensor(x):
    return hasattr(x, "_dtype")


def _copy(x, dtype=None):
    """A copy of x (cast to dtype) laid out as PyTorch's preserve_format lays it out."""
    if not any(s == 0 and n > 1 for s, n in zip(x.strides, x.shape)):
        return np.array(x, dtype=dtype, copy=True, order="K")
    order = fast_to_slow(x.shape, x.strides)[::-1]     # (outermost first)
    out = np.empty([x.shape[d] for d in order], dtype or x.dtype).transpose(np.argsort(order))
    np.copyto(out, x, casting="unsafe")
    return out


def _clone(x, memory_format="preserve"):
    if memory_format == "contiguous":
        return np.array(x, copy=True, order="C")
    return _copy(x)


defop("clone", _clone, vjp=lambda c, g: (g,), grad_fn="CloneBackward0", kind="elementwise",
      functions=("clone",))
defop("to_dtype", lambda x, dtype: _copy(x, dtype), vjp=lambda c, g: (g,),
      grad_fn="ToCopyBackward0", kind="elementwise")
defop("fill", lambda x, value: np.full_like(x, value, order="K"),
      vjp=lambda c, g: (g.new_zeros(g.shape), g.sum() if c.needs(1) else None),
      args=("self", "value"),
      # PyTorch: fill_.Scalar -> FillBackward2, fill_.Tensor -> FillBackward3 (the fill op is
      # only reached in place; the out-of-place fill.Scalar/fill.Tensor are 0 and 1)
      grad_fn=lambda ins, at: "FillBackward3" if _is_tensor(ins[1]) else "FillBackward2",
      kind="elementwise")
defop("full", lambda shape, value, dtype: np.full(shape, value, dtype=dtype), args=(),
      kind="creation", doc="a tensor of one value (zeros, ones, new_full): no literal data")
defop("zero", lambda x: np.zeros_like(x, order="K"), vjp=lambda c, g: (g.new_zeros(g.shape),),
      grad_fn="ZeroBackward0", kind="elementwise")
defop("copy", lambda x, src: np.array(np.broadcast_to(src, x.shape), dtype=x.dtype, order="K"),
      vjp=lambda c, g: (g.new_zeros(g.shape), g), args=("self", "src"), grad_fn="CopyBackwards",
      kind="elementwise")
