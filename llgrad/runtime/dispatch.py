"""The one dispatcher: every op, eager or in-place, goes through `call`/`call_inplace`,
which runs the op table's NumPy impl and records the backward node when grad is on.
This is the eager hot path: keep it lean (no imports or allocations that can be avoided)."""
import numpy as np

from . import grad_mode, trace_state
from ..ir import OPS
from .copy_slices import CopySlices, creation_error
from .dtypes import _cat_of_scalar, float32, result_type
from .node import SavedTensor, gradient_edge, node_class, user_location
from .shapes import broadcast_shapes
from .tensor import Tensor

_state = grad_mode.state
_tstate = trace_state.state


def _is_tensor(x):
    return isinstance(x, Tensor)


def _req(t):
    if t._requires_grad:
        return True
    if t._base is None:
        return False
    if t._creation is not None:         # a view made under no_grad / inference_mode
        return t.requires_grad
    return t.grad_fn is not None


def _same_dtype(op, inputs, pos):
    """True when no promotion is needed: the promoted tensors share one dtype and no
    Python scalar is of a higher category (the common case, checked cheaply)."""
    first = None
    for i in pos:
        if i >= len(inputs):
            break
        x = inputs[i]
        if isinstance(x, Tensor):
            if first is None:
                first = x._dtype
            elif x._dtype is not first:
                return False
        elif x is not None:
            if not isinstance(x, _OPERANDS):
                raise TypeError(f"{op.name}(): argument {_ARG_NAMES[min(i, 2)]}(position {i}) "
                                f"must be a Tensor or a number, not {type(x).__name__}")
            if first is None or _cat_of_scalar(x) > first._cat:
                return False
    return first is not None and (first._cat == 2 or not op.float_out)


# what an op's promoted operand may be besides a Tensor: Python and NumPy numbers (and
# NumPy arrays, which PyTorch accepts too); a list or a string is a mistake, not data
_OPERANDS = (bool, int, float, np.generic, np.ndarray)
_ARG_NAMES = ("'input' ", "'other' ", "")


def prepare(op, inputs):
    """Input arrays, promoted to one dtype where the op promotes (PyTorch's rules)."""
    promote = op.promote
    if promote:
        pos = range(len(inputs)) if promote == "all" else promote
        if not _same_dtype(op, inputs, pos):
            return _promoted(op, inputs, pos)
    return [x._data if isinstance(x, Tensor) else x for x in inputs]


def _promoted(op, inputs, pos):
    rt = result_type(*[inputs[i] for i in pos if i < len(inputs)])
    if op.float_out and rt is not None and not rt.is_floating_point:
        rt = float32
    arrays = []
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor):
            a = x._data
            if x._dtype is not rt and i in pos:
                a = a.astype(rt.np)
            arrays.append(a)
        else:
            arrays.append(x)
    return arrays


def run_impl(op, inputs, attrs):
    try:
        return op.impl(*prepare(op, inputs), **attrs)
    except ValueError as e:
        if "broadcast" in str(e):
            broadcast_shapes(*[x._data.shape for x in inputs if _is_tensor(x)])
        raise RuntimeError(f"{op.name}: {e}") from None


def call(op, inputs, attrs):
    out = run_impl(op, inputs, attrs)
    if op.kind == "view":
        base = inputs[0]
        results = [Tensor._view_of(o, base) for o in out] if op.nout != 1 else \
            [Tensor._view_of(out, base)]
    elif op.nout != 1:
        results = [Tensor._from_array(o) for o in out]
    else:
        results = [Tensor._from_array(out)]
    if _state.grad_enabled and op.vjp is not None:
        for x in inputs:
            if isinstance(x, Tensor) and _req(x):
                record(op, inputs, attrs, results)
                break
    if op.kind == "view" and op.nout != 1 and _state.grad_enabled:
        for r in results:               # (under no_grad they are no_grad views instead)
            r._multi_view = True
    tracer = _tstate.tracer
    if tracer is not None:
        tracer.record(op, inputs, attrs, results)
    return results[0] if op.nout == 1 else tuple(results)


