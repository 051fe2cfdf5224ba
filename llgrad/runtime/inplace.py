"""In-place ops (x.add_(y), x[idx] = v, ...): PyTorch's checks before a write (leaves,
views of leaves, inference tensors, multi-output views, broadcasting into the target),
the write and version bump, and the rebased history (CopySlices on the base when the
target is a view)."""
import numpy as np

from . import dispatch, grad_mode, saved_hooks, trace_state
from ..ir import OPS, bfloat16 as bf16_values
from ..ir.geometry import geometry_overlaps
from .copy_slices import (VIEW_GRAD_WANTED, CopySlices, creation_error, multi_view_error,
                          view_fn_name)  # noqa: F401 (view_fn_name: imported from here)
from .inplace_fast import write as fast_write
from .inplace_overlap import shares_cells, write_changed, write_sequentially
from .dispatch import _is_tensor, _req, call, record, run_impl, scalar_type_name, wrapped_ints
from .dtypes import bfloat16, get_default_dtype, result_type
from .node import gradient_edge
from .saved_tensor import SavedTensor, user_position
from .symbolic_operands import SPECIAL_OPERANDS, escape_in_attrs, special_operands, stand_ins
from .tensor import Tensor

_tstate = trace_state.state


def _check_inplace(t, inputs):
    if t._inference and not grad_mode.state.inference:
        raise RuntimeError("Inplace update to inference tensor outside InferenceMode is not "
                           "allowed.You can make a clone to get a normal tensor before doing "
                           "inplace update.See https://github.com/pytorch/rfcs/pull/17 for "
                           "more details.")
    if not grad_mode.state.grad_enabled or not (t._multi_view or t._creation is not None or
                                                t._requires_grad or t._base is not None):
        return
    if (t._creation is not None or t._multi_view) and \
            not any(_is_tensor(x) and _req(x) for x in inputs):
        return                          # nothing requires grad: no history to get wrong
    if t._creation is not None:
        raise creation_error(t)
    if t._multi_view:       # (a compiled call's result: (op, output) of eager's, run.py)
        t.grad_fn               # (which raises first if its base was written: a rebase)
        raise multi_view_error(t)
    if t._requires_grad and t._grad_fn is None and t._base is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an "
                           "in-place operation.")
    b = t._base     # (a view that requires grad of a leaf base, PyTorch's check_inplace: also
    # a view made a leaf by requires_grad_(), arange(6.).view(2, 3).requires_grad_())
    if b is not None and b._grad_fn is None and (b._requires_grad or t.requires_grad):
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in "
                           "an in-place operation.")


def _check_broadcast_into(shape, inputs):
    """An in-place elementwise op's operands may broadcast to t's shape, never beyond it
    (NumPy's assignment would even let a (1,)-shaped result into a 0-d t)."""
    n = len(shape)
    for x in inputs:
        if not _is_tensor(x):
            continue
        s = x._data.shape
        k = len(s)
        if k > n or any(a == 1 and b != 1 for a, b in zip(shape[n - k:], s)):
            try:
                full = np.broadcast_shapes(shape, *[y._data.shape for y in inputs
                                                    if _is_tensor(y)])
            except ValueError:
                return                   # incompatible shapes: the impl raises
            raise RuntimeError(f"output with shape {list(shape)} doesn't match the broadcast "
                               f"shape {list(full)}")


def check_shape_into(t, other):
    """PyTorch's first check of a binary in-place op (before its dtype and kernel errors):
    other broadcasts into t's shape."""
    if _is_tensor(other):
        _check_broadcast_into(t._data.shape, (t, other))


# PyTorch's assert_no_overlap: these may not read any memory they write, even all of it
# (x.index_copy_(0, i, x)); the others may read exactly the memory they write (x.add_(x));
# a fill value is read as a number first (x.masked_fill_(m, x[0]))
_NO_OVERLAP = ("index_put", "index_add", "scatter", "scatter_add", "scatter_reduce")
_VALUE_READ = ("fill", "masked_fill")
# PyTorch runs these without its internal-overlap check (only a deprecation warning), so on
# an expanded tensor they write the elements they address (x.expand(3, 4)[m] = 0;
# index_fill_ writes through index_put there: functions_index_writes.py)
_UNCHECKED = ("masked_fill", "index_put")


