"""vmap rules for ctc_loss's ops (llgrad/ir/ops_ctc.py): the batch folds into their N dim,
one call. Each sample's recursion reads its own row of every operand (log_probs' column
(T, ., C), targets' row, its lengths; the backward's gradient, likelihood and log-alpha
rows too), so samples of every level side by side are the op on K * N samples."""
from ..runtime.dispatch import call
from .batching import rule

_N_AXIS = {"self": 1}          # (log_probs (T, N, C); every other operand has N first)


def _folded(ctx, name, x, k):
    """x's physical value with its levels (expanded, K of them in all) folded into N."""
    p = ctx.full(x)
    if _N_AXIS.get(name) == 1:          # (*S, T, N, C) -> (T, K * N, C)
        p = p.reshape((k,) + x._data.shape).movedim(0, 1)
        return p.reshape((x._data.shape[0], -1) + x._data.shape[2:])
    return p.reshape((-1,) + x._data.shape[1:])


@rule("ctc_loss", "ctc_loss_backward")
def _ctc(op, inputs, attrs, ctx):
    k = 1
    for n in ctx.sizes:
        k *= n
    out = call(op, tuple(_folded(ctx, name, x, k) for name, x in zip(op.args, inputs)), attrs)
    if op.name == "ctc_loss":           # (K * N,) and (K * N, T, L)
        nll, alpha = out
        return (ctx.wrap(nll.reshape(ctx.sizes + (-1,))),
                ctx.wrap(alpha.reshape(ctx.sizes + (-1,) + alpha._data.shape[1:])))
    t, _, c = out._data.shape           # (T, K * N, C) -> (*S, T, N, C)
    return ctx.wrap(out.reshape((t, k, -1, c)).movedim(1, 0).reshape(
        ctx.sizes + (t, -1, c)))
