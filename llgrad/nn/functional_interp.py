"""F.interpolate (and F.upsample, upsample_nearest, upsample_bilinear) for the modes
nearest, nearest-exact, linear, bilinear, trilinear, bicubic and area, as compositions of gathers along each
spatial dim (index_select, whose gradient scatters back) and weighted sums.

The source indices and weights are PyTorch's own (UpSample.h): nearest reads
floor(dst * scale) in single precision (scale = 1/scale_factor when one is given, else
in/out; exact copies for out == in and halving for out == 2*in); linear modes read
src = scale * (dst + 0.5) - 0.5 clamped at 0 (or scale * dst with align_corners), the two
neighbours floor(src) and the next, with weights 1 - l and l, each dim in turn from the
last, in the input's precision, so the products and sums are PyTorch's."""
import math
import warnings

import numpy as np

from ..ir import bfloat16 as bf16_values
from ..runtime.creation import tensor as _tensor
from ..runtime.node_names import rename
from ..runtime.result_format import in_suggested_format
from .functional_interp_aa import interpolate_aa
from .functional_interp_uint8 import check_integer_input, interpolate_uint8
from .functional_pool import adaptive_avg_pool1d, adaptive_avg_pool2d
from .functional_pool3d import adaptive_avg_pool3d
from ..runtime.vmap_fallback import meta_on_mismatch

_LINEAR = {"linear": 3, "bilinear": 4, "trilinear": 5, "bicubic": 4}


def _scale_value(scale, n, o, dt):
    """compute_scales_value<dt>: 1/scale when a scale is given, else n/o."""
    if scale is not None and scale > 0:
        return dt(1.0 / scale)
    return dt(n) / dt(o)


def _nearest_index(n, o, scale, exact, shortcuts):
    i = np.arange(o)
    # (ATen's 2-d nearest kernels take sizes n and 2n as scale 1 and 2, whatever scale was
    # given; its 1-d and 3-d ones compute every index from the scale)
    if shortcuts and not exact and o == n:
        return i
    if shortcuts and not exact and o == 2 * n:
        return i >> 1
    s = _scale_value(scale, n, o, np.float32)
    src = (i + 0.5) * np.float64(s) if exact else i.astype(np.float32) * s
    return np.minimum(np.floor(src.astype(np.float32)).astype(np.int64), n - 1)


def _linear_weights(n, o, scale, align_corners, dt):
    i = np.arange(o)
    if align_corners:
        s = dt(n - 1) / dt(o - 1) if o > 1 else dt(0)
        src = s * i.astype(dt)
    else:
        s = _scale_value(scale, n, o, dt)
        src = np.maximum(s * (i.astype(dt) + dt(0.5)) - dt(0.5), dt(0))
    i0 = np.minimum(np.floor(src.astype(np.float32)).astype(np.int64), n - 1)
    lam = np.minimum(np.maximum(src - i0.astype(dt), dt(0)), dt(1)).astype(dt)
    i1 = i0 + (i0 < n - 1)
    return i0, i1, (dt(1) - lam).astype(dt), lam


