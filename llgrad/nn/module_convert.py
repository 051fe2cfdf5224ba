"""Module's conversions (to, float / double / half, type, to_empty, cpu, share_memory), all
through _apply as in PyTorch: a subclass that overrides _apply (to convert a cached tensor
that is not a buffer) sees every one of them. A parameter, its gradient and a buffer keep
their objects (optimisers and compiled calls hold them); their data is replaced."""
from __future__ import annotations

from .. import __future__ as _future
from ..runtime.device import NoCudaError, check as _check_device
from ..runtime.dtypes import bfloat16, dtype as _dtype, float16, float32, float64
from ..runtime.grad_mode import no_grad
from ..runtime.meta_tensor import is_meta_device
from ..runtime.tensor import Tensor


def _swap(t, new):
    if new is not t and isinstance(new, Tensor):
        # (PyTorch's `param.data = new` check: nothing of this tensor is replaced)
        if t.requires_grad and not (new.is_floating_point() or new.is_complex()):
            raise RuntimeError("data set to a tensor that requires gradients must be floating "
                               "point or complex dtype")
        t._data, t._storage, t._dtype = new._data, new._storage, new._dtype


def _overwrite_parameters(module, fn):
    """torch.__future__.set_overwrite_module_params_on_conversion(True): each parameter
    converted into a new Parameter object (its gradient converted with it)."""
    params = module._parameters
    for key, p in list(params.items()):
        if p is None:
            continue
        with no_grad():
            new = type(p)(fn(p), p.requires_grad)
            if p.grad is not None:
                new.grad = fn(p.grad).requires_grad_(p.grad.requires_grad)
        params[key] = new


def _is_device(v):
    return v is None or isinstance(v, (str, int)) and not isinstance(v, bool) \
        or type(v).__name__ == "device"


# Module.to's three signatures (PyTorch's _parse_to): per parameter, the values it takes
_TO_SIGNATURES = (
    (("device", _is_device), ("dtype", lambda v: v is None or isinstance(v, _dtype))),
    (("dtype", lambda v: isinstance(v, _dtype)),),
    (("tensor", lambda v: isinstance(v, Tensor)),))
_TO_FLAGS = ("non_blocking", "copy")


def _parse_to(args, kwargs):
    """(device, dtype or a tensor whose dtype is wanted, memory_format) of Module.to's
    arguments; a combination no signature takes is PyTorch's TypeError, a copy argument its
    RuntimeError."""
    for leading in _TO_SIGNATURES:
        names = [n for n, _ in leading] + list(_TO_FLAGS)
        bound = dict(zip(names, args))
        if len(args) > len(names) \
                or any(k in bound or k not in names + ["memory_format"] for k in kwargs):
            continue
        bound.update(kwargs)
        if len(leading) == 1 and leading[0][0] not in bound:    # (dtype / tensor: required)
            continue
        fmt = bound.get("memory_format")
        if all(ok(bound.get(n)) for n, ok in leading) \
                and all(isinstance(bound.get(f, False), bool) for f in _TO_FLAGS) \
                and (fmt is None or isinstance(fmt, str)):
            if "copy" in bound:     # (given at all, even False)
                raise RuntimeError(".to() does not accept copy argument")
            return bound.get("device"), bound.get("dtype", bound.get("tensor")), fmt
    got = ", ".join([type(a).__name__ for a in args] +
                    [f"{k}={type(v).__name__}" for k, v in kwargs.items()])
    raise TypeError(f"to() received an invalid combination of arguments - got ({got}), but "
                    "expected one of: (device device, dtype dtype, bool non_blocking, bool copy, "
                    "*, memory_format memory_format), (dtype dtype, ...), (Tensor tensor, ...)")


class ModuleConvert:
    def _apply(self, fn, recurse=True):
        """fn applied to every parameter, gradient and buffer (the children's own _apply
        first), as torch.nn.Module._apply."""
        if recurse:
            for module in self.children():
                module._apply(fn)
        if _future._overwrite_module_params_on_conversion \
                and not _future._swap_module_params_on_conversion:
            _overwrite_parameters(self, fn)     # (the buffers below as always)
        for store in (self._parameters, self._buffers):
            for t in store.values():
                if t is None:
                    continue
                with no_grad():
                    _swap(t, fn(t))
                g = t.grad if store is self._parameters else None
                if g is not None:
                    with no_grad():
                        _swap(g, fn(g))
        return self

    def to(self, *args: object, **kwargs: object):
        """Cast floating parameters and buffers in place to a dtype, as
        torch.nn.Module.to; a device other than the CPU raises."""
        device, target, fmt = _parse_to(args, kwargs)
        if isinstance(target, Tensor):      # (to(other): other's dtype and device)
            device = device if device is not None or not target.is_meta else target.device
            target = target.dtype
        meta = is_meta_device(device)
        if not meta:
            _check_device(device, "move a module to")
        if target is not None and target._cat < 2:
            raise TypeError("nn.Module.to only accepts floating point or complex dtypes, but "
                            f"got desired dtype={target}")

        def convert(t):     # (a memory format applies to the 4-D and 5-D tensors only)
            kw = {"dtype": target} if target is not None and t.dtype._cat >= 2 else {}
            if fmt is not None and t.dim() in (4, 5):
                kw["memory_format"] = fmt
            if meta:
                kw["device"] = device
            elif device is not None and t.is_meta:
                raise NotImplementedError(
                    "Cannot copy out of meta tensor; no data! Please use "
                    "llgrad.nn.Module.to_empty() instead of llgrad.nn.Module.to() when moving "
                    "module from meta to a different device.")
            return t.to(**kw) if kw else t
        return self._apply(convert)

    def cpu(self):
        """Returns self (CPU tensors stay as they are; a meta one raises: it has no data to
        copy), as torch.nn.Module.cpu."""
        return self._apply(lambda t: t.cpu())

    def share_memory(self):
        """Move every parameter, gradient and buffer to shared memory (Tensor.share_memory_),
        as torch.nn.Module.share_memory: processes forked afterwards train the same weights."""
        return self._apply(lambda t: t.share_memory_())

    def type(self, dst_type: object):
        """Cast every parameter and buffer (integer ones too) to dst_type, as
        torch.nn.Module.type."""
        return self._apply(lambda t: t.type(dst_type))

    def to_empty(self, *, device: object, recurse: bool = True):
        """Give every parameter and buffer new storage of its shape and dtype on device
        (not initialised: llgrad fills it with zeros), as torch.nn.Module.to_empty: how a
        model built on the meta device gets memory."""
        if not is_meta_device(device):
            _check_device(device, "move a module to")
        return self._apply(lambda t: t.new_empty(t.shape, device=device), recurse)

    def cuda(self, device: object = None):
        """Raises: llgrad runs on the CPU only."""
        raise NoCudaError("llgrad runs on the CPU only; Module.cuda() is not available")

    def _cast_floating(self, dtype):
        # (unlike to(dtype), the casts by name leave complex tensors as they are)
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def float(self):
        """Cast floating parameters and buffers to float32, as torch.nn.Module.float."""
        return self._cast_floating(float32)

    def double(self):
        """Cast floating parameters and buffers to float64, as torch.nn.Module.double."""
        return self._cast_floating(float64)

    def half(self):
        """Cast floating parameters and buffers to float16, as torch.nn.Module.half."""
        return self._cast_floating(float16)

    def bfloat16(self):
        """Cast floating parameters and buffers to bfloat16, as torch.nn.Module.bfloat16."""
        return self._cast_floating(bfloat16)
