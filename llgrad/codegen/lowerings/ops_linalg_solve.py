"""Lowering of linalg_solve_ex (llgrad/ir/ops_linalg_solve.py): Gaussian elimination with
partial pivoting, as LAPACK's gesv does it unblocked (getf2 then getrs). For each
(broadcast) batch matrix the system's matrix is copied into a scratch n x n buffer and B
into the result; column by column the pivot is the first row of largest magnitude at or
below the diagonal, its row is swapped with the diagonal's (in the scratch and the result),
and the rows below are eliminated (the multipliers kept in place, as getf2's L). A zero
pivot makes info its 1-based column (the first one) and leaves the column unreduced; back
substitution then gives inf/nan, as the reference's. left=False (X A = B) solves the
transposed system A^T X^T = B^T by swapping indices; vector=True reads B and writes X with
one index less. Products are summed in the result's dtype."""
from llvmlite import ir

from ...ir.graph import Value
from ...ir.geometry import contiguous_strides
from .loops import Access, for_range, loop_nest
from .scalar import I64, Scalar, is_float
from .table import register


def _check(node):
    a, bm = node.inputs[:2]
    if not (isinstance(a, Value) and isinstance(bm, Value)):
        return "a Python-number operand"
    if not is_float(node.outputs[0].type.dtype):
        return "a non-float result"
    return None


def _prepare(plan, group):
    n = group.root.inputs[0].type.shape[-1]
    group.state["lu"] = plan.temp(group, group.root.outputs[0].type.dtype, max(n * n, 1))


def _emit(plan, group, fg):
    node, b, sg = group.root, fg.b, fg.sg
    a, bm = node.inputs[:2]
    out, info = node.outputs[:2]
    if out.type.numel == 0 and info.type.numel == 0:
        return
    dt = out.type.dtype
    left, vector = node.attrs.get("left", True), node.attrs.get("vector", False)
    oshape = out.type.shape
    batch = list(oshape[:-1] if vector else oshape[:-2])
    n = a.type.shape[-1]
    k = 1 if vector else (oshape[-1] if left else oshape[-2])
    src_a = plan.access(a, tuple(batch) + (n, n))
    src_b = plan.access(bm, oshape)
    dst = Access(plan.buffers[out], dt, 0, contiguous_strides(oshape))
    dinfo = Access(plan.buffers[info], info.type.dtype, 0, contiguous_strides(tuple(batch)))
    lu = Access(group.state["lu"], dt, 0, (n, 1))

    def xat(bidx, r, c):        # (the element (r, c) of the solved system's X or B)
        if vector:
            return list(bidx) + [r]
        return list(bidx) + ([r, c] if left else [c, r])

    def aat(bidx, r, c):        # (the element (r, c) of the system's matrix)
        return list(bidx) + ([r, c] if left else [c, r])

    def load(acc, idx):
        return sg.cast(fg.load(acc, idx), dt)

    def const(v):
        return ir.Constant(I64, v)

    one = const(1)
    zero = sg.const(0.0, dt)
    best_slot, piv_slot = fg.alloca(zero.v.type, "best"), fg.alloca(I64, "piv")
    acc_slot, failed = fg.alloca(zero.v.type, "dot"), fg.alloca(I64, "info")

    def fabs(x):
        return Scalar(sg.call("llvm.fabs", x.v.type, x.v), dt)

    def swap(acc_a, acc_b):
        va, vb = fg.load(*acc_a), fg.load(*acc_b)
        fg.store(vb, *acc_a)
        fg.store(va, *acc_b)

    with loop_nest(b, batch, name="batch") as bidx:
        b.store(const(0), failed)
        with loop_nest(b, [n, n], name="copy") as (r, c):
            fg.store(load(src_a, aat(bidx, r, c)), lu, [r, c])
        with loop_nest(b, [n, k], name="rhs") as (r, c):
            fg.store(load(src_b, xat(bidx, r, c)), dst, xat(bidx, r, c))
        with for_range(b, 0, n, name="col") as c:
            b.store(c, piv_slot)
            b.store(fabs(fg.load(lu, [c, c])).v, best_slot)
            with for_range(b, b.add(c, one), n, name="search") as r:
                v = fabs(fg.load(lu, [r, c]))
                best = Scalar(b.load(best_slot, typ=zero.v.type), dt)
                with b.if_then(sg.cmp(">", v, best).v):
                    b.store(v.v, best_slot)
                    b.store(r, piv_slot)
            p = b.load(piv_slot, typ=I64)
            with for_range(b, 0, n, name="swap") as m:
                swap((lu, [c, m]), (lu, [p, m]))
            with for_range(b, 0, k, name="swapb") as j:
                swap((dst, xat(bidx, c, j)), (dst, xat(bidx, p, j)))
            pivot = fg.load(lu, [c, c])
            singular = sg.cmp("==", pivot, zero).v
            with b.if_else(singular) as (is_zero, nonzero):
                with is_zero:
                    first = b.icmp_signed("==", b.load(failed, typ=I64), const(0))
                    with b.if_then(first):
                        b.store(b.add(c, one), failed)
                with nonzero:
                    with for_range(b, b.add(c, one), n, name="elim") as r:
                        f = sg.div(fg.load(lu, [r, c]), pivot)
                        fg.store(f, lu, [r, c])
                        with for_range(b, b.add(c, one), n, name="upd") as m:
                            fg.store(sg.sub(fg.load(lu, [r, m]),
                                            sg.mul(f, fg.load(lu, [c, m]))), lu, [r, m])
                        with for_range(b, 0, k, name="updb") as j:
                            fg.store(sg.sub(fg.load(dst, xat(bidx, r, j)),
                                            sg.mul(f, fg.load(dst, xat(bidx, c, j)))),
                                     dst, xat(bidx, r, j))
        with for_range(b, 0, n, name="back") as t:
            i = b.sub(const(n - 1), t)
            with for_range(b, 0, k, name="bcol") as j:
                b.store(zero.v, acc_slot)
                with for_range(b, b.add(i, one), n, name="m") as m:
                    prod = sg.mul(fg.load(lu, [i, m]), fg.load(dst, xat(bidx, m, j)))
                    s = Scalar(b.load(acc_slot, typ=zero.v.type), dt)
                    b.store(sg.add(s, prod).v, acc_slot)
                dot = Scalar(b.load(acc_slot, typ=zero.v.type), dt)
                x = sg.div(sg.sub(fg.load(dst, xat(bidx, i, j)), dot), fg.load(lu, [i, i]))
                fg.store(x, dst, xat(bidx, i, j))
        order = Scalar(b.load(failed, typ=I64), "int64")
        fg.store(sg.cast(order, info.type.dtype), dinfo, list(bidx))


register("linalg_solve_ex", "kernel", emit=_emit, prepare=_prepare, check=_check)
