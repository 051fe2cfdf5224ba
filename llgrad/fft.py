"""torch.fft: discrete Fourier transforms with PyTorch's names, arguments and gradients
(ir/ops_fft.py's three primitives); and torch.stft / torch.istft, made of them. Eager only:
a compiled function that transforms runs eagerly (compiled code has no complex values)."""
import warnings

from .ir.ops_fft import DUAL
from .nn.functional import fold as _fold, pad as _pad
from .runtime import dtypes
from .runtime.creation import arange
from .runtime.tensor import Tensor
from .runtime.autocast_cast import float32_list
from .runtime.numpy_names import wrap_namespace as _wrap_numpy_names

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2",
           "irfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfft2", "ihfft2", "hfftn", "ihfftn",
           "fftshift", "ifftshift", "fftfreq",
           "rfftfreq", "stft", "istft"]

_NORMS = ("backward", "forward", "ortho")


def _norm(norm):
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise RuntimeError(f'Invalid normalization mode: "{norm}"')   # (as PyTorch)
    return norm


def _floating(x, name):
    if not isinstance(x, Tensor):
        raise TypeError(f"fft_{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    return x if x._dtype._cat >= 2 else x.to(dtypes.get_default_dtype())


def _dims(x, dim, s, name):
    """The transformed dims (non-negative, in order given) and their sizes (s or x's)."""
    nd = x.dim()
    if dim is None:
        dims = list(range(nd)) if s is None else list(range(nd - len(s), nd))
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
        dims = [d + nd if d < 0 else d for d in dims]
        if any(not 0 <= d < nd for d in dims):
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, "
                             f"{nd - 1}], but got {dim})")
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"fft_{name} dims must be unique")
    if s is not None and len(s) != len(dims):
        raise RuntimeError("When given, dim and shape arguments must have the same length")
    sizes = [x.shape[d] if s is None or s[i] == -1 else s[i] for i, d in enumerate(dims)]
    if any(n < 1 for n in sizes):
        raise RuntimeError(f"Invalid number of data points ({min(sizes)}) specified")
    return tuple(dims), sizes


def _resized(x, dims, sizes):
    """x cropped or zero-padded at the end of each dim to its size (as torch.fft's n / s)."""
    pad = [0, 0] * x.dim()
    for d, n in zip(dims, sizes):
        pad[2 * (x.dim() - 1 - d) + 1] = n - x.shape[d]
    return x if not any(pad) else x._op("constant_pad_nd", pad=tuple(pad), value=0)


def _c2c(x, dim, s, norm, forward, name):
    x = _floating(x, name)
    dims, sizes = _dims(x, dim, s, name)
    x = _resized(x, dims, sizes)
    if not x._dtype.is_complex:
        return x._op("fft_r2c", dim=dims, norm=_norm(norm), onesided=False) if forward else \
            x.to(x._dtype.to_complex())._op("fft_c2c", dim=dims, norm=_norm(norm),
                                            forward=False)
    return x._op("fft_c2c", dim=dims, norm=_norm(norm), forward=forward)


def _r2c(x, dim, s, norm, name):
    x = _floating(x, name)
    if x._dtype.is_complex:
        raise RuntimeError(f"{name} expects a real input tensor, but got {x._dtype.name}")
    dims, sizes = _dims(x, dim, s, name)
    return _resized(x, dims, sizes)._op("fft_r2c", dim=dims, norm=_norm(norm), onesided=True)


def _c2r(x, dim, s, norm, name):
    x = _floating(x, name)
    dims, sizes = _dims(x, dim, s, name)
    last = sizes[-1] if s is not None and s[-1] != -1 else 2 * (x.shape[dims[-1]] - 1)
    if last < 1:
        raise RuntimeError(f"Invalid number of data points ({last}) specified")
    sizes[-1] = last // 2 + 1
    x = _resized(x, dims, sizes)
    if not x._dtype.is_complex:
        x = x.to(x._dtype.to_complex())
    return x._op("fft_c2r", dim=dims, norm=_norm(norm), last_dim_size=last)


@float32_list
def fft(input, n=None, dim=-1, norm=None):
    """As torch.fft.fft."""
    return _c2c(input, dim, None if n is None else [n], norm, True, "fft")


@float32_list
def ifft(input, n=None, dim=-1, norm=None):
    """As torch.fft.ifft."""
    return _c2c(input, dim, None if n is None else [n], norm, False, "ifft")


@float32_list
def rfft(input, n=None, dim=-1, norm=None):
    """As torch.fft.rfft: the first n // 2 + 1 entries of a real input's transform."""
    return _r2c(input, dim, None if n is None else [n], norm, "rfft")


