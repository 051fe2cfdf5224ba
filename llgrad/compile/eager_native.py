"""Eager ops on native kernels: the hooks runtime/dispatch.py (an op) and runtime/node.py (its
backward) call for the ops the table marks `eager_native` (erf, GELU, sigmoid, SiLU, softplus,
...), with codegen/eager_kernels.py's shape-free loops.

A call qualifies when its one tensor operand is float32 or float64, holds at least
MIN_ELEMENTS elements (below that NumPy's passes are cheap, and a short script or a test
never loads LLVM for them) and is contiguous in memory (C or Fortran order: the result keeps
the layout, as NumPy's ufuncs do); the other operands are Python numbers. Everything else
runs the op's NumPy implementation. A kernel is built on the first call of its (op, dtype,
numbers, attributes) in the process, from the disk cache when an earlier process built it
(no LLVM then), on a thread of its own: calls run NumPy's implementation until the kernel is
ready, so a first call never waits for LLVM (LLGRAD_COMPILE=sync builds on the calling
thread instead, before the call; `wait()` waits for the builds under way). Results are
within an ulp or two of the NumPy implementation (the lowering compiled code runs; the
op-table tests hold the two together), never a different method.

The backward of such an op is its VJP rule traced once per (op, dtype, what it saves,
attributes) on small examples into a graph of elementwise ops, and run as one loop over the
gradient and the saved tensors (GELU's backward: eight NumPy passes become one), when no
graph of the backward is being built (create_graph=False), nothing traces or vmaps, and the
gradient and the saved tensors are float arrays of one dtype and shape, C-contiguous, of
MIN_ELEMENTS or more. A rule that does not trace to such a graph keeps running as written.

Ops the table marks `eager_rows` (the fused LSTM and GRU cells, forward and backward) take
float tensors of rows of H-wide blocks ((..., 4H) gates beside (..., H) states): a call of
one dtype with the same leading dims (the rows), each row contiguous and the rows evenly
spaced (C-contiguous, or a time step of a batch-first sequence), the largest MIN_ROW_ELEMENTS
or more, runs codegen/eager_row_kernels.py's loop over the rows: one kernel per (op, dtype,
block widths, attributes) for every H and row count, built as above, counted in `stats`
with the others; its results (a tuple for an op of several) are fresh C-contiguous arrays
(or the impl's own, for each step of an `eager_steps` op, a whole LSTM layer, whose impl
gets eager_steps.py's hook: a step's call, or one kernel bound for all its steps).

Ops the table marks `eager_kernel="last_dim"` (softmax, log_softmax) over the last dim of a
C-contiguous float operand of MIN_ELEMENTS or more run codegen/eager_softmax.py's loop over
its rows: one kernel per (op, dtype) for every shape, built as above.

LLGRAD_EAGER_NATIVE=0 turns all of them off; `reset()` forgets the loaded kernels (they are
built or loaded again on their next call); `stats` counts calls and builds."""
import ctypes
import os
import warnings

import numpy as np

from ..ir.np_address import data_pointer
from ..runtime import dispatch, grad_mode, node as node_mod, trace_state
from ..runtime.meta_tensor import is_meta
from ..runtime.tensor import Tensor
from ..tracer.trace import trace_body
from . import eager_shaped, eager_threads
from .eager_builds import PENDING as _PENDING, absent, start as _start, wait  # noqa: F401
from .eager_steps import Steps

MIN_ELEMENTS = 4096
# (a fused cell's NumPy implementation makes ~15 passes: ~30 us at batch 16, 3H 192, its
# row kernel ~3; below this a tiny script's RNN never waits for a build)
MIN_ROW_ELEMENTS = 1024
ENABLED = os.environ.get("LLGRAD_EAGER_NATIVE", "1") != "0"
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

_kernels = {}       # (op name, dtype name, numbers, attrs) -> (ctypes function, address) | None
_vjp_kernels = {}   # (op name, dtype name, saved names, attrs) -> (ctypes function, address) | None
stats = {"calls": 0, "built": 0, "vjp_calls": 0, "vjp_built": 0}
_grad_state = grad_mode.state
_tstate = trace_state.state


def reset():
    """Forget the loaded kernels and the counts (after the builds under way)."""
    wait()
    for table in (_kernels, _plans, _vjp_kernels):
        table.clear()
    stats.update(calls=0, built=0, vjp_calls=0, vjp_built=0)


