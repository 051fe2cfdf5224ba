"""Lowering of linalg_solve_triangular (llgrad/ir/ops_linalg_solve.py): forward or back
substitution, as the reference's row loop. For each (broadcast) batch matrix the result
first holds B; then row by row in solve order (downwards for a lower, upwards for an upper
triangle), for each column, the dot product of the row's off-diagonal part with the rows
solved already is summed in the result's dtype and subtracted from B's element, and the
difference divided by the diagonal (not for unitriangular). left=False (X A = B) is the
transposed problem A^T X^T = B^T: the same loops with the row and column indices of A, B
and X swapped and the triangle flipped. A zero pivot gives inf/nan, as the reference."""
from llvmlite import ir

from ...ir.graph import Value
from ...ir.geometry import contiguous_strides
from .loops import Access, for_range, loop_nest
from .scalar import I64, Scalar, is_float, reg_type
from .table import register


def _check(node):
    a, bm = node.inputs[:2]
    if not (isinstance(a, Value) and isinstance(bm, Value)):
        return "a Python-number operand"
    if not is_float(node.outputs[0].type.dtype):
        return "a non-float result"
    return None


def _emit(plan, group, fg):
    node, b, sg = group.root, fg.b, fg.sg
    a, bm = node.inputs[:2]
    out = node.outputs[0]
    if out.type.numel == 0:
        return
    dt = out.type.dtype
    left, unit = node.attrs.get("left", True), node.attrs.get("unitriangular", False)
    upper = bool(node.attrs["upper"]) != (not left)     # (the triangle of the solved system)
    oshape = out.type.shape
    batch = list(oshape[:-2])
    n = a.type.shape[-1]
    k = oshape[-1] if left else oshape[-2]
    src_a = plan.access(a, tuple(batch) + tuple(a.type.shape[-2:]))
    src_b = plan.access(bm, oshape)
    dst = Access(plan.buffers[out], dt, 0, contiguous_strides(oshape))

    def at(bidx, r, c):         # (index of the solved system's element (r, c))
        return list(bidx) + ([r, c] if left else [c, r])

    def load(acc, idx):
        return sg.cast(fg.load(acc, idx), dt)

    acc_slot = fg.alloca(reg_type(dt), "dot")
    zero = Scalar(ir.Constant(reg_type(dt), 0.0), dt)
    last = ir.Constant(I64, n - 1)
    with loop_nest(b, batch, name="batch") as bidx:
        with loop_nest(b, list(oshape[-2:]), name="copy") as cidx:
            idx = list(bidx) + list(cidx)
            fg.store(load(src_b, idx), dst, idx)
        with for_range(b, 0, n, name="row") as t:
            i = b.sub(last, t) if upper else t
            lo, hi = (b.add(i, ir.Constant(I64, 1)), n) if upper else (0, i)
            with for_range(b, 0, k, name="col") as j:
                b.store(zero.v, acc_slot)
                with for_range(b, lo, hi, name="m") as m:
                    prod = sg.mul(load(src_a, at(bidx, i, m)), fg.load(dst, at(bidx, m, j)))
                    s = Scalar(b.load(acc_slot, typ=acc_slot.allocated_type), dt)
                    b.store(sg.add(s, prod).v, acc_slot)
                dot = Scalar(b.load(acc_slot, typ=acc_slot.allocated_type), dt)
                x = sg.sub(fg.load(dst, at(bidx, i, j)), dot)
                if not unit:
                    x = sg.div(x, load(src_a, at(bidx, i, i)))
                fg.store(x, dst, at(bidx, i, j))


register("linalg_solve_triangular", "kernel", emit=_emit, check=_check)
