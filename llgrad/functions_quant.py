"""torch.fake_quantize_per_tensor_affine and torch.fake_quantize_per_channel_affine, the
fake quantisation of quantisation-aware training: round x / scale to an integer grid, clamp
it to [quant_min, quant_max] and map it back, with the straight-through gradient (the
incoming gradient where the rounded value was inside the range, 0 outside), as PyTorch's
cachemask kernels compute them (x times a float32 1 / scale, rounded half to even)."""
import numpy as np

from .ao.nn.quantized.dynamic.kernels import choose_qparams
from .quantized_tensor import qint8, quantize_per_tensor, quint8
from .runtime.dtypes import float32, int32
from .runtime.functions import where
from .runtime.node_names import rename
from .runtime.tensor import Tensor

__all__ = ["fake_quantize_per_tensor_affine", "fake_quantize_per_channel_affine",
           "quantize_per_tensor_dynamic"]


def _check(x, quant_min, quant_max, kernel):
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{str(x.dtype).split('.')[-1].capitalize()}'")
    if quant_min > quant_max:
        raise RuntimeError("`quant_min` should be less than or         equal to `quant_max`.")


def _straight_through(x, q, inside, name):
    """q's values, x's gradient where `inside` (the straight-through estimator)."""
    out = q.detach() + (x - x.detach()) * inside
    return rename(out, name)


def fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min, quant_max):
    """As torch.fake_quantize_per_tensor_affine: (clamp(round(x / scale) + zero_point,
    quant_min, quant_max) - zero_point) * scale; scale and zero_point numbers, or tensors of
    one element (the TensorQparams form)."""
    _check(input, quant_min, quant_max, "fake_quantize_tensor_cachemask_kernel_type_handling")
    tensors = isinstance(scale, Tensor)
    zp = int(zero_point.item()) if isinstance(zero_point, Tensor) else int(zero_point)
    if not quant_min <= zp <= quant_max:
        raise RuntimeError("`zero_point` must be between `quant_min` and `quant_max`.")
    sc = float(scale.item()) if tensors else float(scale)
    inv = float(np.float32(1.0) / np.float32(sc))
    qval = input.detach().mul(inv).round().add(zp)
    inside = (qval >= quant_min) & (qval <= quant_max)
    q = (qval.clamp(quant_min, quant_max) - zp) * sc
    name = "FakeQuantizePerTensorAffineCachemask" + ("TensorQparams" if tensors else "") + \
        "Backward0"
    return _straight_through(input, q, inside, name)


def fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min, quant_max):
    """As torch.fake_quantize_per_channel_affine: the per-tensor form with one scale and
    zero point per index of dim `axis` (an int32 zero point is added after rounding, a
    float one before it, as PyTorch's kernels do)."""
    _check(input, quant_min, quant_max, "fake_quantize_channel_cachemask_kernel_type_handling")
    if zero_point.dtype not in (int32, float32) and zero_point.dtype.name != "float16":
        raise RuntimeError("Zero-point must be Int32, Float or Half, found "
                           f"{str(zero_point.dtype).split('.')[-1].capitalize()}")
    axis = axis % input.dim()
    shape = [1] * input.dim()
    shape[axis] = -1
    sc = scale.detach().to(float32).reshape(shape)
    zp = zero_point.detach().reshape(shape)
    inv = sc.reciprocal()
    x = input.detach()
    if zero_point.dtype == int32:
        if bool(((zp < quant_min) | (zp > quant_max)).any()):
            raise RuntimeError("`zero_point` must be between `quant_min` and `quant_max`.")
        zp = zp.to(x.dtype)
        qval = (x * inv.to(x.dtype)).round() + zp
    else:
        zp = zp.to(x.dtype)
        qval = (x * inv.to(x.dtype) + zp).round()
    inside = (qval >= quant_min) & (qval <= quant_max)
    q = where(inside, qval, qval.clamp(quant_min, quant_max))
    q = (q - zp) * sc.to(x.dtype)
    return _straight_through(input, q, inside, "FakeQuantizePerChannelAffineCachemaskBackward0")


def quantize_per_tensor_dynamic(input, dtype, reduce_range):
    """As torch.quantize_per_tensor_dynamic: input quantized with the scale and zero point
    ATen's ChooseQuantizationParams picks from its min and max (reduce_range: half the
    integer range, C's division: qint8 [-64, 63], quint8 [0, 127])."""
    if dtype is qint8:
        qmin, qmax = -128, 127
    elif dtype is quint8:
        qmin, qmax = 0, 255
    else:
        raise RuntimeError(f"dtype {dtype}not supported")
    lo, hi = float(input.min()), float(input.max())
    if not lo <= hi:
        raise RuntimeError("In ChooseQuantizationParams, min should be less than or equal to "
                           "max")
    if reduce_range:
        qmin, qmax = int(qmin / 2), int(qmax / 2)
    scale, zero_point = choose_qparams(lo, hi, qmin, qmax, float32_scale=False)
    return quantize_per_tensor(input, scale, zero_point, dtype)
