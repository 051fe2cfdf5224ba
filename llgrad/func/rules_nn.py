"""vmap rules for matrix products, normalisations, embedding, losses, pooling and advanced
indexing: one call of the op on the physical values where the op takes leading dims (or
the batch folds into its N dim), a composition of ops where a batched weight needs it
(layer_norm(x) * w + b), the loop where neither holds (a batched index, batch_norm in
training mode, a batched embedding table)."""
import numpy as np

from ..ir import OPS
from ..ir.ops_index import np_index
from ..runtime.dispatch import call
from ..runtime.tensor import Tensor
from .batched import BatchedTensor, align
from .batching import loop, rule


def _batched(x):
    return type(x) is BatchedTensor


def _pad_or_plain(ctx, x, nd):
    return ctx.padded(x, nd) if _batched(x) else x


@rule("mm", "bmm", "matmul")
def _matmul(op, inputs, attrs, ctx):
    a, b = inputs
    nd = max(a._data.ndim, b._data.ndim)
    return ctx.wrap(call(OPS["matmul"], (_pad_or_plain(ctx, a, nd), _pad_or_plain(ctx, b, nd)),
                         {}))


@rule("dot")
def _dot(op, inputs, attrs, ctx):
    a, b = inputs
    out = call(OPS["matmul"], (ctx.bcast(a).unsqueeze(-2), ctx.bcast(b).unsqueeze(-1)), {})
    return ctx.wrap(out.reshape(ctx.sizes))


@rule("mv")
def _mv(op, inputs, attrs, ctx):
    a, v = inputs
    out = call(OPS["matmul"], (ctx.bcast(a), ctx.bcast(v).unsqueeze(-1)), {})
    return ctx.wrap(out.squeeze(-1))


@rule("addmm", "baddbmm")
def _addmm(op, inputs, attrs, ctx):
    """beta * self + alpha * (mat1 @ mat2), as the op defines it, in batched ops."""
    s, m1, m2 = inputs
    beta, alpha = attrs.get("beta", 1), attrs.get("alpha", 1)
    r = call(OPS["mm" if op.name == "addmm" else "bmm"], (m1, m2), {})
    if alpha != 1:
        r = r * alpha
    if beta != 0:
        r = r + (s * beta if beta != 1 else s)
    return r


@rule("layer_norm")
def _layer_norm(op, inputs, attrs, ctx):
    x, w, b = inputs
    if not _batched(w) and not _batched(b):
        return ctx.wrap(call(op, (align(x, ctx.levels), w, b), attrs))
    y = call(op, (x, None, None), attrs)
    if w is not None:
        y = y * w
    return y + b if b is not None else y


@rule("group_norm")
def _group_norm(op, inputs, attrs, ctx):
    x, w, b = inputs
    if _batched(w) or _batched(b):
        y = call(op, (x, None, None), attrs)
        shape = (x._data.shape[1],) + (1,) * (x._data.ndim - 2)
        if w is not None:
            y = y * w.reshape(shape)
        return y + b.reshape(shape) if b is not None else y
    p = align(x, ctx.levels)
    out = call(op, (p.reshape((-1,) + x._data.shape[1:]), w, b), attrs)
    return ctx.wrap(out.reshape(ctx.sizes + x._data.shape))


@rule("batch_norm")
def _batch_norm(op, inputs, attrs, ctx):
    """Evaluation mode (running statistics) is per element: the batch folds into N.
    Training mode normalises over each sample's N: the loop."""
    x = inputs[0]
    if attrs.get("training") or any(_batched(t) for t in inputs[1:]) or x._data.ndim < 2:
        return loop(op, inputs, attrs, ctx)
    p = align(x, ctx.levels)
    out = call(op, (p.reshape((-1,) + x._data.shape[1:]),) + tuple(inputs[1:]), attrs)
    return ctx.wrap(out.reshape(ctx.sizes + x._data.shape))


@rule("batch_norm_backward")
def _batch_norm_backward(op, inputs, attrs, ctx):
    """Training mode's backward: its statistics run over each sample's N, as the forward's."""
    return loop(op, inputs, attrs, ctx)


@rule("batch_norm_with_stats")
def _batch_norm_with_stats(op, inputs, attrs, ctx):
    """Training mode with the batch's statistics: they run over each sample's N."""
    return loop(op, inputs, attrs, ctx)


@rule("embedding")
def _embedding(op, inputs, attrs, ctx):
    w, idx = inputs
    if _batched(w):
        return loop(op, inputs, attrs, ctx)
    return ctx.wrap(call(op, (w, align(idx, ctx.levels)), attrs))


