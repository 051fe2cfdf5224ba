"""vmap rules for views, shape ops and ops along a dimension: the op runs once on the
physical value with its dimension attributes moved past the batch dims (a view op stays a
view of the physical value, so in-place writes through it reach the base)."""
from ..ir import OPS
from ..runtime.dispatch import call
from ..runtime.tensor import Tensor
from .batched import BatchedTensor, align
from .batching import loop, rule

# op -> (its dim attributes, how many dims the result has beyond the input's: a dim that
# names an output dim (unsqueeze, stack, diag_embed) is normalised against that rank)
_DIM_ATTRS = {
    "softmax": (("dim",), 0), "log_softmax": (("dim",), 0), "cumsum": (("dim",), 0),
    "cumprod": (("dim",), 0), "glu": (("dim",), 0), "sort": (("dim",), 0),
    "topk": (("dim",), 0), "kthvalue": (("dim",), 0), "mode": (("dim",), 0),
    "flip": (("dims",), 0), "diagonal_copy": (("dim1", "dim2"), 0),
    "diag_embed": (("dim1", "dim2"), 1), "transpose": (("dim0", "dim1"), 0),
    "unsqueeze": (("dim",), 1), "slice": (("dim",), 0), "select": (("dim",), 0),
    "diagonal": (("dim1", "dim2"), 0), "unbind": (("dim",), 0), "split": (("dim",), 0),
    "unfold": (("dimension",), 0), "roll": (("dims",), 0),
    "cat": (("dim",), 0), "stack": (("dim",), 1), "gather": (("dim",), 0),
    "scatter": (("dim",), 0), "scatter_add": (("dim",), 0), "scatter_reduce": (("dim",), 0),
    "index_select": (("dim",), 0), "index_add": (("dim",), 0),
}
# every tensor operand at the full batch (the op needs equal shapes, or index tensors as
# big as the input)
_FULL = {"cat", "stack", "gather", "scatter", "scatter_add", "scatter_reduce", "index_add"}
# the index operand that must not be batched (1-D along the dim)
_PLAIN_INDEX = {"index_select": 1, "index_add": 1}


def _shift(value, k, rank):
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        return tuple(_shift(v, k, rank) for v in value)
    return (value % rank if rank else value) + k


@rule(*_DIM_ATTRS)
def _along_dims(op, inputs, attrs, ctx):
    names, extra = _DIM_ATTRS[op.name]
    tensors = [x for x in inputs if isinstance(x, Tensor)]
    nd = tensors[0]._data.ndim
    plain = _PLAIN_INDEX.get(op.name)
    if nd == 0 and op.name not in ("unsqueeze", "stack", "diag_embed") or \
            plain is not None and type(inputs[plain]) is BatchedTensor:
        return loop(op, inputs, attrs, ctx)
    k, rank = ctx.k, nd + extra
    new = dict(attrs)
    for n in names:
        if n in attrs:
            new[n] = _shift(attrs[n], k, rank)
    if op.name == "roll" and attrs.get("dims") is None:       # roll of the flattened tensor
        x = inputs[0]
        p = align(x, ctx.levels).reshape(ctx.sizes + (-1,))
        out = call(op, (p,), dict(attrs, dims=(k,), shifts=tuple(attrs["shifts"])[:1]))
        return ctx.wrap(out.reshape(ctx.sizes + x._data.shape))
    how = ctx.full if op.name in _FULL else ctx.bcast
    args = [how(x) if isinstance(x, Tensor) and i != plain else x for i, x in enumerate(inputs)]
    return ctx.wrap_all(call(op, tuple(args), new))


@rule("view", "_reshape_alias", "_unsafe_view")
def _view(op, inputs, attrs, ctx):
    """(The method checked that one sample can be viewed so; then the physical value can, its
    batch dims kept apart.)"""
    p = align(inputs[0], ctx.levels)
    return ctx.wrap(call(op, (p,), {"shape": ctx.sizes + tuple(attrs["shape"])}))