def _dense(a):
    """Whether a's strides are a permutation of contiguous ones (size-1 dims ignored)."""
    expected = a.itemsize
    for st, n in sorted((st, n) for st, n in zip(a.strides, a.shape) if n != 1):
        if st != expected:
            return False
        expected *= n
    return True


def _check_overlap(op, t, inputs):
    """PyTorch's error for an operand that shares part of the memory an in-place op writes
    (x[1:].add_(x[:-1]), x.copy_(x.t())): by its get_overlap_status, which only judges
    dense layouts (x[::2].add_(x[1::2]) is let through)."""
    a = t._data
    # (a writeable view whose elements repeat: as_strided's; an expanded one is read-only,
    # _write_read_only_view's; NumPy would write one of the values into each repeated cell)
    # (a C-contiguous array has no repeated elements: the usual case skips the scan)
    if not a.flags.c_contiguous and a.flags.writeable and \
            op.name not in _VALUE_READ + ("zero",) and a.size and any(
            s == 0 and n > 1 for s, n in zip(a.strides, a.shape)):
        raise RuntimeError("unsupported operation: more than one element of the written-to "
                           "tensor refers to a single memory location. Please clone() the "
                           "tensor before performing the operation.")
    if op.name in _VALUE_READ:
        return
    for x in inputs[1:]:
        if not isinstance(x, Tensor) or x._storage is not t._storage or not a.size or \
                not x._data.size or not _dense(a) or not _dense(x._data):
            continue
        b = x._data
        a0, b0 = a.__array_interface__["data"][0], b.__array_interface__["data"][0]
        a1, b1 = a0 + a.nbytes, b0 + b.nbytes
        full = a0 == b0 and a1 == b1 and a.ndim == b.ndim and all(
            sa == sb for sa, sb, n in zip(a.strides, b.strides, a.shape) if n != 1)
        if (a0 < b1 and b0 < a1) and (not full or op.name in _NO_OVERLAP):
            raise RuntimeError("unsupported operation: some elements of the input tensor and "
                               "the written-to tensor refer to a single memory location. "
                               "Please clone() the tensor before performing the operation.")


_CATEGORY = {bool: 0, int: 1, float: 2}     # (scalar_category of the common numbers)


def _check_cast(op, t, inputs):
    """PyTorch's check before the op: the operands' result type casts to t's dtype. Its
    category is that of one of the promoting operands, so none above t's means no error
    (but for an integer t of an op with a float result, exp_): then the full rule is skipped."""
    pos = range(len(inputs)) if op.promote == "all" else op.promote or (0,)
    top = t._dtype._cat
    if not op.float_out or top >= 2:
        for i in pos:
            if i < len(inputs):
                x = inputs[i]
                if isinstance(x, Tensor):
                    if x._dtype._cat > top or not x._dtype._plain:
                        break
                elif x is not None and _CATEGORY.get(type(x), 3) > top:
                    break
        else:
            return
    rt = result_type(*[inputs[i] for i in pos if i < len(inputs)])
    if rt is not None and op.float_out and rt._cat < 2:
        rt = get_default_dtype()        # (exp_, sqrt_, atan2_ ... of integers: a float result)
    if rt is not None and rt._cat > t._dtype._cat:      # (PyTorch's check, before the op)
        raise RuntimeError(f"result type {scalar_type_name(rt)} can't be cast to the desired output "
                           f"type {scalar_type_name(t._dtype)}")