@rule("avg_pool2d")
def _avg_pool2d(op, inputs, attrs, ctx):
    x = inputs[0]
    p = align(x, ctx.levels).reshape((-1,) + x._data.shape[-3:])
    out = call(op, (p,), attrs)
    return ctx.wrap(out.reshape(ctx.sizes + x._data.shape[:-3] + out._data.shape[1:]))


@rule("max_pool2d_with_indices", "max_pool2d_with_indices_backward", "avg_pool2d_backward")
def _max_pool2d(op, inputs, attrs, ctx):
    """The op pools the last two dims of any number of leading ones (indices are per plane):
    the batch dims lead every operand (the backward's gradient, input and indices)."""
    return ctx.wrap_all(call(op, tuple(ctx.full(x) for x in inputs), attrs))


@rule("fused_lstm_cell", "fused_lstm_cell_backward", "fused_gru_cell", "fused_gru_cell_backward")
def _fused_cell(op, inputs, attrs, ctx):
    """The fused LSTM / GRU cells work on the last dim under any leading ones (the same in
    every operand): the batch dims lead every operand."""
    return ctx.wrap_all(call(op, tuple(ctx.full(x) for x in inputs), attrs))


@rule("lstm_layer")
def _lstm_layer(op, inputs, attrs, ctx):
    """With only the input and the states batched, the batch dims fold into the layer's batch
    B (one call; each result's batch dims taken back out of its B dim); with a batched
    weight, the loop. (nn.LSTM runs its per-step ops under vmap: this is a direct call.)"""
    x, hx, cx = inputs[0], inputs[5], inputs[6]
    if any(_batched(w) for w in inputs[1:5]):
        return loop(op, inputs, attrs, ctx)
    k, s = ctx.k, ctx.sizes
    n, b, _ = x._data.shape
    xs = ctx.full(x).permute(k, *range(k), k + 1, k + 2).reshape(n, -1, x._data.shape[2])
    states = [ctx.full(v).reshape(-1, v._data.shape[-1]) for v in (hx, cx)]
    y, hy, cy, gates, cells = call(op, (xs,) + tuple(inputs[1:5]) + tuple(states), attrs)

    def seq(t):         # (T, S*B, G) -> (*S, T, B, G)
        return t.reshape((n,) + s + (b, t._data.shape[-1])).permute(
            *range(1, k + 1), 0, k + 1, k + 2)
    return (ctx.wrap(seq(y)), ctx.wrap(hy.reshape(s + (b, -1))),
            ctx.wrap(cy.reshape(s + (b, -1))), ctx.wrap(seq(gates)), ctx.wrap(seq(cells)))


@rule("lstm_layer_backward")
def _lstm_layer_backward(op, inputs, attrs, ctx):
    """Once per sample (the weights' gradients are sums over the layer's batch)."""
    return loop(op, inputs, attrs, ctx)


@rule("convolution", "convolution_backward_input", "convolution_backward_weight")
def _convolution(op, inputs, attrs, ctx):
    """A batched first operand alone folds into N (one call; not the weight gradient's,
    which sums over N); otherwise each sample is a
    group of its own: channels (sample, channel), groups * samples groups (functorch's
    trick), every operand materialised with the batch dims leading."""
    first, rest = inputs[0], [x for x in inputs[1:] if x is not None]
    k = int(np.prod(ctx.sizes))
    if op.name != "convolution_backward_weight" and not any(_batched(x) for x in rest):
        p = ctx.full(first).reshape((-1,) + first._data.shape[1:])
        out = call(op, (p,) + tuple(inputs[1:]), attrs)
        return ctx.wrap(out.reshape(ctx.sizes + (first._data.shape[0],) + out._data.shape[1:]))

    def channels(x):                    # (*S, N, C, ...) -> (N, S*C, ...)
        p = ctx.full(x).reshape((k,) + x._data.shape)
        n, c = x._data.shape[:2]
        return p.transpose(0, 1).reshape((n, k * c) + x._data.shape[2:])

    def stacked(x):                     # (*S, O, ...) -> (S*O, ...)
        return ctx.full(x).reshape((k * x._data.shape[0],) + x._data.shape[1:])

    grouped = dict(attrs, groups=attrs["groups"] * k)
    if op.name == "convolution":
        x, w, b = inputs
        out = call(op, (channels(x), stacked(w), None if b is None else stacked(b)), grouped)
        per = w._data.shape[0]
    elif op.name == "convolution_backward_input":
        g, w = inputs
        out = call(op, (channels(g), stacked(w)), grouped)
        per = w._data.shape[1] * attrs["groups"]
    else:
        g, x = inputs
        size = attrs["weight_size"]
        out = call(op, (channels(g), channels(x)), dict(grouped, weight_size=(
            k * size[0],) + tuple(size[1:])))
        return ctx.wrap(out.reshape(ctx.sizes + tuple(size)))
    n = out._data.shape[0]
    out = out.reshape((n, k, per) + out._data.shape[2:]).transpose(0, 1)
    return ctx.wrap(out.reshape(ctx.sizes + (n, per) + out._data.shape[3:]))