_plans = {}


def save_plan(op):
    """[(name, position)] for what op saves: position is an input index, ("*", i) for a
    variadic tail from input i, or ("result", k) for output k. Computed once per op."""
    plan = _plans.get(op.name)
    if plan is None:
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
        _plans[op.name] = plan
    return plan


def _save(x):
    return SavedTensor(x) if isinstance(x, Tensor) else x


_classes = {}


def _node_for(op, inputs, attrs):
    cls = _classes.get(op.name)
    if cls is None:
        name = op.node_name(inputs, attrs)
        cls = node_class(name)
        if isinstance(op.grad_fn, str):     # the name never varies: remember the class
            _classes[op.name] = cls
    return cls(op, attrs)


_nondiff = {}


def _nondiff_positions(op, n):
    """Input positions of op's nondiff arguments, for n inputs (a variadic tail included)."""
    key = (op.name, n)
    pos = _nondiff.get(key)
    if pos is None:
        pos = []
        for i, a in enumerate(op.args):
            if a.lstrip("*") in op.nondiff:
                pos += range(i, n) if a.startswith("*") else [i]
        pos = _nondiff[key] = frozenset(pos)
    return pos


def nondiff_error(function, argument):
    """PyTorch's error for a tensor requiring grad where it is never differentiated (an
    nll_loss weight, batch_norm's running statistics), with the user's line."""
    return RuntimeError(f"The function '{function}' is not differentiable with respect to "
                        f"argument '{argument}'. This input cannot have requires_grad True. "
                        f"(at {user_location()})")


def _has_edge(op, inputs, i, x, nondiff):
    """PyTorch's rule (optable's docstring): which inputs get a next_functions edge."""
    if i in nondiff:
        if isinstance(x, Tensor) and x.requires_grad:     # (as PyTorch: no silent zero)
            raise nondiff_error(op.name, op.args[min(i, len(op.args) - 1)].lstrip("*"))
        return False
    if isinstance(x, Tensor):
        return True
    if x is None:
        scalars = op.scalar_args
        if not scalars or op.args[i] not in scalars:
            return True             # a missing optional tensor (weight=None)
        # a bound of clamp: a Scalar, unless another bound is a tensor (the Tensor overload)
        return any(isinstance(inputs[k], Tensor) for k, a in enumerate(op.args) if a in scalars)
    return op.number_edges


def record(op, inputs, attrs, results, self_override=None):
    node = _node_for(op, inputs, attrs)
    edges, meta, at = [], [], None
    nondiff = _nondiff_positions(op, len(inputs)) if op.nondiff else ()
    for i, x in enumerate(inputs):
        tensor = isinstance(x, Tensor)
        if (tensor and not nondiff) or _has_edge(op, inputs, i, x, nondiff):
            if at is not None:
                at.append(len(edges))
            e = gradient_edge(x) if tensor and x._dtype._cat == 2 else None
            edges.append(e or (None, 0))
        else:
            if at is None:
                at = list(range(i))
            at.append(-1)
        meta.append((x._data.shape, x._dtype) if tensor else None)
    node.next_functions = tuple(edges)
    node._in_meta = tuple(meta)
    if at is not None:
        node._edge_at = tuple(at)
    if op.nout != 1:
        node._out_meta = [(r._data.shape, r._dtype) for r in results]
    if op.save:
        saved = node._saved
        for name, pos in save_plan(op):
            if type(pos) is int:
                x = self_override if pos == 0 and self_override is not None else \
                    (inputs[pos] if pos < len(inputs) else None)
                saved[name] = SavedTensor(x) if isinstance(x, Tensor) else x
            elif pos[0] == "*":
                saved[name] = [_save(x) for x in inputs[pos[1]:]]
            elif results:                   # in-place ops save their result themselves
                saved[name] = SavedTensor(results[pos[1]], is_output=True, output_nr=pos[1])
        node._where = user_location()
    tracer = _tstate.tracer
    if tracer is not None:          # the backward of a traced op reports the op's line
        node._where = tracer.current_loc()
    for i, r in enumerate(results):
        if r._dtype._cat == 2:
            r._grad_fn = node
            r._output_nr = i
            r._requires_grad = True
    return node


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
    if t._multi_view:
        raise RuntimeError(
            f"Output {t._output_nr} of {type(t.grad_fn).__name__} is a view and is being "
            "modified inplace. This view is the output of a function that returns multiple "
            "views. Such functions do not allow the output views to be modified inplace. You "
            "should replace the inplace operation by an out-of-place one.")
    if t._requires_grad and t._grad_fn is None and t._base is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an "
                           "in-place operation.")
    b = t._base
    if b is not None and b._requires_grad and b._grad_fn is None:
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


