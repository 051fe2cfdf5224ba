"""vmap's batching: the dispatcher's hook (runtime/dispatch.py `batching`) while a vmap is
active. An op called with a BatchedTensor among its inputs is run once on the physical
values, by a rule chosen from the op table:

  elementwise   every op of kind "elementwise": the operands' batch dims are aligned (size
                1 where an operand lacks a level) and their logical ranks padded, so NumPy's
                broadcasting does the rest; the result is checked to have the batched shape
                (an op whose result takes one operand's shape is re-run with every operand
                expanded, and only then, if still not, looped)
  reduce        every op of kind "reduce": its `dim` attribute (None: all logical dims)
                moved past the batch dims
  rule          the ops with a rule of their own in rules_shape.py (views, dims of
                softmax/cat/gather/..., as_strided) and rules_nn.py (matmul family, norms,
                embedding, losses, pooling, indexing)
  loop          any other op (and the cases a rule declines): the op once per sample on
                ordinary tensors, the results stacked -- always correct, B times the calls

`path(name)` says which one an op takes. In-place ops on a batched tensor run out of place
and are copied into the target's physical value; writing a batched value into an
unbatched tensor is PyTorch's error. Every op a rule issues is an ordinary op on ordinary
tensors, so autograd records it and llgrad.compile traces it."""
import threading

import numpy as np

from ..ir import OPS
from ..runtime import dispatch, random_state
from ..runtime.dispatch import call, op_result_type
from ..runtime.dtypes import result_type
from ..runtime.tensor import Tensor
from .batched import BatchedTensor, align, sizes_of, wrap

RULES = {}          # op name -> rule(op, inputs, attrs, ctx) -> the op's logical result(s)
force_loop = False  # tests: every op through the loop (the oracle for the rules)


def rule(*names):
    def register(fn):
        for n in names:
            RULES[n] = fn
        return fn
    return register


class Ctx:
    """The levels an op call is batched over: their sizes and helpers for the physical
    values of its operands."""
    __slots__ = ("levels", "sizes", "k")

    def __init__(self, levels, sizes):
        self.levels, self.sizes, self.k = levels, sizes, len(levels)

    def bcast(self, x):
        """x's physical value with one leading dim per level (size 1 where x lacks it)."""
        if type(x) is BatchedTensor:
            return align(x, self.levels)
        return x.reshape((1,) * self.k + x._data.shape)

    def full(self, x):
        """x's physical value with every level at its full size (an expanded view)."""
        if type(x) is BatchedTensor:
            return align(x, self.levels, self.sizes)
        return x.reshape((1,) * self.k + x._data.shape).expand(self.sizes + x._data.shape)

    def padded(self, x, nd):
        """bcast(x) with its logical rank padded to nd (size-1 dims after the batch dims)."""
        p = self.bcast(x)
        pad = nd - x._data.ndim
        if pad > 0:
            s = p._data.shape
            p = p.reshape(s[:self.k] + (1,) * pad + s[self.k:])
        return p

    def wrap(self, p):
        return wrap(p, self.levels)

    def wrap_all(self, out):
        if isinstance(out, (tuple, list)):
            return type(out)(self.wrap(o) for o in out)
        return self.wrap(out)


def _ctx(inputs):
    sizes = {}
    for x in inputs:
        if type(x) is BatchedTensor:
            for lv, n in sizes_of(x).items():
                if sizes.setdefault(lv, n) != n:
                    raise RuntimeError(f"vmap: level {lv} has batch sizes {sizes[lv]} and {n}")
    levels = tuple(sorted(sizes))
    return Ctx(levels, tuple(sizes[lv] for lv in levels))


def path(name):
    """'elementwise', 'reduce', 'rule' or 'loop': how vmap batches the op `name`."""
    if name in RULES:
        return "rule"
    op = OPS[name]
    return op.kind if op.kind in ("elementwise", "reduce") else "loop"


def batched_call(op, inputs, attrs):
    ctx = _ctx(inputs)
    if force_loop and op.kind != "view":
        return loop(op, inputs, attrs, ctx)
    fn = RULES.get(op.name)
    if fn is None:
        fn = elementwise if op.kind == "elementwise" else reduce if op.kind == "reduce" \
            else loop
    return fn(op, inputs, attrs, ctx)


# ---- the generic paths ------------------------------------------------------------------------

def loop(op, inputs, attrs, ctx):
    """The op once per sample (all levels flattened into one), the results stacked."""
    if op.kind == "view":       # (a stacked copy would lose writes made through the view)
        shapes = [tuple(x.shape) for x in inputs if isinstance(x, Tensor)]
        raise RuntimeError(f"vmap: the view op {op.name} cannot be batched here (inputs of "
                           f"logical shapes {shapes})")
    n = 1
    for s in ctx.sizes:
        n *= s
    if n == 0:
        raise RuntimeError(f"vmap: {op.name} over a batch of size 0 has no rule of its own")
    flat = [ctx.full(x).reshape((n,) + x._data.shape) if type(x) is BatchedTensor else None
            for x in inputs]
    results = []
    for i in range(n):
        args = tuple(x if f is None else f.select(0, i) for f, x in zip(flat, inputs))
        results.append(call(op, args, attrs))
    if isinstance(results[0], (tuple, list)):
        cols = list(zip(*results))
        return type(results[0])(_stack(op, c, ctx) for c in cols)
    return _stack(op, results, ctx)


def _stack(op, outs, ctx):
    shape = outs[0]._data.shape
    if any(o._data.shape != shape for o in outs):
        raise RuntimeError(f"vmap: {op.name} gives results of different shapes for different "
                           f"samples ({shape} and others): a data-dependent shape cannot be "
                           "batched")
    return ctx.wrap(call(OPS["stack"], tuple(outs), {"dim": 0}).reshape(ctx.sizes + shape))


