"""How the dispatcher runs an op that meets bfloat16 (a bfloat16 tensor among its operands,
or a bfloat16 dtype asked of it): as PyTorch's CPU kernels compute bfloat16, on float32
values (a bfloat16 is one exactly), each floating result rounded once to bfloat16 where
the op's result dtype is bfloat16 (ir/bfloat16.py). Views move no values and run on the
bfloat16 memory itself, so they share it."""
import threading

import numpy as np

from ..ir import OPS, bfloat16 as bf16_values
from .dtypes import bfloat16
from .operands import op_result_type, prepare
from .tensor import Tensor

_F32 = np.dtype(np.float32)


class _State(threading.local):
    def __init__(self):
        self.unrounded = 0      # > 0 while a bfloat16 node's VJP rule runs (vjp_in_float32)


state = _State()


def vjp_in_float32(rule, node, grads):
    """rule(node, grads) for a node of bfloat16 results, as PyTorch's backward kernels
    compute bfloat16 gradients: in float32, each gradient rounded once (when node.py casts
    it to its input's dtype), not after every op of the rule. (index and embedding: in
    bfloat16, their index_put adding each gradient in order, as PyTorch's backward does.)"""
    if node._op.name in _ADDED_IN_ORDER and not node.attrs.get("scale_grad_by_freq"):
        return rule(node, grads)
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
    in_float = rounds and op.name in _NUMBERS_IN_FLOAT
    numbers = rounds and not in_float and op.name not in _NUMBERS_EXACT
    out = []
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor):
            if x._dtype is bfloat16:
                x = Tensor._from_array(bf16_values.to_float32(x._data))
            elif not rounds or i not in promoted:
                pass
            elif in_float and i and x._data.size == 1:      # (read as a float: opmath)
                x = Tensor._from_array(np.asarray(x._data, dtype=_F32))
            elif x._dtype._cat < 2 or x._dtype._cat == 2 and not x._data.ndim:
                x = Tensor._from_array(bf16_values.round_to(x._data).astype(_F32))
        elif numbers and isinstance(x, (int, float, np.integer, np.floating)) and \
                not isinstance(x, bool):
            x = bf16_values.round_number(x)
        out.append(x)
    if attrs and attrs.get("dtype") == "bfloat16":
        attrs = dict(attrs, dtype="float32")
    if numbers and op.name in _ROUNDED_ALPHA and isinstance(attrs.get("alpha"), float):
        attrs = dict(attrs, alpha=bf16_values.round_number(attrs["alpha"]))
    return out, attrs, rounds


# ops whose number operand (a Python number, or a one-element tensor of another dtype as
# the second operand: the kernel's is_cpu_scalar(2)) PyTorch keeps in float32, its opmath
# type, beside a bfloat16 tensor; other ops, and these with a 0-d tensor first, cast it to
# bfloat16 first, as their operands are cast to the common dtype (measured against 2.13)
_NUMBERS_IN_FLOAT = frozenset(("mul", "div", "div_mode", "div_scalar", "lerp"))
_ROUNDED_ALPHA = frozenset(("add", "sub", "rsub"))
# ops whose number operand PyTorch's kernel reads as a double (bernoulli_(p) compares each
# double uniform with p itself: rounding p to bfloat16 flipped draws between the two)
_NUMBERS_EXACT = frozenset(("bernoulli_p",))
_ADDED_IN_ORDER = frozenset(("index", "embedding"))


def rounded(out):
    """An impl's result (an array, or a tuple / list of them) with every float32 array
    rounded to bfloat16's memory."""
    if isinstance(out, (np.ndarray, np.generic)):     # (a reduction's NumPy scalar too)
        return bf16_values.round_to(out) if out.dtype == _F32 else out
    if isinstance(out, (tuple, list)):
        return type(out)(rounded(o) for o in out)
    return out


