"""Fractional max pooling (fractional_max_pool2d / 3d, PyTorch's checks and messages).

As ATen's kernel: per plane, one random sample u in [0, 1) for each spatial dim (drawn with
torch.rand(n_batch, C, nd) in the input's dtype unless given) places the windows of the
output's i-th cell at int((i + u) * alpha) - int(u * alpha), alpha = (I - K) / (O - 1)
in the input's dtype, the last window at I - K; each output cell is the maximum of its
window (the first maximum; a NaN wins, the last one met), its index the flat position in the
plane. Everything is tensor ops (the samples may be a traced random draw): the output is a
gather of the input at the indices, whose gradient adds into those positions, as ATen's
backward does."""
import numpy as np

from ..runtime.creation import arange, rand
from ..runtime.dtypes import int64
from ..runtime.functions import cat, where
from ..runtime.node_names import rename
from ..runtime.vmap_fallback import values_read
from ..runtime.autocast_cast import float32_list

__all__ = ["fractional_max_pool2d", "fractional_max_pool2d_with_indices",
           "fractional_max_pool3d", "fractional_max_pool3d_with_indices"]


def _tuple(x, n):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,) * n


def _starts(u, size, out, k):
    """(.., out) int64 window starts along one dim for samples u (.., 1)."""
    if out <= 0:
        return u.new_zeros(u.shape[:-1] + (0,)).to(int64)
    last = u.new_full(u.shape[:-1] + (1,), size - k).to(int64)
    if out == 1:
        return last
    npdt = np.dtype(u.dtype.name)
    alpha = float(npdt.type(size - k) / npdt.type(out - 1))
    i = arange(out - 1, dtype=u.dtype)
    seq = ((i + u) * alpha).to(int64) - (u * alpha).to(int64)
    return cat([seq, last], -1)


def _pool(name, nd, input, kernel_size, output_size, samples):
    ints = "Ints" if nd == 2 else "three Ints"
    if len(kernel_size) != nd:
        raise RuntimeError(f"{name}: kernel_size must either be a single Int or tuple of {ints}")
    if len(output_size) != nd:
        raise RuntimeError(f"{name}: output_size must either be a single Int or tuple of {ints}")
    # (ATen's 3-D checks name its out function and want the windows strictly inside)
    label, strict = (name, 0) if nd == 2 else (name + "_out", 1)
    ndim = input.dim()
    if ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{label}(): Expected {nd + 1}D or {nd + 2}D tensor, but got: "
                           f"{list(input.shape)}")
    shape = tuple(input.shape)
    for i in range(1, ndim):
        if shape[i] <= 0:
            raise RuntimeError(f"{label}(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but got{list(shape)} with dimension {i} being "
                               "empty.")
    batched = ndim == nd + 2
    x = input if batched else input.unsqueeze(0)
    n, c, sizes = x.shape[0], x.shape[1], tuple(x.shape[2:])
    dims = ("time", "height", "width")[3 - nd:]
    for d, o, k, s in zip(dims, output_size, kernel_size, sizes):
        if o + k - 1 > s - strict:
            raise RuntimeError(f"{label}(): pool {d} {k} too large relative to input {d} {s}")
    if samples.dtype != input.dtype:
        raise RuntimeError("Expect _random_samples to have the same dtype as input")
    if samples.dim() != 3:
        raise RuntimeError(f"Expect _random_samples to have 3 dimensions, got {samples.dim()}")
    if samples.shape[0] < n:
        raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
    if samples.shape[1] != c:
        raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
    if samples.shape[2] != nd:
        raise RuntimeError(f"Expect _random_samples.size(2) equals to {nd}; got "
                           f"{samples.shape[2]}.")
    u = samples[:n].detach()
    # ATen's samples per plane: (w, h) in 2-D, (t, h, w) in 3-D
    order = (1, 0) if nd == 2 else (0, 1, 2)
    flat = 0
    for j, (d, o, k, s) in enumerate(zip(order, output_size, kernel_size, sizes)):
        st = _starts(u[:, :, d:d + 1], s, o, k)                     # (n, c, o)
        pos = (st.unsqueeze(-1) + arange(k, dtype=int64)) \
            * int(np.prod(sizes[j + 1:], dtype=np.int64))          # (n, c, o, k)
        # to (n, c, o_0.., o_nd-1, k_0.., k_nd-1), this dim's o and k in their places
        ones = (1,) * (nd - 1 - j)
        flat = flat + pos.reshape((n, c) + (1,) * j + (o,) + ones + (1,) * j + (k,) + ones)
    out_shape = tuple(output_size)
    m = int(np.prod(out_shape, dtype=np.int64))
    kk = int(np.prod(kernel_size, dtype=np.int64))
    # (n, c, outputs..., kernel...) -> (n, c, m, kk), kernel positions in scan order
    flat = flat.reshape((n, c, m, kk))
    # explicit plane size: reshape(n, c, -1) is ambiguous for an empty batch
    plane = x.reshape(n, c, int(np.prod(sizes, dtype=np.int64)))
    vals = plane.detach().gather(-1, flat.reshape(n, c, m * kk)).reshape(n, c, m, kk)
    nan = vals.isnan()
    last_nan = (kk - 1) - nan.flip(-1).to(int64).argmax(-1)
    pick = where(nan.any(-1), last_nan, vals.argmax(-1))
    indices = flat.gather(-1, pick.unsqueeze(-1)).squeeze(-1)      # (n, c, m)
    out = plane.gather(-1, indices).reshape((n, c) + out_shape)
    indices = indices.reshape((n, c) + out_shape)
    if not batched:
        out, indices = out.squeeze(0), indices.squeeze(0)
    return rename(out, f"FractionalMaxPool{nd}DBackward0", (input,)), indices