def _ctypes_fn(inputs):
    """The ctypes type of a kernel void k(out, in_1, ..., in_inputs, n)."""
    return ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (inputs + 1)), ctypes.c_int64)


def _key(op, dtype, numbers, attrs):
    try:
        key = (op.name, dtype, tuple((type(v), v) for v in numbers),
               tuple(sorted(attrs.items())))
        hash(key)
    except TypeError:               # (an unhashable attribute: not one of these ops')
        return None
    return key


def _built(op, dtype, build, *args):
    """build(op name, dtype name, *args), or None with a warning where LLVM refused it (NumPy's
    implementation serves)."""
    try:
        return build(op.name, dtype.name, *args)
    except Exception as e:          # noqa: BLE001
        warnings.warn(f"llgrad: eager {op.name} on {dtype.name} runs on NumPy: its native "
                      f"kernel failed to build ({type(e).__name__}: {e})", RuntimeWarning,
                      stacklevel=3)
        return None


def _kernel(op, dtype, numbers, attrs):
    addr = _built(op, dtype, _op_kernel, numbers, attrs)
    stats["built"] += addr is not None
    return None if addr is None else (_ctypes_fn(1)(int(addr)), addr)


def _op_kernel(op_name, dtype, numbers, attrs):
    """From the disk cache (a warm process imports no lowering), else built."""
    from ..codegen import eager_cache
    found = eager_cache.cached(eager_cache.op_key(op_name, dtype, numbers, attrs))
    if found is not None:
        return found
    from ..codegen import eager_kernels      # (the code generator: a kernel to build)
    return eager_kernels.build(op_name, dtype, numbers, attrs)


def _rows_kernel(op_name, dtype, widths, attrs):
    """(address, result widths): from the disk cache, else built; None where op is not
    one loop over rows."""
    from ..codegen import eager_cache
    graph = eager_cache.rows_graph(op_name, dtype, widths, attrs)
    if graph is None:
        return None
    found = eager_cache.cached(eager_cache.rows_key(op_name, dtype, widths, attrs))
    if found is not None:
        return found, eager_cache.rows_out_widths(graph)
    from ..codegen import eager_row_kernels     # (the code generator: one to build)
    return eager_row_kernels.build(op_name, graph, dtype, widths, attrs)


def _row_kernel(op, dtype, widths, attrs):
    built = _built(op, dtype, _rows_kernel, widths, attrs)
    if built is None or len(built[1]) != op.nout:
        return None
    addr, out_widths = built
    stats["built"] += 1
    fn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (len(out_widths) + len(widths))),
                          *([ctypes.c_int64] * (2 + len(widths))))(int(addr))
    return fn, addr, out_widths, data_pointer


