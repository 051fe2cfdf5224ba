"""Native kernels for eager elementwise ops, free of shapes: `void k(out, x, n)` computes
op(x[i]) for i < n on contiguous memory, from the same lowering compiled code uses.

Why: NumPy has no erf, sigmoid or GELU of its own, so the eager implementations of those ops
(and of leaky_relu, elu, softplus, ...) are ten passes or a branchy np.where over the array:
15-30x torch's eager kernels. One loop per (op, attributes, dtype), written once, serves every
shape: the op as its lowering emits it (its decomposition into primitive ops where it has
one), vectorised by LLVM for the host, cached on disk like every kernel (a warm process loads
it without LLVM). The op table says which ops run so (`eager_native`); runtime/dispatch.py
calls them through the hook compile/eager_native.py installs."""
from llvmlite import ir

from ..ir.builder import Builder
from ..ir.decompose import expand_composites
from ..ir.graph import TensorType, Value
from ..ir.printer import print_graph
# (their imports register the elementwise lowerings, all an eager kernel is made of: not
# codegen.build's every lowering, a third of the import time)
from .lowerings import ops_activations, ops_elementwise, ops_special, ops_tensor  # noqa: F401
from .lowerings import ops_copy, ops_select  # noqa: F401  (clamps, where; copies, fills)
from .lowerings.fusion import Expr
from .lowerings.scalar import I64, PTR, ScalarGen
from .lowerings.table import LOWERINGS
from .eager_cache import ENTRY, op_key
from .native import jit, keys


def graph_of(op_name, dtype, scalars, attrs):
    """The IR graph of op on one float tensor x (shape (1,): elementwise code never reads the
    shape) and Python scalars; None where the shape rule refuses it or the result's dtype is
    not x's."""
    b = Builder(f"eager_{op_name}")
    x = b.input(TensorType(dtype, (1,)), "x")
    try:
        y = b.add(op_name, [x, *scalars], attrs)
    except Exception:       # (the shape rule refuses these operands: NumPy's impl decides)
        return None
    if not isinstance(y, Value) or y.type.dtype != dtype:
        return None
    return b.ret(y)


def lowerable(graph, dtype):
    """graph decomposed into primitives, when it is one elementwise loop: float inputs and
    one output of dtype and one shape, every node with an elementwise lowering that takes
    it; else None."""
    shape = graph.inputs[0].type.shape if graph.inputs else None
    if len(graph.outputs) != 1 or not isinstance(graph.outputs[0], Value) or graph.guards \
            or graph.mutated:
        return None
    for v in list(graph.inputs) + list(graph.outputs):
        if v.type.dtype != dtype or tuple(v.type.shape) != tuple(shape):
            return None
    g = expand_composites(graph)
    for node in g.nodes:
        low = LOWERINGS.get(node.op)
        if low is None or low.form != "elementwise" or (low.check and low.check(node)):
            return None
        if any(tuple(o.type.shape) != tuple(shape) for o in node.outputs):
            return None
    return g


class _Loop:
    """What fusion.Expr reads leaves through: input k's element i from its pointer."""

    def __init__(self, sg, dtype):
        self.sg, self.dtype = sg, dtype

    def load(self, ptr, idx):
        b = self.sg.b
        return self.sg.load(b.gep(ptr, [idx], inbounds=True, source_etype=_mem(self.dtype)),
                            self.dtype)


def _mem(dtype):
    return ir.FloatType() if dtype == "float32" else ir.DoubleType()


def module_of(graph, dtype):
    """The llvmlite module of graph's loop: void eager_kernel(ptr out, ptr in0, ..., i64 n),
    out[i] = graph(in0[i], ...) for i < n."""
    mod = jit.new_module(graph.name)
    k = len(graph.inputs)
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR] * (k + 1) + [I64]), ENTRY)
    out, ins, n = fn.args[0], fn.args[1:k + 1], fn.args[k + 1]
    out.add_attribute("noalias")        # (a fresh output: the vectoriser needs no checks)
    for p in ins:
        p.add_attribute("noalias")
    entry, body, done = (fn.append_basic_block(s) for s in ("entry", "body", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", n, ir.Constant(I64, 0)), body, done)
    b.position_at_end(body)
    i = b.phi(I64, "i")
    i.add_incoming(ir.Constant(I64, 0), entry)
    sg = ScalarGen(mod, b)
    loop = _Loop(sg, dtype)
    accesses = dict(zip(graph.inputs, ins))
    y = graph.outputs[0]
    r = loop.load(accesses[y], i) if y in accesses else \
        sg.cast(Expr(loop, graph.nodes, accesses, i).value(y), dtype)
    sg.store(r, b.gep(out, [i], inbounds=True, source_etype=_mem(dtype)))
    nxt = b.add(i, ir.Constant(I64, 1))
    i.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, n), body, done)
    b.position_at_end(done)
    b.ret_void()
    return mod


def build_graph(graph, dtype, key=None):
    """The address of graph's loop (a jit.CodeAddress: it keeps the code loaded), from
    memory, the disk cache (under key, else the key of its IR text) or LLVM; None where
    graph is not one elementwise loop."""
    g = lowerable(graph, dtype)
    if g is None:
        return None
    key = key or keys.key_for(print_graph(g), "eager-elementwise-1d")
    compiled = jit.lookup(key, ENTRY)
    if compiled is None:
        compiled = jit.compile_module(module_of(g, dtype), [ENTRY], key=key)
    return compiled.address(ENTRY)


def build(op_name, dtype, scalars=(), attrs=None):
    """The address of op's eager kernel for dtype (see build_graph), or None; stored under
    eager_cache.op_key, where a warm process finds it without this module
    (eager_cache.op_kernel)."""
    g = graph_of(op_name, dtype, scalars, attrs or {})
    return None if g is None else build_graph(g, dtype, op_key(op_name, dtype, scalars, attrs))
