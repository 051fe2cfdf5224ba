"""Native kernels for eager ops over rows of gate blocks (the fused LSTM and GRU cells and
their backwards): `void k(out_0, ..., in_0, ..., i64 rows, i64 H, i64 step_0, ...)`, every
operand `rows` rows of w blocks of H contiguous elements (gates (..., 4H) beside states
(..., H)), input k's rows step_k elements apart (w_k * H when it is C-contiguous; more for a
time step of a batch-first sequence's projection), the results' rows packed; one loop over
the rows and in it one loop over the H columns of every block at once.

Why: the cells' NumPy implementations are fifteen to twenty passes over the step's arrays
(a quarter of an eager LSTM step); torch runs one kernel. The loop body is the op's own
decomposition (ir/decompose.py: slices of the gate blocks, sigmoid, tanh, mul, add, cat),
emitted by the compiled path's elementwise lowerings through fusion.Expr, so eager and
compiled code compute each element by the same instructions (the same bits). H is an argument: one kernel
per (op, dtype, block widths) serves every hidden size and batch, cached on disk like
every kernel. The op table says which ops run so (`eager_rows`); compile/eager_native.py
calls them.

How: the op's graph is made at probe sizes (_ROWS rows, blocks of _H) and decomposed; its
nodes must be slices of whole blocks of an input on the last dim (the loop's leaves: block
j of input k is `in_k + row * step_k + j * H`), elementwise nodes with a lowering on
(rows, H) operands, and cats of such values on the last dim that are results (block j of
the result is part j). Anything else is refused (None: NumPy's implementation runs)."""
from llvmlite import ir

from ..ir.decompose import expand_composites
from ..ir.graph import Value
from .eager_cache import ENTRY, H as _H, ROWS as _ROWS, rows_graph, rows_key
from .eager_kernels import _Loop, _mem   # (it imports codegen.build: the lowerings)
from .lowerings.fusion import Expr
from .lowerings.scalar import I64, PTR, ScalarGen
from .lowerings.table import LOWERINGS
from .native import jit

graph_of = rows_graph      # (the probe sizes, _ROWS x _H blocks: eager_cache.py)


class Plan:
    """A decomposed graph as one loop over rows: `leaves` (Value -> (input, block)),
    `members` (the elementwise nodes), `outputs` (per result, the Values of its blocks)."""

    def __init__(self, graph, leaves, members, outputs, widths):
        self.graph, self.leaves, self.members = graph, leaves, members
        self.outputs, self.widths = outputs, widths

    @property
    def out_widths(self):
        return tuple(len(parts) for parts in self.outputs)


