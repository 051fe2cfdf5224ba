"""The one dispatcher: every op, eager or in-place, goes through `call`/`call_inplace`,
which runs the op table's NumPy impl and records the backward node when grad is on."""
import numpy as np

from . import grad_mode
from .dtypes import float32, result_type
from .node import (SavedTensor, gradient_edge, node_class, user_location)


def _is_tensor(x):
    return hasattr(x, "_dtype")


def _req(t):
    return t._requires_grad or (t._base is not None and t.grad_fn is not None)


def prepare(op, inputs):
    """Input arrays, promoted to one dtype where the op promotes (PyTorch's rules)."""
    promote = op.promote
    if not promote:
        return [x._data if _is_tensor(x) else x for x in inputs]
    pos = range(len(inputs)) if promote == "all" else promote
    rt = result_type(*[inputs[i] for i in pos if i < len(inputs)])
    if op.float_out and rt is not None and not rt.is_floating_point:
        rt = float32
    arrays = []
    for i, x in enumerate(inputs):
        if _is_tensor(x):
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
            from .shapes import broadcast_shapes
            broadcast_shapes(*[x._data.shape for x in inputs if _is_tensor(x)])
        raise RuntimeError(f"{op.name}: {e}") from None


def call(op, inputs, attrs):
    from .tensor import Tensor
    out = run_impl(op, inputs, attrs)
    if op.kind == "view":
        base = inputs[0]
        results = [Tensor._view_of(o, base) for o in out] if op.nout != 1 else \
            [Tensor._view_of(out, base)]
    elif op.nout != 1:
        results = [Tensor._from_array(o) for o in out]
    else:
        results = [Tensor._from_array(out)]
    if grad_mode.state.grad_enabled and op.vjp is not None:
        for x in inputs:
            if _is_tensor(x) and _req(x):
                record(op, inputs, attrs, results)
                break
    if op.kind == "view" and op.nout != 1:
        for r in results:
            r._multi_view = True
    return results[0] if op.nout == 1 else tuple(results)


def _variadic(op, inputs):
    """Map the op's argument names to inputs ("*name" takes the rest as a list)."""
    named = {}
    for i, a in enumerate(op.args):
        if a[0] == "*":
            named[a[1:]] = list(inputs[i:])
            break
        named[a] = inputs[i] if i < len(inputs) else None
    return named


def _save(x):
    return SavedTensor(x) if _is_tensor(x) else x


def record(op, inputs, attrs, results, self_override=None):
    node = node_class(op.node_name(inputs, attrs))(op, attrs)
    edges, meta = [], []
    for x in inputs:
        if _is_tensor(x):
            e = gradient_edge(x)
            edges.append(e if e is not None and x._dtype.is_floating_point else (None, 0))
            meta.append((x._data.shape, x._dtype))
        else:
            edges.append((None, 0))
            meta.append(None)
    node.next_functions = tuple(edges)
    node._in_meta = tuple(meta)
    if op.nout != 1:
        node._out_meta = [(r._data.shape, r._dtype) for r in results]
    if op.save:
        named = None
        saved = node._saved
        for name in op.save:
            if name.startswith("result"):
                if not results:
                    continue                      # in-place: the caller saves t itself
                i = int(name[6:] or 0)
                r = results[i]
                saved[name] = SavedTensor(r, is_output=True, output_nr=i)
                continue
            if named is None:
                named = _variadic(op, inputs)
                if self_override is not None:
                    named[op.args[0]] = self_override
            v = named[name]
            saved[name] = [_save(x) for x in v] if isinstance(v, list) else _save(v)
        node._where = user_location()
    for i, r in enumerate(results):
        if r._dtype.is_floating_point:
            r._grad_fn = node
            r._output_nr = i
            r._requires_grad = True
    return node


def _check_inplace(t):
    if t._multi_view:
        raise RuntimeError(
            f"Output {t._output_nr} of {type(t.grad_fn).__name__} is a view and is being "
            "modified inplace. This view is the output of a function that returns multiple "
            "views. Such functions do not allow the output views to be modified inplace. You "
            "should replace the inplace operation by an out-of-place one.")
    if t._inference and not grad_mode.state.inference:
        raise RuntimeError("Inplace update to inference tensor outside InferenceMode is not "
                           "allowed.You can make a clone to get a normal tensor before doing "
                           "inplace update.See https://github.com/pytorch/rfcs/pull/17 for "
                           "more details.")
    if grad_mode.state.grad_enabled:
        if t._requires_grad and t._grad_fn is None and t._base is None:
            raise RuntimeError("a leaf Variable that requires grad is being used in an "
                               "in-place operation.")
        b = t._base
        if b is not None and b._requires_grad and b._grad_fn is None:
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in "
                               "an in-place operation.")


def call_inplace(op, t, inputs, attrs):
    """Run op out of place, write the result into t's memory, bump the version, and
    rebase t's history (through CopySlices on its base when t is a view)."""
    from .tensor import Tensor
    _check_inplace(t)
    rt = result_type(*[inputs[i] for i in (range(len(inputs)) if op.promote == "all"
                                           else op.promote or (0,)) if i < len(inputs)])
    if rt is not None and rt._cat > t._dtype._cat:
        raise RuntimeError(f"result type {_tname(rt)} can't be cast to the desired output "
                           f"type {_tname(t._dtype)}")
    recording = grad_mode.state.grad_enabled and op.vjp is not None and \
        any(_is_tensor(x) and _req(x) for x in inputs)
    out = run_impl(op, inputs, attrs)
    old_self = None
    if recording and t._dtype.is_floating_point and op.args[0] in op.save:
        old_self = Tensor._from_array(np.array(t._data, copy=True))   # t is about to change
        old_self._grad_fn, old_self._requires_grad = None, False
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
    if not recording:
        return t
    node = record(op, inputs, attrs, [], self_override=old_self)
    if base is None:
        node.next_functions = ((self_edge or (None, 0)),) + node.next_functions[1:]
        _save_result(op, node, t)
        t._grad_fn, t._output_nr, t._requires_grad = node, 0, True
    else:
        from .copy_slices import CopySlices
        # CopySlices calls node itself; edge 0 only says the view's gradient is wanted
        node.next_functions = ((self_edge or (node, 0)),) + node.next_functions[1:]
        _save_result(op, node, t)
        cs = CopySlices(base, t, node, base_edge)
        base._grad_fn, base._output_nr, base._requires_grad = cs, 0, True
        t._view_version = -1           # its grad_fn is rebuilt (AsStridedBackward0) on access
    return t


def _save_result(op, node, t):
    if "result" in op.save:
        node._saved["result"] = SavedTensor(t, is_output=True)


def _tname(d):
    return {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
            "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
            "bool": "Bool"}[d.name]
