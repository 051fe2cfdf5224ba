"""Eager backward of the ops the table marks `eager_vjp="shaped"` (layer_norm) on a native
kernel: their VJP rule is a dozen tensor ops over rows (mean, centre, variance, rsqrt, two
more means, the weight's and bias's sums), each a NumPy pass and a dispatch, 6x PyTorch's
fused backward on a (64, 128, 256) input.

A backward that builds no graph (create_graph=False: grad mode off while it runs), with no
tracer, vmap or forward AD, whose gradient and saved tensors are float arrays of one dtype
(int32/int64 targets beside them), the largest of MIN_ELEMENTS or more, runs the rule traced once per (op, shapes, dtype,
attributes, inputs wanting a gradient) on example tensors of those shapes and lowered as a
compiled backward is (codegen.lower: the rows schedule makes it one walk over each row, the
compiled path's own numbers, which the op-table tests hold to the rule's within rounding).
The kernel is built as eager_shaped.py builds its kernels (the builder thread, the rule as
written meanwhile; LLGRAD_COMPILE=sync before the call); at most MAX_KERNELS shapes are kept.
`reset()` forgets them; LLGRAD_EAGER_NATIVE=0 turns this off with the other eager kernels."""
import numpy as np

from ..ir import OPS
from ..runtime import dispatch, grad_mode, node as node_mod, trace_state
from ..runtime.meta_tensor import is_meta
from ..runtime.tensor import Tensor
from ..tracer.trace import trace_body
from . import eager_builds
from .eager_native import ENABLED, ExampleCtx
from .eager_shaped import _FLOATS, _INDICES, dtype_name, kernel_operand, lowered

MIN_ELEMENTS = 1024        # (the rule costs ~100 us at that size, a kernel call ~10)
MAX_KERNELS = 128
_kernels = {}       # (op name, shapes, dtype, attributes, needs) -> (Kernel, positions) | None
stats = {"calls": 0, "built": 0}
_grad_state = grad_mode.state
_tstate = trace_state.state


def reset():
    """Forget the kernels and the counts (after the builds under way)."""
    eager_builds.wait()
    _kernels.clear()
    stats.update(calls=0, built=0)


class _ExampleNode(ExampleCtx):
    """ExampleCtx (the saved tensors as examples of their shapes, the attributes) that wants
    the gradients of the inputs the traced node wants."""

    def __init__(self, saved, attrs, needs):
        super().__init__(saved, attrs)
        self._needs = needs

    def needs(self, i):
        return self._needs[i]


def _traced(op, g, saved, attrs, needs):
    """(graph of op's rule on the examples, the input positions of its outputs), or None."""
    node = _ExampleNode(saved, attrs, needs)
    positions = []

    def body():
        res = op.vjp(node, g)
        positions.extend(i for i, r in enumerate(res) if r is not None)
        return [r for r in res if r is not None]
    inputs = [("grad", g)] + [(n, t) for n, t in saved.items() if t is not None]
    try:
        graph = trace_body(f"vjp_{op.name}", inputs, body, examples=False)
    except Exception:               # noqa: BLE001 (a rule that does not trace: as written)
        return None
    if graph.guards or graph.mutated:   # (the rule read a value: the examples' would stick)
        return None
    return graph, tuple(positions)


def _build(op_name, graph, positions):
    kernel = lowered(graph, f"the eager backward of {op_name} runs its rule")
    stats["built"] += kernel is not None
    return None if kernel is None else (kernel, positions)


def _example(shape, dtype, k):
    """A tensor of shape and dtype to trace with (its values never reach the kernel: a rule
    that reads one leaves a guard, and runs as written)."""
    n = int(np.prod(shape))
    values = np.linspace(-1.5 + k, 2.5 + k, n) if dtype in ("float32", "float64") else \
        np.zeros(n)             # (an index: 0 is in range of any non-empty dim)
    return Tensor._from_array(values.astype(dtype).reshape(shape))


def shaped_vjp(node, g):
    """node's VJP on its shaped kernel (node_mod.fast_vjps' hook); else on the NumPy VJP the
    op had before install (runtime/fast_vjp_small.py's: small sizes, a kernel still
    building), or None (the rule runs)."""
    res = _on_kernel(node, g)
    if res is None:
        below = _below.get(node._op)
        return None if below is None else below(node, g)
    return res


def _on_kernel(node, g):
    if _grad_state.grad_enabled or _tstate.tracer is not None or dispatch.batching is not None \
            or dispatch.forward_ad is not None or type(g) is not Tensor or is_meta(g):
        return None
    ga = g._data
    if ga.dtype not in _FLOATS:
        return None
    op = node._op
    arrays, saved, big = [ga], [], ga.size
    for name in op.save:
        t = getattr(node, name)         # (unpacked: the saved-version check as the rule's)
        if t is None:
            saved.append(None)
            continue
        if not isinstance(t, Tensor):   # (a Parameter too; a number: the rule runs)
            return None
        a = t._data
        if a.dtype != ga.dtype and a.dtype not in _INDICES:
            return None
        arrays.append(a)
        saved.append(a)
        big = max(big, a.size)
    if big < MIN_ELEMENTS:
        return None
    # (dtype.name is a Python property: read only for a call that may run a kernel)
    sig = [(a.shape, dtype_name(a.dtype)) if a is not None else None for a in [ga] + saved]
    needs = tuple(node.needs(i) for i in range(node.ninputs))
    attrs = node.attrs
    try:
        key = (op.name, tuple(sig), tuple(sorted(attrs.items())), needs)
        found = _kernels.get(key, False)
    except TypeError:               # (an unhashable attribute)
        return None
    if found is False:      # (absent: a call standing in does not trace the rule again)
        if len(_kernels) >= MAX_KERNELS or eager_builds.absent(_kernels, key):
            return None
        examples = {n: None if s is None else _example(*s, k)
                    for k, (n, s) in enumerate(zip(op.save, sig[1:]))}
        traced = _traced(op, _example(*sig[0], -1), examples, dict(attrs), needs)
        if traced is None:
            _kernels[key] = None
            return None
        found = eager_builds.start(_kernels, key, lambda: _build(op.name, *traced))
    if found is None or found is eager_builds.PENDING:
        return None
    kernel, positions = found
    try:
        outs = kernel([kernel_operand(a) for a in arrays])
    except IndexError:              # (an index out of range: the rule raises eager's error)
        return None
    res = [None] * len(needs)
    for i, out in zip(positions, outs):
        res[i] = Tensor._from_array(out)
    stats["calls"] += 1
    return tuple(res)


_below = {}        # op -> the fast VJP installed before shaped_vjp (it runs where no kernel)


def install(enabled=ENABLED):
    """Run the eager_vjp="shaped" ops' backward here (enabled) or as their rules, or the
    NumPy VJPs they had (not)."""
    for op in OPS.values():
        if op.eager_vjp == "shaped":
            prev = node_mod.fast_vjps.get(op)
            if prev is not None and prev is not shaped_vjp:
                _below[op] = prev
            if enabled:
                node_mod.fast_vjps[op] = shaped_vjp
            elif op in _below:
                node_mod.fast_vjps[op] = _below[op]
            else:
                node_mod.fast_vjps.pop(op, None)


install()
