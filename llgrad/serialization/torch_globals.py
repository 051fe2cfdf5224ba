"""What PyTorch's globals in a checkpoint load as: the torch._utils rebuild functions (over
one load's storages), torch.Size, torch.device, the dtypes and storage classes, the few
builtins and collections a checkpoint uses, and refusals for the tensor kinds llgrad lacks.
This table is what weights_only allows by default."""
import codecs
import pickle
from collections import Counter, OrderedDict

import numpy as np

from .. import quantized_tensor as qt
from ..nn.parameter import Parameter
from ..runtime.device import device
from ..runtime import functions
from ..runtime.functions import sparse_coo
from ..runtime.functions_config import layout
from ..runtime.functions_sparse import sparse_coo_tensor
from ..runtime.meta_tensor import rebuild_meta
from ..runtime.tensor import Size, Tensor
from .torch_names import _DTYPE_BY_TORCH_NAME, _OTHER_TORCH_DTYPES, _STORAGE_TYPES, _OtherDtype


def _set_requires_grad(t, requires_grad):
    if requires_grad:
        if t.dtype._cat < 2:
            raise RuntimeError("only Tensors of floating point and complex dtype can require "
                               "gradients")
        t.requires_grad_(True)
    return t


def _apply_metadata(t, metadata):
    """PyTorch's lazy conjugate and negative bits (a saved x.conj() or -x.imag keeps x's
    memory and the bit): llgrad has no such views, so the values are made."""
    if metadata:
        if metadata.get("conj"):
            t = t.conj_physical()
        if metadata.get("neg"):
            t = -t
    return t


def _set_state(obj, state):
    """PyTorch's _set_obj_state: attributes saved with a tensor (not llgrad's own slots)."""
    if isinstance(state, tuple):
        if len(state) != 2:
            raise RuntimeError(f"Invalid serialized state: {state}")
        state = state[0]
    if state:
        if not isinstance(state, dict):
            raise pickle.UnpicklingError("a tensor's saved state must be a dict")
        for k, v in state.items():
            if not isinstance(k, str) or k in Tensor.__slots__ or k.startswith("__"):
                raise pickle.UnpicklingError(f"cannot restore attribute {k!r} on a tensor")
            obj.__dict__[k] = v
    return obj


