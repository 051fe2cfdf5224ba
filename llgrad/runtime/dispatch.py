"""The one dispatcher: every op goes through `call` (in-place ops through
`inplace.call_inplace`, which builds on it): it runs the op table's NumPy impl and
records the backward node when grad is on.
This is the eager hot path: keep it lean (no imports or allocations that can be avoided)."""
import re
import warnings

import numpy as np

from . import grad_mode, saved_hooks, size_reads, trace_state
from ..ir.optable import c_order, contiguous_result, iterator_layout_op, unreduced_elementwise
from .autocast_cast import cast_operands, state as autocast_state
from .dispatch_bf16 import float32_operands, involved, kernel_rounded, rounded, summed_in_order
from .dispatch_edges import _NO_EDGE, node_edges
from .dispatch_edges import _has_edge, _nondiff_positions, nondiff_error  # noqa: F401
from .dtypes import complex_unsupported
from .dtypes import scalar_type_name  # noqa: F401  (its importers' name for it)
from .memory_layout import iterator_layout
from .operands import op_result_type, prepare, wrapped_ints  # noqa: F401 (dispatch's names)
from .node import accumulate_node, define_fields, gradient_edge, node_class
from .saved_tensor import SavedNumber, SavedTensor, user_location, user_position
from .shapes import broadcast_shapes
from .symbolic_operands import SPECIAL_OPERANDS, escape_in_attrs, special_operands, stand_ins
from .tensor import Tensor

# PyTorch computes inf * 0, 1 / 0 and log(-1) without a word; NumPy warns. The op table's
# implementations (and the dispatcher calling them) give PyTorch's silence: a filter on
# NumPy's messages from their own modules, not np.errstate around each call (~5 us per op).
# It is kept first among the filters: a catch_warnings context entered before the import
# (pytest's, around each test) drops it, and a user's simplefilter("always") or "error"
# would shadow it. Where a RuntimeWarning still escapes as an error, run_impl runs the op
# again silenced
_SILENCE = ("ignore", re.compile(r"(divide by zero|invalid value|overflow|underflow) "
                                 r"encountered|Mean of empty slice|Degrees of freedom <= 0"),
            RuntimeWarning, re.compile(r"llgrad\.(ir|runtime)\."), 0)


def _silence_numpy():
    f = warnings.filters
    if _SILENCE in f:
        f.remove(_SILENCE)
    f.insert(0, _SILENCE)
    getattr(warnings, "_filters_mutated", lambda: None)()   # (the filters cache)


_silence_numpy()

_state = grad_mode.state
_tstate = trace_state.state
_hooks = saved_hooks.state


def _is_tensor(x):
    return isinstance(x, Tensor)


def _req(t):
    if t._requires_grad or t._base is None:
        return t._requires_grad
    if t._creation is not None:         # a view made under no_grad / inference_mode
        return t.requires_grad
    return t.grad_fn is not None


# the native kernels of eager elementwise ops (compile/eager_native.py installs them):
# native_eager(op, arrays, attrs) -> the result, or None where NumPy's impl must run
native_eager = None


def set_native_eager(fn):
    """Install fn as the native_eager hook (None: every op on its NumPy impl); the previous."""
    global native_eager
    prev, native_eager = native_eager, fn
    return prev


def run_impl(op, inputs, attrs):
    f = warnings.filters
    if not f or f[0] is not _SILENCE:
        _silence_numpy()
    try:
        if (op.eager_native or op.eager_rows or op.eager_steps or op.eager_kernel) \
                and native_eager is not None:
            arrays = prepare(op, inputs)
            out = native_eager(op, arrays, attrs)
            if out is not None:
                return out
            return op.impl(*arrays, **attrs)
        if attrs:
            return op.impl(*prepare(op, inputs), **attrs)
        return op.impl(*prepare(op, inputs))   # (no empty **{} to build and to parse)
    except RuntimeWarning:      # NumPy's, raised by a filter set to "error": run it silent
        with np.errstate(all="ignore"):
            return op.impl(*prepare(op, inputs), **attrs)
    except ValueError as e:
        if "broadcast" in str(e):
            broadcast_shapes(*[x._data.shape for x in inputs if _is_tensor(x)])
        raise (e if getattr(e, "keep_type", False) else RuntimeError(f"{op.name}: {e}")) from None


def run_bf16(op, inputs, attrs):
    """run_impl of an op that meets bfloat16: on float32 values, rounded once
    (dispatch_bf16.py); a view on the bfloat16 memory itself."""
    if op.kind == "view":
        return run_impl(op, inputs, attrs)
    inputs, attrs, rounds = float32_operands(op, inputs, attrs)
    out = run_impl(op, inputs, attrs)
    if not rounds:
        return out
    return rounded(kernel_rounded(op, inputs, attrs, summed_in_order(op, inputs, attrs, out)))


def impl_for_special(op, inputs, attrs):
    """How to run op whose inputs include a complex or bfloat16 tensor: run_impl, run_bf16,
    or PyTorch's error where the op takes no complex tensors."""
    if not op.complex:
        for x in inputs:
            if isinstance(x, Tensor) and x._dtype._cat == 3:
                raise complex_unsupported(op.name, user_location())
    return run_bf16 if involved(inputs, attrs) else run_impl