def call_inplace(op, t, inputs, attrs, _timed=False, _dual=False):
    """Run op out of place, write the result into t's memory, bump the version, and
    rebase t's history (through CopySlices on its base when t is a view)."""
    if fast_write(op, t, inputs, attrs):      # (the common case: inplace_fast.py)
        return t
    if dispatch.profiler is not None and not _timed:     # (torch.profiler: dispatch.py)
        return dispatch.profiler.op_inplace(op, t, inputs, attrs)
    if dispatch.forward_ad is not None and not _dual:    # (a dual level: dispatch.py)
        return dispatch.forward_ad.call_inplace(op, t, inputs, attrs)
    for x in inputs:
        # (NumPy's numbers, dynamic numbers, ints past int64 and uint64: dispatch.call)
        if type(x) in SPECIAL_OPERANDS or type(x) is int and not -1 << 63 <= x < 1 << 64:
            inputs = special_operands(op, inputs, attrs)
            break
    if attrs and stand_ins.active:          # (a traced function's dynamic number)
        escape_in_attrs(op, attrs)
    if dispatch.batching is not None:       # a vmap is active (llgrad/func/batching.py)
        res = dispatch.batching.call_inplace(op, t, inputs, attrs)
        if res is not NotImplemented:
            return res
    impl = run_impl
    # one pass over the inputs (this is the eager hot path of every in-place op): a complex
    # or bfloat16 operand, one that may require grad (_req's cheap answer: it neither
    # requires grad itself nor is a view), one of another shape than t's
    plain, req, shape = True, False, t._data.shape
    for x in inputs:
        if isinstance(x, Tensor):
            plain = plain and x._dtype._plain
            req = req or x._requires_grad or x._base is not None
            if x._data.shape != shape:
                shape = None
    if not plain:
        impl = dispatch.impl_for_special(op, inputs, attrs)
    _check_inplace(t, inputs)
    _check_overlap(op, t, inputs)
    if op.kind == "elementwise" and shape is None:     # (operands of t's shape broadcast)
        _check_broadcast_into(t._data.shape, inputs)
    _check_cast(op, t, inputs)
    # (a meta t: nothing is computed or written, the rest is as on the CPU)
    on_meta = dispatch.meta is not None and dispatch.meta.inplace(op, t, inputs, attrs)
    recording = req and grad_mode.state.grad_enabled and op.vjp is not None and \
        t._dtype._cat >= 2 and any(_is_tensor(x) and _req(x) for x in inputs)  # (ints: none)
    retained = (t._grad_fn, t._output_nr) if recording and t._retains_grad else None
    tracer = _tstate.tracer
    chained = not on_meta and shares_cells(t)
    if chained and tracer is not None:
        tracer.graph_break(f"{op.name}_ on a view whose elements share memory (each element "
                           "reads what an earlier one wrote)")
    if tracer is not None and op.name in _UNCHECKED and not on_meta and \
            any(s == 0 and n > 1 for n, s in zip(t._data.shape, t.stride())):
        tracer.graph_break(f"{op.name}_ on an expanded tensor (the elements it addresses "
                           "written into shared memory)")
    operands = tracer.operands(inputs) if tracer is not None else None   # values before
    try:
        # (copy_ of a tensor of t's dtype: its array written into t directly, NumPy's
        # assignment copying once, through a buffer where the two overlap, where the impl's
        # copy and then the write would move the data twice)
        out = None if on_meta else inputs[1]._data if op.name == "copy" and \
            impl is run_impl and not chained and isinstance(inputs[1], Tensor) and \
            inputs[1]._dtype is t._dtype else impl(op, inputs, attrs)
    except OverflowError:
        inputs = wrapped_ints(op, inputs)
        operands = tracer.operands(inputs) if tracer is not None else None
        out = impl(op, inputs, attrs)
    if t._dtype is bfloat16 and out is not None:
        out = bf16_values.round_to(out)     # (a float32 result: rounded once, not truncated)
    old_self = None
    if recording and t._dtype._cat >= 2 and op.args[0] in op.save:
        # t is about to change: save a clone, recorded so that it keeps t's history (the
        # VJP reads it, and create_graph differentiates through it)
        old_self = call(OPS["clone"], (t,), {"memory_format": "preserve"}, _dual=True)
    saved_inputs = _operands_before_write(t, inputs) if recording and \
        saved_hooks.shared.mutation_ok else inputs
    base = t._base
    base_edge = gradient_edge(base) if recording and base is not None else None
    self_edge = gradient_edge(t) if recording else None
    try:
        if chained and op.kind != "elementwise":
            write_changed(t, out)
        elif chained:       # (PyTorch's loop, element by element: inplace_overlap.py)
            write_sequentially(t, inputs, attrs, lambda ins, at: impl(op, ins, at),
                               bf16_values.round_to if t._dtype is bfloat16 else np.asarray)
        elif not on_meta:
            # (a 0-d result is a NumPy scalar, which NumPy range-checks where an array
            # wraps: int8 100 += uint8 200 is 44, as PyTorch's)
            t._data[...] = out if isinstance(out, np.ndarray) else np.asarray(out)
    except ValueError as e:
        if "read-only" not in str(e):
            raise
        _write_read_only_view(op, t, inputs, out, recording)
    t._storage.version += 1
    t._storage.write_loc = user_position()     # (shown by saved_tensor.where_str)
    if tracer is not None:
        tracer.record_inplace(op, t, operands, attrs)
    if not recording:
        return t
    node = record(op, saved_inputs, attrs, [], self_override=old_self)
    _saved_before_write(node, t)
    if base is None:
        node.next_functions = ((self_edge or (None, 0)),) + node.next_functions[1:]
        _save_result(op, node, t)
        t._grad_fn, t._output_nr, t._requires_grad = node, 0, True
    else:
        # CopySlices calls node itself; edge 0 only says the view's gradient is wanted
        node.next_functions = ((self_edge or VIEW_GRAD_WANTED),) + node.next_functions[1:]
        _save_result(op, node, t, on_view=True)
        cs = CopySlices(base, t, node, base_edge)
        base_retained = (base._grad_fn, base._output_nr) if base._retains_grad else None
        base._grad_fn, base._output_nr, base._requires_grad = cs, 0, True
        if base_retained is not None:
            _move_retention(base, *base_retained)
        t._view_version = -1           # its grad_fn is rebuilt (AsStridedBackward0) on access
    if retained is not None:
        _move_retention(t, *retained)
    return t