@float32_list
def irfft(input, n=None, dim=-1, norm=None):
    """As torch.fft.irfft: the real signal of length n (default 2 * (m - 1)) whose rfft is
    input."""
    return _c2r(input, dim, None if n is None else [n], norm, "irfft")


@float32_list
def hfft(input, n=None, dim=-1, norm=None):
    """As torch.fft.hfft: the real transform of a Hermitian signal's first half."""
    return irfft(_floating(input, "hfft").conj(), n, dim, DUAL[_norm(norm)])


@float32_list
def ihfft(input, n=None, dim=-1, norm=None):
    """As torch.fft.ihfft: the inverse of hfft (the first half of a real input's ifft)."""
    return rfft(input, n, dim, DUAL[_norm(norm)]).conj()



@float32_list
def fftn(input, s=None, dim=None, norm=None):
    """As torch.fft.fftn."""
    return _c2c(input, dim, s, norm, True, "fftn")


@float32_list
def ifftn(input, s=None, dim=None, norm=None):
    """As torch.fft.ifftn."""
    return _c2c(input, dim, s, norm, False, "ifftn")


@float32_list
def rfftn(input, s=None, dim=None, norm=None):
    """As torch.fft.rfftn."""
    return _r2c(input, dim, s, norm, "rfftn")


@float32_list
def irfftn(input, s=None, dim=None, norm=None):
    """As torch.fft.irfftn."""
    return _c2r(input, dim, s, norm, "irfftn")


@float32_list
def hfftn(input, s=None, dim=None, norm=None):
    """As torch.fft.hfftn: the real transform of a Hermitian signal given by the first half
    of its last dimension (irfftn of the conjugate, under the dual norm, as hfft)."""
    return irfftn(_floating(input, "hfftn").conj(), s, dim, DUAL[_norm(norm)])


@float32_list
def ihfftn(input, s=None, dim=None, norm=None):
    """As torch.fft.ihfftn: the inverse of hfftn (the first half of a real input's ifftn):
    as ATen, the last dim's one-sided transform conjugated, then the others' inverse c2c."""
    x = _floating(input, "ihfftn")
    if x._dtype.is_complex:
        raise RuntimeError(f"ihfftn expects a real input tensor, but got {x._dtype.name}")
    dims, sizes = _dims(x, dim, s, "ihfftn")
    half = _resized(x, dims, sizes)._op("fft_r2c", dim=dims[-1:], norm=DUAL[_norm(norm)],
                                        onesided=True)
    return half.conj() if len(dims) == 1 else half.conj_physical()._op(
        "fft_c2c", dim=dims[:-1], norm=_norm(norm), forward=False)


@float32_list
def hfft2(input, s=None, dim=(-2, -1), norm=None):
    """As torch.fft.hfft2."""
    return hfftn(input, s, dim, norm)


@float32_list
def ihfft2(input, s=None, dim=(-2, -1), norm=None):
    """As torch.fft.ihfft2."""
    return ihfftn(input, s, dim, norm)


@float32_list
def fft2(input, s=None, dim=(-2, -1), norm=None):
    """As torch.fft.fft2."""
    return fftn(input, s, dim, norm)


@float32_list
def ifft2(input, s=None, dim=(-2, -1), norm=None):
    """As torch.fft.ifft2."""
    return ifftn(input, s, dim, norm)


@float32_list
def rfft2(input, s=None, dim=(-2, -1), norm=None):
    """As torch.fft.rfft2."""
    return rfftn(input, s, dim, norm)


@float32_list
def irfft2(input, s=None, dim=(-2, -1), norm=None):
    """As torch.fft.irfft2."""
    return irfftn(input, s, dim, norm)


