"""vmap rules for the 3-D convolution and pooling ops (llgrad/ir/ops_conv3d.py,
ops_pool3d.py). The pools take any leading dims before (D, H, W): the batch dims lead the
operand, one call. The convolution folds a batched input alone into N (one call); with a
batched weight or bias each sample becomes a group of its own (functorch's trick, as the
2-D convolution's rule)."""
import numpy as np

from ..runtime.dispatch import call
from .batched import BatchedTensor
from .batching import rule


@rule("max_pool3d_with_indices", "avg_pool3d")
def _pool3d(op, inputs, attrs, ctx):
    return ctx.wrap_all(call(op, (ctx.full(inputs[0]),), attrs))


@rule("convolution3d")
def _convolution3d(op, inputs, attrs, ctx):
    x, w, b = inputs
    if type(w) is not BatchedTensor and type(b) is not BatchedTensor:
        p = ctx.full(x).reshape((-1,) + x._data.shape[1:])
        out = call(op, (p, w, b), attrs)
        return ctx.wrap(out.reshape(ctx.sizes + (x._data.shape[0],) + out._data.shape[1:]))
    k = int(np.prod(ctx.sizes))
    n, c = x._data.shape[:2]
    # (*S, N, C, ...) -> (N, S*C, ...); (*S, O, ...) -> (S*O, ...)
    xs = ctx.full(x).reshape((k,) + x._data.shape).transpose(0, 1) \
        .reshape((n, k * c) + x._data.shape[2:])

    def stacked(t):
        return ctx.full(t).reshape((k * t._data.shape[0],) + t._data.shape[1:])
    out = call(op, (xs, stacked(w), None if b is None else stacked(b)),
               dict(attrs, groups=attrs["groups"] * k))
    per = w._data.shape[0]
    out = out.reshape((n, k, per) + out._data.shape[2:]).transpose(0, 1)
    return ctx.wrap(out.reshape(ctx.sizes + (n, per) + out._data.shape[3:]))
