"""Concat elimination: the groups computing a `cat`'s (or `stack`'s) operands write straight
into their blocks of its result, and the copy is dropped.

A recurrent network's backward joins its per-step values: the four gate gradients of a step
along dim 1, then the 32 steps' along dim 0 for the weight gradient's GEMM (ir/gemm_sums.py);
each copy was a pass over memory. Here operand k's buffer is a *slice* of the result's
(Buffer role "slice": its parent, an element offset and, for a block that is not one
contiguous run, its strides there); the entry passes each group a pointer into the parent
(build._pointer), so a group's code is the same whichever dense slice it writes (dedupe.py
shares it; a slice's strides are part of the key), and every reader of a dense slice reads
it where it is, which holds the value the copy would have read.

A cat qualifies when every operand
  - is computed by a group of this plan before the cat (not a graph input, constant, view
    or loop stack), densely, in the result's dtype, non-empty, once in the cat;
  - does not escape (returned, guarded, a mutated input's final value, or the root of a
    view that does) and is the operand of no earlier eliminated cat;
  - where its block is strided in the result (a cat along a dim after a non-1 one), is
    stored by an elementwise loop or a cluster without reductions (they store through
    plan.store_strides; a reduction's loop order, and so its bits, would change with the
    layout) and is read by nothing but the cat (and, in a cluster, its own members, which
    read it from a register).
A cat's result may itself be a slice of a later cat's. Nothing else writes the result's
buffer, whose lifetime runs from the first operand's group to the last reader of it or of
any slice in it (plan._make_buffers), so a slice holds its operand's value as long as anything
reads it.

LLGRAD_CONCAT_ELIMINATION=0 (or ENABLED = False) turns it off."""
import math
import os

from ...ir.geometry import contiguous_strides
from ...ir.graph import StackType, Value
from .plan import root_of

ENABLED = os.environ.get("LLGRAD_CONCAT_ELIMINATION", "1") != "0"


def merge_concats(plan):
    """plan.groups without the cat/stack groups whose operands become slices of their
    results; plan.concats gets (result, [(operand, element offset, strides or None)]) for
    each, in group order (a cat's result may itself be an operand of a later one)."""
    plan.concats = []
    if not ENABLED:
        return plan.groups
    where = {grp: k for k, grp in enumerate(plan.groups)}
    made = {v: (where[grp], grp) for grp in plan.groups for v in grp.results}
    escaping = {root_of(v) for v in plan.escaping} | set(plan.escaping)
    claimed = set()
    dropped = set()
    for grp in plan.groups:
        node = grp.root
        if node is None or node.op not in ("cat", "stack") or grp.members != [node] \
                or len(grp.results) != 1 or grp.results[0] is not node.outputs[0]:
            continue
        blocks = _blocks(node)
        if blocks is None:
            continue
        pos = where[grp]
        ok = all(_operand_ok(plan, x, st, node, made, escaping, claimed, pos)
                 for x, _, st in blocks)
        if not ok or len({id(x) for x, _, _ in blocks}) != len(blocks):
            continue
        claimed.update(x for x, _, _ in blocks)
        plan.concats.append((node.outputs[0], blocks))
        dropped.add(grp)
    if not dropped:
        return plan.groups
    out = [grp for grp in plan.groups if grp not in dropped]
    for i, grp in enumerate(out):
        grp.index = i
    return out


def _blocks(node):
    """[(operand, element offset of its block in the result, the block's strides in the
    result or None where it is one contiguous run)]."""
    out = node.outputs[0]
    shape = tuple(out.type.shape)
    if not shape or not all(isinstance(x, Value) for x in node.inputs):
        return None
    dim = node.attrs["dim"] % len(shape)
    ostr = contiguous_strides(shape)
    strided = None if math.prod(shape[:dim]) == 1 else \
        (ostr[:dim] + ostr[dim + 1:] if node.op == "stack" else ostr)
    blocks, off = [], 0
    for k, x in enumerate(node.inputs):
        if node.op == "stack":
            blocks.append((x, k * ostr[dim], strided))
        else:
            if len(x.type.shape) != len(shape):
                return None
            blocks.append((x, off * ostr[dim], strided))
            off += x.type.shape[dim]
    return blocks


def _operand_ok(plan, x, strided, node, made, escaping, claimed, pos):
    t = x.type
    k, grp = made.get(x, (None, None))
    if k is None or k >= pos or root_of(x) is not x or isinstance(t, StackType) \
            or x.node is None or t.dtype != node.outputs[0].type.dtype or t.numel <= 0 \
            or tuple(t.strides) != tuple(contiguous_strides(t.shape)) \
            or x in escaping or x in claimed:
        return False
    if strided is None:
        return True
    # a block strided in the result: only loops that store through plan.store_strides
    # (no reduction among them: a loop order changed by the strides would change its
    # sums' bits), and nothing but the cat reads the operand
    if grp.loop == "cluster":
        # (readers inside the cluster take the value from its register, not the block)
        inside = set(grp.members)
        return not getattr(grp, "reductions", ()) and \
            all(c is node or c in inside for c in plan.consumers[x])
    return grp.loop == "elementwise" and grp.root.outputs[0] is x \
        and plan.consumers[x] == [node]
