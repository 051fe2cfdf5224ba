"""Module's conversions (to, float / double / half, type, to_empty, cpu, share_memory), all
through _apply as in PyTorch: a subclass that overrides _apply (to convert a cached tensor
that is not a buffer) sees every one of them. A parameter, its gradient and a buffer keep
their objects (optimisers and compiled calls hold them); their data is replaced."""
from __future__ import annotations

from .. import __future__ as _future
from ..runtime.device import check as _check_device
from ..runtime.dtypes import bfloat16, dtype as _dtype, float16, float32, float64
from ..runtime.grad_mode import no_grad
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
        _check_device(kwargs.get("device"), "move a module to")
        for a in args:
            if isinstance(a, str) or type(a).__name__ == "device":
                _check_device(a, "move a module to")
        target = kwargs.get("dtype")
        for a in args:
            if isinstance(a, (_dtype, Tensor)):     # (to(other): other's dtype)
                target = a if isinstance(a, _dtype) else a.dtype
        if target is not None and not target.is_floating_point:
            raise TypeError("nn.Module.to only accepts floating point or complex dtypes, but "
                            f"got desired dtype={target}")
        fmt = kwargs.get("memory_format")
        rest = {k: v for k, v in kwargs.items() if k != "memory_format"}

        def convert(t):     # (a memory format applies to the 4-D and 5-D tensors only)
            if fmt is not None and t.dim() in (4, 5):
                return t.to(*args, **kwargs) if t.is_floating_point() else \
                    t.to(memory_format=fmt)
            return t.to(*args, **rest) if t.is_floating_point() else t
        return self._apply(convert)

    def cpu(self):
        """Returns self (everything lives on the CPU), as torch.nn.Module.cpu."""
        return self._apply(lambda t: t)

    def share_memory(self):
        """Move every parameter, gradient and buffer to shared memory (Tensor.share_memory_),
        as torch.nn.Module.share_memory: processes forked afterwards train the same weights."""
        return self._apply(lambda t: t.share_memory_())

    def type(self, dst_type: object):
        """Cast every parameter and buffer (integer ones too) to dst_type, as
        torch.nn.Module.type."""
        return self._apply(lambda t: t.type(dst_type))

    def to_empty(self, *, device: object, recurse: bool = True):
        """Give every parameter and buffer new storage of its shape and dtype (not
        initialised: llgrad fills it with zeros), as torch.nn.Module.to_empty."""
        _check_device(device, "move a module to")
        return self._apply(lambda t: t.new_empty(t.shape), recurse)

    def cuda(self, device: object = None):
        """Raises: llgrad runs on the CPU only."""
        raise RuntimeError("llgrad runs on the CPU only; Module.cuda() is not available")

    def float(self):
        """Cast floating parameters and buffers to float32, as torch.nn.Module.float."""
        return self.to(float32)

    def double(self):
        """Cast floating parameters and buffers to float64, as torch.nn.Module.double."""
        return self.to(float64)

    def half(self):
        """Cast floating parameters and buffers to float16, as torch.nn.Module.half."""
        return self.to(float16)

    def bfloat16(self):
        """As torch.nn.Module.bfloat16: raises NotImplementedError (llgrad has no bfloat16
        tensors), the module left as it was."""
        return self.to(bfloat16)
