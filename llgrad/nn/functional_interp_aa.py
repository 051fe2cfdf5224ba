"""F.interpolate(antialias=True) for the modes bilinear, bicubic and lanczos of a 4-D input,
with PyTorch's separable filter (UpSampleKernel.cpp, _compute_weights_aa): each output
index i reads the inputs xmin .. xmin + xsize - 1 around center = scale * (i + 0.5),
weighted by the filter at (j - center + 0.5) / scale (the filter widened by the scale when
downsampling) and normalised to sum 1, in the input's precision. The last dim is resampled
first, then the one before; a dim whose size does not change is left as it is. Each step is
a sum of gathers (index_select, whose gradient scatters back) times weights (the reads
past an output's xsize masked to 0), the terms added in PyTorch's order."""
import math

import numpy as np

from ..runtime.creation import tensor as _tensor
from ..runtime.node_names import rename

_A_BICUBIC = -0.5        # Keys' a, as PIL (the plain bicubic mode uses -0.75)


def _triangle(x):
    x = np.abs(x)
    return np.where(x < 1, 1 - x, 0)


def _cubic(x):
    x = np.abs(x)
    a = _A_BICUBIC
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1, near, np.where(x < 2, far, 0))


def _sinc(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == 0, 1, np.sin(np.pi * x) / (np.pi * x))


def _lanczos3(x):
    return np.where((x >= -3) & (x < 3), _sinc(x) * _sinc(x / 3), 0)


# filter, interp_size
_FILTERS = {"bilinear": (_triangle, 2), "bicubic": (_cubic, 4), "lanczos": (_lanczos3, 6)}


def _scale(n, o, scale, align_corners, dt):
    """area_pixel_compute_scale."""
    if align_corners:
        return dt(n - 1) / dt(o - 1) if o > 1 else dt(0)
    if scale is not None and scale > 0:
        return dt(1.0 / scale)
    return dt(n) / dt(o)


def _weights(n, o, scale, align_corners, mode, dt):
    """(indices, weights, outside), each a list of max_interp_size arrays of length o: the
    j-th input each output reads (clamped into the input past its xsize), its weight (0
    there) and whether j is past xsize (PyTorch reads nothing there: an inf or NaN clamped
    into it must not make 0 * inf)."""
    filt, size = _FILTERS[mode]
    s = _scale(n, o, scale, align_corners, dt)
    support = dt(size * 0.5) * s if s >= 1 else dt(size * 0.5)
    inv = dt(1) / s if s >= 1 else dt(1)
    width = int(math.ceil(support)) * 2 + 1
    i = np.arange(o)
    center = s * (i.astype(dt) + dt(0.5))
    xmin = np.maximum((center - support + dt(0.5)).astype(np.int64), 0)
    xsize = np.minimum((center + support + dt(0.5)).astype(np.int64), n) - xmin
    j = np.arange(width)[:, None]
    inside = j < xsize[None, :]
    w = np.where(inside, filt(((j + xmin[None, :]).astype(dt) - center[None, :] + dt(0.5))
                              * inv).astype(dt), dt(0)).astype(dt)
    total = w.sum(0, dtype=dt)      # (PyTorch adds them in order; so does a 1-row sum)
    w = np.where(total != 0, w / np.where(total != 0, total, dt(1)), w).astype(dt)
    idx = np.minimum(j + xmin[None, :], n - 1)
    used = int(xsize.max()) if o else 0
    return list(idx[:used]), list(w[:used]), list(~inside[:used])


def interpolate_aa(input, out_size, scales, mode, align_corners):
    """The antialiased resampling of a 4-D input to out_size (see the module's doc)."""
    x = input
    dt = np.float64 if input.dtype.name == "float64" else np.float32
    for k in (1, 0):
        dim = 2 + k
        n, o = input.shape[dim], out_size[k]
        if n == o:
            continue
        shape = (o,) + (1,) * (3 - dim)
        idx, ws, outside = _weights(n, o, scales[k], align_corners, mode, dt)
        total = None
        for i, w, out in zip(idx, ws, outside):
            term = x.index_select(dim, _tensor(i)) * _tensor(w.reshape(shape)).to(input.dtype)
            if out.any():
                term = term.masked_fill(_tensor(out.reshape(shape)), 0)
            total = term if total is None else total + term
        x = total
    if x is input:
        x = input.clone()
    return rename(x, f"Upsample{mode.capitalize()}2DAaBackward0", (input,))
