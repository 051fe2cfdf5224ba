"""Fused elementwise code: the expression of a group's members at one loop index, and the
loop nest of an elementwise group.

Operand dtypes follow the reference interpreter exactly: tensor operands of promoting ops
are cast to the dtype the op's type rule promotes to (`shape_rules.operand_casts`), Python
numbers become constants of that dtype (NumPy treats them as weak scalars), and every
node's result is cast to its IR type's dtype, as `interpret` does with `astype`."""
import functools

import numpy as np

from ...ir.graph import TensorType, Value
from ...ir.optable import OPS
from ...ir.promotion import on_default_change
from ...ir.shape_rules import promote_operands
from .loops import normalize
from .parallel import cost, parallel_loops
from .table import LOWERINGS


@functools.lru_cache(maxsize=4096)
def _compute_dtypes(opname, key):
    # key: per operand ("t", dtype, ndim > 0) for tensors, ("s", type name, value) else
    types = [TensorType(k[1], (1,) if k[2] else ()) if k[0] == "t" else k[2] for k in key]
    op = OPS[opname]
    dts = [t.dtype if isinstance(t, TensorType) else None for t in types]
    if not op.promote:
        return tuple(dts), None
    dummies = [np.zeros(1, dtype=t.dtype) if isinstance(t, TensorType) else t for t in types]
    promoted = promote_operands(op, types, dummies)
    pos = range(len(types)) if op.promote == "all" else op.promote
    res = None
    for i in pos:
        if i < len(types) and isinstance(types[i], TensorType):
            dts[i] = promoted[i].dtype.name
            res = res or dts[i]
    return tuple(dts), res


on_default_change(_compute_dtypes.cache_clear)    # (a Python float's dtype is the default's)


def compute_dtypes(node):
    """Per operand: the dtype it is computed in (None: a Python value passed as is)."""
    key = tuple(("t", x.type.dtype, len(x.type.shape) > 0) if isinstance(x, Value)
                else ("s", type(x).__name__, x) for x in node.inputs)
    dts, res = _compute_dtypes(node.op, key)
    dts = list(dts)
    op = OPS[node.op]
    if not op.promote:
        return dts
    res = res or node.outputs[0].type.dtype
    pos = range(len(dts)) if op.promote == "all" else op.promote
    for i in pos:
        x = node.inputs[i] if i < len(dts) else None
        if isinstance(x, (bool, int, float)):
            dts[i] = res                  # a Python number: a constant of the promoted dtype
    return dts


_PY_DTYPE = {bool: "bool", int: "int64", float: "float64"}


class Expr:
    """Emits the values of a group's members at the loop indices idx (each member once)."""

    def __init__(self, fg, members, accesses, idx):
        self.fg, self.sg = fg, fg.sg
        self.members = set(members)
        self.accesses = accesses        # leaf Value -> Access over the loop space
        self.idx = idx
        self.memo = {}

    def value(self, v):
        s = self.memo.get(v)
        if s is not None:
            return s
        memo, stack = self.memo, [v]     # post-order without recursion (long chains)
        while stack:
            u = stack[-1]
            if u in memo:
                stack.pop()
            elif u.node is None or u.node not in self.members:
                memo[u] = self.fg.load(self.accesses[u], self.idx)
                stack.pop()
            else:
                pending = [x for x in u.node.inputs if isinstance(x, Value) and x not in memo]
                if pending:
                    stack.extend(reversed(pending))     # the first operand is emitted first
                else:
                    memo[u] = self._node(u.node)
                    stack.pop()
        return memo[v]

    def _node(self, node):
        sg = self.sg
        dts = compute_dtypes(node)
        args = []
        for x, dt in zip(node.inputs, dts):
            if isinstance(x, Value):
                s = self.value(x)
                args.append(sg.cast(s, dt) if dt is not None else s)
            elif dt is not None:
                args.append(sg.const(x, dt))
            elif isinstance(x, (bool, int, float)):     # not promoted: its own dtype
                args.append(sg.const(x, _PY_DTYPE[type(x)]))
            else:
                args.append(x)
        r = LOWERINGS[node.op].emit(sg, node, *args)
        return sg.cast(r, node.outputs[0].type.dtype)


def emit_elementwise(plan, group, fg):
    """One loop nest over the root's shape, storing the fused expression (split over the
    threads when it is big enough: parallel.py)."""
    root = group.root.outputs[0]
    shape = root.type.shape
    out = plan.out_access(group)
    leaves = [(v, plan.access(v, shape)) for v in group.leaves]
    ext, strides, _, _ = normalize(shape, [out.strides] + [a.strides for _, a in leaves])
    out = out.with_strides(strides[0])
    accs = {v: a.with_strides(s) for (v, a), s in zip(leaves, strides[1:])}

    def body(g, loops, tid):            # (g: fg itself, or the threads' function)
        with loops() as idx:
            e = Expr(g, group.members, accs, idx)
            g.store(e.value(root), out, idx)
    parallel_loops(fg, ext, body, cost=cost(group.members))
