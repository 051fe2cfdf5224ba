"""Turning a float module's weights into a dynamic quantized module's: the weight observer
of the module's qconfig picks the scale and zero point (PyTorch's _quantize_weight)."""
from .....quantized_tensor import (per_channel_affine, per_channel_affine_float_qparams,
                                  per_channel_symmetric, per_tensor_affine,
                                  per_tensor_symmetric, qint8, quantize_per_channel,
                                  quantize_per_tensor)
from .....runtime.dtypes import float16, float32, float64, int64

_PER_TENSOR = (per_tensor_affine, per_tensor_symmetric)
_PER_CHANNEL = (per_channel_affine, per_channel_symmetric, per_channel_affine_float_qparams)


def weight_observer(mod):
    """A new weight observer from mod.qconfig (PyTorch asserts that it has one)."""
    if not hasattr(mod, "qconfig") or mod.qconfig is None:
        raise AssertionError("Input float module must have qconfig defined")
    return mod.qconfig.weight()


def quantize_weight(w, observer):
    """w (a float tensor) quantized with the qparams the observer computes from it; a
    float16 observer rounds w to float16 (kept as float32, the values the kernel uses)."""
    if observer.dtype is float16:
        return w.detach().to(float16).to(float32)
    observer(w.detach())
    scale, zero_point = observer.calculate_qparams()
    w = w.detach().to(float32)
    if observer.qscheme in _PER_TENSOR:
        return quantize_per_tensor(w, float(scale), int(zero_point), observer.dtype)
    if observer.qscheme in _PER_CHANNEL:
        return quantize_per_channel(w, scale.to(float64), zero_point.to(int64),
                                    observer.ch_axis, observer.dtype)
    raise ValueError(f"Unexpected qscheme {observer.qscheme}")


def from_float_linear(cls, mod):
    """cls (the dynamic quantized Linear) made from the float Linear mod."""
    observer = weight_observer(mod)
    if observer.dtype not in (qint8, float16):
        raise RuntimeError("Unsupported dtype specified for dynamic quantized Linear!")
    q = cls(mod.in_features, mod.out_features, dtype=observer.dtype)
    q.set_weight_bias(quantize_weight(mod.weight, observer), mod.bias)
    return q
