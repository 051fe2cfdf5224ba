"""Trees of `add` nodes as the sum-rewriting passes read them (gemm_sums.py, scatter_sums.py):
an add is a tree node when `joins(node)` holds (alpha 1, tensor operands, ...); an operand
that is the result of a tree node used only there is that node's subtree, any other operand
is a leaf. Each pass rewrites the largest subtrees whose leaves all qualify.

Both are found in one pass over the graph: each node's summary of its subtree's leaves
(counts, a shared key) is combined from its operands', and the subtrees are chosen from each
tree's top downwards, every node looked at once. Walking the leaves of every add as a
root of its own was quadratic in a chain of single-use adds (a gradient summed over 4,000
loop steps: 5 s in gemm_sums, 12 s in scatter_sums)."""
from .graph import Value

MIXED = object()        # the key of leaves that do not all share one


def same_key(keys):
    """The key all of keys but None (a leaf of no kind: the pass counts those) are, None if
    there is none, or MIXED."""
    found = None
    for k in keys:
        if k is MIXED:
            return MIXED
        if k is not None:
            if found is None:
                found = k
            elif k != found:
                return MIXED
    return found


def summaries(graph, uses, joins, leaf, combine):
    """({tree node: combine([its operands' summaries])}, {tree node: the tree node whose
    operand it is}). An operand's summary is its node's own when that is a tree node whose
    result is used once (there), else leaf(operand)."""
    summary, parent = {}, {}
    for n in graph.nodes:
        if n.op != "add" or not joins(n):
            continue
        parts = []
        for x in n.inputs:
            m = x.node if isinstance(x, Value) else None
            if m is not None and m in summary and uses.get(x) == 1:
                parent[m] = n
                parts.append(summary[m])
            else:
                parts.append(leaf(x))
        summary[n] = combine(parts)
    return summary, parent


def chosen_roots(graph, summary, parent, take, descend):
    """The tree nodes whose subtrees are rewritten, latest first: from the top of each tree
    (a tree node with no parent) down, each node m that `take(m)`s (not looked below), and
    below a node that does not take, its subtrees when `descend(summary[m])` (whether one
    of them may take). Disjoint subtrees, each node looked at once."""
    out = []
    for n in reversed(graph.nodes):
        if n not in summary or n in parent:
            continue
        stack = [n]
        while stack:
            m = stack.pop()
            if take(m):
                out.append(m)
            elif descend(summary[m]):
                for x in dict.fromkeys(m.inputs):
                    if isinstance(x, Value) and x.node is not None and parent.get(x.node) is m:
                        stack.append(x.node)
    return out
