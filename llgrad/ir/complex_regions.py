"""Complex values in a graph native code computes: each connected run of ops on them becomes
one `complex_region` node (ops_complex.py), whose sub-Graph the interpreter runs on the
operands native code hands it (codegen/lowerings/complex_region.py), so the real ops around
it stay native code. An FNO layer's rfft2, complex products and irfft2, a rotary
embedding's view_as_complex, product and view_as_real, an STFT loss's stft and abs are each
one call back into NumPy, with eager's own implementations: the same numbers as eager.

A region holds every node with a complex operand or result, but for a view keeping its
dtype of a value no open region computes (native code reads it through its strides, as any
view), and every view of a value the region gives in another layout than the traced one
(relaid: a view's type is laid out in its base's memory). Its results are the values read
outside it, each written C-contiguous into a buffer of its own (a relaid one is read outside
by no view). Nodes join the region of their operands while nothing outside has read it
yet (a region is placed at its last node, so everything it reads is computed before it and
everything reading it after). Where a region would give a graph output, write-back or
guard in another layout than the traced one, or a returned view sharing memory the caller
sees otherwise (an input, another result), the graph stays as it is: the interpreter runs
it, with the backend's warning."""
import hashlib

from .geometry import contiguous_strides
from .graph import Graph, Node, TensorType, Value
from .optable import OPS
from .passes import _rebuild

OP = "complex_region"


def _complex(x):
    return isinstance(x, Value) and x.type.dtype.startswith("complex")


def _dense(t):
    return t.offset == 0 and tuple(t.strides) == tuple(contiguous_strides(t.shape))


def _joins(node, relaid, in_open):
    """Whether node belongs in a region: it touches a complex value (but for a view keeping
    its dtype of a value no open region computes: native code reads it through its
    strides), or is a view of a value a region gives in another layout than the traced one
    (relaid)."""
    op = OPS.get(node.op)
    view = op is not None and op.kind == "view" and node.view_of is not None
    if view and (node.view_of in relaid or node.view_of in in_open):
        return True
    if not any(_complex(x) for x in node.inputs) and not any(_complex(o) for o in node.outputs):
        return False
    return not view or any(o.type.dtype != node.view_of.type.dtype for o in node.outputs)


def complex_regions(graph):
    """graph with its complex ops gathered into complex_region nodes (a new Graph; graph
    itself when it has none, or when a region cannot give a value in the traced layout)."""
    if not any(_complex(v) for v in graph.inputs) and not any(
            _complex(o) for node in graph.nodes for o in node.outputs):
        return graph                # (every node touching a complex value defines or reads one)
    kept = set(graph.outputs) | set(graph.mutated.values()) | {g.value for g in graph.guards}
    region_of = {}                  # Value -> its region's id, for values regions compute
    relaid = set()                  # the values among those laid out as no result can be
    members, is_open = {}, {}       # region id -> [Node]; whether nothing outside read it
    placed = []                     # nodes and region ids in graph order
    for node in graph.nodes:
        if node.op == OP:
            return graph
        read = {region_of[x] for x in node.inputs if isinstance(x, Value) and x in region_of}
        in_open = {x for x in node.inputs[:1] if x in region_of and is_open[region_of[x]]} \
            if not any(o in kept for o in node.outputs) else ()     # (kept: a native view)
        if not _joins(node, relaid, in_open):
            for r in read:              # (read outside: nothing joins it from here on)
                is_open[r] = False
            placed.append(node)
            continue
        open_ = sorted(r for r in read if is_open[r])
        rid = open_[0] if open_ else len(placed)
        if not open_:
            members[rid], is_open[rid] = [], True
        for r in open_[1:]:             # (several open regions read: one region now)
            members[rid] += members.pop(r)
            placed = [rid if item == r and not isinstance(item, Node) else item
                      for item in placed]
            for n in members[rid]:
                for o in n.outputs:
                    region_of[o] = rid
            is_open.pop(r)
        members[rid].append(node)
        for o in node.outputs:
            region_of[o] = rid
            if not _dense(o.type):
                relaid.add(o)
        placed.append(rid)
    if not members:
        return graph
    order = {id(n): k for k, n in enumerate(graph.nodes)}
    for ns in members.values():
        ns.sort(key=lambda n: order[id(n)])
    return _rebuilt(graph, placed, members, region_of)


