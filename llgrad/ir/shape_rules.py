"""Result types from the op table: shape, dtype and (for views) strides and offset.

The rule is the op's own NumPy impl run on stand-in arrays that own no memory: stride-0
broadcasts for ops that read their inputs, and 1-element buffers restrided to the input's
exact layout for views (views only compute pointers, never read). So every op of the table
has a shape rule without a second declaration that could drift from its impl.

A stand-in holds no values, so a length that depends on values must come from attributes:
index / index_put with a bool mask carry `counts` (each mask's True count, recorded by the
tracer, llgrad/tracer/masks.py), and their impl makes the all-False stand-in mask select
that many (ir/ops_index.py _fit_masks). Without counts (eager never passes them) a mask
stand-in selects nothing."""

import numpy as np

from .graph import TensorType, contiguous
from .optable import OPS
from .ops_shape import strided_view
from .printer import literal
from .promotion import on_default_change, result_dtype


def _standin(t, for_view):
    if not isinstance(t, TensorType):
        return t
    if for_view:
        # a base buffer that starts `offset` elements before the view's first element
        return strided_view(np.zeros(1, dtype=t.dtype), t.shape, t.strides)
    return np.broadcast_to(np.zeros((), dtype=t.dtype), t.shape)


_memo = {}
on_default_change(_memo.clear)     # (a Python float's dtype is the default's)


_PLAIN = (bool, int, float, str, type(None))
_PLAIN_EXACT = frozenset(_PLAIN)


def _key(x):
    # constants with their type: 1, 1.0 and True promote differently but compare equal;
    # what is not a plain value or a tuple/list of them (arrays, dicts) by its literal.
    # (Exact types first: a trace builds a key per recorded op and per verified node.)
    t = type(x)
    if t is TensorType:
        return x
    if t in _PLAIN_EXACT:
        return (t, x)
    if t is tuple or t is list:
        return (t, tuple(map(_key, x)))
    if isinstance(x, TensorType):
        return x
    if isinstance(x, _PLAIN):
        return (t, x)
    if isinstance(x, (tuple, list)):
        return (t, tuple(map(_key, x)))
    return literal(x)


def infer_types(opname, in_types, attrs):
    if opname == "constant":      # the IR's one op outside the table: a literal array
        return [TensorType(attrs["dtype"], tuple(np.shape(attrs["value"])))]
    if opname == "complex_region":  # (its region's results, C-contiguous: complex_regions.py)
        return [TensorType(v.type.dtype, v.type.shape) for v in attrs["region"].outputs]
    # a rule is a pure function of its operand types and attributes: remember the last
    # few thousand (repeated layers and long chains ask the same question many times)
    key = (opname, tuple(map(_key, in_types)),
           tuple([(k, _key(attrs[k])) for k in sorted(attrs)]) if attrs else ())
    types = _memo.get(key)
    if types is None:
        types = _infer(opname, in_types, attrs)
        if len(_memo) >= 4096:
            _memo.clear()
        _memo[key] = types
    return list(types)


def _infer(opname, in_types, attrs):
    op = OPS[opname]
    view = op.kind == "view"
    args = [_standin(t, view) for t in in_types]
    arrays = promote_operands(op, in_types, args)
    with np.errstate(all="ignore"):   # the stand-ins are zeros: log(0) is no concern here
        out = op.impl(*arrays, **attrs)
    outs = out if op.nout != 1 else (out,)
    types = []
    for o in outs:
        o = np.asarray(o)
        if view:
            # an impl that copies (np.reshape of a non-viewable layout) has no geometry
            # in terms of its input: refuse it rather than invent one
            if o.size and not np.may_share_memory(o, arrays[0]):
                raise ValueError(f"{opname}: the result is not a view of its input")
            base = in_types[0]
            shift = (o.__array_interface__["data"][0]
                     - arrays[0].__array_interface__["data"][0]) // o.itemsize
            types.append(TensorType(o.dtype.name, tuple(o.shape),
                                    tuple(s // o.itemsize for s in o.strides),
                                    base.offset + shift))
        else:
            types.append(TensorType(o.dtype.name, tuple(o.shape), contiguous(o.shape)))
    return types


def operand_casts(op, in_types):
    """((position, dtype), ...): the tensor operands of op that its dtype promotion casts
    (PyTorch's rules, on types), each to the dtype promoted_dtype chooses. The one rule the
    type inference, the interpreter, the Python backend and native code apply."""
    res = promoted_dtype(op, in_types)
    if res is None:
        return ()
    pos = range(len(in_types)) if op.promote == "all" else op.promote
    return tuple((k, res) for k in pos if k < len(in_types)
                 and isinstance(in_types[k], TensorType) and in_types[k].dtype != res
                 and not keeps_number(op, k, res, in_types[k].dtype, in_types[k].shape))


_HALF_NUMBER_OPS = frozenset(("mul", "div"))


def keeps_number(op, k, res, dtype, shape):
    """Whether operand k (of dtype and shape) of op stays uncast although the op promotes to
    res: a 0-d tensor as mul's or div's second operand where the result is float16, which
    PyTorch's CPU kernel reads as its own value in float32, its opmath type (1.1, not the
    float16 1.0996); the impl takes it as a number (ops_elementwise.py _half_scalars)."""
    return (k == 1 and not shape and str(res) == "float16" and op.name in _HALF_NUMBER_OPS
            and np.dtype(dtype).kind in "biuf")


def promote_operands(op, in_types, arrays):
    """arrays (operands of types in_types) with op's operand casts applied."""
    casts = operand_casts(op, in_types)
    if not casts:
        return arrays
    out = list(arrays)
    for k, dt in casts:
        if isinstance(out[k], np.ndarray):
            out[k] = out[k].astype(dt)
    return out


def promoted_dtype(op, in_types):
    """The dtype an op's promoting operands are cast to (None: the op does not promote)."""
    if not op.promote:
        return None
    pos = range(len(in_types)) if op.promote == "all" else op.promote
    return result_dtype([(t.dtype, bool(t.shape)) if isinstance(t, TensorType) else t
                         for t in (in_types[i] for i in pos if i < len(in_types))],
                        op.float_out)
