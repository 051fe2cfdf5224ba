"""The observers dynamic quantization uses (torch.ao.quantization.observer): MinMaxObserver
and PerChannelMinMaxObserver record a tensor's range and compute PyTorch's scale and zero
point in float32; PlaceholderObserver only names a dtype (the activation of a dynamic
qconfig, whose range the kernel finds at each call)."""
import functools

import numpy as np

from ...quantized_tensor import (per_channel_affine, per_channel_symmetric, per_tensor_affine,
                                 per_tensor_symmetric, qint8, quint8)
from ...runtime.dtypes import float32
from ...runtime.tensor import Tensor

__all__ = ["ObserverBase", "MinMaxObserver", "PerChannelMinMaxObserver",
           "PlaceholderObserver"]

_SYMMETRIC = (per_tensor_symmetric, per_channel_symmetric)


class _PartialWrapper(functools.partial):
    """What Observer.with_args returns: a factory of configured observers."""

    def with_args(self, **kwargs):
        """The factory with more arguments fixed."""
        return _PartialWrapper(self.func, *self.args, **{**self.keywords, **kwargs})


class ObserverBase:
    """An observer: called on a tensor it records what it needs and returns the tensor."""

    def __init__(self, dtype=quint8, is_dynamic=False):
        self.dtype, self.is_dynamic = dtype, is_dynamic

    @classmethod
    def with_args(cls, **kwargs):
        """A factory of observers made with these arguments (PyTorch's with_args)."""
        return _PartialWrapper(cls, **kwargs)

    def __repr__(self):
        return f"{type(self).__name__}()"


class PlaceholderObserver(ObserverBase):
    """Records nothing: it names the dtype (a dynamic activation, a float16 weight)."""

    def __init__(self, dtype=float32, custom_op_name="", compute_dtype=None,
                 quant_min=None, quant_max=None, qscheme=None, eps=None, is_dynamic=False):
        super().__init__(dtype, is_dynamic)
        self.quant_min, self.quant_max, self.qscheme = quant_min, quant_max, qscheme

    def __call__(self, x):
        return x

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for PlaceholderObserver")


class MinMaxObserver(ObserverBase):
    """The running min and max of what it is called on, and PyTorch's qparams from them."""

    def __init__(self, dtype=quint8, qscheme=per_tensor_affine, reduce_range=False,
                 quant_min=None, quant_max=None, factory_kwargs=None, eps=1.1920928955078125e-07,
                 is_dynamic=False, **kwargs):
        super().__init__(dtype, is_dynamic)
        self.qscheme, self.reduce_range, self.eps = qscheme, reduce_range, np.float32(eps)
        self._custom_range = quant_min is not None
        if quant_min is None:
            quant_min, quant_max = (-128, 127) if dtype is qint8 else (0, 255)
            if reduce_range:
                quant_min, quant_max = quant_min // 2, quant_max // 2
        self.quant_min, self.quant_max = quant_min, quant_max
        self.min_val = self.max_val = None

    def _reduce(self, x):
        return np.float32(x.min()), np.float32(x.max())

    def __call__(self, x):
        a = x.detach().numpy().astype(np.float32)
        if a.size == 0:
            return x
        lo, hi = self._reduce(a)
        if self.min_val is not None:
            lo, hi = np.minimum(lo, self.min_val), np.maximum(hi, self.max_val)
        self.min_val, self.max_val = lo, hi
        return x

    forward = __call__

    def calculate_qparams(self):
        """(scale float32, zero_point int64) as tensors, as PyTorch's _calculate_qparams."""
        f32 = np.float32
        lo = np.minimum(self.min_val if self.min_val is not None else f32(np.inf), f32(0))
        hi = np.maximum(self.max_val if self.max_val is not None else f32(-np.inf), f32(0))
        qmin, qmax = self.quant_min, self.quant_max
        if self.qscheme in _SYMMETRIC:
            hi = np.maximum(-lo, hi)
            scale = np.maximum((hi / f32((qmax - qmin) / 2)).astype(f32), self.eps)
            zp = np.zeros_like(scale, dtype=np.int64)
            if self.dtype is quint8:
                zp = zp + ((qmin + qmax) // 2 if self._custom_range else 128)
        else:
            scale = np.maximum(((hi - lo) / f32(qmax - qmin)).astype(f32), self.eps)
            zp = (qmin - np.rint(lo / scale)).astype(np.int64)
            zp = np.clip(zp, qmin, qmax)
        return (Tensor._from_array(np.asarray(scale, f32).copy()),
                Tensor._from_array(np.asarray(zp, np.int64).copy()))

    def __repr__(self):
        return f"{type(self).__name__}(min_val={self.min_val}, max_val={self.max_val})"


class PerChannelMinMaxObserver(MinMaxObserver):
    """MinMaxObserver with one range per index of dim ch_axis."""

    def __init__(self, ch_axis=0, dtype=quint8, qscheme=per_channel_affine, reduce_range=False,
                 quant_min=None, quant_max=None, factory_kwargs=None,
                 eps=1.1920928955078125e-07, is_dynamic=False):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs,
                         eps, is_dynamic)
        self.ch_axis = ch_axis

    def _reduce(self, x):
        y = np.moveaxis(x, self.ch_axis, 0).reshape(x.shape[self.ch_axis], -1)
        return y.min(axis=1).astype(np.float32), y.max(axis=1).astype(np.float32)
