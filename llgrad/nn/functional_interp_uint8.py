"""F.interpolate on integer inputs. PyTorch's CPU kernels take uint8 in the modes nearest
and nearest-exact (a gather, as for floats) and bilinear, bicubic (4-D, with or without
antialias) and lanczos, which resample in fixed point as PIL does (UpSampleKernel.cpp,
_compute_index_ranges_int16_weights): per dim, double weights scaled to int16 with the
largest precision that keeps them below 2**15, each output the rounded integer sum
clamped to 0..255; the last dim first, into a uint8 buffer, then the one before. Every
other integer (or bool) input, and uint8 in the other modes, is refused with the error of
the kernel PyTorch would dispatch to."""
import math

import numpy as np

from ..runtime.creation import tensor as _tensor

_NAMES = {"uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long",
          "bool": "Bool"}


def _kernel(mode, nsp, out_size, antialias):
    """The name of the kernel whose dispatch refuses the dtype (for a contiguous input: the
    channels-last kernels serve 2-d outputs up to 128 wide and high in total)."""
    small = nsp == 2 and sum(out_size) <= 128
    if mode in ("nearest", "nearest-exact"):
        return "upsample_nearest2d_channels_last" if small else "compute_indices_weights_nearest"
    if antialias:
        return "compute_index_ranges_weights"
    if mode == "bilinear" and small:
        return "upsample_bilinear2d_channels_last"
    return "compute_indices_weights_cubic" if mode == "bicubic" else "compute_indices_weights_linear"


def check_integer_input(input, mode, out_size, antialias):
    """Raise PyTorch's NotImplementedError for an integer input the mode does not take (or a
    half one to antialias); return True for a uint8 input to resample with
    interpolate_uint8."""
    name = input.dtype.name
    # (ATen copies an unresized input before it computes any antialiasing weights)
    if antialias and name in ("float16", "bfloat16") and \
            tuple(out_size) != tuple(input.shape[2:]):
        raise NotImplementedError('"compute_index_ranges_weights" not implemented for '
                                  f"'{'Half' if name == 'float16' else 'BFloat16'}'")
    if input.is_floating_point() or input.is_complex():
        return False
    if name == "uint8" and mode in ("nearest", "nearest-exact"):
        return False
    if name == "uint8" and mode in ("bilinear", "bicubic", "lanczos"):
        return True
    raise NotImplementedError(f'"{_kernel(mode, len(out_size), out_size, antialias)}" not '
                              f"implemented for '{_NAMES.get(name, name)}'")


def _triangle(x):
    x = abs(x)
    return 1.0 - x if x < 1.0 else 0.0


def _cubic(a):
    def f(x):
        x = abs(x)
        if x < 1.0:
            return ((a + 2) * x - (a + 3)) * x * x + 1
        if x < 2.0:
            return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
        return 0.0
    return f


def _sinc(x):
    return 1.0 if x == 0.0 else math.sin(x * math.pi) / (x * math.pi)


def _lanczos3(x):
    x = abs(x)
    return _sinc(x) * _sinc(x / 3.0) if x < 3.0 else 0.0


def _weights(n, o, scale, align_corners, mode, antialias):
    """(xmin, xsize, weights (o, width) int16 values, precision) for one dim."""
    size = {"bilinear": 2, "bicubic": 4, "lanczos": 6}[mode]
    filt = _triangle if mode == "bilinear" else _lanczos3 if mode == "lanczos" else \
        _cubic(-0.5 if antialias else -0.75)
    if align_corners:
        s = (n - 1) / (o - 1) if o > 1 else 0.0
    else:
        s = 1.0 / scale if scale is not None and scale > 0 else n / o
    if antialias:
        support = size * 0.5 * s if s >= 1.0 else size * 0.5
        width = int(math.ceil(support)) * 2 + 1
    else:
        width = size
    xmin, xsize = np.zeros(o, np.int64), np.zeros(o, np.int64)
    w = np.zeros((o, width))
    wmax = 0.0
    for i in range(o):
        if antialias:
            center = s * (i + 0.5)
            inv = 1.0 / s if s >= 1.0 else 1.0
            lo = max(int(center - support + 0.5), 0)
            k = min(max(min(int(center + support + 0.5), n) - lo, 0), width)
            row = [filt((j + lo - center + 0.5) * inv) for j in range(k)]
            total = sum(row)        # (in order, as PyTorch adds them)
            if total != 0.0:
                row = [v / total for v in row]
                wmax = max([wmax] + row)
            w[i, :k] = row
        else:
            src = s * i if align_corners else s * (i + 0.5) - 0.5
            if not align_corners and mode == "bilinear" and src < 0:
                src = 0.0
            idx = min(int(math.floor(np.float32(src))), n - 1)
            lam = min(max(src - idx, 0.0), 1.0)
            sup = width // 2
            unb = idx - sup + 1
            lo = max(unb, 0)
            k = min(max(min(idx + sup + 1, n) - lo, 0), width)
            at = 0
            for j in range(width):      # weights of taps outside the input fold onto the edge
                v = filt(float(j + 1 - sup) - lam)
                if unb + j <= 0:
                    at = 0
                elif unb + j >= n - 1:
                    at = k - 1
                w[i, at] += v
                wmax = max(wmax, w[i, at])
                at += 1
        xmin[i], xsize[i] = lo, k
    prec = 0
    while prec < 22 and int(0.5 + wmax * (1 << (prec + 1))) < (1 << 15):
        prec += 1
    v = w * (1 << prec)
    wi = np.where(v < 0, np.trunc(v - 0.5), np.trunc(v + 0.5)).astype(np.int64)
    return xmin, xsize, wi, prec


def _resample(a, axis, o, scale, align_corners, mode, antialias):
    n = a.shape[axis]
    xmin, xsize, wi, prec = _weights(n, o, scale, align_corners, mode, antialias)
    x = np.moveaxis(a, axis, -1).astype(np.int64)
    acc = np.full(x.shape[:-1] + (o,), 1 << (prec - 1), np.int64)
    for j in range(wi.shape[1]):
        used = j < xsize
        tap = x[..., np.minimum(xmin + j, n - 1)]
        acc += np.where(used, tap * wi[:, j], 0)
    out = np.clip(acc >> prec, 0, 255).astype(np.uint8)
    return np.moveaxis(out, -1, axis)


def interpolate_uint8(input, out_size, scales, mode, align_corners, antialias):
    """Bilinear, bicubic or lanczos resampling of a 4-D uint8 input (see the module's doc)."""
    a = input.numpy()
    for k in (1, 0):
        if a.shape[2 + k] != out_size[k]:
            a = _resample(a, 2 + k, out_size[k], scales[k], align_corners, mode, antialias)
    return _tensor(np.ascontiguousarray(a))