def _reduced(loss, reduction):
    if reduction == "none":
        return loss
    return loss.mean() if reduction == "mean" else loss.sum()


@rule("mse_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
      "binary_cross_entropy_with_logits")
def _pointwise_loss(op, inputs, attrs, ctx):
    """The loss per element (reduction='none', broadcast as elementwise ops are), then each
    sample's mean or sum."""
    tensors = [x for x in inputs if isinstance(x, Tensor)]
    nd = max(x._data.ndim for x in tensors)
    args = tuple(_pad_or_plain(ctx, x, nd) for x in inputs)
    out = call(op, args, dict(attrs, reduction="none"))
    want = ctx.sizes + tuple(np.broadcast_shapes(*[x._data.shape for x in tensors]))
    if out._data.shape != want:
        return loop(op, inputs, attrs, ctx)
    return _reduced(ctx.wrap(out), attrs.get("reduction", "mean"))


@rule("nll_loss")
def _nll_loss(op, inputs, attrs, ctx):
    """The batch folds into N (reduction='none'); a sample's mean divides by the sum of its
    targets' weights, which nll_loss of -1 everywhere gives."""
    x, t, w = inputs
    if _batched(w) or x._data.ndim == 0:
        return loop(op, inputs, attrs, ctx)
    px, pt = ctx.full(x), ctx.full(t)
    tail = x._data.shape[-1:] if x._data.ndim == 1 else x._data.shape[1:]
    fx = px.reshape((-1,) + tail)
    ft = pt.reshape((-1,) + (t._data.shape[1:] if x._data.ndim > 1 else ()))
    none = dict(attrs, reduction="none")
    loss = ctx.wrap(call(op, (fx, ft, w), none).reshape(ctx.sizes + t._data.shape))
    reduction = attrs.get("reduction", "mean")
    if reduction != "mean":
        return _reduced(loss, reduction)
    den = call(op, (fx.new_full(fx._data.shape, -1.0), ft, w), none)
    return loss.sum() / ctx.wrap(den.reshape(ctx.sizes + t._data.shape)).sum()


def _adjacent(spec):
    """NumPy keeps advanced index dims in place only when the advanced indices (tensors, and
    ints beside them) are next to each other; else they go first, before the batch dims."""
    if "T" not in spec:
        return True
    pos = [i for i, s in enumerate(spec) if s == "T" or type(s) is int]
    return pos[-1] - pos[0] + 1 == len(pos)


_FULL_SLICE = ("slice", None, None, None)


@rule("index")
def _index(op, inputs, attrs, ctx):
    x, ix = inputs[0], inputs[1:]
    spec = attrs["spec"]
    if not _batched(x) or any(_batched(i) for i in ix) or not _adjacent(spec):
        return loop(op, inputs, attrs, ctx)
    spec = (_FULL_SLICE,) * ctx.k + tuple(spec)
    return ctx.wrap(call(op, (align(x, ctx.levels),) + tuple(ix), dict(attrs, spec=spec)))


@rule("index_put")
def _index_put(op, inputs, attrs, ctx):
    x, v, ix = inputs[0], inputs[1], inputs[2:]
    spec = attrs["spec"]
    if any(_batched(i) for i in ix) or not _adjacent(spec) or attrs.get("counts"):
        return loop(op, inputs, attrs, ctx)
    probe = np.broadcast_to(np.zeros((), dtype=x._data.dtype), x._data.shape)
    region = probe[np_index(spec, [i._data for i in ix])].shape
    args = (ctx.full(x), _pad_or_plain(ctx, v, len(region))) + tuple(ix)
    return ctx.wrap(call(op, args, dict(attrs, spec=(_FULL_SLICE,) * ctx.k + tuple(spec))))