# llgrad.func's batching rules while a vmap is active (llgrad/func/batching.py), and the meta
# device's results once a meta tensor exists (meta_dispatch.py): ops with a batched (a meta)
# operand go there; None (one global read per op) otherwise
batching = meta = None

# torch.profiler's hook while a profile records (llgrad/profiler/_record.py): .op(op, inputs,
# attrs) times the op and runs it through call(..., _timed=True); .node(node, grads, retain)
# an autograd node (engine.py); .op_inplace(op, t, inputs, attrs) (inplace.py). None (one
# global read per op) otherwise
profiler = None

# torch.autograd.forward_ad's hook while a dual level is active (llgrad/autograd/forward_ad.py):
# .call(op, inputs, attrs) computes the tangents of ops on dual tensors and runs the op through
# call(..., _dual=True); .call_inplace(op, t, inputs, attrs) (inplace.py); None otherwise
forward_ad = None


class _OpInfo:
    """What the dispatcher reads of an op on every call, worked out on its first call (an
    op's declaration does not change after defop): saves re-deriving it per call."""
    __slots__ = ("view", "single", "node_cls", "plan", "contig", "layout", "unreduced")

    def __init__(self, op):
        self.view = op.kind == "view"
        self.contig = contiguous_result(op)     # (PyTorch's reductions, cat, scans ...)
        self.layout = iterator_layout_op(op)
        self.unreduced = unreduced_elementwise(op)     # (mse_loss(reduction="none") ...)
        self.single = op.nout == 1
        # the node class, when the op's node name never varies (else made per call)
        self.node_cls = node_class(op.grad_fn) if isinstance(op.grad_fn, str) else None
        self.plan = save_plan(op)
        define_fields(op.save)          # (c.self, grad_fn._saved_self: node.py)


_infos = {}         # op -> _OpInfo (keyed by the OpDef itself: a name can be declared again)


def _info(op):
    info = _infos[op] = _OpInfo(op)
    return info


_new = Tensor._from_array
_new_view = Tensor._view_of
_ndarray = np.ndarray


def _rows(inputs, out):
    """Whether every tensor among inputs is row-major and of out's shape: then
    iterator_layout keeps out as it is (its first check, without its calls and list: the
    common elementwise op)."""
    if type(out) is not _ndarray:
        return False
    shape = out.shape
    for x in inputs:
        if isinstance(x, Tensor):
            d = x._data
            if d.shape != shape or not d.flags.c_contiguous:
                return False
    return True


def call(op, inputs, attrs, _timed=False, _dual=False):
    """Run op of the table on inputs with attrs: eagerly, or recorded when tracing, or
    batched under vmap; the autograd node is attached when grad mode needs one (the
    dispatcher every Tensor method goes through)."""
    if profiler is not None and not _timed:
        return profiler.op(op, inputs, attrs)
    if forward_ad is not None and not _dual:
        return forward_ad.call(op, inputs, attrs)
    special = False     # (a tensor of a dtype NumPy does not run as it is: one loop for both)
    for x in inputs:
        if isinstance(x, Tensor):
            if not x._dtype._plain:
                special = True
        elif type(x) in SPECIAL_OPERANDS or type(x) is int and not -1 << 63 <= x < 1 << 64:
            inputs = special_operands(op, inputs, attrs)
            special = None      # (looked at again below, in the operands read)
            break
    if attrs and size_reads.live:       # (a size the user's code passed on: an int here)
        attrs = size_reads.plain_attrs(attrs)
    if attrs and stand_ins.active:          # (a traced function's dynamic number)
        if (filled := escape_in_attrs(op, attrs)) is not None:  # (full's fill value)
            return filled
    if batching is not None and (res := batching.call(op, inputs, attrs)) is not NotImplemented:
        return res
    if meta is not None and (res := meta.call(op, inputs, attrs)) is not NotImplemented:
        return res
    if op.autocast is not None and autocast_state.dtype is not None:
        inputs = cast_operands(op, inputs)
        special = None
    if special is None:
        special = any(isinstance(x, Tensor) and not x._dtype._plain for x in inputs)
    impl = run_impl
    if special:
        impl = impl_for_special(op, inputs, attrs)
    elif attrs and attrs.get("dtype") == "bfloat16":
        impl = run_bf16
    info = _infos.get(op) or _info(op)
    try:
        out = impl(op, inputs, attrs)
    except OverflowError:
        inputs = wrapped_ints(op, inputs)
        out = impl(op, inputs, attrs)
    if info.view:
        base = inputs[0]
        results = [_new_view(out, base)] if info.single else [_new_view(o, base) for o in out]
    elif info.contig and not (info.unreduced and attrs.get("reduction") == "none"):
        results = [_new(c_order(out))] if info.single else [_new(c_order(o)) for o in out]
    else:
        if info.layout or info.unreduced:
            out = out if _rows(inputs, out) else iterator_layout(out, inputs, op)
        results = [_new(out)] if info.single else [_new(o) for o in out]
    if op.vjp is not None and _state.grad_enabled:
        for x in inputs:
            # (_req inlined for the common answers: a tensor that requires grad itself, or
            # one that is not a view and does not)
            if isinstance(x, Tensor) and (x._requires_grad or x._base is not None and _req(x)):
                record(op, inputs, attrs, results, info=info)
                break
    if info.view and not info.single and _state.grad_enabled:
        for r in results:               # (under no_grad they are no_grad views instead)
            r._multi_view = True
    tracer = _tstate.tracer
    if tracer is not None:
        tracer.record(op, inputs, attrs, results)
    return results[0] if info.single else tuple(results)