def _samples(input, nd, samples):
    if samples is not None:
        return samples
    n = 1 if input.dim() == nd + 1 else input.shape[0]
    return rand(n, input.shape[-nd - 1], nd, dtype=input.dtype)


@values_read
def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    """As torch.nn.functional.fractional_max_pool2d_with_indices: (output, indices)."""
    if output_size is None and output_ratio is None:
        raise ValueError("fractional_max_pool2d requires specifying either an output_size or "
                         "an output_ratio")
    if output_size is None:
        if len(output_ratio) > 2:
            raise ValueError("fractional_max_pool2d requires output_ratio to either be a single "
                             "Int or tuple of Ints.")
        r = _tuple(output_ratio, 2)
        output_size = [int(input.size(-2) * r[0]), int(input.size(-1) * r[1])]
    samples = _samples(input, 2, _random_samples)
    return _pool("fractional_max_pool2d", 2, input, _tuple(kernel_size, 2),
                 _tuple(output_size, 2), samples)


@values_read
def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    """As torch.nn.functional.fractional_max_pool3d_with_indices: (output, indices)."""
    if output_size is None and output_ratio is None:
        raise ValueError("fractional_max_pool3d requires specifying either an output_size or "
                         "an output_ratio")
    if output_size is None:
        r = _tuple(output_ratio, 3)
        output_size = [int(input.size(-3) * r[0]), int(input.size(-2) * r[1]),
                       int(input.size(-1) * r[2])]
    samples = _samples(input, 3, _random_samples)
    return _pool("fractional_max_pool3d", 3, input, _tuple(kernel_size, 3),
                 _tuple(output_size, 3), samples)


@float32_list
def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """As torch.nn.functional.fractional_max_pool2d (with return_indices, (output,
    indices))."""
    res = fractional_max_pool2d_with_indices(input, kernel_size, output_size, output_ratio,
                                             return_indices, _random_samples)
    return res if return_indices else res[0]


@float32_list
def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """As torch.nn.functional.fractional_max_pool3d (with return_indices, (output,
    indices))."""
    res = fractional_max_pool3d_with_indices(input, kernel_size, output_size, output_ratio,
                                             return_indices, _random_samples)
    return res if return_indices else res[0]