def _promoted(op, inputs, args):
    """args cast to the dtype the op promotes the logical operands to (a batched 0-d tensor
    is a dimensioned one physically, which PyTorch's promotion treats differently)."""
    if not op.promote:
        return args
    pos = range(len(inputs)) if op.promote == "all" else op.promote
    tensors = [inputs[i] for i in pos if i < len(inputs) and isinstance(inputs[i], Tensor)]
    if len({t._dtype for t in tensors}) < 2:
        return args
    want, have = op_result_type(op, inputs), op_result_type(op, args)
    if want is have or want is None:
        return args
    return [a.to(want) if i in pos and isinstance(a, Tensor) and a._dtype is not want else a
            for i, a in enumerate(args)]


def elementwise(op, inputs, attrs, ctx):
    tensors = [x for x in inputs if isinstance(x, Tensor)]
    nd = max(x._data.ndim for x in tensors)
    args = [ctx.padded(x, nd) if type(x) is BatchedTensor else x for x in inputs]
    args = _promoted(op, inputs, args)
    out = call(op, tuple(args), attrs)
    want = ctx.sizes + tuple(np.broadcast_shapes(*[x._data.shape for x in tensors]))
    if out._data.shape != want:
        # an op whose result takes one operand's shape (copy, fill, uniform, ...): every
        # operand at the full shape
        args = [a.expand(want) if isinstance(a, Tensor) else a for a in args]
        out = call(op, tuple(args), attrs)
        if out._data.shape != want:
            return loop(op, inputs, attrs, ctx)
    return ctx.wrap(out)


def reduce(op, inputs, attrs, ctx):
    x = inputs[0]
    if len(inputs) != 1 or type(x) is not BatchedTensor:
        return loop(op, inputs, attrs, ctx)
    k, nd = ctx.k, x._data.ndim
    p = align(x, ctx.levels)
    dim = attrs.get("dim")
    if op.name in ("argmax", "argmin") and dim is None:
        flat = p.reshape(ctx.sizes + (-1,))
        out = call(op, (flat,), dict(attrs, dim=k, keepdim=False))
        if attrs.get("keepdim"):
            out = out.reshape(ctx.sizes + (1,) * nd)
        return ctx.wrap(out)
    if nd == 0:
        return loop(op, inputs, attrs, ctx)
    if dim is None:
        new = tuple(range(k, k + nd))
    elif isinstance(dim, int):
        new = dim + k
    else:
        new = tuple(d + k for d in dim)
    return ctx.wrap_all(call(op, (p,), dict(attrs, dim=new)))


# ---- the dispatcher's hook ----------------------------------------------------------------------

class _Hook:
    """What runtime/dispatch.py calls while a vmap is active (NotImplemented: no batched
    operand, the ordinary path)."""

    @staticmethod
    def call(op, inputs, attrs):
        for x in inputs:
            if type(x) is BatchedTensor:
                return batched_call(op, inputs, attrs)
        return NotImplemented

    @staticmethod
    def call_inplace(op, t, inputs, attrs):
        if type(t) is not BatchedTensor:
            for x in inputs:
                if type(x) is BatchedTensor:
                    break
            else:
                return NotImplemented
        return batched_inplace(op, t, inputs, attrs)


HOOK = _Hook()
_active = [0]           # vmaps running, on all threads (the hook is the dispatcher's global)
_lock = threading.Lock()


def install(random_hook):
    """The dispatcher's hook, and random_hook before every draw (random_state.py), while any
    vmap runs (both check this thread's state)."""
    with _lock:
        _active[0] += 1
        dispatch.batching = HOOK
        random_state.random_hook = random_hook


def uninstall():
    with _lock:
        _active[0] -= 1
        if _active[0] <= 0:
            _active[0] = 0
            dispatch.batching = None
            random_state.random_hook = None


def batched_inplace(op, t, inputs, attrs):
    """An in-place op with a batched operand: out of place, then copied into t."""
    res = batched_call(op, inputs, attrs)
    if op.kind == "view":                   # squeeze_ and the like: t takes the new view
        if type(t) is not BatchedTensor:
            raise RuntimeError(f"vmap: {op.name} of an unbatched tensor by a batched one")
        t._phys, t._data = res._phys, res._data
        return t
    tl = t._levels if type(t) is BatchedTensor else ()
    rl = res._levels if type(res) is BatchedTensor else ()
    extra = [lv for lv in rl if lv not in tl]
    if extra or tuple(res._data.shape) != tuple(t._data.shape):
        sizes = sizes_of(res)
        full = [sizes[lv] for lv in extra] + list(np.broadcast_shapes(res._data.shape,
                                                                      t._data.shape))
        raise RuntimeError(f"output with shape {list(t._data.shape)} doesn't match the "
                           f"broadcast shape {full}")
    pos = range(len(inputs)) if op.promote == "all" else (op.promote or (0,))
    rt = result_type(*[inputs[i] for i in pos if i < len(inputs)])
    if rt is not None and rt._cat > t._dtype._cat:
        raise RuntimeError(f"result type {dispatch.scalar_type_name(rt)} can't be cast to the "
                           f"desired output type {dispatch.scalar_type_name(t._dtype)}")
    target = t._phys if type(t) is BatchedTensor else t
    src = align(res, tl) if type(res) is BatchedTensor else \
        res.reshape((1,) * len(tl) + res._data.shape)
    target.copy_(src)
    return t
