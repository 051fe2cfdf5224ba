"""Copies of values nothing else reads: clone(x), where x is computed in the graph (not an
input, not a view), read by the clone alone, and laid out as the copy would be, holds x's
values in x's layout; its readers read x itself.

Where it comes from: a matmul's backward flattens its gradient with reshape, which copies
when the trace saw it non-contiguous (the sum of Slot Attention's key gradients over the
iterations, read transposed until products_untransposed made it row-major): the copy then
moved 4 MB of float32 into a second buffer on every step, for each of keys and values."""
from .graph import Value
from .passes import _rebuild, dce
from .transposed_copies import uses


def clones_dropped(graph):
    """graph with each such clone's result replaced by its operand (a new Graph; graph
    itself when there is none). A clone whose result the graph returns, writes back or
    guards is kept (the caller's buffer is a copy), and so is one of a value something
    else reads or views (a later in-place write to either must not reach the other)."""
    readers, views, kept = uses(graph)
    subst = {}
    for n in graph.nodes:
        if n.op != "clone" or len(n.outputs) != 1 or not n.inputs:
            continue
        x, out = n.inputs[0], n.outputs[0]
        if not isinstance(x, Value) or x.node is None or x.node.view_of is not None or \
                x.type != out.type or readers.get(x) != 1 or views.get(x) or x in kept or \
                out in kept or getattr(out.type, "offset", 0) != 0:
            continue
        subst[out] = x
    if not subst:
        return graph
    nodes = [n for n in graph.nodes if not (n.outputs and n.outputs[0] in subst)]
    return dce(_rebuild(graph, nodes, subst))
