"""Discrete Fourier transforms, PyTorch's three primitives (aten::_fft_c2c, _fft_r2c,
_fft_c2r) on NumPy's pocketfft. Eager only, as every complex op (ops_complex.py).

norm is NumPy's (and torch.fft's) name of the scale, relative to the transform's direction:
"backward" leaves the forward transform unscaled and scales the inverse by 1/n, "forward"
the other way round, "ortho" both by 1/sqrt(n). The VJP of a transform is the transform
the other way with the same scale (its adjoint), which is the other direction's "dual"
norm; the one-sided transforms' VJPs are PyTorch's (fft_r2c_backward: the gradient padded
with zeros to the full length, transformed back, its real part; fft_c2r_backward: the
one-sided transform of the gradient, the entries that stand for two doubled)."""
import numpy as np

from .ops_complex import COMPLEX_OF, REAL_OF
from .optable import defop

DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _c2c(x, dim, norm, forward):
    fn = np.fft.fftn if forward else np.fft.ifftn
    return np.asarray(fn(x, axes=dim, norm=norm), dtype=x.dtype)


def _c2c_vjp(c, g):
    return (g._op("fft_c2c", dim=c.dim, norm=DUAL[c.norm], forward=not c.forward),)


def _r2c(x, dim, norm, onesided):
    fn = np.fft.rfftn if onesided else np.fft.fftn
    return np.asarray(fn(x, axes=dim, norm=norm), dtype=COMPLEX_OF[x.dtype])


def _r2c_vjp(c, g):
    if c.onesided:          # (the other half as zeros, not as the mirrored conjugates)
        last = c.dim[-1]
        missing = c.shape(0)[last] - g.shape[last]
        if missing > 0:
            size = list(g.shape)
            size[last] = missing
            g = _cat_zeros(g, size, last)
    full = g._op("fft_c2c", dim=c.dim, norm=DUAL[c.norm], forward=False)
    return (full._op("view_as_real").select(-1, 0),)


def _cat_zeros(g, size, dim):
    """g with zeros of shape size after it along dim (the Tensor API: a padded copy)."""
    pad = [0, 0] * (g.dim() - 1 - dim) + [0, size[dim]]
    return g._op("constant_pad_nd", pad=tuple(pad), value=0)


def _c2r(x, dim, norm, last_dim_size):
    s = [x.shape[d] for d in dim[:-1]] + [last_dim_size]
    return np.asarray(np.fft.irfftn(x, s=s, axes=dim, norm=norm), dtype=REAL_OF[x.dtype])


def _c2r_vjp(c, g):
    gi = g._op("fft_r2c", dim=c.dim, norm=DUAL[c.norm], onesided=True)
    last = c.dim[-1]
    kept = gi.shape[last]
    doubled = c.last_dim_size - kept
    if doubled > 0:
        weights = [1.0] + [2.0] * doubled + [1.0] * (kept - 1 - doubled)
        shape = [1] * gi.dim()
        shape[last] = kept
        gi = gi * g.new_tensor(weights).reshape(shape)
    return (gi,)


defop("fft_c2c", _c2c, vjp=_c2c_vjp, grad_fn="FftC2CBackward0", complex="only",
      doc="dim: a tuple of non-negative dims; norm: NumPy's name; forward: the direction")
defop("fft_r2c", _r2c, vjp=_r2c_vjp, grad_fn="FftR2CBackward0", complex="only",
      doc="onesided: only the first n // 2 + 1 entries along the last of dim")
defop("fft_c2r", _c2r, vjp=_c2r_vjp, grad_fn="FftC2RBackward0", complex="only",
      doc="last_dim_size: the real result's length along the last of dim")