def _rebuilt(graph, placed, members, region_of):
    kept = set(graph.outputs) | set(graph.mutated.values()) | {g.value for g in graph.guards}
    read_outside = set(kept)            # the values a region gives: read by another node
    for item in placed:
        ns = [item] if isinstance(item, Node) else members[item]
        for n in ns:
            read_outside.update(x for x in n.inputs if isinstance(x, Value) and
                                region_of.get(x, -1) != (-2 if isinstance(item, Node)
                                                        else item))
    last = {item: k for k, item in enumerate(placed) if not isinstance(item, Node)}
    subst, nodes = {}, []
    for k, item in enumerate(placed):
        if isinstance(item, Node):
            nodes.append(item)
        elif last[item] == k:
            node, results = _region_node(graph.name, members[item], read_outside, kept,
                                         _sharing(graph))
            if node is None:
                return graph
            nodes.append(node)
            subst.update(zip(results, node.outputs))
    return _rebuild(graph, nodes, subst)


def _root(v):
    while v.node is not None and v.node.view_of is not None:
        v = v.node.view_of
    return v


def _sharing(graph):
    """{returned view: how many of the graph's inputs (written back or not) and returned
    values share its memory} (one that shares it with nothing else the caller sees may be
    a copy)."""
    roots = [_root(v) for v in graph.outputs]
    written = {_root(v) for v in graph.mutated.values()}    # (an input's memory, too)
    count = {r: roots.count(r) + (r.node is None or r in written) for r in roots}
    return {v: count[r] for v, r in zip(graph.outputs, roots) if v is not r}


def _region_node(name, ns, read_outside, kept, returned):
    """(The complex_region node computing ns, the values it gives) (None: a kept value it
    cannot lay out as traced)."""
    own = {o for n in ns for o in n.outputs}
    results = [o for n in ns for o in n.outputs if o in read_outside]
    types = []
    for v in results:
        t = v.type
        if v in kept and not _dense(t) or v in returned and returned[v] > 1:
            return None, None           # (eager's result shares memory the caller sees)
        types.append(TensorType(t.dtype, t.shape, contiguous_strides(t.shape)))
    operands, inner = [], {}
    for n in ns:
        for x in n.inputs:
            if isinstance(x, Value) and x not in own and x not in inner:
                operands.append(x)
                inner[x] = Value(x.type, None, len(operands) - 1, f"in{len(operands) - 1}")
    sub_nodes = []
    for n in ns:
        m = Node(n.op, [inner.get(x, x) if isinstance(x, Value) else x for x in n.inputs],
                 dict(n.attrs), [], n.loc,
                 inner.get(n.view_of, n.view_of) if n.view_of is not None else None)
        m.outputs = [Value(o.type, m, o.index, o.name) for o in n.outputs]
        inner.update(zip(n.outputs, m.outputs))
        sub_nodes.append(m)
    region = Graph(f"{name}_complex", [inner[x] for x in operands], sub_nodes,
                   [inner[v] for v in results], {}, [])
    # (digest: the region's text, which the code calling it back depends on: two regions'
    # calls are one function only where it is the same, codegen/schedule/dedupe.py)
    digest = hashlib.sha256(str(region).encode()).hexdigest()[:16]
    node = Node(OP, list(operands), {"region": region, "digest": digest}, [], ns[-1].loc)
    node.outputs = [Value(t, node, k, v.name) for k, (t, v) in enumerate(zip(types, results))]
    return node, results
