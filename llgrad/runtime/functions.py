"""The llgrad.* function namespace (torch.exp, torch.cat, ...), defined over Tensor methods."""
from __future__ import annotations
import builtins as _builtins  # this module shadows any/all/sum/max/min/abs/round
from typing import TYPE_CHECKING

import numpy as np

from . import dtypes, trace_state
from ..ir import OPS
from ..ir.optable import method_doc, on_declare
from .creation import tensor as _tensor
from .creation_checks import fill_value_fits
from .dispatch import call
from .numpy_scalars import python_number
from .shapes import check_condition as _check_condition, norm_dim
from .shapes import broadcast_shapes as _broadcast_shapes
from .tensor import Size, Tensor
from .result_format import in_suggested_format

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = []


# the functions whose input PyTorch also takes as a Python number (torch.sub(1, x): its
# argument parser's numbers-as-tensors list), read as a 0-dim tensor of the two's dtype
_NUMBER_INPUT = frozenset(("add", "sub", "subtract", "mul", "multiply", "div", "divide",
                           "true_divide", "floor_divide"))
_TRUE_DIV = frozenset(("div", "divide", "true_divide"))


def _number_input(name, input, args, kwargs):
    other = args[0] if args else kwargs.get("other")
    if isinstance(input, Tensor):
        return input
    if name not in _NUMBER_INPUT or not isinstance(input, (bool, int, float, np.number,
                                                           np.bool_)):
        kind = type(input)      # (its C type's name: numpy.ndarray, list)
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{'numpy.' * (kind.__module__ == 'numpy')}{kind.__name__}")
    if not isinstance(other, Tensor):
        return _tensor(input)
    rt = dtypes.result_type(input, other)
    if name in _TRUE_DIV and kwargs.get("rounding_mode") is None and not rt.is_floating_point:
        rt = dtypes.get_default_dtype()     # (-2 / uint8 is -0.67: the number is not wrapped)
    return _tensor(input, dtype=rt)