def summed_in_order(op, inputs, attrs, out):
    """out (float32, run_impl's result on float32 operands) of index_put(accumulate=True)
    or a 1-d index_add as PyTorch's CPU kernels add into bfloat16: one source element after
    another, in order, each sum rounded (600 ones added at one index make 256, not 600);
    out unchanged for other ops."""
    if op.name == "index_put" and attrs.get("accumulate"):
        x, values, *ix = prepare(op, inputs)
        at = _positions(x.shape, lambda a: OPS["index"].impl(
            a, *ix, spec=attrs["spec"], counts=attrs.get("counts")))
    elif op.name == "index_add" and inputs[0]._data.ndim <= 1:    # (more dims: in float32)
        x, index, values = prepare(op, inputs)
        at = _positions(x.shape, lambda a: np.take(a, index, axis=attrs["dim"]))
        alpha = attrs.get("alpha", 1)           # (source * alpha in bfloat16 first)
        values = values if alpha == 1 else bf16_values.to_float32(
            bf16_values.round_to(values * np.float32(bf16_values.round_number(alpha))))
    else:
        return out
    at, values = (a.reshape(-1) for a in np.broadcast_arrays(at, values))
    flat = np.array(x, dtype=_F32).reshape(-1)
    out[...] = bf16_values.add_in_order(flat, at, np.asarray(values, _F32)).reshape(x.shape)
    return out


def kernel_rounded(op, inputs, attrs, out):
    """out (float32, run_impl's result on float32 operands), recomputed where PyTorch's
    bfloat16 kernel rounds on the way: log_softmax over the last dim keeps its sum of
    exponentials and that sum's log in bfloat16 (LogSoftmaxKernelImpl.h's lastdim kernel);
    out unchanged for other ops."""
    if op.name == "nll_loss":
        return _nll_loss_cascaded(op, inputs, attrs, out)
    if op.name != "log_softmax":
        return out
    x = prepare(op, inputs)[0]
    if x.ndim == 0 or attrs["dim"] % x.ndim != x.ndim - 1 or x.shape[-1] == 0:
        return out
    s = x - np.max(x, axis=-1, keepdims=True)
    total = bf16_values.to_float32(bf16_values.round_to(np.exp(s).sum(-1, keepdims=True)))
    lse = bf16_values.to_float32(bf16_values.round_to(np.log(total)))
    return (s - lse).astype(_F32)


def _nll_loss_cascaded(op, inputs, attrs, out):
    """A (N, C) nll_loss without class weights, summed or averaged, as PyTorch's CPU kernel
    (LossNLL.cpp) adds bfloat16 losses: in bfloat16, cascaded in levels of 16 samples, the
    levels then added in order, the mean divided in bfloat16."""
    x, target, weight = prepare(op, inputs)
    reduction = attrs.get("reduction", "mean")
    keep = target != attrs.get("ignore_index", -100)
    if x.ndim != 2 or weight is not None or reduction not in ("mean", "sum") or \
            not keep.any():
        return out
    rnd = bf16_values.round_number
    picked = x[np.arange(len(target)), np.where(keep, target, 0)]
    partial = [0.0] * 8
    for b in np.nonzero(keep)[0]:
        partial[0] = rnd(partial[0] - float(picked[b]))
        for j in range(7):
            if b & (15 << (4 * j)):
                break
            partial[j + 1], partial[j] = rnd(partial[j + 1] + partial[j]), 0.0
    total = 0.0
    for v in partial:
        total = rnd(total + v)
    if reduction == "mean":
        total = rnd(total / rnd(float(keep.sum())))
    return np.asarray(total, dtype=_F32)


def _positions(shape, take):
    """The flat (row-major) positions in an array of shape of the elements take(a) picks
    from a: each axis's coordinates taken from a zero-copy broadcast view, so that the
    memory is the picked elements' (an embedding's gradient picks rows of a large table)."""
    if not shape:
        return take(np.zeros((), np.int64))
    at, step = 0, 1
    for k in reversed(range(len(shape))):
        axis = np.arange(shape[k]).reshape([-1 if j == k else 1 for j in range(len(shape))])
        at = at + take(np.broadcast_to(axis, shape)) * step
        step *= shape[k]
    return at