def _cubic_weights(n, o, scale, align_corners, dt):
    """HelperInterpCubic: src = scale * (dst + 0.5) - 0.5 unclamped (or scale * dst), the
    four neighbours floor(src) - 1 ... + 2 clamped to the input, weights of the cubic
    convolution with A = -0.75 at t = src - floor(src)."""
    i = np.arange(o).astype(dt)
    if align_corners:
        src = (dt(n - 1) / dt(o - 1) if o > 1 else dt(0)) * i
    else:
        src = _scale_value(scale, n, o, dt) * (i + dt(0.5)) - dt(0.5)
    i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
    t = np.minimum(np.maximum(src - i0.astype(dt), dt(0)), dt(1)).astype(dt)
    a = dt(-0.75)

    def conv1(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def conv2(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    ws = [conv2(t + 1), conv1(t), conv1(1 - t), conv2((1 - t) + 1)]     # (PyTorch's roundings)
    return [np.clip(i0 - 1 + j, 0, n - 1) for j in range(4)], [w.astype(dt) for w in ws]


def _round_to(a, dtype):
    """float32 array a rounded to float16 / bfloat16 values (kept as float32)."""
    if dtype.name == "bfloat16":
        return bf16_values.to_float32(bf16_values.round_to(a))
    return np.asarray(a, np.float32).astype(np.float16).astype(np.float32)


def _interp_dims(input, out_size, scales, mode, align_corners):
    # a half (or bfloat16) input is resampled in single precision and rounded once, as
    # PyTorch's kernels do; its weights are rounded to its dtype first, but in the
    # channels-last kernel PyTorch runs for a 2-d bilinear output of at most 128 rows and
    # columns together
    half = input.dtype.name in ("float16", "bfloat16") and \
        mode not in ("nearest", "nearest-exact")
    x = input.float() if half else input
    wdt = input.dtype if not (half and mode == "bilinear" and sum(out_size) <= 128) else None

    dev = input.device

    def const(a):       # (on the input's device: meta, or the CPU inside `with device("meta")`)
        return _tensor(a, device=dev)

    def weight(w, shape):
        t = const(w.reshape(shape))
        return (t.to(wdt) if wdt is not None else t).to(x.dtype)
    nsp = len(out_size)
    for k in reversed(range(nsp)):          # the last dim first (PyTorch's inner loop)
        dim = 2 + k
        n, o = input.shape[dim], out_size[k]
        if mode in ("nearest", "nearest-exact"):
            idx = _nearest_index(n, o, scales[k], mode == "nearest-exact", nsp == 2)
            if not (o == n and np.array_equal(idx, np.arange(n))):
                x = x.index_select(dim, const(idx))
            continue
        dt = np.float64 if input.dtype.name == "float64" else np.float32
        shape = (o,) + (1,) * (x.dim() - 1 - dim)
        if mode == "bicubic":
            idx, ws = _cubic_weights(n, o, scales[k], align_corners, dt)
            terms = [x.index_select(dim, const(i)) * weight(w, shape) for i, w in zip(idx, ws)]
            x = terms[0] + terms[1] + terms[2] + terms[3]
            continue
        if o == n:      # (ATen's linear kernels copy a dim whose size stays, whatever the
            continue    # scale_factor that gave it: floor(8 * 1.1) = 8 is no resampling)
        i0, i1, l0, l1 = _linear_weights(n, o, scales[k], align_corners, dt)
        if half and wdt is not None:    # (PyTorch's lambdas: l0 = 1 - half(l1))
            l1 = _round_to(l1, input.dtype)
            l0 = _round_to(np.float32(1) - l1, input.dtype)
        x = x.index_select(dim, const(i0)) * weight(l0, shape) + \
            x.index_select(dim, const(i1)) * weight(l1, shape)
    return x.to(input.dtype) if half else x


def _check_sizes(input, out_size):
    """upsample_*d_common_check: every spatial size of the input and the output above 0."""
    n = list(input.shape[2:])
    if min(n + list(out_size)) > 0:
        return
    names = "DHW"[3 - len(n):]
    got = ", ".join(f"{a}: {v}" for a, v in zip(names, n))
    want = ", ".join(f"{a}: {v}" for a, v in zip(names, out_size))
    raise RuntimeError("Input and output sizes should be greater than 0, but got input "
                       f"({got}){' and' if len(n) == 1 else ''} output ({want})")


@meta_on_mismatch
def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """As torch.nn.functional.interpolate (modes nearest, nearest-exact, linear, bilinear,
    trilinear, bicubic and area with PyTorch's indices and weights; antialias=True for
    bilinear, bicubic and lanczos in functional_interp_aa)."""
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating "
                             "modes: linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    dim = input.dim() - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but got "
                    f"input with spatial dimensions of {list(input.shape[2:])} and output size "
                    f"of {size}. Please provide input tensor in (N, C, d1, d2, ...,dK) format "
                    "and output size in (o1, o2, ...,oK) format.")
            if not all(isinstance(v, (int, np.integer)) for v in size):
                raise TypeError("expected size to be one of int or Tuple[int] or Tuple[int, int] "
                                "or Tuple[int, int, int], but got size with types "
                                f"{[type(v) for v in size]}")
            out_size = [int(v) for v in size]
        else:
            out_size = [int(size)] * dim
        scales = [None] * dim
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError(
                    "Input and scale_factor must have the same number of spatial dimensions, but "
                    f"got input with spatial dimensions of {list(input.shape[2:])} and "
                    f"scale_factor of shape {scale_factor}. Please provide input tensor in (N, "
                    "C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.")
            scales = [float(v) for v in scale_factor]
        else:
            scales = [float(scale_factor)] * dim
        out_size = [int(math.floor(input.shape[2 + i] * scales[i])) for i in range(dim)]
        if any(not -2 ** 63 <= n < 2 ** 63 for n in out_size):
            raise RuntimeError("value cannot be converted to type int64_t without overflow")
        if recompute_scale_factor or mode == "area":
            scales = [None] * dim
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and input.dim() == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos "
                         "modes and requires a 4-D tensor as input")
    if mode == "area":
        if dim == 1:
            return adaptive_avg_pool1d(input, out_size)
        if dim == 2:
            return adaptive_avg_pool2d(input, out_size)
        if dim == 3:
            return adaptive_avg_pool3d(input, out_size)
    if mode in ("nearest", "nearest-exact") and 1 <= dim <= 3:
        _check_sizes(input, out_size)
        check_integer_input(input, mode, out_size, False)
        out = _interp_dims(input, out_size, scales, mode, None)
        return in_suggested_format(rename(
            input.clone() if out is input else out,
            f"Upsample{'NearestExact' if mode == 'nearest-exact' else 'Nearest'}"
            f"{dim}DBackward0", (input,)), input)
    if mode in _LINEAR and input.dim() == _LINEAR[mode]:
        _check_sizes(input, out_size)
        if check_integer_input(input, mode, out_size, antialias):
            out = interpolate_uint8(input, out_size, scales, mode, align_corners, antialias)
        elif antialias:
            out = interpolate_aa(input, out_size, scales, mode, align_corners)
        else:
            out = rename(_interp_dims(input, out_size, scales, mode, align_corners),
                         f"Upsample{mode.capitalize()}{dim}DBackward0", (input,))
        # (ATen's upsample kernels allocate their result in the input's suggested format)
        return in_suggested_format(out, input)
    if mode == "lanczos" and input.dim() == 4:
        if align_corners:
            raise ValueError("Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("Lanczos mode requires antialias=True")
        _check_sizes(input, out_size)
        if check_integer_input(input, mode, out_size, True):
            return in_suggested_format(
                interpolate_uint8(input, out_size, scales, mode, False, True), input)
        return in_suggested_format(interpolate_aa(input, out_size, scales, mode, False), input)
    if mode in _LINEAR and 3 <= input.dim() <= 5 and mode != "bicubic":
        raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs "
                                  f"{_LINEAR[mode]}D input")
    raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got "
                              f"{input.dim()}D) for the modes: nearest | linear | bilinear | "
                              f"bicubic | trilinear | lanczos | area | nearest-exact (got {mode})")


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """As torch.nn.functional.upsample (interpolate under its old name)."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """As torch.nn.functional.upsample_nearest."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """As torch.nn.functional.upsample_bilinear."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