def call_inplace(op, t, inputs, attrs):
    """Run op out of place, write the result into t's memory, bump the version, and
    rebase t's history (through CopySlices on its base when t is a view)."""
    _check_inplace(t, inputs)
    if op.kind == "elementwise":
        _check_broadcast_into(t._data.shape, inputs)
    rt = result_type(*[inputs[i] for i in (range(len(inputs)) if op.promote == "all"
                                           else op.promote or (0,)) if i < len(inputs)])
    if rt is not None and rt._cat > t._dtype._cat:
        raise RuntimeError(f"result type {_tname(rt)} can't be cast to the desired output "
                           f"type {_tname(t._dtype)}")
    recording = grad_mode.state.grad_enabled and op.vjp is not None and \
        any(_is_tensor(x) and _req(x) for x in inputs)
    retained = (t._grad_fn, t._output_nr) if recording and t._retains_grad else None
    tracer = _tstate.tracer
    operands = tracer.operands(inputs) if tracer is not None else None   # values before
    out = run_impl(op, inputs, attrs)
    old_self = None
    if recording and t._dtype.is_floating_point and op.args[0] in op.save:
        # t is about to change: save a clone, recorded so that it keeps t's history (the
        # VJP reads it, and create_graph differentiates through it)
        old_self = call(OPS["clone"], (t,), {"memory_format": "preserve"})
    base = t._base
    base_edge = gradient_edge(base) if recording and base is not None else None
    self_edge = gradient_edge(t) if recording else None
    try:
        t._data[...] = out
    except ValueError as e:
        if "read-only" in str(e):
            raise RuntimeError("unsupported operation: more than one element of the written-to "
                               "tensor refers to a single memory location. Please clone() the "
                               "tensor before performing the operation.") from None
        raise
    t._storage.version += 1
    t._storage.write_loc = user_location()
    if tracer is not None:
        tracer.record_inplace(op, t, operands, attrs)
    if not recording:
        return t
    node = record(op, inputs, attrs, [], self_override=old_self)
    _saved_before_write(node, t)
    if base is None:
        node.next_functions = ((self_edge or (None, 0)),) + node.next_functions[1:]
        _save_result(op, node, t)
        t._grad_fn, t._output_nr, t._requires_grad = node, 0, True
    else:
        # CopySlices calls node itself; edge 0 only says the view's gradient is wanted
        node.next_functions = ((self_edge or (node, 0)),) + node.next_functions[1:]
        _save_result(op, node, t, on_view=True)
        cs = CopySlices(base, t, node, base_edge)
        base._grad_fn, base._output_nr, base._requires_grad = cs, 0, True
        t._view_version = -1           # its grad_fn is rebuilt (AsStridedBackward0) on access
    if retained is not None:
        _move_retention(t, *retained)
    return t


def _saved_before_write(node, t):
    """An operand saved by an in-place op that shares t's memory (x.mul_(x)) was saved
    after the write, so it holds the new values: date it before the write, as PyTorch saves
    it before the op, so that backward raises the in-place error instead of using them."""
    for s in node._saved.values():
        for x in (s if isinstance(s, list) else (s,)):
            if isinstance(x, SavedTensor) and not x.is_output and \
                    x.tensor._storage is t._storage:
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


def _tname(d):
    return {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
            "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
            "bool": "Bool"}[d.name]
