"""vmap rules of the square-matrix ops (llgrad/ir/ops_matrix.py): they already batch over
leading dims, so the batch dims go in front of the matrices and the op runs once."""
from ..runtime.dispatch import call
from .batching import rule


@rule("linalg_inv_ex", "linalg_det", "linalg_slogdet")
def _leading(op, inputs, attrs, ctx):
    return ctx.wrap_all(call(op, (ctx.full(inputs[0]),), attrs))
