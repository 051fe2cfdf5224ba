"""F.affine_grid and F.grid_sample (the spatial transformer's pair), as compositions.

affine_grid is ATen's own composition: a constant base grid of (x, y[, z], 1) in [-1, 1]
(linspace_from_neg_one) times theta^T by bmm, so its gradient is bmm's. grid_sample follows
the CPU kernel (GridSamplerKernel.cpp) step by step: unnormalise the grid to pixel units,
apply the padding mode to the coordinate (border: clip; reflection: reflect, then clip, each
with the kernel's formula and its zero gradient on the borders, which the kernel counts as
out of bounds), then read the corners with gather on the flattened spatial dims (whose
gradient scatters back into the input) and weight them (whose gradient reaches the grid).
Corners outside the input (NaN ones included) read index 0 and are dropped by a where, so
nothing outside is ever read, as in the kernel. bilinear and nearest serve 4-D and 5-D inputs,
bicubic 4-D ones (16 taps, the padding applied to each tap, A = -0.75)."""
import itertools
import warnings

import numpy as np

from ..runtime.creation import tensor as _tensor, zeros
from ..ir import bfloat16 as bf16_values
from ..runtime.dtypes import bfloat16, bool_, int64
from ..runtime.functions import minimum, where
from ..runtime.node_names import rename
from ..runtime.ranges import linspace_values
from .functional_loss import _NAMES
from ..runtime.vmap_fallback import meta_on_mismatch
from ..runtime.autocast_cast import float32_list
from ..runtime.user_frames import user_stacklevel

__all__ = ["affine_grid", "grid_sample", "grid_sampler"]

_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to "
                  "align_corners=False since 1.3.0. Please specify align_corners=True if the "
                  "old behavior is desired. See the documentation of grid_sample for details.")
_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
_PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}
_CUBIC_A = -0.75


# ---- affine_grid ---------------------------------------------------------------------------

def _linspace_from_neg_one(n, align_corners, dt):
    """ATen's linspace(-1, 1, n) (its two-sided formula) scaled by (n-1)/n unless
    align_corners; one step is 0."""
    if n <= 1:
        return np.zeros(1, dt)
    r = linspace_values(-1, 1, n, dt)
    if align_corners:
        return r
    if dt == bf16_values.STORAGE:       # (bfloat16: the product and the quotient each rounded)
        f32 = bf16_values.to_float32
        return bf16_values.round_to(f32(bf16_values.round_to(f32(r) * np.float32(n - 1)))
                                    / np.float32(n))
    return (r * dt.type(n - 1) / dt.type(n)).astype(dt)


def _base_grid(spatial, align_corners, dt):
    """(*spatial, nd + 1): x along the last dim, then y (and z), then a column of ones."""
    nd = len(spatial)
    base = np.ones(tuple(spatial) + (nd + 1,), dt)
    for k in range(nd):                      # coordinate k runs along spatial dim nd-1-k
        r = _linspace_from_neg_one(spatial[nd - 1 - k], align_corners, dt)
        shape = [1] * nd
        shape[nd - 1 - k] = -1
        base[..., k] = r.reshape(shape)
    return base


@meta_on_mismatch
def affine_grid(theta, size, align_corners=None):
    """As torch.nn.functional.affine_grid: the sampling grid (N, H, W, 2) (or (N, D, H, W,
    3)) of the affine maps theta (N, 2, 3) (or (N, 3, 4)) over a normalised output."""
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=user_stacklevel())
        align_corners = False
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = [int(s) for s in size]
    if len(size) == 4:
        if theta.dim() != 3 or theta.shape[-2] != 2 or theta.shape[-1] != 3:
            raise ValueError("Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                             f"{size}. Got {theta.shape}.")
        spatial = size[-2:]
    elif len(size) == 5:
        if theta.dim() != 3 or theta.shape[-2] != 3 or theta.shape[-1] != 4:
            raise ValueError("Expected a batch of 3D affine matrices of shape Nx3x4 for size "
                             f"{size}. Got {theta.shape}.")
        spatial = size[-3:]
    else:
        raise NotImplementedError("affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {size}.")
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size "
                      "grids when align_corners=True. This is not an intended use case of "
                      "affine_grid. See the documentation of affine_grid for details.",
                      stacklevel=user_stacklevel())
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    return _affine_grid_generator(theta, size, align_corners)


