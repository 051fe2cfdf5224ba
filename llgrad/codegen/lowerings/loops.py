"""Loops and strided addressing over llvmlite's IRBuilder.

`for_range` and `loop_nest` are context managers that build counted loops; `Access`
describes how one buffer is read or written over an iteration space (element strides per
loop dimension, 0 for broadcast dims, and an element offset from the buffer's pointer);
`normalize` orders and coalesces an iteration space so that the innermost loop is the
longest unit-stride run (what LLVM's vectoriser wants). `FuncGen` is one internal
function of the module with one `noalias` pointer parameter per buffer it touches."""
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from llvmlite import ir

from ..native.jit import jit
from .scalar import I64, PTR, ScalarGen, mem_type


def _i64(x):
    return ir.Constant(I64, x) if isinstance(x, int) else x


def loop_hints(module, **hints):
    """Loop metadata (`llvm.loop.<name>` = value), e.g. loop_hints(m, vectorize_width=8)."""
    ops = [module.add_metadata([ir.MetaDataString(module, "llvm.loop." + k.replace("_", ".")),
                                ir.Constant(ir.IntType(32), int(v))])
           for k, v in hints.items()]
    md = ir.values.MDValue(module, ops, name=str(len(module.metadata)))
    md.operands = (md,) + tuple(ops)      # a loop ID refers to itself
    return md


def float32_sum_hints(module, dtypes, inner):
    """Hints for a loop whose float32 values are summed in float64: vectorise at the float32
    width (LLVM's cost model picks the float64 width, halving the throughput of the math
    before the sum); None where some value is not float32 or the loop is short. In code
    shared between sizes (`threads_by_size`) the length is a run-time value: a hint that
    came and went with it would make each size's module differ, and build on its own."""
    width = jit().vector_bits // 32
    short = inner < 8 * width and not getattr(module, "threads_by_size", False)
    if short or any(dt != "float32" for dt in dtypes):
        return None
    return loop_hints(module, vectorize_width=width)


@contextmanager
def for_range(b, start, stop, step=1, name="i", hints=None):
    """for (i = start; i < stop; i += step): yields i (an i64). Bounds are ints or i64s;
    hints: loop metadata from loop_hints() for the loop's latch."""
    start, stop, step = _i64(start), _i64(stop), _i64(step)
    pre = b.block
    head = b.append_basic_block(f"{name}.head")
    body = b.append_basic_block(f"{name}.body")
    done = b.append_basic_block(f"{name}.done")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64, name)
    i.add_incoming(start, pre)
    b.cbranch(b.icmp_signed("<", i, stop), body, done)
    b.position_at_end(body)
    yield i
    nxt = b.add(i, step, name=f"{name}.next", flags=("nsw",))
    i.add_incoming(nxt, b.block)
    br = b.branch(head)
    if hints is not None:
        br.set_metadata("llvm.loop", hints)
    b.position_at_end(done)


@contextmanager
def loop_nest(b, extents, name="i"):
    """Nested loops over extents (outermost first): yields the list of i64 indices."""
    with ExitStack() as stack:
        idx = [stack.enter_context(for_range(b, 0, n, name=f"{name}{k}"))
               for k, n in enumerate(extents)]
        yield idx


@dataclass(frozen=True)
class Access:
    """Elements of `buf` (a Buffer) of dtype dt at `offset + sum(i_d * strides[d])`."""
    buf: object
    dt: str
    offset: int
    strides: tuple

    def with_strides(self, strides):
        return Access(self.buf, self.dt, self.offset, tuple(strides))


def element_index(b, offset, strides, idx):
    """offset + sum(idx[d] * strides[d]) as an i64 (constant parts folded)."""
    acc = None
    for i, s in zip(idx, strides):
        if s == 0:
            continue
        term = i if s == 1 else b.mul(i, ir.Constant(I64, s), flags=("nsw",))
        acc = term if acc is None else b.add(acc, term, flags=("nsw",))
    if acc is None:
        return ir.Constant(I64, offset)
    return b.add(acc, ir.Constant(I64, offset), flags=("nsw",)) if offset else acc


def normalize(extents, accesses, reduced=None, ref=None):
    """Reorder and coalesce an iteration space.

    extents: loop extents; accesses: stride tuples (one per access, same length);
    reduced: per-dim flags (reduction dims are never merged with kept dims); ref: index of
    the access whose memory order sets the loop order (None: keep the logical order).
    Returns (extents, [strides per access], reduced flags, perm) with size-1 dims dropped,
    dims sorted by descending |ref stride| (stable), and adjacent dims merged when every
    access walks them as one."""
    reduced = list(reduced or [False] * len(extents))
    dims = [d for d, n in enumerate(extents) if n != 1]
    if any(extents[d] == 0 for d in dims):
        dims = [d for d in dims if extents[d] == 0][:1]      # an empty space: one 0 loop
    if ref is not None:
        rs = accesses[ref]
        dims.sort(key=lambda d: -abs(rs[d]))
    ext = [extents[d] for d in dims]
    strides = [[s[d] for d in dims] for s in accesses]
    red = [reduced[d] for d in dims]
    k = len(ext) - 1
    while k > 0:
        # merge dim k-1 (outer) with dim k (inner)?
        if red[k - 1] == red[k] and all(s[k - 1] == s[k] * ext[k] for s in strides):
            ext[k - 1:k + 1] = [ext[k - 1] * ext[k]]
            red[k - 1:k + 1] = [red[k]]
            for s in strides:
                s[k - 1:k + 1] = [s[k]]
        k -= 1
    return tuple(ext), [tuple(s) for s in strides], red, dims


class FuncGen:
    """One internal function `void name(ptr noalias %b0, ...)`: one parameter per buffer,
    allocas in a block of their own, the body built with `self.b`. bases: {id(buffer):
    elements} for parameters that point that far into their buffer (dedupe.read_bases):
    `address` counts an access's offset from there."""

    def __init__(self, module, name, buffers, bases=None):
        self.module = module
        self.bases = bases or {}
        fnty = ir.FunctionType(ir.VoidType(), [PTR] * len(buffers))
        self.fn = ir.Function(module, fnty, name=name)
        self.fn.linkage = "internal"
        self.fn.attributes.add("nounwind")
        self.ptrs = {}
        for arg, buf in zip(self.fn.args, buffers):
            arg.add_attribute("noalias")
            arg.name = f"b{getattr(buf, 'slot', 'x')}"
            self.ptrs[buf] = arg
        self._allocas = self.fn.append_basic_block("allocas")
        self._body = self.fn.append_basic_block("body")
        self.b = ir.IRBuilder(self._body)
        self.sg = ScalarGen(module, self.b)

    def alloca(self, typ, name="", count=None):
        """A stack slot (count of them, contiguous, when count is given), in the entry."""
        ab = ir.IRBuilder(self._allocas)
        return ab.alloca(typ, size=None if count is None else _i64(count), name=name)

    def address(self, acc, idx):
        """Pointer to the element of Access acc at loop indices idx."""
        i = element_index(self.b, acc.offset - self.bases.get(id(acc.buf), 0), acc.strides, idx)
        return self.b.gep(self.ptrs[acc.buf], [i], inbounds=True,
                          source_etype=mem_type(acc.dt))

    def load(self, acc, idx):
        return self.sg.load(self.address(acc, idx), acc.dt)

    def store(self, s, acc, idx):
        self.sg.store(s, self.address(acc, idx))

    def finish(self):
        self.b.ret_void()
        ir.IRBuilder(self._allocas).branch(self._body)
        return self.fn
