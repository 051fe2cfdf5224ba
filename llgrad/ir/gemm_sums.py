"""A sum of matrix products that share their inner dimension's role, sum_i a_i^T @ b_i, as
one product of stacked operands: cat(a)^T @ cat(b).

Where it comes from: a weight used at every step of an unrolled loop (a recurrent layer's
W_hh, a weight shared across positions) gets its gradient as one small product per step,
h_{t-1}^T @ dgates_t, with K = the batch (32 rows), added up. Products with so small a K
run at a fraction of the GEMM rate (the LSTM benchmark's per-step products: ~38 GFLOP/s of
~100); stacked, K is the batch times the steps. The sum is the same sum of the same
products, added in another order (as any GEMM orders its K loop).

The rewrite applies to a tree of `add` nodes (alpha 1, each result used once, by the next
add) whose leaves are `mm(t(a_i), b_i)` (each used once), all of one dtype and shape, with
2-D a_i (k x m) and b_i (k x n). Leaves are stacked in chunks of at most MAX_ROWS rows, so
the operands kept alive for the stacked product stay bounded; the chunks' products are
added in the tree's order."""
from .add_trees import MIXED, chosen_roots, same_key, summaries
from .graph import Node, Value
from .passes import _rebuild
from .shape_rules import infer_types

MIN_TERMS = 3           # fewer products: nothing to gain
MAX_ROWS = 2048         # rows of the stacked operands per product


def _emit(nodes, op, inputs, loc, **attrs):
    types = infer_types(op, [x.type if isinstance(x, Value) else x for x in inputs], attrs)
    view_of = inputs[0] if op in ("t", "view") else None
    node = Node(op, list(inputs), attrs, [], loc, view_of)
    node.outputs = [Value(t, node, i) for i, t in enumerate(types)]
    nodes.append(node)
    return node.outputs[0]


def _uses(graph):
    count = {}
    for n in graph.nodes:
        for x in set(x for x in n.inputs if isinstance(x, Value)):
            count[x] = count.get(x, 0) + 1
        if n.view_of is not None and n.view_of not in n.inputs:
            count[n.view_of] = count.get(n.view_of, 0) + 1
    for v in list(graph.outputs) + list(graph.mutated.values()) + [g.value for g in graph.guards]:
        count[v] = count.get(v, 0) + 2          # (an escaping value is never folded away)
    return count


def _product(v, uses):
    """(a, b) when v = mm(t(a), b) with 2-D a and b, v used once; else None."""
    n = v.node
    if n is None or n.op != "mm" or uses.get(v) != 1:
        return None
    left, right = n.inputs
    ln = left.node if isinstance(left, Value) else None
    if ln is None or ln.op != "t" or len(ln.inputs[0].type.shape) != 2:
        return None
    return ln.inputs[0], right


def _leaves(root, uses):
    """The product leaves of the add tree under root (left to right), or None."""
    leaves, stack = [], [root]
    while stack:
        v = stack.pop()
        n = v.node
        if n is not None and n.op == "add" and n.attrs.get("alpha", 1) == 1 and \
                (v is root or uses.get(v) == 1) and all(isinstance(x, Value) for x in n.inputs):
            stack.extend(reversed(n.inputs))
            continue
        p = _product(v, uses)
        if p is None:
            return None
        leaves.append((v, p))
    return leaves


def _joins(n):
    """Whether add node n is a node of a sum's tree (add_trees.py)."""
    return n.attrs.get("alpha", 1) == 1 and all(isinstance(x, Value) for x in n.inputs)


def _leaf(x, uses):
    """(products, other leaves, the products' shapes and dtypes) of operand x as a leaf."""
    p = _product(x, uses)
    if p is None:
        return 0, 1, None
    a, b = p
    return 1, 0, (a.type.shape, b.type.shape, a.type.dtype, b.type.dtype, x.type.dtype)


def _combine(parts):
    return sum(p[0] for p in parts), sum(p[1] for p in parts), same_key([p[2] for p in parts])


def _takes(summary):
    """Whether a subtree is a sum of MIN_TERMS or more products of one shape and dtype."""
    n, others, key = summary
    return not others and n >= MIN_TERMS and key is not MIXED


def _stacks(graph):
    """{the set of its operands: their order} of each stack along dim 0 of distinct values.
    A recurrent layer's backward stacks its per-step gate gradients (the input weight's
    product) that are also the b_i of its recurrent weight's sum: stacked in that order, the
    two read one stack (cse merges the copies) and concat elimination writes each step's
    gradient into it (codegen/schedule/concat.py), where two orders made two copies."""
    found = {}
    for n in graph.nodes:
        if n.op == "stack" and n.attrs.get("dim", 0) == 0 and \
                all(isinstance(x, Value) for x in n.inputs) and \
                len(set(n.inputs)) == len(n.inputs):
            found.setdefault(frozenset(n.inputs), tuple(n.inputs))
    return found


def merge_product_sums(graph):
    """graph with each qualifying sum of products as stacked products (a new Graph; graph
    itself when there is none)."""
    uses = _uses(graph)
    summary, parent = summaries(graph, uses, _joins, lambda x: _leaf(x, uses), _combine)
    plans = {n: _leaves(n.outputs[0], uses)     # (each a sum of uniform products: _takes)
             for n in chosen_roots(graph, summary, parent, lambda m: _takes(summary[m]),
                                   lambda s: s[0] >= MIN_TERMS)}
    if not plans:
        return graph
    stacks = _stacks(graph)
    nodes, subst = [], {}
    for n in graph.nodes:
        leaves = plans.get(n)
        if leaves is None:
            nodes.append(n)
            continue
        k = leaves[0][1][0].type.shape[0]
        per_chunk = max(1, MAX_ROWS // max(k, 1))
        stacked = stacks.get(frozenset(b for _, (_, b) in leaves)) \
            if len(leaves) <= per_chunk else None
        if stacked is not None and len(stacked) != len(leaves):
            stacked = None          # (products sharing a b: the stack has fewer rows)
        if stacked is not None:     # (its order: the stack, and this product, read one copy)
            order = {b: i for i, b in enumerate(stacked)}
            leaves = sorted(leaves, key=lambda leaf: order[leaf[1][1]])
        total = None
        for start in range(0, len(leaves), per_chunk):
            chunk = leaves[start:start + per_chunk]
            if len(chunk) == 1:
                a, b = chunk[0][1]
                part = _emit(nodes, "mm", [_emit(nodes, "t", [a], n.loc), b], n.loc)
            else:
                a = _emit(nodes, "cat", [a for _, (a, _) in chunk], n.loc, dim=0)
                if stacked is not None:
                    b = _emit(nodes, "stack", list(stacked), n.loc, dim=0)
                    b = _emit(nodes, "view", [b], n.loc, shape=(k * len(chunk),
                                                                b.type.shape[-1]))
                else:
                    b = _emit(nodes, "cat", [b for _, (_, b) in chunk], n.loc, dim=0)
                part = _emit(nodes, "mm", [_emit(nodes, "t", [a], n.loc), b], n.loc)
            total = part if total is None else _emit(nodes, "add", [total, part], n.loc,
                                                     alpha=1)
        subst[n.outputs[0]] = total
    return _rebuild(graph, nodes, subst)