def _affine_grid_generator(theta, size, align_corners):
    n, nd = size[0], len(size) - 2
    spatial = tuple(size[2:])
    if theta.shape[0] != n:
        raise RuntimeError("Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{n}, {nd + 1}] but got: [{theta.shape[0]}, {nd + 1}].")
    # (bfloat16's grid holds bfloat16 values in its float32-word memory: cast exactly)
    base = _base_grid(spatial, align_corners, theta.dtype.np)
    base = _tensor(base.astype(np.float32)).to(theta.dtype) if theta.dtype is bfloat16 else \
        _tensor(base)
    points = int(np.prod(spatial))
    grid = base.reshape(1, points, nd + 1).expand(n, points, nd + 1).bmm(theta.transpose(1, 2))
    return rename(grid.view((n,) + spatial + (nd,)), "AffineGridGeneratorBackward0", (theta,))


# ---- grid_sample: coordinates ----------------------------------------------------------------

def _unnormalize(coord, size, align_corners):
    """[-1, 1] -> pixel units: corner centres (align_corners) or corner edges."""
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _clip(c, size):
    """min(size - 1, max(c, 0)) as the vectorised kernel computes it (its max(NaN, 0) is 0);
    the gradient passes strictly inside only (clip_coordinates_get_grad counts the borders
    as out of bounds)."""
    inside = (c > 0) & (c < size - 1)
    return where(inside, c, (c.detach() >= size - 1).to(c.dtype) * (size - 1))


def _reflect(c, size, align_corners):
    """The vectorised kernel's reflect_coordinates: fold c into [low, high] by reflections
    about the borders (the corner centres with align_corners, else the corner edges)."""
    if align_corners:
        if size <= 1:
            return c.detach() * 0
        off, span2 = 0.0, 2.0 * (size - 1)
    else:
        off, span2 = 0.5, 2.0 * size
    a = (c + off).abs() if off else c.abs()
    extra = a - (a / span2).trunc() * span2
    r = minimum(extra, span2 - extra)
    return r - off if off else r


def _pad(c, size, padding, align_corners):
    """compute_coordinates: the padding mode applied to a pixel-unit coordinate."""
    if padding == 1:
        return _clip(c, size)
    if padding == 2:
        return _clip(_reflect(c, size, align_corners), size)
    return c


# ---- grid_sample: reading the input ----------------------------------------------------------

class _Reader:
    """Reads input (N, C, *S) at integer-valued coordinate tensors (N, P), one per spatial
    dim (last dim first, as the grid orders them): zeros outside the input."""

    def __init__(self, input):
        self.n, self.c = input.shape[0], input.shape[1]
        self.sizes = tuple(input.shape[2:])[::-1]         # (W, H[, D])
        self.flat = input.reshape(self.n, self.c, int(np.prod(self.sizes)))

    def read(self, coords):
        inside, index, stride = None, None, 1
        for c, size in zip(coords, self.sizes):
            ok = (c > -1) & (c < size)
            inside = ok if inside is None else inside & ok
            # (outside, NaN included, reads index 0, dropped below)
            k = where(ok, c, 0.0).to(int64) * stride
            index = k if index is None else index + k
            stride *= size
        p = index.shape[-1]
        vals = self.flat.gather(2, index.unsqueeze(1).expand(self.n, self.c, p))
        return where(inside.unsqueeze(1), vals, vals.new_zeros(()))


def _linear(reader, src):
    """bilinear / trilinear: the 2^nd corners, weights products of (1 - frac, frac)."""
    lows = [s.floor() for s in src]
    fracs = [s - lo for s, lo in zip(src, lows)]
    out = None
    nd = len(src)
    # corners in the kernel's order (nw, ne, sw, se: the outer dims' offsets vary slowest)
    for offs in itertools.product((0, 1), repeat=nd):
        offs = offs[::-1]                            # offs[k]: offset along coordinate k
        weight = None
        for k in reversed(range(nd)):
            f = fracs[k] if offs[k] else 1 - fracs[k]
            weight = f if weight is None else weight * f
        vals = reader.read([lo + o for lo, o in zip(lows, offs)])
        term = vals * weight.unsqueeze(1)
        out = term if out is None else out + term
    return out


def _cubic_coefficients(t):
    """get_cubic_upsample_coefficients(t) with A = -0.75."""
    a = _CUBIC_A

    def conv1(x):                                    # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def conv2(x):                                    # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    t2 = 1 - t
    return conv2(t + 1), conv1(t), conv1(t2), conv2(t2 + 1)


