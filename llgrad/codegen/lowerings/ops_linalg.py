"""Lowerings of linalg_solve_triangular and linalg_cholesky_ex (llgrad/ir/ops_linalg_solve.py).

linalg_solve_triangular: forward or back substitution, as the reference's row loop. For
each (broadcast) batch matrix the result first holds B; then row by row in solve order
(downwards for a lower, upwards for an upper triangle), for each column, the dot product of the row's off-diagonal part with the rows
solved already is summed in the result's dtype and subtracted from B's element, and the
difference divided by the diagonal (not for unitriangular). In float32 and float64 (left) the
dot products of a row are summed for all its columns at once, in a scratch row, one solved
row at a time (the same terms in the same order, along rows of X instead of down its
columns: a 256 x 256 system with 256 right-hand sides, a Cholesky factor's gradient, took
20 ms). left=False (X A = B) is the
transposed problem A^T X^T = B^T: the same loops with the row and column indices of A, B
and X swapped and the triangle flipped. A zero pivot gives inf/nan, as the reference.

linalg_cholesky_ex: the Cholesky-Banachiewicz row loop over A's lower triangle (what the
reference hands LAPACK), each dot product summed in the result's dtype. A pivot that is not
positive (or NaN) makes info the order of that leading minor and the matrix's factor all
zeros, as the reference's; upper=True stores the factor transposed.

Both loops are scalar, one dependent add at a time: past HOST_WORK multiply-adds a matrix
calls the reference back instead (host_call.py), which runs BLAS trsm / LAPACK potrf (a
float64 256x256 solve against 256 columns took 16 ms of CPU in the loop, 1.2 ms called
back; a 256x256 Cholesky 2.5 ms against 1.4 ms)."""
from llvmlite import ir

from ...ir.graph import Value
from ...ir.geometry import contiguous_strides
from . import host_call
from .loops import Access, for_range, loop_nest
from .scalar import I64, Scalar, is_float, reg_type
from .table import register


HOST_WORK = 32768          # multiply-adds of one matrix (the callback costs ~10-20 us)


def _work(node):
    """Multiply-adds of the loop for one matrix of node's batch."""
    shape = node.outputs[0].type.shape
    if node.op == "linalg_cholesky_ex":
        return shape[-1] ** 3 // 6
    return node.inputs[0].type.shape[-1] * shape[-1] * shape[-2] // 2   # (n/2 per element)


def _hosted(node):
    return _work(node) >= HOST_WORK


def _check(node):
    a, bm = node.inputs[:2]
    if not (isinstance(a, Value) and isinstance(bm, Value)):
        return "a Python-number operand"
    if not is_float(node.outputs[0].type.dtype):
        return "a non-float result"
    return host_call._check(node) if _hosted(node) else None


def _prepare_hosted(plan, group):
    if _hosted(group.root):
        host_call._prepare(plan, group)


def _emit(plan, group, fg):
    if _hosted(group.root):
        return host_call._emit(plan, group, fg)
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
    row = group.state.get("row")
    with loop_nest(b, batch, name="batch") as bidx:
        with loop_nest(b, list(oshape[-2:]), name="copy") as cidx:
            idx = list(bidx) + list(cidx)
            fg.store(load(src_b, idx), dst, idx)
        with for_range(b, 0, n, name="row") as t:
            i = b.sub(last, t) if upper else t
            lo, hi = (b.add(i, ir.Constant(I64, 1)), n) if upper else (0, i)
            if row is not None:
                _solve_row(fg, Access(row, dt, 0, (1,)), src_a, dst, at, bidx, i, lo, hi, k,
                           unit, zero)
            else:
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


def _solve_row(fg, acc, src_a, dst, at, bidx, i, lo, hi, k, unit, zero):
    """Row i of X: acc[j] = sum over the solved rows m of A[i, m] X[m, j] (m in order, as
    the column loop's dot), then X[i, j] = (B[i, j] - acc[j]) / A[i, i]."""
    b, sg = fg.b, fg.sg
    with for_range(b, 0, k, name="zero") as j:
        fg.store(zero, acc, [j])
    with for_range(b, lo, hi, name="m") as m:
        aim = fg.load(src_a, at(bidx, i, m))
        with for_range(b, 0, k, name="col") as j:
            fg.store(sg.add(fg.load(acc, [j]), sg.mul(aim, fg.load(dst, at(bidx, m, j)))),
                     acc, [j])
    with for_range(b, 0, k, name="col") as j:
        x = sg.sub(fg.load(dst, at(bidx, i, j)), fg.load(acc, [j]))
        if not unit:
            x = sg.div(x, fg.load(src_a, at(bidx, i, i)))
        fg.store(x, dst, at(bidx, i, j))


