"""Saved operands of a saved stack, read through the stack.

An unrolled recurrent layer stacks its steps' hidden states into its output, and the backward
reads each h_t apart (the weight gradient's per-step product) as well as the output (the next
layer's, or the head's, gradient). Saved one by one, every h_t is a result of the forward
graph, so it cannot be written into its block of the stack (codegen/schedule/concat.py: an
escaping operand keeps its own buffer) and the stack is a copy of all of them, in the forward
of every training step. Saved through the stack, the backward reads h_t as `select(stack,
t)`, a view of a value saved anyway: the same bytes, and the forward's stack is no copy.

A stack qualifies when it, or a view of it, is saved already (it then costs nothing more);
each of its operands that is saved and made by the forward is replaced by the view. The
backward's nodes that view such an operand get their types again (the select's offset)."""
from .geometry import contiguous_strides
from .graph import Node, Value
from .optable import OPS
from .shape_rules import infer_types


def _root(v):
    node = v.node
    while node is not None and node.view_of is not None and \
            getattr(OPS.get(node.op), "kind", None) == "view":
        v = node.view_of
        node = v.node
    return v


def _same_layout(x, node):
    """Whether x's view in node's result is typed as x is, but for its offset (the same
    dtype, dense strides): the backward's readers of x then read the view alike."""
    t, out = x.type, node.outputs[0].type
    return getattr(t, "dtype", None) == out.dtype and \
        tuple(t.strides) == tuple(contiguous_strides(t.shape))


def through_stacks(saved, fwd_nodes, free):
    """(saved without the operands read through their stack, with those stacks; {operand:
    (stack, dim, index)})."""
    saved_set = set(saved)
    roots = {_root(v) for v in saved if v not in free}
    views = {}
    for n in fwd_nodes:
        # (along dim 0 only: each operand's block is one contiguous run, so its view is
        # read as the operand was, and concat.py writes the block from any loop)
        if n.op != "stack" or n.outputs[0] not in roots or \
                n.attrs.get("dim", 0) % len(n.outputs[0].type.shape) != 0:
            continue
        for k, x in enumerate(n.inputs):
            if isinstance(x, Value) and x in saved_set and x not in free \
                    and x.node is not None and x not in views and _same_layout(x, n):
                views[x] = (n.outputs[0], n.attrs.get("dim", 0), k)
    if not views:
        return saved, {}
    out = [v for v in saved if v not in views]
    out += [s for s in dict.fromkeys(s for s, _, _ in views.values()) if s not in out]
    return out, views


def view_nodes(views, subst, loc_of):
    """The backward's select nodes for views (its values in subst: each operand's entry is
    set to its view)."""
    nodes = []
    for x, (s, dim, k) in views.items():
        src = subst[s]
        attrs = {"dim": dim, "index": k}
        (t,) = infer_types("select", [src.type], attrs)
        m = Node("select", [src], attrs, [], loc_of(x), src)
        m.outputs = [Value(t, m, 0)]
        subst[x] = m.outputs[0]
        nodes.append(m)
    return nodes


def out_types(old, new, views):
    """new's result types: old's, but a view's again from its inputs where views are read
    (a view of a select carries the select's offset)."""
    if views and getattr(OPS.get(new.op), "kind", None) == "view" and any(
            a is not b for a, b in zip(old.inputs, new.inputs) if isinstance(a, Value)):
        return infer_types(new.op, [x.type if isinstance(x, Value) else x
                                    for x in new.inputs], new.attrs)
    return [o.type for o in old.outputs]