def _shift(input, dim, sign):
    dims = list(range(input.dim())) if dim is None else \
        [dim] if isinstance(dim, int) else list(dim)
    return input.roll([sign * (input.shape[d] // 2) for d in dims], dims)


def fftshift(input, dim=None):
    """As torch.fft.fftshift: the zero frequency moved to the middle."""
    return _shift(input, dim, 1)


def ifftshift(input, dim=None):
    """As torch.fft.ifftshift: the inverse of fftshift."""
    return _shift(input, dim, -1)


def fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """As torch.fft.fftfreq: the sample frequencies of an n-point transform, spacing d."""
    k = arange(n, dtype=dtype or dtypes.get_default_dtype(), device=device)
    k = k - n * (k >= (n + 1) // 2).to(k.dtype)
    return (k * (1.0 / (n * d))).requires_grad_(requires_grad)     # (ATen: mul_, not div_)


def rfftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """As torch.fft.rfftfreq: the sample frequencies of an n-point rfft, spacing d."""
    k = arange(n // 2 + 1, dtype=dtype or dtypes.get_default_dtype(), device=device)
    return (k * (1.0 / (n * d))).requires_grad_(requires_grad)     # (ATen: mul_, not div_)


def _window(window, win_length, n_fft, like):
    if window is None:
        warnings.warn("A window was not provided. A rectangular window will be applied,which is "
                      "known to cause spectral leakage. Other windows such as torch.hann_window "
                      "or torch.hamming_window are recommended to reduce spectral leakage.To "
                      "suppress this warning and use a rectangular window, explicitly set "
                      "`window=torch.ones(n_fft, device=<device>)`.", UserWarning, stacklevel=3)
        window = like.new_ones(win_length)
    if window.dim() != 1 or window.shape[0] != win_length:
        raise RuntimeError(f"stft: expected a 1D window tensor of size equal to win_length="
                           f"{win_length}, but got window with size {list(window.shape)}")
    left = (n_fft - win_length) // 2
    return window._op("constant_pad_nd", pad=(left, n_fft - win_length - left), value=0) \
        if win_length < n_fft else window


@float32_list
def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
         pad_mode="reflect", normalized=False, onesided=None, return_complex=None):
    """As torch.stft: the Fourier transforms of the signal's windowed frames, shape
    (batch?, frequencies, frames)."""
    hop = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    real = not input._dtype.is_complex and (window is None or not window._dtype.is_complex)
    if return_complex is None and real:
        raise RuntimeError("stft requires the return_complex parameter be given for real "
                           "inputs, and will further require that return_complex=True in a "
                           "future PyTorch release.")
    if input.dim() not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.dim()}D")
    if not 0 < win_length <= n_fft or hop <= 0:
        raise RuntimeError(f"stft: expected 0 < win_length <= n_fft and hop_length > 0, but "
                           f"got win_length={win_length}, n_fft={n_fft}, hop_length={hop}")
    x = input if input.dim() == 2 else input.unsqueeze(0)
    if center:
        x = _pad(x.unsqueeze(1), [n_fft // 2, n_fft // 2], mode=pad_mode).squeeze(1)
    if x.shape[-1] < n_fft:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {x.shape[-1]}, but got n_fft={n_fft}")
    frames = x.unfold(-1, n_fft, hop) * _window(window, win_length, n_fft, x)
    norm = "ortho" if normalized else "backward"
    one = real if onesided is None else onesided
    spec = rfft(frames, norm=norm) if one else fft(frames, norm=norm)
    spec = spec.transpose(-1, -2)
    spec = spec if input.dim() == 2 else spec.squeeze(0)
    if return_complex is False:
        return spec._op("view_as_real")
    return spec


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
          normalized=False, onesided=None, length=None, return_complex=False):
    """As torch.istft: the signal whose stft is input, by overlap-add of the inverse
    transforms of its frames divided by the window's overlapped squares."""
    hop = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    if not input._dtype.is_complex:
        raise RuntimeError("istft requires a complex-valued input tensor")
    spec = input if input.dim() == 3 else input.unsqueeze(0)
    n_frames = spec.shape[-1]
    one = spec.shape[-2] != n_fft if onesided is None else onesided
    norm = "ortho" if normalized else "backward"
    cols = spec.transpose(-1, -2)
    frames = irfft(cols, n=n_fft, norm=norm) if one and not return_complex else \
        ifft(cols, n=n_fft, norm=norm)
    w = _window(window, win_length, n_fft, frames.real if frames._dtype.is_complex
                else frames)
    frames = frames * w
    total = n_fft + hop * (n_frames - 1)
    ola = _fold(frames.transpose(1, 2), (1, total), (1, n_fft), stride=(1, hop)) \
        if not frames._dtype.is_complex else None
    if ola is None:
        raise RuntimeError("istft: return_complex=True is not supported")
    env = _fold((w * w).reshape(1, n_fft, 1).expand(1, n_fft, n_frames), (1, total),
                (1, n_fft), stride=(1, hop))
    start = n_fft // 2 if center else 0
    end = total - (n_fft // 2 if center else 0) if length is None else start + length
    y = ola.reshape(ola.shape[0], total)
    env = env.reshape(total)
    if bool((env[start:min(end, total)].abs() < 1e-11).any()):
        raise RuntimeError("istft: window overlap add min: 1e-11 not satisfied (the window's "
                           "squares overlapped vanish somewhere)")
    y = y[:, start:min(end, total)] / env[start:min(end, total)]
    if end > total:
        y = y._op("constant_pad_nd", pad=(0, end - total), value=0)
    return y if input.dim() == 3 else y.squeeze(0)


Tensor.stft = stft      # (torch.Tensor.stft / istft: the functions with the tensor as input)
Tensor.istft = istft


# (x= / a= / x1= for input=, x2= for other=: PyTorch's NumPy-style names, as llgrad.*'s)
_wrap_numpy_names(globals(), __all__)
