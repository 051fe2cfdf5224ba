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
from .build import PASSES  # noqa: F401  (registers every lowering)
from .lowerings.fusion import Expr
from .lowerings.scalar import I64, PTR, ScalarGen
from .lowerings.table import LOWERINGS
from .native import jit, keys

ENTRY = "eager_kernel"


def graph_of(op_name, dtype, scalars, attrs):
    """The IR graph of op on one float tensor x (shape (1,): elementwise code never reads the
    shape) and Python scalars, decomposed into primitives; None where some node has no
    elementwise lowering or its lowering declines it, or the result's dtype is not x's."""
    b = Builder(f"eager_{op_name}")
    x = b.input(TensorType(dtype, (1,)), "x")
    try:
        y = b.add(op_name, [x, *scalars], attrs)
    except Exception:       # (the shape rule refuses these operands: NumPy's impl decides)
        return None
    if not isinstance(y, Value) or y.type.dtype != dtype:
        return None
    g = expand_composites(b.ret(y))
    for node in g.nodes:
        low = LOWERINGS.get(node.op)
        if low is None or low.form != "elementwise" or (low.check and low.check(node)):
            return None
    return g


class _Loop:
    """What fusion.Expr reads leaves through: x[i] from the kernel's input pointer."""

    def __init__(self, sg, x_ptr, dtype):
        self.sg, self.x_ptr, self.dtype = sg, x_ptr, dtype

    def load(self, access, idx):
        b = self.sg.b
        ptr = b.gep(self.x_ptr, [idx], inbounds=True, source_etype=_mem(self.dtype))
        return self.sg.load(ptr, self.dtype)


def _mem(dtype):
    return ir.FloatType() if dtype == "float32" else ir.DoubleType()


def module_of(graph, dtype):
    """The llvmlite module of graph's loop: void eager_kernel(ptr out, ptr x, i64 n)."""
    mod = jit.new_module(graph.name)
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64]), ENTRY)
    out, xp, n = fn.args
    for p in (out, xp):
        p.add_attribute("noalias")      # (a fresh output: the vectoriser needs no checks)
    entry, body, done = (fn.append_basic_block(s) for s in ("entry", "body", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", n, ir.Constant(I64, 0)), body, done)
    b.position_at_end(body)
    i = b.phi(I64, "i")
    i.add_incoming(ir.Constant(I64, 0), entry)
    sg = ScalarGen(mod, b)
    loop = _Loop(sg, xp, dtype)
    x = graph.inputs[0]
    expr = Expr(loop, graph.nodes, {x: None}, i)
    y = graph.outputs[0]
    r = sg.cast(expr.value(y), dtype) if y is not x else loop.load(None, i)
    sg.store(r, b.gep(out, [i], inbounds=True, source_etype=_mem(dtype)))
    nxt = b.add(i, ir.Constant(I64, 1))
    i.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, n), body, done)
    b.position_at_end(done)
    b.ret_void()
    return mod


def build(op_name, dtype, scalars=(), attrs=None):
    """The address of op's eager kernel for dtype (a jit.CodeAddress: it keeps the code
    loaded), from memory, the disk cache or LLVM; None where the op has no such kernel."""
    g = graph_of(op_name, dtype, scalars, attrs or {})
    if g is None:
        return None
    key = keys.key_for(print_graph(g), "eager-elementwise-1d")
    compiled = jit.lookup(key, ENTRY)
    if compiled is None:
        compiled = jit.compile_module(module_of(g, dtype), [ENTRY], key=key)
    return compiled.address(ENTRY)
