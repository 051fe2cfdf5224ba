"""The dispatcher's meta-device hook: an op with a meta tensor operand computes no values.
Its result types come from the op table's shape/dtype rule (ir/shape_rules.py, the IR's
own), laid out as eager lays the op's result out (row-major, or PyTorch's TensorIterator
layout for elementwise ops, or a copy's memory format), and the results are new meta
tensors with the same autograd history a CPU op records. View ops take the ordinary path:
on a meta tensor's `_data` they compute only pointers (meta_tensor.py).

The hook is put in with the first meta tensor made (dispatch.meta: until then one global
read per op, as the other hooks); `uninstall` takes it out again."""
import numpy as np

from ..ir.graph import TensorType
from ..ir.ops_copy import CHANNELS_LAST
from ..ir.optable import contiguous_result, iterator_layout_op, unreduced_elementwise
from ..ir.shape_rules import infer_types
from . import dispatch, grad_mode, trace_state, vmap_fallback
from .dtypes import from_name
from .memory_layout import iterator_result_strides
from . import meta_tensor as meta_tensor_module
from .meta_tensor import MetaStorage, meta_tensor, no_data_error, preserved_strides
from .shapes import broadcast_shapes
from .tensor import Tensor

_grad = grad_mode.state
_tstate = trace_state.state

# ops whose result shape depends on the values: PyTorch has no meta kernel for them
_NONZERO = ("The register_meta function for llgrad.nonzero() raises unimplemented by default, "
            "as a correct data-independent implementation does not exist.")


def no_meta_kernel(name):
    """PyTorch's error for an operator that has no meta kernel."""
    return NotImplementedError(
        f"aten::{name}: attempted to run this operator with Meta tensors, but there was no "
        "fake impl or Meta kernel registered.")


def nonzero_error():
    """PyTorch's error for nonzero (and boolean-mask indexing) of a meta tensor."""
    return NotImplementedError(_NONZERO)


def _device_name(t):
    return "meta" if t._storage.__class__ is MetaStorage else "cpu"


def _index_positions(op, n):
    # the positions of op's index tensors among n inputs (a variadic tail included)
    if op.name in ("index_add", "index_copy", "index_fill"):    # (these check the devices)
        return ()
    pos = []
    for i, a in enumerate(op.args):
        if a.lstrip("*") in ("index", "indices"):
            pos += range(i, n) if a.startswith("*") else [i]
    return pos


def check_devices(op, inputs):
    """PyTorch's error for tensors on two devices in one op. The expected device is the
    first tensor's that is not a CPU 0-d one; beside meta tensors a CPU tensor is allowed
    when it is 0-d (a wrapped number) or an index (gather's, indexing's, embedding's: as
    PyTorch's meta kernels take them)."""
    want = None
    for x in inputs:
        if isinstance(x, Tensor) and (x._data.ndim or x._storage.__class__ is MetaStorage):
            want = _device_name(x)
            break
    for i, x in enumerate(inputs):
        if not isinstance(x, Tensor) or _device_name(x) == want:
            continue
        if want == "meta" and (not x._data.ndim or i in _index_positions(op, len(inputs))):
            continue
        raise RuntimeError(f"Tensor on device {_device_name(x)} is not on the expected device "
                           f"{want}!")