def save_plan(op):
    """[(name, position)] for what op saves: position is an input index, ("*", i) for a
    variadic tail from input i, or ("result", k) for output k (kept in the op's _OpInfo)."""
    plan = []
    for name in op.save:
        if name.startswith("result"):
            plan.append((name, ("result", int(name[6:] or 0))))
            continue
        for i, a in enumerate(op.args):
            if a == name:
                plan.append((name, i))
            elif a == "*" + name:
                plan.append((name, ("*", i)))
    return plan


def _save(x):
    return SavedTensor(x) if isinstance(x, Tensor) else x


_WRAPPED = (bool, int, float, complex)     # the numbers PyTorch wraps (Tensor overloads)

# a node's _in_meta, one shared tuple per distinct ((shape, dtype), ...): a training step
# repeats the same few, and a tuple of its own in every node is 3 or so objects more per op
# for the garbage collector to count and traverse (small-op models, a neural ODE or a CRF,
# spent a fifth of a step in collections). Bounded: cleared past _META_LIMIT entries
_metas = {}
_META_LIMIT = 4096


def record(op, inputs, attrs, results, self_override=None, info=None):
    """Attach op's backward node to results (in-place ops: [], and the node is returned).
    This and call are the eager hot path: one pass over the inputs, no helper calls in the
    common case (a tensor operand, no nondiff arguments)."""
    if info is None:
        info = _infos.get(op) or _info(op)
    cls = info.node_cls
    if cls is None:
        cls = node_class(op.node_name(inputs, attrs))
    node = cls(op, attrs)
    edges, meta, at = [], [], None
    if not op.nondiff:
        # the common case first: every input a tensor (each then has its edge)
        for x in inputs:
            if not isinstance(x, Tensor):
                edges, meta, at = node_edges(op, inputs)
                break
            if x._dtype._cat >= 2:
                if x._base is None:     # (gradient_edge inlined for a tensor not a view)
                    fn = x._grad_fn
                    edges.append((fn, x._output_nr) if fn is not None else
                                 (x._acc or accumulate_node(x), 0) if x._requires_grad else
                                 _NO_EDGE)
                else:
                    edges.append(gradient_edge(x) or _NO_EDGE)
            else:
                edges.append(_NO_EDGE)
            meta.append((x._data.shape, x._dtype))
    else:
        edges, meta, at = node_edges(op, inputs)
    node.next_functions = tuple(edges)
    meta = tuple(meta)
    shared = _metas.get(meta)
    if shared is None:
        if len(_metas) >= _META_LIMIT:
            _metas.clear()
        shared = _metas[meta] = meta
    node._in_meta = shared
    if at is not None:
        node._edge_at = tuple(at)
    if not info.single:
        node._out_meta = [(r._data.shape, r._dtype) for r in results]
        node._nout = len(results) or 1
    if op.save:
        saved = node._saved = {}
        for name, pos in info.plan:
            if type(pos) is int:
                x = self_override if pos == 0 and self_override is not None else \
                    (inputs[pos] if pos < len(inputs) else None)
                # (a number PyTorch wraps into a tensor is freed with the graph: SavedNumber)
                saved[name] = SavedTensor(x) if isinstance(x, Tensor) else SavedNumber(x) \
                    if op.number_edges and type(x) in _WRAPPED else x
            elif pos[0] == "*":
                saved[name] = [_save(x) for x in inputs[pos[1]:]]
            elif results:                   # in-place ops save their result themselves
                r = results[pos[1]]
                if _hooks.stack and r._dtype._cat >= 2:    # (a pack hook sees the output
                    r._grad_fn, r._output_nr, r._requires_grad = node, pos[1], True  # wired)
                saved[name] = SavedTensor(r, is_output=True, output_nr=pos[1])
    tracer = _tstate.tracer
    if tracer is not None:          # the backward of a traced op reports the op's line
        node._where = tracer.current_loc()
    elif op.save:                   # (for the in-place error: saved_tensor.where_str)
        node._where = user_position()
    if info.single:
        if results:
            r = results[0]
            if r._dtype._cat >= 2:
                r._grad_fn = node
                r._output_nr = 0
                r._requires_grad = True
        return node
    for i, r in enumerate(results):
        if r._dtype._cat >= 2:
            r._grad_fn = node
            r._output_nr = i
            r._requires_grad = True
    return node