def _write_read_only_view(op, t, inputs, out, recording):
    """Write out into t, a view NumPy holds read-only: one of an expanded tensor (its own
    memory: written through a writeable view of it, as PyTorch writes where no two elements
    share memory, or all get one value: fill_, zero_), or of a read-only array (an error)."""
    base = t._storage.base
    overlaps = geometry_overlaps(t._data.shape, t.stride())
    # (when autograd records the write, PyTorch's error comes in backward: CopySlices)
    one_value = op.name == "zero" or op.name == "fill" and not _is_tensor(inputs[1])
    if base.flags.writeable and overlaps and op.name in _UNCHECKED:
        write_changed(t, out)
        return
    if base.flags.writeable and (not overlaps or one_value):
        offset = t._data.__array_interface__["data"][0] - t._storage.data_ptr()
        np.ndarray(t._data.shape, t._data.dtype, base, offset, t._data.strides)[...] = out
        return
    if overlaps:
        raise RuntimeError("unsupported operation: more than one element of the written-to "
                           "tensor refers to a single memory location. Please clone() the "
                           "tensor before performing the operation.") from None
    raise RuntimeError(f"{op.name}_: the tensor's memory is read-only (a read-only NumPy "
                       "array or memmap under from_numpy): clone() it, or make the array "
                       "writeable, before writing into it") from None


def _operands_before_write(t, inputs):
    """Under allow_mutation_on_saved_tensors, an operand other than t that shares t's
    memory (x.mul_(x)) must be saved with its values before the write, as PyTorch packs it
    before the kernel runs: a clone made now (keeping its history) stands for it."""
    return [x if i == 0 or not isinstance(x, Tensor) or x._storage is not t._storage else
            call(OPS["clone"], (x,), {"memory_format": "preserve"}, _dual=True)
            for i, x in enumerate(inputs)]


def _saved_before_write(node, t):
    """An operand saved by an in-place op that shares t's memory (x.mul_(x)) was saved
    after the write, so it holds the new values: date it before the write, as PyTorch saves
    it before the op, so that backward raises the in-place error instead of using them."""
    for s in node._saved.values():
        for x in (s if isinstance(s, list) else (s,)):
            if isinstance(x, SavedTensor) and not x.is_output and \
                    getattr(x.tensor, "_storage", None) is t._storage:  # (not hook-packed)
                x.version = t._storage.version - 1


def _move_retention(t, old_fn, old_nr):
    """retain_grad() follows the tensor to its new history (PyTorch retains the gradient of
    the tensor's current value, not of the value before the in-place op)."""
    ref = old_fn._retained.pop(old_nr, None) if old_fn is not None and old_fn._retained else None
    if ref is None:
        return
    fn = t.grad_fn
    fn._retained = fn._retained or {}
    fn._retained[t._output_nr] = ref


def _save_result(op, node, t, on_view=False):
    if "result" in op.save:
        # In place on a view, the node is not t's grad_fn (CopySlices on the base calls it):
        # like PyTorch (is_inplace_on_view), the saved result unpacks as t with its current
        # history, so double backward goes through the base's graph, not back into node.
        node._saved["result"] = SavedTensor(t, is_output=not on_view)
