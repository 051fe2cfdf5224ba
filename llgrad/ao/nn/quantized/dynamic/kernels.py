"""The arithmetic of PyTorch's dynamic quantized kernels on x86 (quantized::linear_dynamic
and the dynamic quantized LSTM / GRU cells), in NumPy. Per call the activation is quantized
to quint8 from its own min and max (ATen's ChooseQuantizationParams; reduce_range keeps 7 bits
so the int8 products cannot saturate the int16 pair sums of fbgemm's kernels, except at a NaN,
which quantizes to 255: saturated as the host's fbgemm kernel does); the integer products are
summed in int32; the result is acc * float32(x_scale * w_scale) + bias
with one rounding (the fused multiply-add of fbgemm's output stage, reproduced in float64:
the product of two 24-bit significands is exact there), which gives the output of torch's
x86 and fbgemm engines bit for bit."""
import numpy as np

from .....backends.cpu import cpu_flags
from .....backends.quantized import check_engine
from .....ir.fused_madd import fma32
from .....quantized_tensor import quantize_array, quint8

_SMALL_SCALE = float(np.float32(6.1e-5))   # (ATen's SMALL_SCALE_THRESHOLD)


def choose_qparams(lo, hi, qmin, qmax, float32_scale=True):
    """(scale, zero point) mapping [lo, hi] (widened to hold 0) onto [qmin, qmax], as ATen's
    quant_utils::ChooseQuantizationParams (preserve_sparsity off); its scale is a double,
    which fbgemm's kernels take as float32 (float32_scale)."""
    f32 = np.float32
    lo, hi = min(float(f32(lo)), 0.0), max(float(f32(hi)), 0.0)
    scale = (hi - lo) / (qmax - qmin)
    if f32(scale) == 0 or np.isinf(np.float32(1) / f32(scale)):
        scale = 0.1
    if scale < _SMALL_SCALE:
        org, scale = f32(scale), _SMALL_SCALE
        if lo == 0:
            hi = _SMALL_SCALE * (qmax - qmin)
        elif hi == 0:
            lo = -_SMALL_SCALE * (qmax - qmin)
        else:
            amp = f32(f32(_SMALL_SCALE) / org)
            lo, hi = float(f32(lo) * amp), float(f32(hi) * amp)
    from_min, from_max = qmin - lo / scale, qmax - hi / scale
    err_min, err_max = abs(qmin) - abs(lo / scale), abs(qmax) - abs(hi / scale)
    initial = from_min if err_min < err_max else from_max
    if initial < qmin:
        zp = qmin
    elif initial > qmax:
        zp = qmax
    else:
        zp = int(np.rint(initial))
    return (float(f32(scale)) if float32_scale else float(scale)), zp


def find_min_max(v, lanes=8):
    """fbgemm's FindMinMax of a flat float32 array, NaNs included as its AVX2 loop meets
    them: a NaN first element makes both NaN; otherwise a NaN resets its lane's running
    min / max (vminps returns its second operand) and the scalar steps pass over NaNs."""
    if not v.size:
        return 0.0, 0.0
    first = float(v[0])
    if np.isnan(first) or not np.isnan(v).any():
        return (first, first) if np.isnan(first) else (float(v.min()), float(v.max()))
    n = v.size // lanes * lanes
    lo = hi = first
    if n:
        block = v[:n].reshape(-1, lanes)
        for j in range(lanes):
            col = block[:, j]
            nans = np.nonzero(np.isnan(col))[0]
            tail = col[nans[-1]:] if nans.size else np.concatenate(([first], col))
            if not np.isnan(tail[-1]):
                tail = tail[~np.isnan(tail)]
                lo, hi = min(lo, float(tail.min())), max(hi, float(tail.max()))
    rest = v[n:][~np.isnan(v[n:])]
    if rest.size:
        lo, hi = min(lo, float(rest.min())), max(hi, float(rest.max()))
    return lo, hi


def linear_dynamic(x, w, bias, reduce_range=True):
    """quantized::linear_dynamic: x (float32 array, last dim in_features) times the
    quantized weight w (QuantizedTensor, out x in), plus the float bias (array or None)."""
    check_engine()
    x = np.asarray(x, dtype=np.float32)
    k = x.shape[-1]
    x2 = x.reshape(-1, k)
    lo, hi = find_min_max(x2.reshape(-1))
    if not lo <= hi:
        raise RuntimeError("In ChooseQuantizationParams, min should be less than or equal to "
                           "max")
    scale, zp = choose_qparams(lo, hi, 0, 127 if reduce_range else 255)
    qx = quantize_array(x2, scale, zp, quint8).astype(np.int64)
    w_zp = np.asarray(w._zero_point, np.int64).reshape(-1, 1)
    w_scale = np.float32(w._scale) if w._axis is None else w._scale.astype(np.float32)
    acc = _int_products(qx, w._ints.astype(np.int64), zp, w_zp).astype(np.float32)
    mult = (np.float32(scale) * w_scale).astype(np.float32)
    out = acc.astype(np.float64) * mult.astype(np.float64)
    if bias is not None:
        out = out + np.asarray(bias, dtype=np.float32).astype(np.float64)
    return out.astype(np.float32).reshape(x.shape[:-1] + (w._ints.shape[0],))


def _int_products(qx, wq, x_zp, w_zp):
    """(qx - x_zp) @ (wq - w_zp).T in int32 as fbgemm sums it. Its AVX2 and AVX-512 kernels
    multiply uint8 by int8 with vpmaddubsw, whose int16 sum of a pair of adjacent k saturates
    (reached only by activations above 127: a NaN's 255, or reduce_range off); the zero
    points come off afterwards through row and column sums. AVX-512 VNNI's vpdpbusd sums
    exactly."""
    exact = ((qx - x_zp) @ (wq - w_zp).T).astype(np.int32)
    if "avx512_vnni" in cpu_flags() or not qx.size or qx.max() <= 127:
        return exact
    k = qx.shape[1]
    a = np.pad(qx, ((0, 0), (0, k % 2))).reshape(len(qx), 1, -1, 2)
    b = np.pad(wq, ((0, 0), (0, k % 2))).reshape(1, len(wq), -1, 2)
    raw = np.empty(exact.shape, np.int64)
    for i in range(len(qx)):      # (a row at a time: the pair products are rows x out x k/2)
        raw[i] = np.clip((a[i] * b[0]).sum(-1), -32768, 32767).sum(-1)
    raw = raw - x_zp * wq.sum(1) - w_zp.reshape(-1) * qx.sum(1, keepdims=True) \
        + k * x_zp * w_zp.reshape(-1)      # (w_zp: one per output, or one for all)
    return raw.astype(np.int32)


def linear_fp16(x, w16, bias):
    """quantized::linear_dynamic_fp16: float32 activations times the weight rounded to
    float16 (w16, out x in), accumulated in float32, plus the bias."""
    x = np.asarray(x, dtype=np.float32)
    w = w16.astype(np.float16).astype(np.float32)
    x2 = x.reshape(-1, x.shape[-1])
    # fbgemm's fp16 GEMM: one fused multiply-add per k, in order, into a float32 accumulator
    # (rounded once, ir/fused_madd.fma32); a BLAS sum differs in ulps
    acc = np.zeros((x2.shape[0], w.shape[0]), np.float32)
    for k in range(x2.shape[1]):
        acc = fma32(x2[:, k:k + 1], w[:, k], acc)
    out = acc.reshape(x.shape[:-1] + (w.shape[0],))
    if bias is not None:
        out = out + np.asarray(bias, dtype=np.float32)
    return out.astype(np.float32)