def _row_step(a):
    """The distance in elements between the rows of a (its leading dims flattened) when each
    row is contiguous and they are evenly spaced (a time step of a batch-first sequence:
    (B, T, G)[:, t]), else None."""
    size = a.itemsize
    if a.strides[-1] != size and a.shape[-1] > 1:
        return None
    step = span = None
    for n, s in zip(reversed(a.shape[:-1]), reversed(a.strides[:-1])):
        if n == 1:
            continue
        if span is not None and s != span:
            return None
        step = s if step is None else step
        span = s * n
    return a.shape[-1] if step is None else (step // size if step % size == 0 else None)


def _rows_plan(op, arrays, attrs):
    """(kernel, pointer reader, result widths, leading dims, rows, H, row steps, dtype)."""
    x = arrays[0]
    if type(x) is not np.ndarray or x.dtype not in _FLOATS or not x.ndim:
        return None
    dtype, lead = x.dtype, x.shape[:-1]
    big, lasts, steps = 0, [], []
    for a in arrays:
        if type(a) is not np.ndarray or a.dtype != dtype or not a.ndim or a.shape[:-1] != lead:
            return None
        n = a.shape[-1]
        step = n if a.flags.c_contiguous else _row_step(a)
        if step is None:
            return None
        lasts.append(n)
        steps.append(step)
        big = max(big, a.size)
    h = min(lasts)
    if big < MIN_ROW_ELEMENTS or h == 0:
        return None
    widths = tuple([n // h for n in lasts])
    if sum(widths) * h != sum(lasts):           # (some last size not a multiple of H)
        return None
    key = (op.name, dtype, widths) if not attrs else _key(op, dtype, widths, attrs)
    if key is None:
        return None
    found = _kernels.get(key, False)
    if found is False:
        found = _start(_kernels, key, lambda a=dict(attrs): _row_kernel(op, dtype, widths, a))
    if found is None or found is _PENDING:
        return None
    fn, _, out_widths, ptr = found
    return fn, ptr, out_widths, lead, x.size // x.shape[-1], h, steps, dtype


def _native_last_dim(op, x, attrs):
    """An eager_kernel="last_dim" op (softmax, log_softmax) of x over its last dim on the
    kernel of codegen/eager_softmax.py, or None (NumPy's impl runs)."""
    if type(x) is not np.ndarray or x.size < MIN_ELEMENTS or x.dtype not in _FLOATS \
            or not x.flags.c_contiguous or attrs.get("dim") not in (x.ndim - 1, -1) \
            or len(attrs) != 1:
        return None
    key = ("last_dim", op.name, x.dtype)    # (dtype.name, a Python property: when built)
    found = _kernels.get(key, False)
    if found is False:
        found = _start(_kernels, key, lambda: _last_dim_kernel(op, key[2].name))
    if found is None or found is _PENDING:
        return None
    out = np.empty_like(x)
    eager_threads.rows(found, (data_pointer(out), data_pointer(x)), x.size // x.shape[-1],
                       x.shape[-1], x.itemsize)
    stats["calls"] += 1
    return out


def _last_dim_kernel(op, dtype):
    from ..codegen import eager_softmax      # (loads llvmlite: only when a kernel is needed)
    try:
        addr = eager_softmax.build(op.name, dtype)
    except Exception as e:          # noqa: BLE001
        warnings.warn(f"llgrad: eager {op.name} on {dtype} runs on NumPy: its native kernel "
                      f"failed to build ({type(e).__name__}: {e})", RuntimeWarning, stacklevel=2)
        return None
    stats["built"] += 1
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                          ctypes.c_int64)(int(addr))
    return fn, addr


_plans = {}     # (op, each array's layout) -> its built kernel's plan (a time loop's steps)


def _out_plan(op, arrays, attrs, outs=None):
    """The plan (_rows_plan's) of op on arrays into outs (None: fresh results), or None."""
    if not any(type(a) is np.ndarray and a.size >= MIN_ROW_ELEMENTS for a in arrays):
        return None     # (_rows_plan's size test, first: a small cell has no plan to look up)
    every = arrays if outs is None else (*arrays, *outs)
    sig = None if attrs else (op, *[(a.shape, a.strides, a.dtype) if isinstance(a, np.ndarray)
                                    else (a,) for a in every])
    plan = _plans.get(sig) if sig is not None else None
    if plan is None:
        plan = _rows_plan(op, arrays, attrs)
        if plan is None or outs is not None and any(
                o.shape != plan[3] + (w * plan[5],) or o.dtype != plan[7] or
                not o.flags.c_contiguous for o, w in zip(outs, plan[2])):
            return None
        if sig is not None and len(_plans) < 1024:
            _plans[sig] = plan
    return plan


def _native_rows(op, arrays, attrs, outs=None):
    """An eager_rows op on its row kernel (the results), or None (NumPy's impl runs); outs:
    C-contiguous arrays of the results' shapes to write (else fresh ones)."""
    plan = _out_plan(op, arrays, attrs, outs)
    if plan is None:
        return None
    fn, ptr, out_widths, lead, rows, h, steps, dtype = plan
    if outs is None:
        outs = [np.empty(lead + (w * h,), dtype) for w in out_widths]
    fn(*[ptr(a) for a in outs], *[ptr(a) for a in arrays], rows, h, *steps)
    stats["calls"] += 1
    return outs[0] if op.nout == 1 else tuple(outs)


_STEPS = Steps(_out_plan, _native_rows, stats)


def native_eager(op, arrays, attrs):
    """op on arrays with attrs on its native kernel, or None (NumPy's impl runs instead)."""
    if op.eager_kernel == "last_dim":
        return _native_last_dim(op, arrays[0], attrs)
    if op.eager_kernel == "shaped":
        return eager_shaped.run(op, arrays, attrs)
    if op.eager_rows:
        return _native_rows(op, arrays, attrs)
    if op.eager_steps:      # (its impl runs each step's eager_rows op through rows=)
        return op.impl(*arrays, rows=_STEPS, **attrs)
    x = arrays[0]
    if type(x) is not np.ndarray or x.size < MIN_ELEMENTS or x.dtype not in _FLOATS:
        return None
    numbers = arrays[1:]
    for v in numbers:
        if type(v) not in (int, float, bool):
            return None
    flags = x.flags
    if not (flags.c_contiguous or flags.f_contiguous):
        return None
    key = _key(op, x.dtype, numbers, attrs)
    if key is None:
        return None
    found = _kernels.get(key, False)
    if found is False:
        dtype = x.dtype
        found = _start(_kernels, key, lambda a=dict(attrs): _kernel(op, dtype, numbers, a))
    if found is None or found is _PENDING:
        return None
    out = np.empty_like(x)          # (the same memory order as x: one flat loop serves both)
    eager_threads.elementwise(found, (data_pointer(out), data_pointer(x)), x.size, x.itemsize)
    stats["calls"] += 1
    return out


class ExampleCtx:
    """What a VJP rule reads of its node, while it is traced: the saved names as example
    tensors, the attributes, and one input wanting a gradient."""

    def __init__(self, saved, attrs):
        self._saved_examples, self._attrs = saved, attrs

    def __getattr__(self, name):
        if name.startswith("_saved_"):
            name = name[7:]
        if name in self._saved_examples:
            return self._saved_examples[name]
        try:
            return self._attrs[name]
        except KeyError:
            raise AttributeError(name) from None

    def needs(self, i):
        return i == 0


def _vjp_kernel(key, op, dtype, names, attrs):
    """Trace op's VJP rule on examples of 8 elements (here: tracing uses this thread's grad
    mode) and start its loop's build; what runs now (see _start)."""
    g = Tensor._from_array(np.linspace(-2, 2, 8).astype(dtype))
    saved = {n: Tensor._from_array(np.linspace(-1.5, 2.5, 8).astype(dtype)) for n in names}
    ctx = ExampleCtx(saved, attrs)
    try:
        prev = _grad_state.grad_enabled
        _grad_state.grad_enabled = False
        try:
            graph = trace_body(f"vjp_{op.name}", [("grad", g)] + list(saved.items()),
                               lambda: op.vjp(ctx, g)[0])
        finally:
            _grad_state.grad_enabled = prev
    except Exception:               # noqa: BLE001 (a rule that does not trace so: as written)
        _vjp_kernels[key] = None
        return None
    return _start(_vjp_kernels, key, lambda: _vjp_build(graph, dtype, len(names)))


def _vjp_build(graph, dtype, saved):
    from ..codegen import eager_kernels      # (loads llvmlite: only when a kernel is needed)
    try:
        addr = eager_kernels.build_graph(graph, dtype.name)
    except Exception:               # noqa: BLE001 (LLVM refused it: the rule as written)
        addr = None
    stats["vjp_built"] += addr is not None
    return None if addr is None else (_ctypes_fn(saved + 1)(int(addr)), addr)


def native_vjp(node, g):
    """node's VJP (an eager_native op's) as one native loop, or None (the rule runs)."""
    if _grad_state.grad_enabled or _tstate.tracer is not None or dispatch.batching is not None \
            or type(g) is not Tensor or not node.needs(0) or dispatch.forward_ad is not None:
        return None
    ga = g._data
    if ga.size < MIN_ELEMENTS or ga.dtype not in _FLOATS or not ga.flags.c_contiguous or \
            is_meta(g):
        return None
    op = node._op
    arrays = [ga]
    for name in op.save:
        t = getattr(node, name)         # (unpacked: the saved-version check as the rule's)
        if type(t) is not Tensor:
            return None
        a = t._data
        if a.shape != ga.shape or a.dtype != ga.dtype or not a.flags.c_contiguous:
            return None
        arrays.append(a)
    key = _key(op, ga.dtype, (), node.attrs)
    if key is None:
        return None
    key = key + (op.save,)
    found = _vjp_kernels.get(key, False)
    if found is False and not absent(_vjp_kernels, key):    # (absent: not traced again)
        found = _vjp_kernel(key, op, ga.dtype, op.save, node.attrs)
    if found is None or found is False or found is _PENDING:
        return None
    out = np.empty_like(ga)
    eager_threads.elementwise(found, (data_pointer(out), *[data_pointer(a) for a in arrays]),
                              ga.size, ga.itemsize)
    stats["vjp_calls"] += 1
    return (Tensor._from_array(out),) + (None,) * (len(node._in_meta) - 1)


def install(enabled=ENABLED):
    """Make the dispatcher and the nodes run eager_native ops here (enabled) or as the
    table's NumPy implementations and VJP rules (not)."""
    dispatch.set_native_eager(native_eager if enabled else None)
    node_mod.set_native_vjp(native_vjp if enabled else None)


install()