def _prepare(plan, group):
    """A scratch row of the dot products where X's dtype is its register type (none for a
    matrix called back: _hosted)."""
    node = group.root
    if _hosted(node):
        return _prepare_hosted(plan, group)
    out = node.outputs[0]
    shape, dt = out.type.shape, out.type.dtype
    k = shape[-1] if node.attrs.get("left", True) else shape[-2]
    # (left=False walks X's rows as the solved system's columns: its dots run along X's
    # rows already, and a scratch row would read X down its columns)
    if node.attrs.get("left", True) and dt in ("float32", "float64") and \
            all(x.type.dtype == dt for x in node.inputs[:2]):
        group.state["row"] = plan.temp(group, dt, max(k, 1))


register("linalg_solve_triangular", "kernel", emit=_emit, prepare=_prepare, check=_check)


def _check_cholesky(node):
    if not isinstance(node.inputs[0], Value):
        return "a Python-number operand"
    if not is_float(node.outputs[0].type.dtype):
        return "a non-float result"
    return host_call._check(node) if _hosted(node) else None


def _emit_cholesky(plan, group, fg):
    if _hosted(group.root):
        return host_call._emit(plan, group, fg)
    node, b, sg = group.root, fg.b, fg.sg
    a, (out, info) = node.inputs[0], node.outputs[:2]
    oshape = out.type.shape
    batch, n = list(oshape[:-2]), oshape[-1]
    dt = out.type.dtype
    src = plan.access(a, oshape)
    dst = Access(plan.buffers[out], dt, 0, contiguous_strides(oshape))
    if node.attrs.get("upper", False):      # (L[i, j] lands at (j, i))
        dst = dst.with_strides(dst.strides[:-2] + dst.strides[-2:][::-1])
    dinfo = Access(plan.buffers[info], info.type.dtype, 0, contiguous_strides(tuple(batch)))
    zero = Scalar(ir.Constant(reg_type(dt), 0.0), dt)
    acc_slot = fg.alloca(reg_type(dt), "dot")
    failed = fg.alloca(I64, "info")
    with loop_nest(b, batch, name="batch") as bidx:
        b.store(ir.Constant(I64, 0), failed)
        with loop_nest(b, [n, n], name="zero") as zidx:
            fg.store(zero, dst, list(bidx) + zidx)
        with for_range(b, 0, n, name="row") as i:
            with for_range(b, 0, b.add(i, ir.Constant(I64, 1)), name="col") as j:
                b.store(zero.v, acc_slot)
                with for_range(b, 0, j, name="k") as k:
                    prod = sg.mul(fg.load(dst, list(bidx) + [i, k]),
                                  fg.load(dst, list(bidx) + [j, k]))
                    s = Scalar(b.load(acc_slot, typ=acc_slot.allocated_type), dt)
                    b.store(sg.add(s, prod).v, acc_slot)
                dot = Scalar(b.load(acc_slot, typ=acc_slot.allocated_type), dt)
                x = sg.sub(sg.cast(fg.load(src, list(bidx) + [i, j]), dt), dot)
                diagonal = b.icmp_signed("==", i, j)
                with b.if_else(diagonal) as (on_diagonal, below):
                    with on_diagonal:
                        bad = b.not_(sg.cmp(">", x, zero).v)      # (NaN too)
                        first = b.icmp_signed("==", b.load(failed, typ=I64), ir.Constant(I64, 0))
                        with b.if_then(b.and_(bad, first)):
                            b.store(b.add(i, ir.Constant(I64, 1)), failed)
                        fg.store(Scalar(sg.call("llvm.sqrt", x.v.type, x.v), dt), dst,
                                 list(bidx) + [i, i])
                    with below:
                        fg.store(sg.div(x, fg.load(dst, list(bidx) + [j, j])), dst,
                                 list(bidx) + [i, j])
        order = b.load(failed, typ=I64)
        with b.if_then(b.icmp_signed("!=", order, ir.Constant(I64, 0))):
            with loop_nest(b, [n, n], name="clear") as zidx:
                fg.store(zero, dst, list(bidx) + zidx)
        fg.store(sg.cast(Scalar(order, "int64"), info.type.dtype), dinfo, list(bidx))


register("linalg_cholesky_ex", "kernel", emit=_emit_cholesky, prepare=_prepare_hosted,
         check=_check_cholesky)