def _type(x):
    if not isinstance(x, Tensor):
        return x
    a = x._data
    item = a.itemsize
    return TensorType(x._dtype.name, tuple(a.shape), tuple(s // item for s in a.strides),
                      x._storage_offset())


_MATMULS = ("mm", "bmm", "matmul", "addmm", "baddbmm")


def _matmul_types(op, inputs, attrs):
    """The result type of a matrix product without the shape rule's product of stand-ins
    (a model's weights on the meta device may hold gigabytes), or None (the rule decides,
    and raises its errors)."""
    a, b = inputs[-2], inputs[-1]
    if not (isinstance(a, Tensor) and isinstance(b, Tensor)) or not a._data.ndim or \
            not b._data.ndim or any(isinstance(x, Tensor) and x._data.ndim > 3 and
                                    op.name != "matmul" for x in inputs):
        return None
    sa, sb = tuple(a._data.shape), tuple(b._data.shape)
    ka, kb = sa[-1], (sb[-2] if len(sb) > 1 else sb[0])
    if ka != kb:
        return None
    try:
        batch = broadcast_shapes(sa[:-2], sb[:-2])
    except RuntimeError:
        return None
    shape = tuple(batch) + (sa[-2:-1] if len(sa) > 1 else ()) + (sb[-1:] if len(sb) > 1 else ())
    # the dtype (and the other operands' checks) from the rule on one-element stand-ins
    small = infer_types(op.name, _tiny(inputs), attrs)
    return [TensorType(small[0].dtype, shape)]


def _tiny(inputs):
    # one-element stand-ins of the tensors, of their ranks (a dtype rule reads no more)
    return [TensorType(x._dtype.name, (1,) * x._data.ndim) if isinstance(x, Tensor) else x
            for x in inputs]


def _elementwise_types(op, inputs, attrs):
    """An elementwise op's result types: the operands' broadcast shape, the dtypes of the
    rule on one-element stand-ins (no result of the full size is made: a meta model's
    weights may hold gigabytes)."""
    shape = tuple(broadcast_shapes(*[x._data.shape for x in inputs if isinstance(x, Tensor)]))
    return [TensorType(t.dtype, shape) for t in infer_types(op.name, _tiny(inputs), attrs)]


def _result_types(op, inputs, attrs):
    if op.kind == "elementwise":
        return _guarded_rule(_elementwise_types, op, inputs, attrs)
    if op.name in _MATMULS:
        types = _matmul_types(op, inputs, attrs)
        if types is not None:
            return types
    if op.name in ("index", "index_put"):
        # a bool mask's length is its True count: a CPU mask has one, a meta mask none
        masks = [x for x in inputs[1 if op.name == "index" else 2:]
                 if isinstance(x, Tensor) and x._dtype.name == "bool"]
        if any(m._storage.__class__ is MetaStorage for m in masks):
            raise nonzero_error()
        if masks:
            attrs = dict(attrs, counts=[int(np.count_nonzero(m._data)) for m in masks])
    return _guarded_rule(lambda op, inputs, attrs: infer_types(
        op.name, [_type(x) for x in inputs], attrs), op, inputs, attrs)


def _guarded_rule(rule, op, inputs, attrs):
    # the rule's errors as the op's eager errors (dispatch.run_impl's)
    try:
        with np.errstate(all="ignore"):
            return rule(op, inputs, attrs)
    except np.linalg.LinAlgError:
        raise no_meta_kernel(op.name) from None
    except ValueError as e:
        if "broadcast" in str(e):
            broadcast_shapes(*[x._data.shape for x in inputs if isinstance(x, Tensor)])
        raise (e if getattr(e, "keep_type", False) else RuntimeError(f"{op.name}: {e}")) \
            from None


def _strides(op, ty, inputs, attrs):
    shape = ty.shape
    fmt = attrs.get("memory_format")
    if fmt in CHANNELS_LAST and len(shape) == len(CHANNELS_LAST[fmt]):
        out, acc = [0] * len(shape), 1
        for d in reversed(CHANNELS_LAST[fmt]):
            out[d] = acc
            acc *= shape[d]
        return tuple(out)
    src = inputs[0] if inputs else None
    if op.name in ("clone", "copy", "to_dtype") and fmt in (None, "preserve") and \
            isinstance(src, Tensor) and tuple(src._data.shape) == shape:
        return preserved_strides(shape, src.stride())
    if iterator_layout_op(op) and not contiguous_result(op) or \
            unreduced_elementwise(op) and attrs.get("reduction") == "none":
        return iterator_result_strides(shape, inputs, op)
    return None


def call(op, inputs, attrs):
    """op on inputs when one is a meta tensor: meta results (with autograd history as on
    the CPU); NotImplemented when no operand is on the meta device."""
    for x in inputs:
        if isinstance(x, Tensor) and x._storage.__class__ is MetaStorage:
            break
    else:
        return NotImplemented
    check_devices(op, inputs)
    if _tstate.tracer is not None:
        _tstate.tracer.graph_break("an op on meta tensors")
    if op.kind == "view":
        return NotImplemented       # (pointers only: the ordinary path)
    types = _result_types(op, inputs, attrs)
    results = [meta_tensor(t.shape, from_name(t.dtype), _strides(op, t, inputs, attrs))
               for t in types]
    if op.vjp is not None and _grad.grad_enabled and \
            any(isinstance(x, Tensor) and dispatch._req(x) for x in inputs):
        dispatch.record(op, inputs, attrs, results)
    return results[0] if op.nout == 1 else tuple(results)


def inplace(op, t, inputs, attrs):
    """Whether in-place op writes into a meta tensor t (then nothing is computed or
    written; the operands are checked as the op checks them). Raises for a CPU t written
    from a meta tensor, as PyTorch."""
    if t._storage.__class__ is not MetaStorage:
        for x in inputs:
            if isinstance(x, Tensor) and x._storage.__class__ is MetaStorage:
                if op.name == "copy":
                    raise no_data_error()
                check_devices(op, inputs)
        return False
    if _tstate.tracer is not None:
        _tstate.tracer.graph_break("an op on meta tensors")
    if op.name != "copy":           # (a copy into a meta tensor may come from any device)
        check_devices(op, inputs)
        # the rule's checks (index shapes ...) where they cost little: the elementwise ones
        # were made before (a broadcast into t), and a rule's stand-ins cost t's size
        if op.kind != "elementwise" and sum(x._data.size for x in inputs
                                            if isinstance(x, Tensor)) <= _CHECKED_ELEMENTS \
                and not _meta_mask_put(op, inputs):
            _result_types(op, inputs, attrs)
    return True


_CHECKED_ELEMENTS = 1 << 22


def _meta_mask_put(op, inputs):
    # t[mask] = values with a mask on the meta device: its True count is unknown, and
    # PyTorch's meta kernel takes the values unchecked
    return op.name == "index_put" and any(
        isinstance(x, Tensor) and x._dtype.name == "bool" and
        x._storage.__class__ is MetaStorage for x in inputs[2:])


class _Hook:
    """What dispatch.meta holds while meta tensors exist: call and inplace above."""
    call = staticmethod(call)
    inplace = staticmethod(inplace)


meta_tensor_module.hook = _Hook       # (the first meta tensor puts it in the dispatcher)


def uninstall():
    """Take the hook out of the dispatcher until the next meta tensor is made (ops on
    meta tensors made before then compute on their zeros)."""
    dispatch.meta = vmap_fallback.meta = None
