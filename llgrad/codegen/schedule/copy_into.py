"""Copy elimination for products: a `clone` of a permuted view of a matrix product, the
product read by nothing else, becomes the product itself written through strided stores
into the copy's result (BLAS and gemm.py take any row stride for C, and batch indices are
addressed one by one), and the copy is dropped.

Where it comes from: attention's `(a @ v).transpose(1, 2).reshape(b, t, c)`, whose reshape
of the transposed view copies it to contiguous (eager and torch do the same copy); a pass
over the attention output that the product can do as it stores (the product's buffer is a
"slice" of the copy's result with strides, as a cat's operand is: concat.py, whose entries
in plan.concats it shares).

A clone qualifies when
  - its result is dense (contiguous strides, offset 0) and no cat's operand;
  - its operand is a view of a product's result x that only permutes x's dims (same
    offset, the same (extent, stride) pairs over the dims of extent > 1), with x's last dim
    its last (C's columns stay unit-stride);
  - x is the result of a group of this plan before the clone that holds the product alone
    (mm, bmm or a matmul of operands of rank >= 2, float32 or float64, non-empty, K > 0),
    dense, neither escaping nor a slice already, and every reader of x or of a view of it
    is a view or the clone.

LLGRAD_COPY_ELIMINATION=0 (or ENABLED = False) turns it off."""
import os

from ...ir.geometry import contiguous_strides
from ...ir.graph import Value
from ...ir.optable import OPS
from .plan import root_of

ENABLED = os.environ.get("LLGRAD_COPY_ELIMINATION", "1") != "0"
PRODUCTS = ("mm", "bmm", "matmul")


def merge_copies(plan):
    """plan.groups without the clone groups whose products now store into their results;
    plan.concats gets (result, [(product, 0, its strides in the result)]) for each."""
    if not ENABLED:
        return plan.groups
    plan.concats = getattr(plan, "concats", [])
    where = {grp: k for k, grp in enumerate(plan.groups)}
    made = {v: (where[grp], grp) for grp in plan.groups for v in grp.results}
    escaping = {root_of(v) for v in plan.escaping} | set(plan.escaping)
    taken = {x for _, blocks in plan.concats for x, _, _ in blocks}
    readers = {}
    for node in plan.nodes:
        for u in node.inputs:
            if isinstance(u, Value):
                readers.setdefault(root_of(u), []).append(node)
    dropped = set()
    for grp in plan.groups:
        node = grp.root
        if node is None or node.op != "clone" or grp.members != [node] \
                or len(grp.results) != 1 or grp.results[0] is not node.outputs[0]:
            continue
        out = node.outputs[0]
        x = _product_under(node, plan, made, where[grp], escaping, taken, readers)
        strides = _strides_in(node.inputs[0], x) if x is not None else None
        if strides is None or out in taken or out.type.offset != 0 or \
                tuple(out.type.strides) != tuple(contiguous_strides(out.type.shape)):
            continue
        taken.add(x)
        plan.concats.append((out, [(x, 0, strides)]))
        dropped.add(grp)
    if not dropped:
        return plan.groups
    kept = [grp for grp in plan.groups if grp not in dropped]
    for i, grp in enumerate(kept):
        grp.index = i
    return kept


def _product_under(node, plan, made, pos, escaping, taken, readers):
    """x when the clone's operand is a view of product x that qualifies, else None."""
    v = node.inputs[0]
    if not isinstance(v, Value) or v.node is None:
        return None
    x = root_of(v)
    k, grp = made.get(x, (None, None))
    p = x.node
    if k is None or k >= pos or x is v or p is None or p.op not in PRODUCTS or \
            grp.members != [p] or x in escaping or x in taken or x.type.numel <= 0 or \
            x.type.dtype not in ("float32", "float64") or \
            x.type.dtype != node.outputs[0].type.dtype or \
            tuple(x.type.strides) != tuple(contiguous_strides(x.type.shape)):
        return None
    ops = [u for u in p.inputs if isinstance(u, Value)]
    if len(ops) != 2 or any(len(u.type.shape) < 2 for u in ops) or ops[0].type.shape[-1] == 0:
        return None
    if any(r is not node and getattr(OPS.get(r.op), "kind", None) != "view"
           for r in readers.get(x, ())):
        return None
    return x


def _strides_in(v, x):
    """x's strides in a dense copy of v, when v only permutes x's dims; else None."""
    vt, xt = v.type, x.type
    if vt.offset != xt.offset or vt.numel != xt.numel:
        return None
    cs = contiguous_strides(vt.shape)
    at = {}                                 # x's stride -> the copy's, over dims > 1
    for n, s, c in zip(vt.shape, vt.strides, cs):
        if n > 1:
            if s in at:
                return None
            at[s] = (n, c)
    out = []
    for n, s in zip(xt.shape, xt.strides):
        if n == 1:
            out.append(0)
        elif at.get(s, (None,))[0] != n:
            return None
        else:
            out.append(at.pop(s)[1])
    if at or (xt.shape[-1] > 1 and out[-1] != 1):
        return None
    if xt.shape[-2] == 1 or xt.shape[-1] == 1:
        return None     # (BLAS wants ldc >= N for a row or a column: left as it was)
    return tuple(out)