def _method_fn(name, op=None):
    def fn(input, *args, **kwargs):
        if type(input) is not Tensor:
            input = _number_input(name, input, args, kwargs)
        return getattr(input, name)(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = method_doc(name, op, function=True)    # ("... as torch.<name>.")
    __all__.append(name)
    globals()[name] = fn


def _declared_functions(op):
    for name in op.functions:
        _method_fn(name, op)


on_declare(_declared_functions)     # (OpDef.functions: for ops declared now and later)
for _n in ("reshape", "flatten", "unflatten", "narrow", "chunk", "broadcast_to", "detach",
           "numel"):                # (methods that are no one op)
    _method_fn(_n)


def export(fn, *names):
    """fn as llgrad.<name> for its own name and each alias in names (a function written out,
    not a wrapper of a Tensor method: llgrad/runtime/functions_*.py)."""
    for name in (fn.__name__,) + names:
        globals()[name] = fn
        if name not in __all__:
            __all__.append(name)
    return fn


def __getattr__(name):
    """llgrad.<name> for a function of an op declared after import (llgrad/__init__.py)."""
    try:
        return globals()[name]
    except KeyError:
        raise AttributeError(f"module 'llgrad' has no attribute {name!r}") from None


def _tensors(seq, what):
    if not isinstance(seq, (list, tuple)):  # (PyTorch's: a tensor would be unbound into rows)
        raise TypeError(f"{what}(): argument 'tensors' (position 1) must be tuple of Tensors, "
                        f"not {type(seq).__name__}")
    seq = list(seq)
    if not seq:         # (PyTorch's types and words)
        if what == "cat":
            raise ValueError("torch.cat(): expected a non-empty list of Tensors")
        raise RuntimeError(f"{what} expects a non-empty TensorList")
    for i, t in enumerate(seq):    # (not seq.index(t): it compares tensors by ==)
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{type(t).__name__}")
    return seq


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenate tensors along dim, as torch.cat (1-D empty tensors are skipped in the
    shape check, PyTorch's legacy rule)."""
    seq = _tensors(tensors, "cat")
    # PyTorch's legacy rule: 1-D empty tensors are skipped for the shape check, but still
    # take part in type promotion and get a (zero-size) gradient
    legacy = [t._data.ndim == 1 and t._data.size == 0 for t in seq]
    full = [t for t, e in zip(seq, legacy) if not e]
    if not full:
        return call(OPS["cat"], tuple(seq), {"dim": norm_dim(dim, 1)})
    d = norm_dim(dim, full[0]._data.ndim)
    ref = full[0]._data.shape
    for i, t in enumerate(seq):
        s = t._data.shape
        if legacy[i] or s == ref and s:     # (the usual case: the checks below pass)
            continue
        if s and len(s) == len(ref) and s[:d] == ref[:d] and s[d + 1:] == ref[d + 1:]:
            continue                        # (another width along dim: no generator walk)
        if not s:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be "
                               "concatenated")
        if len(s) != len(ref):
            raise RuntimeError(f"Tensors must have same number of dimensions: got {len(ref)} "
                               f"and {len(s)}")
        if _builtins.any(a != b for j, (a, b) in enumerate(zip(s, ref))
                                               if j != d):
            j = next(j for j, (a, b) in enumerate(zip(s, ref)) if j != d and a != b)
            raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected "
                               f"size {ref[j]} but got size {s[j]} for tensor number {i} in "
                               "the list.")
    empty = ref[:d] + (0,) + ref[d + 1:]
    out = call(OPS["cat"], tuple(t.reshape(empty) if e else t for t, e in zip(seq, legacy)),
               {"dim": d})
    # (only a 4-d or 5-d tensor can suggest a channels_last format)
    return in_suggested_format(out, *full, every=True) if len(ref) in (4, 5) else out


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Stack equal-shaped tensors along a new dimension dim, as torch.stack."""
    ts = _tensors(tensors, "stack")
    for i, t in enumerate(ts):
        if t._data.shape != ts[0]._data.shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(ts[0]._data.shape)} at entry 0 and "
                               f"{list(t._data.shape)} at entry {i}")
    return call(OPS["stack"], tuple(ts), {"dim": norm_dim(dim, ts[0]._data.ndim + 1)})


def where(condition: Tensor, input: Tensor | float | None = None,
          other: Tensor | float | None = None) -> Tensor | tuple[Tensor, ...]:
    """Elements of input where condition holds, else of other, as torch.where;
    where(condition) alone gives the indices of its nonzero elements (inside llgrad.compile
    their count is a guard of the trace)."""
    if input is None and other is None:
        if trace_state.state.tracer is not None:    # (nonzero's count a guard of the trace)
            return condition.nonzero(as_tuple=True)
        return condition.nonzero(as_tuple=True)     # (a 0-dim condition read as 1-dim)
    _check_condition(condition)
    for v in (input, other):    # (a Python int checked against an integer result's range)
        if type(v) is int and dtypes.result_type(input, other)._cat == 1:
            fill_value_fits(v, dtypes.result_type(input, other))
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        input = _tensor(python_number(input))   # (a weak scalar, np.float64 too: float32)
    return call(OPS["where"], (condition, input, other), {})


def is_tensor(obj: object) -> bool:
    """Whether obj is an llgrad Tensor, as torch.is_tensor."""
    return isinstance(obj, Tensor)


def allclose(a: Tensor, b: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    """Whether a and b are elementwise close, as torch.allclose."""
    return bool(np.allclose(a._data, b._data, rtol=rtol, atol=atol, equal_nan=equal_nan))


def equal(input: Tensor, other: Tensor) -> bool:
    """Whether a and b have the same shape and elements, as torch.equal."""
    if input._data.shape != other._data.shape:
        return False
    if trace_state.state.tracer is not None:    # (the answer is a read of values: a guard)
        return bool((input.detach() == other.detach()).all())
    return bool(np.array_equal(input._data, other._data))


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """The tensors expanded (as views) to their common broadcast shape, as
    torch.broadcast_tensors."""
    shape = _broadcast_shapes(*[t._data.shape for t in tensors])
    # (PyTorch's expand_outplace: a tensor already of that shape is returned itself)
    return tuple(t if t._data.shape == shape else t.expand(shape) for t in tensors)


def broadcast_shapes(*shapes) -> Size:
    """The shape tensors of the given shapes (or ints, as 1-d shapes) broadcast to, as
    torch.broadcast_shapes."""
    given = [(s,) if isinstance(s, int) else s for s in shapes]    # (as written: PyTorch's
    shapes = [tuple(s) for s in given]                              # message shows a Size)
    out = [1] * _builtins.max((len(s) for s in shapes), default=0)
    for k, s in enumerate(shapes):
        for i in _builtins.range(-1, -len(s) - 1, -1):
            if s[i] < 0 or (s[i] != 1 and out[i] not in (1, s[i])):
                raise RuntimeError(
                    f"Attempting to broadcast a dimension of length {s[i]} at {i}! Mismatching"
                    f" argument at index {k} had {given[k]}; but expected shape should be "
                    f"broadcastable to {out}")
            if out[i] == 1:
                out[i] = s[i]
    return Size(out)


__all__ += ["cat", "concat", "stack", "where", "is_tensor", "allclose", "equal",
            "broadcast_tensors", "broadcast_shapes"]
concat = cat
