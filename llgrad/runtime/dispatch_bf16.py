"""How the dispatcher runs an op that meets bfloat16 (a bfloat16 tensor among its operands,
or a bfloat16 dtype asked of it): as PyTorch's CPU kernels compute bfloat16, on float32
values (a bfloat16 is one exactly), each floating result rounded once to bfloat16 where
the op's result dtype is bfloat16 (ir/bfloat16.py). Views move no values and run on the
bfloat16 memory itself, so they share it."""
import threading

import numpy as np

from ..ir import bfloat16 as bf16_values
from .dtypes import bfloat16
from .operands import op_result_type
from .tensor import Tensor

_F32 = np.dtype(np.float32)


class _State(threading.local):
    def __init__(self):
        self.unrounded = 0      # > 0 while a bfloat16 node's VJP rule runs (vjp_in_float32)


state = _State()


def vjp_in_float32(rule, node, grads):
    """rule(node, grads) for a node of bfloat16 results, as PyTorch's backward kernels
    compute bfloat16 gradients: in float32, each gradient rounded once (when node.py casts
    it to its input's dtype), not after every op of the rule."""
    grads = grads.float() if isinstance(grads, Tensor) else \
        [g.float() if isinstance(g, Tensor) and g._dtype is bfloat16 else g for g in grads]
    state.unrounded += 1
    try:
        return rule(node, grads)
    finally:
        state.unrounded -= 1


def involved(inputs, attrs):
    """Whether bfloat16 is among inputs or asked for by attrs (called where some input's
    dtype is not plain, or attrs name a dtype)."""
    if attrs and attrs.get("dtype") == "bfloat16":
        return True
    for x in inputs:
        if isinstance(x, Tensor) and x._dtype is bfloat16:
            return True
    return False


def _result_is_bf16(op, inputs, attrs):
    """Whether op's floating results are bfloat16: the dtype it is asked for, else what its
    operands promote to, else its first tensor's dtype."""
    asked = attrs.get("dtype") if attrs else None
    if isinstance(asked, str):
        return asked == "bfloat16"
    if op.promote:
        return op_result_type(op, inputs) is bfloat16
    for x in inputs:
        if isinstance(x, Tensor):
            return x._dtype is bfloat16
    return False


def float32_operands(op, inputs, attrs):
    """(inputs, attrs, rounds): the operands with every bfloat16 tensor as a float32 one of
    the same values (and an integer one the op promotes to bfloat16 rounded to it, as
    PyTorch casts it), attrs asking float32 where they asked bfloat16, and whether the
    results are to be rounded to bfloat16."""
    rounds = _result_is_bf16(op, inputs, attrs) and not state.unrounded
    promoted = range(len(inputs)) if op.promote == "all" else op.promote or ()
    numbers = rounds and op.name not in _NUMBERS_IN_FLOAT
    out = []
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor):
            if x._dtype is bfloat16:
                x = Tensor._from_array(bf16_values.to_float32(x._data))
            elif rounds and x._dtype._cat < 2 and i in promoted:
                x = Tensor._from_array(bf16_values.round_to(x._data).astype(_F32))
            elif numbers and x._dtype._cat == 2 and not x._data.ndim and i in promoted:
                x = Tensor._from_array(bf16_values.round_to(x._data).astype(_F32))
        elif numbers and isinstance(x, (float, np.floating)):
            x = bf16_values.round_number(x)
        out.append(x)
    if attrs and attrs.get("dtype") == "bfloat16":
        attrs = dict(attrs, dtype="float32")
    if numbers and op.name in _ROUNDED_ALPHA and isinstance(attrs.get("alpha"), float):
        attrs = dict(attrs, alpha=bf16_values.round_number(attrs["alpha"]))
    return out, attrs, rounds


# ops whose number operand (a Python number, or a 0-d tensor of another floating dtype)
# PyTorch keeps in float32, its opmath type, beside a bfloat16 tensor; other ops cast it to
# bfloat16 first, as their operands are cast to the common dtype (measured against 2.13)
_NUMBERS_IN_FLOAT = frozenset(("mul", "div", "div_mode", "div_scalar", "lerp"))
_ROUNDED_ALPHA = frozenset(("add", "sub", "rsub"))


def rounded(out):
    """An impl's result (an array, or a tuple / list of them) with every float32 array
    rounded to bfloat16's memory."""
    if isinstance(out, (np.ndarray, np.generic)):     # (a reduction's NumPy scalar too)
        return bf16_values.round_to(out) if out.dtype == _F32 else out
    if isinstance(out, (tuple, list)):
        return type(out)(rounded(o) for o in out)
    return out