def _bicubic(reader, src, padding, align_corners):
    """16 taps around floor(src); the padding mode is applied to each tap's coordinate."""
    (ix, iy), (w, h) = src, reader.sizes
    x0, y0 = ix.detach().floor(), iy.detach().floor()
    cx, cy = _cubic_coefficients(ix - x0), _cubic_coefficients(iy - y0)
    xs = [_pad(x0 + (k - 1), w, padding, align_corners) for k in range(4)]
    out = None
    for i in range(4):
        y = _pad(y0 + (i - 1), h, padding, align_corners)
        row = None
        for k in range(4):
            term = reader.read([xs[k], y]) * cx[k].unsqueeze(1)
            row = term if row is None else row + term
        term = row * cy[i].unsqueeze(1)
        out = term if out is None else out + term
    return out


def _check(input, grid, mode):
    """ATen's check_grid_sampler_common, _2d / _3d, in its order; then the kernel's dtypes."""
    isz, gsz = list(input.shape), list(grid.shape)
    if isz[0:1] != gsz[0:1]:
        raise RuntimeError("grid_sampler(): expected grid and input to have same batch size, but "
                           f"got input with sizes {isz} and grid with sizes {gsz}")
    if gsz[-1:] != [input.dim() - 2]:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.dim() - 2} in "
                           f"last dimension, but got grid with sizes {gsz}")
    for k in range(2, input.dim()):
        if isz[k] == 0:
            raise RuntimeError("grid_sampler(): expected input to have non-empty spatial "
                               f"dimensions, but input has sizes {isz} with dimension {k} being "
                               "empty")
    nd = 4 if input.dim() == 4 else 5
    if input.dim() != nd or grid.dim() != nd:
        raise RuntimeError(f"grid_sampler(): expected {nd}D input and grid with same number of "
                           f"dimensions, but got input with sizes {isz} and grid with sizes "
                           f"{gsz}")
    if mode == 2 and nd != 4:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if not input.is_floating_point():
        raise NotImplementedError(f'"grid_sampler_{nd - 2}d_cpu_kernel_impl" not implemented '
                                  f"for '{_NAMES[input.dtype.name]}'")
    if input.dtype != grid.dtype:
        raise RuntimeError(f"expected scalar type {_NAMES[input.dtype.name]} but found "
                           f"{_NAMES[grid.dtype.name]}")


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """As torch.grid_sampler: modes as ATen's numbers (0 bilinear, 1 nearest, 2 bicubic;
    padding 0 zeros, 1 border, 2 reflection)."""
    mode, padding = int(interpolation_mode), int(padding_mode)
    _check(input, grid, mode)
    n, c = input.shape[0], input.shape[1]
    out_spatial = tuple(grid.shape[1:-1])
    nd = input.dim() - 2
    reader = _Reader(input)
    g = grid.reshape(n, int(np.prod(out_spatial)), nd)
    coords = [_unnormalize(g[..., k], reader.sizes[k], align_corners) for k in range(nd)]
    if mode == 2:
        out = _bicubic(reader, coords, padding, align_corners)
    else:
        src = [_pad(x, s, padding, align_corners) for x, s in zip(coords, reader.sizes)]
        if mode == 1:
            out = reader.read([x.round() for x in src])
            if grid.requires_grad:
                # the kernel gives the grid a zero gradient in nearest mode (not none): a
                # term that is always 0 and passes 0 back, NaN and inf in the grid included
                never = zeros(g.shape[:-1], dtype=bool_)
                out = out + where(never, g[..., 0], 0.0).unsqueeze(1)
        else:
            out = _linear(reader, src)
    # (contiguous, as PyTorch's kernel writes it: a 3-D grid's reads came channels-last, and
    # a .view of the result raised)
    out = out.reshape((n, c) + out_spatial).contiguous()
    return rename(out, f"GridSampler{nd}DBackward0", (input, grid))


@float32_list
def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """As torch.nn.functional.grid_sample: input (N, C, H, W) read at the normalised
    coordinates grid (N, Ho, Wo, 2) (x, then y, in [-1, 1]) -> (N, C, Ho, Wo); 5-D inputs and
    grids (x, y, z) for bilinear and nearest."""
    if mode not in _MODES:
        raise ValueError("nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in _PADDINGS:
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=user_stacklevel())
        align_corners = False
    return grid_sampler(input, grid, _MODES[mode], _PADDINGS[padding_mode], align_corners)