def _torch_globals(loader):
    """PyTorch's names as llgrad objects, for this load (the rebuild functions read its
    storages)."""
    def _rebuild_tensor(storage, storage_offset, size, stride):
        return loader.rebuild_tensor(storage, storage_offset, size, stride)

    def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
                           backward_hooks, metadata=None):
        t = loader.rebuild_tensor(storage, storage_offset, size, stride)
        return _set_requires_grad(_apply_metadata(t, metadata), requires_grad)

    def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad,
                           backward_hooks, dtype, metadata=None):
        t = loader.rebuild_tensor(storage, storage_offset, size, stride, dtype)
        return _set_requires_grad(_apply_metadata(t, metadata), requires_grad)

    def _rebuild_parameter(data, requires_grad, backward_hooks):
        if not isinstance(data, Tensor):
            raise pickle.UnpicklingError("a Parameter's data must be a tensor")
        return Parameter(data, requires_grad)

    def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
        return _set_state(_rebuild_parameter(data, requires_grad, backward_hooks), state)

    rebuilders = (_rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter,
                  _rebuild_parameter_with_state)

    def _rebuild_from_type_v2(func, new_type, args, state):
        if func not in rebuilders:
            raise pickle.UnpicklingError(f"_rebuild_from_type_v2: unsupported function {func}")
        if new_type not in (Tensor, Parameter):
            raise pickle.UnpicklingError("_rebuild_from_type_v2: llgrad rebuilds only tensors "
                                         "and Parameters")
        ret = func(*args)
        if new_type is Parameter and not isinstance(ret, Parameter):
            ret = Parameter(ret, ret.requires_grad)
        return _set_state(ret, state)

    def _rebuild_sparse_tensor(layout, data):
        if layout is not sparse_coo:
            raise RuntimeError(f"llgrad.load: the file holds a sparse tensor of layout "
                               f"{layout}; llgrad has the sparse COO layout only")
        indices, values, size, coalesced = data     # (checked against size, as PyTorch's load)
        return sparse_coo_tensor(indices, values, size, is_coalesced=coalesced)

    def _rebuild_qtensor(storage, storage_offset, size, stride, quantizer_params,
                         requires_grad, backward_hooks):
        ints = loader.rebuild_tensor(storage, storage_offset, size, stride)
        dtype = {npd: q for q, (npd, _) in qt.INT_OF.items()}.get(ints._data.dtype)
        scheme = quantizer_params[0]
        if dtype is None or not isinstance(scheme, qt.qscheme):
            raise pickle.UnpicklingError("_rebuild_qtensor: not a quantized tensor's storage")
        if scheme is qt.per_tensor_affine:
            _, scale, zero_point = quantizer_params
            return qt.QuantizedTensor(ints._data, dtype, scheme, float(scale), int(zero_point))
        if scheme is qt.per_channel_affine or scheme is qt.per_channel_affine_float_qparams:
            _, scales, zero_points, axis = quantizer_params
            if not 0 <= axis < len(size) or len(scales) != size[axis] or \
                    len(zero_points) != size[axis]:
                raise ValueError("_rebuild_qtensor: per_channel scales/zero_points do not "
                                 "match size[axis]")
            sc = scales.numpy() if isinstance(scales, Tensor) else scales
            zp = np.asarray(zero_points.numpy() if isinstance(zero_points, Tensor)
                            else zero_points)
            # (PyTorch saves float_qparams as per_channel_affine: the float zero points tell)
            if zp.dtype.kind == "f":
                scheme = qt.per_channel_affine_float_qparams
            return qt.QuantizedTensor(ints._data, dtype, scheme, sc, zp, axis)
        raise RuntimeError(f"llgrad.load: quantized tensors of scheme {scheme} are not "
                           "supported")

    def parameter(data=None, requires_grad=True):
        return Parameter(data, requires_grad)

    def size(*args):
        return Size(*args)

    def get_layout(name):
        got = getattr(functions, name[len("torch."):], None) if isinstance(name, str) and \
            name.startswith("torch.") else None
        return got if type(got) is layout else name

    def encode(obj, encoding="utf-8", errors="strict"):      # protocol 2's bytes
        if not isinstance(obj, str):
            raise pickle.UnpicklingError("_codecs.encode: expected a str")
        return codecs.encode(obj, encoding, errors)

    g = {
        "collections.OrderedDict": OrderedDict, "collections.Counter": Counter,
        "builtins.set": set, "builtins.bytearray": bytearray,     # (no frozenset: as torch)
        "builtins.complex": complex, "_codecs.encode": encode,
        "torch._utils._rebuild_tensor": _rebuild_tensor,
        "torch._utils._rebuild_tensor_v2": _rebuild_tensor_v2,
        "torch._utils._rebuild_tensor_v3": _rebuild_tensor_v3,
        "torch._utils._rebuild_parameter": _rebuild_parameter,
        "torch._utils._rebuild_parameter_with_state": _rebuild_parameter_with_state,
        "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
        "torch.nn.parameter.Parameter": parameter, "torch.Tensor": Tensor,
        "torch.Size": size, "torch.device": device,
        "torch.serialization._get_layout": get_layout,
        "torch._utils._rebuild_sparse_tensor": _rebuild_sparse_tensor,
        "torch._utils._rebuild_meta_tensor_no_storage": rebuild_meta,
        "torch._utils._rebuild_qtensor": _rebuild_qtensor,
    }
    for name, scheme in qt.SCHEMES.items():
        g[f"torch.{name}"] = scheme
    for name, d in qt.BY_NAME.items():
        g[f"torch.{name}"] = d
    for name, st in _STORAGE_TYPES.items():
        g[f"torch.{name}"] = st
        g[f"torch.cuda.{name}"] = st
        g[f"torch.storage.{name}"] = st
    for name, d in _DTYPE_BY_TORCH_NAME.items():
        g[f"torch.{name}"] = d
    for name in _OTHER_TORCH_DTYPES:
        g[f"torch.{name}"] = _OtherDtype(name)
    # the ones llgrad cannot rebuild: refused with the reason
    for name, what in (("_rebuild_nested_tensor", "nested tensors"),
                       ("_rebuild_wrapper_subclass", "tensor subclasses"),
                       ("_rebuild_device_tensor_from_numpy", "device tensors from NumPy"),
                       ("_rebuild_device_tensor_from_cpu_tensor", "device tensors")):
        g[f"torch._utils.{name}"] = _unsupported(name, what)
    return g


def _unsupported(name, what):
    def f(*args, **kwargs):
        raise RuntimeError(f"llgrad.load: the file holds {what} (torch._utils.{name}), which "
                           "llgrad does not support")
    f.__name__ = name
    return f
