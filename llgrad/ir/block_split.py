"""Elementwise results read in blocks of their last dim, computed block by block: a node such
as an LSTM step's `gates = gx + h @ W_hh^T` (addmm, decomposed: ir/decompose.py), whose
readers are the slices of its four gate blocks (the fused cell's decomposition) and, perhaps,
the backward (gates is saved), becomes one node per block over the operands' slices, and
the whole value, where something still reads it, the `cat` of the blocks.

Why: as one (B, 4H) node it is a loop of its own (its readers read it through views, so it
cannot be inlined into them) that stores the gates and a second loop, the cell's, loads them
back. Per block, each (B, H) node is inlined into, or clustered with, the cell's loop
(codegen/schedule/cluster.py), and the cat's copy is dropped: each block is computed
straight into its place in the cat's result (codegen/schedule/concat.py). The same
elements are computed by the same operations, so results are bit for bit the same.

A node qualifies when it is a float add, sub or mul, its result is non-empty with 2+ dims,
every tensor operand has its shape (no broadcast) or is 1-D of its last dim (a bias), and
its readers include slices along the last dim (step 1) that cover the last dim with
disjoint blocks, each slice read by elementwise ops only; other readers get the cat."""
from .decompose import FLOATS, _Emitter
from .graph import Value
from .optable import OPS
from .passes import _rebuild

_OPS = ("add", "sub", "mul")


def _block_slices(graph):
    """{Value: [slice nodes]} of the values read through last-dim slices."""
    out = {}
    for n in graph.nodes:
        if n.op != "slice" or not isinstance(n.inputs[0], Value):
            continue
        x = n.inputs[0]
        rank = len(x.type.shape)
        if rank >= 2 and n.attrs.get("dim") % rank == rank - 1 and n.attrs.get("step", 1) == 1:
            out.setdefault(x, []).append(n)
    return out


def _blocks(x, slices):
    """[(start, end)] disjoint blocks covering x's last dim, or None."""
    last = x.type.shape[-1]
    spans = sorted({(max(0, s.attrs["start"]), min(last, s.attrs["end"])) for s in slices})
    pos = 0
    for a, b in spans:
        if a != pos or b <= a:
            return None
        pos = b
    return spans if pos == last and len(spans) >= 2 else None


def _qualifies(node, x):
    op = OPS.get(node.op)
    shape = tuple(x.type.shape)
    if op is None or op.kind != "elementwise" or op.decompose is not None or \
            node.op not in _OPS or len(node.outputs) != 1 or x.type.numel <= 0 or \
            x.type.dtype not in FLOATS:
        return False
    for a in node.inputs:
        if isinstance(a, Value) and tuple(a.type.shape) != shape and \
                tuple(a.type.shape) != shape[-1:]:
            return False
        if isinstance(a, Value) and a.type.dtype != x.type.dtype:
            return False
    return True


def _elementwise_readers(v, readers, graph):
    """Whether v is read, and only by elementwise ops (reading it directly): then its block's
    node joins their loop. (A block read through a view, as attention's q, k, v chunks, would
    be a loop of its own, and the whole value's cat a copy: nothing gained.)"""
    rs = readers.get(v, [])
    return bool(rs) and v not in graph.outputs and all(
        r.op in OPS and OPS[r.op].kind == "elementwise" for r in rs)


def split_blocks(graph):
    """graph with each qualifying elementwise node computed per last-dim block (a new Graph;
    graph itself when nothing qualifies)."""
    sliced = _block_slices(graph)
    if not sliced:
        return graph
    readers = {}
    for n in graph.nodes:
        for v in n.inputs:
            if isinstance(v, Value):
                readers.setdefault(v, []).append(n)
    todo = {}
    for x, slices in sliced.items():
        if x.node is None or x.node.view_of is not None or not _qualifies(x.node, x) or \
                not all(_elementwise_readers(s.outputs[0], readers, graph) for s in slices):
            continue
        spans = _blocks(x, slices)
        if spans is not None:
            todo[x.node] = (x, slices, spans)
    if not todo:
        return graph
    nodes, subst = [], {}
    blocks = {}             # (Value, start, end) -> its block's node result
    pending = {}            # Value -> (its blocks, loc): the cat, made before its first reader
    split_slices = {s for _, slices, _ in todo.values() for s in slices}

    def flush(xs):
        for x in xs:
            parts, loc = pending.pop(x)
            subst[x] = _Emitter(nodes, loc)("cat", parts, dim=len(x.type.shape) - 1)
    for n in graph.nodes:
        if n not in todo:
            if n not in split_slices:
                reads = [x for x in n.inputs + [n.view_of] if isinstance(x, Value)]
                flush([x for x in dict.fromkeys(reads) if x in pending])
            nodes.append(n)
            continue
        x, slices, spans = todo[n]
        emit = _Emitter(nodes, n.loc)
        parts = []
        for a, b in spans:
            ins = [emit("slice", [v], dim=len(v.type.shape) - 1, start=a, end=b, step=1)
                   if isinstance(v, Value) else v for v in n.inputs]
            parts.append(emit(n.op, ins, **n.attrs))
            blocks[x, a, b] = parts[-1]
        for s in slices:
            a, b = max(0, s.attrs["start"]), min(x.type.shape[-1], s.attrs["end"])
            subst[s.outputs[0]] = blocks[x, a, b]
        # every other reader, the backward's saved value included, reads the cat (dce
        # drops it when nothing does), made where the first such reader is: made here, it
        # would read the blocks' loop before the cell's joins it (and so split the two)
        pending[x] = (parts, n.loc)
    flush(list(pending))
    # (the split nodes and their slices are left out: _rebuild would map their results
    # to copies of themselves, over the replacements)
    nodes = [m for m in nodes if not (m.op == "slice" and m.outputs[0] in subst)]
    return _rebuild(graph, nodes, subst)
