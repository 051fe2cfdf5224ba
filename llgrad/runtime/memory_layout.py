"""The layout `empty_like(x)` gives in PyTorch (memory_format=torch.preserve_format): x's
own strides when x is dense, else dense strides in x's dimension order (ATen's
infer_dense_strides). Random `*_like` draws and dropout masks fill such a buffer in memory
order, so drawing them row-major would give other numbers than PyTorch's for a transposed
x (nn.MultiheadAttention's batch_first output, a permuted feature map). And the layout of
an elementwise op's result, PyTorch's TensorIterator's."""
import math

import numpy as np

from ..ir.geometry import (contiguous_strides, fast_to_slow, geometry_overlaps, geometry_span,
                           iterator_strides)
from ..ir.ops_copy import CHANNELS_LAST, relaid_to, rows_plainly
from ..ir.promotion import result_dtype
from . import trace_state
from .memory_formats import op_format
from .tensor import Tensor as _Tensor


def in_layout_of(x, make):
    """make(shape) -> a contiguous tensor; the same values laid out as empty_like(x), filled
    in memory order: make's row-major order is that buffer's memory order."""
    shape = tuple(x.shape)
    if x.is_contiguous():
        return make(shape)
    return _in_order(shape, fast_to_slow(shape, x.stride())[::-1], make)


def _in_order(shape, order, make):
    # make's row-major tensor of the dimensions in order (slowest first), permuted back
    drawn = make(tuple(shape[d] for d in order))
    inverse = [0] * len(order)
    for i, d in enumerate(order):
        inverse[d] = i
    return drawn.permute(inverse)


def like_layout(x, make, memory_format=None):
    """make(shape) laid out as x's `*_like` result with memory_format (preserve_format, the
    default: x's layout; contiguous_format: row-major; channels_last(_3d): NHWC). Not a view of make's tensor: a fresh
    tensor as PyTorch's, a leaf (its base is internal)."""
    d = x._data
    if memory_format is None and type(d) is np.ndarray and d.flags.c_contiguous and \
            trace_state.state.tracer is None:
        # (the common call: a row-major x, whose shape is read as is (no size to note for a
        # trace); NumPy's flag is is_contiguous's answer, size-1 dims and no elements alike)
        return make(d.shape)
    fmt = op_format(memory_format, x.dim())
    if fmt in CHANNELS_LAST:
        out = _in_order(tuple(x.shape), CHANNELS_LAST[fmt], make)
    elif fmt == "contiguous" or x.is_contiguous():
        return make(tuple(x.shape))
    else:
        out = in_layout_of(x, make)
    out._base = None            # (the permuted buffer is the result's own, as in reshape's
    out._creation = None        # copy: no view of it escapes)
    return out


def iterator_layout(out, inputs, op):
    """out (op's array result) laid out as PyTorch lays it out from the tensors among
    inputs (ops_copy.iterator_relaid); out itself when it already is (every input
    row-major, the common case, is checked first). An input cast to the promoted dtype
    counts with its copy's layout (PyTorch casts before laying the result out); op None:
    no input is cast."""
    if rows_plainly([x._data for x in inputs if isinstance(x, _Tensor)], out.shape):
        return out
    if type(out) is not np.ndarray or out.size <= 1:
        return out
    # the strides wanted are a function of the operands' geometry and types alone: worked
    # out once per geometry (an expanded gradient meets the same ones every step; PyTorch's
    # sort of the dims cost ~10 us an op)
    key = _geometry_key(out, inputs, op)
    if key is None:
        want = _relaid_strides(out, inputs, op)
        return out if want is None else relaid_to(out, want)
    got = _wanted.get(key)
    if got is None:
        if len(_wanted) > 4096:         # (a bound, not an LRU: geometries rarely vary)
            _wanted.clear()
        want = _relaid_strides(out, inputs, op)
        got = _wanted[key] = (want, out.itemsize, want and tuple(w * out.itemsize for w in want))
    want, size, strides = got
    # (out already so laid out, byte for byte: relaid_to's answer without its checks)
    if want is None or out.strides == strides and out.itemsize == size:
        return out
    return relaid_to(out, want)


# _geometry_key -> (_relaid_strides, the result's item size, those strides in its bytes)
_wanted = {}
_KEYED = (int, float, bool, complex, str, type(None))


def _geometry_key(out, inputs, op):
    # (op, the result's shape, each tensor operand's shape, strides and dtype, each other
    # operand's type: all the promotion and the sort read), or None: not cached
    key = [op, out.shape]
    for x in inputs:
        if isinstance(x, _Tensor):
            a = x._data
            if type(a) is not np.ndarray:
                return None
            key.append((a.shape, a.strides, x._dtype))
        elif type(x) in _KEYED:
            key.append(type(x))
        else:
            return None
    return tuple(key)


def _relaid_strides(out, inputs, op):
    """The strides (in elements) PyTorch gives op's result out from these inputs, or None
    where out is kept as it is (an operand with a negative stride)."""
    operands = _iterator_operands(inputs, op)
    if operands is None:
        return None
    # (pow(Scalar, Tensor) makes a row-major result)
    row_major = op is not None and op.name == "pow" and not isinstance(inputs[0], _Tensor)
    return (None if row_major else iterator_strides(out.shape, operands)) or \
        contiguous_strides(out.shape)


def _iterator_operands(inputs, op):
    # [(shape, strides)] of the tensors among inputs as the TensorIterator sees them (after
    # their casts); None when one has a negative stride
    tensors = [(i, x) for i, x in enumerate(inputs) if isinstance(x, _Tensor)]
    if any(s < 0 for _, x in tensors for s in x._data.strides):
        return None
    common = _promoted_to(op, inputs)
    operands = []
    for i, x in tensors:
        a = x._data
        strides = [s // a.itemsize for s in a.strides]
        if common is not None and x._dtype.name != common and \
                (op.promote == "all" or i in op.promote):
            strides = _preserved(a.shape, strides)
        operands.append((a.shape, strides))
    return operands


def iterator_result_strides(shape, inputs, op):
    """The strides (in elements) iterator_layout gives op's result of shape: PyTorch's
    TensorIterator layout, from the operands' strides alone (meta tensors' results)."""
    operands = _iterator_operands(inputs, op)
    if operands is None or op.name == "pow" and not isinstance(inputs[0], _Tensor) or \
            math.prod(shape) <= 1:
        return contiguous_strides(shape)
    return iterator_strides(shape, operands) or contiguous_strides(shape)


def preserved_strides(shape, strides):
    """The strides of a preserve_format copy of a tensor with these (a dense tensor's own;
    else dense in its dimension order)."""
    return tuple(_preserved(shape, list(strides)))


def _promoted_to(op, inputs):
    if op is None or not op.promote:
        return None
    pos = range(len(inputs)) if op.promote == "all" else op.promote
    return result_dtype([(x._dtype.name, bool(x._data.ndim)) if isinstance(x, _Tensor) else x
                         for x in (inputs[i] for i in pos if i < len(inputs))], op.float_out)


def _preserved(shape, strides):
    """The strides of a preserve_format copy of a tensor with these (a dense tensor's own;
    else dense in its dimension order)."""
    if not geometry_overlaps(shape, strides) and \
            geometry_span(shape, strides, 0) == int(np.prod(shape)):
        return strides
    out, acc = [0] * len(shape), 1
    for d in fast_to_slow(shape, strides):
        out[d] = acc
        acc *= shape[d]
    return out