def plan_of(graph, dtype):
    """graph (from graph_of) decomposed as one loop over rows (see the module), or None."""
    block = (_ROWS, _H)
    widths = []
    for v in graph.inputs:
        shape = tuple(v.type.shape)
        if v.type.dtype != dtype or len(shape) != 2 or shape[0] != _ROWS or shape[1] % _H:
            return None
        widths.append(shape[1] // _H)
    if graph.guards or graph.mutated or not graph.outputs:
        return None
    g = expand_composites(graph)
    index = {v: k for k, v in enumerate(g.inputs)}
    leaves = {v: (k, 0) for v, k in index.items() if widths[k] == 1}
    made, members, cats = set(), set(), {}
    for node in g.nodes:
        outs = node.outputs
        if node.op == "slice":
            x, a = node.inputs[0], node.attrs
            if x not in index or a.get("dim") not in (1, -1) or a.get("step") != 1 \
                    or a.get("start", 0) % _H or a.get("end") != a.get("start", 0) + _H:
                return None
            leaves[outs[0]] = (index[x], a["start"] // _H)
            continue
        if node.op == "cat":
            parts = node.inputs
            if node.attrs.get("dim") not in (1, -1) or \
                    any(not isinstance(p, Value) or tuple(p.type.shape) != block for p in parts):
                return None
            cats[outs[0]] = list(parts)
            continue
        low = LOWERINGS.get(node.op)
        if low is None or low.form != "elementwise" or (low.check and low.check(node)):
            return None
        for x in node.inputs:
            if isinstance(x, Value) and (tuple(x.type.shape) != block or
                                         (x not in leaves and x not in made)):
                return None
        if any(tuple(o.type.shape) != block for o in outs):
            return None
        members.add(node)
        made.update(outs)
    for node in g.nodes:            # (a cat is a result only: nothing reads it)
        if any(isinstance(x, Value) and x in cats for x in node.inputs):
            return None
    outputs = []
    for y in g.outputs:
        parts = cats.get(y, [y])
        if not isinstance(y, Value) or y.type.dtype != dtype or \
                any(p not in leaves and p not in made for p in parts):
            return None
        outputs.append(parts)
    return Plan(g, leaves, members, outputs, tuple(widths))


def module_of(plan, dtype):
    """The llvmlite module of plan's loop: void eager_kernel(ptr out_0, ..., ptr in_0, ...,
    i64 rows, i64 H, i64 step_0, ...) (step_k: between input k's rows, in elements)."""
    mod = jit.new_module(plan.graph.name)
    nout, nin = len(plan.outputs), len(plan.widths)
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR] * (nout + nin) +
                                          [I64] * (2 + nin)), ENTRY)
    outs, ins = fn.args[:nout], fn.args[nout:nout + nin]
    rows, h = fn.args[nout + nin:nout + nin + 2]
    steps = fn.args[nout + nin + 2:]
    for p in fn.args[:nout + nin]:
        p.add_attribute("noalias")      # (fresh outputs: the vectoriser needs no checks)
    entry, row, body, row_end, done = (fn.append_basic_block(s) for s in
                                       ("entry", "row", "body", "row_end", "done"))
    b = ir.IRBuilder(entry)
    zero, one = ir.Constant(I64, 0), ir.Constant(I64, 1)
    b.cbranch(b.and_(b.icmp_signed(">", rows, zero), b.icmp_signed(">", h, zero)), row, done)
    b.position_at_end(row)
    r = b.phi(I64, "r")
    r.add_incoming(zero, entry)
    rh = b.mul(r, h)
    et = _mem(dtype)

    def block(base, row, j):            # block j of the row at element `row` of base
        off = b.add(row, b.mul(h, ir.Constant(I64, j)))
        return b.gep(base, [off], inbounds=True, source_etype=et)

    starts = [b.mul(r, st) for st in steps]
    accesses = {v: block(ins[k], starts[k], j) for v, (k, j) in plan.leaves.items()}
    stores = [(p, block(outs[m], b.mul(rh, ir.Constant(I64, len(parts))), j))
              for m, parts in enumerate(plan.outputs) for j, p in enumerate(parts)]
    b.branch(body)
    b.position_at_end(body)
    c = b.phi(I64, "c")
    c.add_incoming(zero, row)
    sg = ScalarGen(mod, b)
    loop = _Loop(sg, dtype)
    e = Expr(loop, plan.members, accesses, c)
    values = [sg.cast(e.value(p), dtype) for p, _ in stores]   # (every load before a store)
    for s, (_, ptr) in zip(values, stores):
        sg.store(s, b.gep(ptr, [c], inbounds=True, source_etype=et))
    c1 = b.add(c, one)
    c.add_incoming(c1, b.block)
    b.cbranch(b.icmp_signed("<", c1, h), body, row_end)
    b.position_at_end(row_end)
    r1 = b.add(r, one)
    r.add_incoming(r1, row_end)
    b.cbranch(b.icmp_signed("<", r1, rows), row, done)
    b.position_at_end(done)
    b.ret_void()
    return mod


def build(op_name, graph, dtype, widths, attrs=None):
    """(address, result widths) of the row kernel of graph (eager_cache.rows_graph of op for
    dtype and input block widths; the address a jit.CodeAddress: it keeps the code loaded),
    from memory, the disk cache (under eager_cache.rows_key, where a warm process finds it
    without this module: eager_cache.rows_kernel) or LLVM; None where the op is not one loop
    over rows."""
    plan = plan_of(graph, dtype)
    if plan is None:
        return None
    key = rows_key(op_name, dtype, widths, attrs)
    compiled = jit.lookup(key, ENTRY)
    if compiled is None:
        compiled = jit.compile_module(module_of(plan, dtype), [ENTRY], key=key)
    return compiled.address(ENTRY), plan.out_widths