@rule("alias", "tril", "triu", "constant_pad_nd", "reflection_pad", "replication_pad")
def _trailing(op, inputs, attrs, ctx):
    """Ops on the last dims only: the batch dims lead, untouched."""
    x = inputs[0]
    need = {"tril": 2, "triu": 2}.get(op.name, len(attrs.get("pad", ())) // 2)
    if x._data.ndim < need or len(inputs) != 1:
        return loop(op, inputs, attrs, ctx)
    return ctx.wrap(call(op, (align(x, ctx.levels),), attrs))


@rule("t")
def _t(op, inputs, attrs, ctx):
    x = inputs[0]
    p = align(x, ctx.levels)
    if x._data.ndim < 2:
        return ctx.wrap(call(OPS["alias"], (p,), {}))
    return ctx.wrap(call(OPS["transpose"], (p,), {"dim0": ctx.k, "dim1": ctx.k + 1}))


@rule("permute")
def _permute(op, inputs, attrs, ctx):
    k = ctx.k
    dims = tuple(range(k)) + tuple(d + k for d in attrs["dims"])
    return ctx.wrap(call(op, (align(inputs[0], ctx.levels),), {"dims": dims}))


@rule("expand")
def _expand(op, inputs, attrs, ctx):
    size = tuple(attrs["size"])
    p = ctx.padded(inputs[0], len(size))
    return ctx.wrap(p.expand(ctx.sizes + size))


@rule("squeeze", "squeeze_")
def _squeeze(op, inputs, attrs, ctx):
    x = inputs[0]
    shape = x._data.shape
    dim = attrs.get("dim")
    dims = range(len(shape)) if dim is None else (dim,) if isinstance(dim, int) else dim
    dims = tuple(d + ctx.k for d in dims if shape[d] == 1)
    return ctx.wrap(call(OPS["squeeze"], (align(x, ctx.levels),), {"dim": dims}))


@rule("repeat")
def _repeat(op, inputs, attrs, ctx):
    reps = tuple(attrs["repeats"])
    p = ctx.padded(inputs[0], len(reps))
    return ctx.wrap(call(op, (p,), {"repeats": (1,) * ctx.k + reps}))


@rule("as_strided")
def _as_strided(op, inputs, attrs, ctx):
    """A batched tensor reports sample 0's strides and storage offset: the view is taken at
    the same geometry in every sample, each sample's offset moved by its batch strides."""
    p = align(inputs[0], ctx.levels)
    k = ctx.k
    return ctx.wrap(p.as_strided(ctx.sizes + tuple(attrs["size"]),
                                 p.stride()[:k] + tuple(attrs["stride"]),
                                 attrs["storage_offset"]))


@rule("strided_scatter", "strided_gather", "strided_put")
def _strided(op, inputs, attrs, ctx):
    """Ops on flat buffers through a geometry (as_strided's backward, in-place writes through
    views): the samples' buffers side by side, one more (outermost) dim of the geometry
    striding from one to the next."""
    n = 1
    for s in ctx.sizes:
        n *= s
    size, stride, offset = attrs["geom"]
    size, stride = tuple(size), tuple(stride)
    x = inputs[0]
    if op.name == "strided_scatter":
        if tuple(x._data.shape) != size:
            return loop(op, inputs, attrs, ctx)
        span = attrs["span"]
        values = ctx.full(x).reshape((n,) + size)
        out = call(op, (values,), {"geom": ((n,) + size, (span,) + stride, offset),
                                   "span": n * span})
        return ctx.wrap(out.reshape(ctx.sizes + (span,)))
    m = x._data.shape[0]
    flat = ctx.full(x).reshape((n * m,))
    geom = ((n,) + size, (m,) + stride, offset)
    if op.name == "strided_gather":
        return ctx.wrap(call(op, (flat,), {"geom": geom}).reshape(ctx.sizes + size))
    values = ctx.padded(inputs[1], len(size)).expand(ctx.sizes + size).reshape((n,) + size)
    return ctx.wrap(call(op, (flat, values), {"geom": geom}).reshape(ctx.sizes + (m,)))
