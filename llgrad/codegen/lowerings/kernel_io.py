"""Elementwise code computed inside a kernel's own loops (schedule/kernel_io.py decides
what): a *prologue* computes an operand of the kernel where the kernel loads it, so the
operand is never written; an *epilogue* computes the elementwise consumers of a result
where the kernel stores it, so the result is written only where something else reads it
and its consumers do not read it back. batch_norm -> relu is then one pass that writes the
activation once, and relu's backward (le, masked_fill) is read by batch_norm_backward from
relu's output and the incoming gradient, with no masked gradient in memory.

The values are the unfused plan's bits: an epilogue starts from the result as the kernel
stores it (in the result's dtype), a prologue's value is the one its group would store,
and both are the same Expr code an elementwise group runs (fusion.py).

A lowering declares which operand and result positions take them (table.py: prologue=,
epilogue=) and goes through KernelIO for those values:

    io = KernelIO(plan, group)
    src, dst = io.operand(x, shape), io.result(y)
    shape, red, accs = coalesce(shape, red, io.with_fused([src, dst], shape))
    src, dst = io.take(accs)                 # (the fused code's accesses kept)
    ... v = io.load(g, x, src, idx) ... io.store(g, y, value, dst, idx)

io.operand / io.result give accesses whose buffer is None where the value is computed
instead of read, or not stored; their strides still say how the loop walks it."""
from ...ir.geometry import contiguous_strides
from ...ir.graph import Value
from .fusion import Expr
from .loops import Access


class Fused:
    """What the schedule fused into a kernel group (group.state["fused"])."""

    def __init__(self):
        self.prologue = {}      # operand Value -> the elementwise nodes computing it
        self.epilogue = {}      # result Value -> the elementwise nodes computing from it
        self.stores = []        # epilogue values written (read outside the group)

    def nodes(self):
        return [n for ns in self.prologue.values() for n in ns] + \
            [n for ns in self.epilogue.values() for n in ns]


class KernelIO:
    def __init__(self, plan, group):
        self.plan, self.group = plan, group
        self.fused = group.state.get("fused") or Fused()
        self.stored = set(group.results)
        self.accs, self._extra = {}, []

    @property
    def nodes(self):
        """The fused elementwise nodes (for the kernel's cost per element)."""
        return self.fused.nodes()

    def operand(self, v, shape):
        """How operand v is read over shape (broadcast as plan.access does); a prologue's
        value has no buffer: the Access only says its (C-contiguous) walk."""
        if v not in self.fused.prologue:
            return self.plan.access(v, shape)
        t = v.type
        lead = len(shape) - len(t.shape)
        strides = [0] * lead + [0 if n == 1 else s for n, s in
                                zip(t.shape, contiguous_strides(t.shape))]
        return Access(None, t.dtype, 0, tuple(strides))

    def result(self, v):
        """Result v's C-contiguous Access (its buffer None where v is not written)."""
        buf = self.plan.buffers[v] if v in self.stored else None
        return Access(buf, v.type.dtype, 0, contiguous_strides(v.type.shape))

    def with_fused(self, accesses, shape):
        """accesses, then those of the fused code over shape: its leaves (read) and its
        stored values (written), to be coalesced together (take() gets them back)."""
        f = self.fused
        inside = {o for n in f.nodes() for o in n.outputs} | set(f.epilogue)
        leaves = []
        for n in f.nodes():
            for x in n.inputs:
                if isinstance(x, Value) and x not in inside and x not in leaves:
                    leaves.append(x)
        self._extra = [(v, self.plan.access(v, shape)) for v in leaves] + \
            [(v, self.result(v)) for v in f.stores]
        return list(accesses) + [a for _, a in self._extra]

    def take(self, accesses):
        """The kernel's own accesses of accesses (as with_fused gave them, coalesced)."""
        n = len(accesses) - len(self._extra)
        self.accs = {v: a for (v, _), a in zip(self._extra, accesses[n:])}
        return accesses[:n]

    def load(self, g, v, acc, idx):
        """Operand v at idx: loaded through acc, or computed by its prologue."""
        nodes = self.fused.prologue.get(v)
        if nodes is None:
            return g.load(acc, idx)
        return Expr(g, nodes, self.accs, idx).value(v)

    def store(self, g, v, s, acc, idx):
        """Result v's value s (a Scalar of v's dtype) at idx: written through acc if v is
        stored, and its epilogue computed and written."""
        if acc.buf is not None:
            g.store(s, acc, idx)
        nodes = self.fused.epilogue.get(v)
        if not nodes:
            return
        e = Expr(g, nodes, self.accs, idx)
        e.memo[v] = s
        outs = [(w, e.value(w)) for w in self.fused.stores if w.node in e.members]
        for w, x in outs:
            g.store(x, self.accs[w], idx)
