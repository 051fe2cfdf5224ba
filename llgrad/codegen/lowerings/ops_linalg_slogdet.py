"""Lowering of linalg_slogdet (llgrad/ir/ops_matrix.py): LU with partial pivoting as
LAPACK's getf2 does it unblocked, on a scratch copy of each (batch) matrix: column by column
the pivot is the first row of largest magnitude at or below the diagonal, its row swapped
with the diagonal's, the rows below eliminated. The factor is then read as NumPy's slogdet
reads it: the sign is the product of the pivots' signs, negated per row swap, and the log of
the absolute determinant the sum of the pivots' logs in row order, in the result's dtype.
A zero pivot (a singular matrix) gives sign 0 and -inf, as NumPy's and PyTorch's."""
from llvmlite import ir

from ...ir.graph import Value
from ...ir.geometry import contiguous_strides
from . import vecmath
from .loops import Access, for_range, loop_nest
from .scalar import I64, Scalar, is_float
from .table import register


def _check(node):
    if not isinstance(node.inputs[0], Value):
        return "a Python-number operand"
    if not is_float(node.outputs[0].type.dtype):
        return "a non-float result"
    return None


def _prepare(plan, group):
    n = group.root.inputs[0].type.shape[-1]
    group.state["lu"] = plan.temp(group, group.root.outputs[0].type.dtype, max(n * n, 1))


def _emit(plan, group, fg):
    node, b, sg = group.root, fg.b, fg.sg
    a = node.inputs[0]
    sign_out, log_out = node.outputs[:2]
    if sign_out.type.numel == 0:
        return
    dt = sign_out.type.dtype
    batch = list(sign_out.type.shape)
    n = a.type.shape[-1]
    src = plan.access(a, tuple(batch) + (n, n))
    strides = contiguous_strides(tuple(batch))
    dsign = Access(plan.buffers[sign_out], dt, 0, strides)
    dlog = Access(plan.buffers[log_out], dt, 0, strides)
    lu = Access(group.state["lu"], dt, 0, (n, 1))
    one = ir.Constant(I64, 1)
    zero, unit = sg.const(0.0, dt), sg.const(1.0, dt)
    rt = zero.v.type
    best_slot, piv_slot = fg.alloca(rt, "best"), fg.alloca(I64, "piv")
    sign_slot, log_slot = fg.alloca(rt, "sign"), fg.alloca(rt, "logdet")
    singular = fg.alloca(ir.IntType(1), "singular")

    def fabs(x):
        return Scalar(sg.call("llvm.fabs", x.v.type, x.v), dt)

    def slot(s):
        return Scalar(b.load(s, typ=rt), dt)

    with loop_nest(b, batch, name="batch") as bidx:
        with loop_nest(b, [n, n], name="copy") as (r, c):
            fg.store(sg.cast(fg.load(src, list(bidx) + [r, c]), dt), lu, [r, c])
        b.store(unit.v, sign_slot)
        b.store(zero.v, log_slot)
        b.store(ir.Constant(ir.IntType(1), 0), singular)
        with for_range(b, 0, n, name="col") as c:
            b.store(c, piv_slot)
            b.store(fabs(fg.load(lu, [c, c])).v, best_slot)
            with for_range(b, b.add(c, one), n, name="search") as r:
                v = fabs(fg.load(lu, [r, c]))
                with b.if_then(sg.cmp(">", v, slot(best_slot)).v):
                    b.store(v.v, best_slot)
                    b.store(r, piv_slot)
            p = b.load(piv_slot, typ=I64)
            with b.if_then(b.icmp_signed("!=", p, c)):
                with for_range(b, 0, n, name="swap") as m:
                    x, y = fg.load(lu, [c, m]), fg.load(lu, [p, m])
                    fg.store(y, lu, [c, m])
                    fg.store(x, lu, [p, m])
                b.store(sg.neg(slot(sign_slot)).v, sign_slot)
            pivot = fg.load(lu, [c, c])
            with b.if_else(sg.cmp("==", pivot, zero).v) as (is_zero, nonzero):
                with is_zero:
                    b.store(ir.Constant(ir.IntType(1), 1), singular)
                with nonzero:
                    negative = sg.cmp("<", pivot, zero).v
                    b.store(sg.select(negative, sg.neg(slot(sign_slot)), slot(sign_slot)).v,
                            sign_slot)
                    b.store(sg.add(slot(log_slot), vecmath.log(sg, fabs(pivot))).v, log_slot)
                    with for_range(b, b.add(c, one), n, name="elim") as r:
                        f = sg.div(fg.load(lu, [r, c]), pivot)
                        fg.store(f, lu, [r, c])
                        with for_range(b, b.add(c, one), n, name="upd") as m:
                            fg.store(sg.sub(fg.load(lu, [r, m]),
                                            sg.mul(f, fg.load(lu, [c, m]))), lu, [r, m])
        dead = b.load(singular)
        fg.store(sg.select(dead, zero, slot(sign_slot)), dsign, list(bidx))
        fg.store(sg.select(dead, sg.const(float("-inf"), dt), slot(log_slot)), dlog, list(bidx))


register("linalg_slogdet", "kernel", emit=_emit, prepare=_prepare, check=_check)
