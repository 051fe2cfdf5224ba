"""An op's operands as its NumPy impl takes them: promoted to one dtype where the op
promotes (PyTorch's rules, ir/promotion.py), Python ints wrapped into an integer result's
range. The dispatcher's (dispatch.py) first step, kept lean as it is."""
import numpy as np

from ..ir.ops_copy import preserve_copy
from ..ir.promotion import result_dtype
from ..ir.shape_rules import keeps_number
from .dtypes import _cat_of_scalar, from_name, wrap_int
from .tensor import Tensor


def _same_dtype(op, inputs, pos):
    """True when no promotion is needed: the promoted tensors share one dtype and no
    Python scalar is of a higher category (the common case, checked cheaply)."""
    first = None
    for i in pos:
        if i >= len(inputs):
            break
        x = inputs[i]
        if isinstance(x, Tensor):
            if first is None:
                first = x._dtype
            elif x._dtype is not first:
                return False
        elif x is not None:
            if not isinstance(x, _OPERANDS):
                raise TypeError(f"{op.name}(): argument {_ARG_NAMES[min(i, 2)]}(position {i}) "
                                f"must be a Tensor or a number, not {type(x).__name__}")
            if first is None or (_SCALAR_CAT.get(type(x)) or _cat_of_scalar(x)) > first._cat:
                return False
    return first is not None and (first._cat >= 2 or not op.float_out)


# what an op's promoted operand may be besides a Tensor: Python and NumPy numbers (and
# NumPy arrays, which PyTorch accepts too); a list or a string is a mistake, not data
_OPERANDS = (bool, int, float, complex, np.generic, np.ndarray)
_ARG_NAMES = ("'input' ", "'other' ", "")
# scalar_category of the usual Python numbers by a dict lookup (bool's 0 is falsy: it goes
# to _cat_of_scalar, which gives 0 too)
_SCALAR_CAT = {int: 1, float: 2, complex: 3}


def op_result_type(op, inputs):
    """The dtype op's promoting operands are cast to (ir/promotion.py: the IR's rule)."""
    pos = range(len(inputs)) if op.promote == "all" else op.promote
    name = result_dtype([(x._dtype.name, bool(x._data.ndim)) if isinstance(x, Tensor) else x
                         for x in (inputs[i] for i in pos if i < len(inputs))], op.float_out)
    return None if name is None else from_name(name)


def prepare(op, inputs):
    """Input arrays, promoted to one dtype where the op promotes (PyTorch's rules)."""
    promote = op.promote
    if promote:
        # the common case first: every input a tensor, all of one dtype (then nothing is
        # promoted whichever positions promote); two operands (the most common) unrolled
        if len(inputs) == 2:
            a, b = inputs
            if isinstance(a, Tensor):
                dt = a._dtype
                if isinstance(b, Tensor):
                    if b._dtype is dt and (dt._cat >= 2 or not op.float_out):
                        return [a._data, b._data]
                elif dt._cat >= 2 and (type(b) is float or type(b) is int):
                    # (a floating tensor and a Python number, x * 0.5: nothing is promoted,
                    # whichever positions promote; the general path's answer, without it)
                    return [a._data, b]
        else:
            dt = None
            arrays = []
            for x in inputs:
                if not isinstance(x, Tensor) or (x._dtype is not dt and dt is not None):
                    break
                dt = x._dtype
                arrays.append(x._data)
            else:
                if dt is not None and (dt._cat >= 2 or not op.float_out):
                    return arrays
        pos = range(len(inputs)) if promote == "all" else promote
        if not _same_dtype(op, inputs, pos):
            return _promoted(op, inputs, pos)
    return [x._data if isinstance(x, Tensor) else x for x in inputs]


def _promoted(op, inputs, pos):
    rt = op_result_type(op, inputs)
    arrays = []
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor) and x._dtype is not rt and i in pos and not keeps_number(
                op, i, rt.name, x._data.dtype, x._data.shape):
            x = preserve_copy(x._data, rt.np)   # (astype lays an expanded x out otherwise)
        arrays.append(x._data if isinstance(x, Tensor) else x)
    return arrays


def wrapped_ints(op, inputs):
    """inputs with each Python int wrapped into op's integer result dtype (int8 tensor + 300
    adds 44, as PyTorch; NumPy raises OverflowError): called once that error is raised, so
    that the tracer records the wrapped number too. Re-raises where that does not apply."""
    rt = op_result_type(op, inputs) if op.promote else None
    if rt is None or rt._cat != 1 or not any(type(x) is int for x in inputs):
        raise
    return [wrap_int(x, rt) if type(x) is int else x for x in inputs]
