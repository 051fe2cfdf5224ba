"""llgrad.signal.windows: torch.signal.windows' window functions (SciPy's conventions:
symmetric by default, sym=False for the periodic window of spectral analysis), written as
PyTorch writes them, with linspace in the requested dtype and the elementwise functions after
it, as PyTorch's (a float32 value may still be an ulp or two apart: the elementwise functions'
rounding). torch.hann_window and its siblings, periodic by default, are
runtime/functions_windows.py's."""
import math
from collections.abc import Iterable

from ..runtime.creation import arange, empty, linspace, ones, tensor
from ..runtime.dtypes import float32, float64, get_default_dtype
from ..runtime.functions import abs as _abs, cos, exp, i0, minimum, pow, sin, sqrt

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]


def _checks(name, M, dtype, layout):
    """-> the dtype (the default dtype for None), after PyTorch's checks of every window."""
    dtype = get_default_dtype() if dtype is None else dtype
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if layout is not None and str(layout) not in ("torch.strided", "llgrad.strided"):
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    if dtype not in (float32, float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")
    return dtype


def _empty(dtype, requires_grad):
    return empty((0,), dtype=dtype, requires_grad=requires_grad)


def _ones(dtype, requires_grad):
    return ones((1,), dtype=dtype, requires_grad=requires_grad)


def _linspace(start, end, M, dtype, requires_grad):
    return linspace(start, end, M, dtype=dtype, requires_grad=requires_grad)


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None,
                requires_grad=False):
    """As torch.signal.windows.exponential: exp(-|n - center| / tau)."""
    dtype = _checks("exponential", M, dtype, layout)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if M == 0:
        return _empty(dtype, requires_grad)
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    constant = 1 / tau
    k = _linspace(-center * constant, (-center + (M - 1)) * constant, M, dtype, requires_grad)
    return exp(-_abs(k))


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """As torch.signal.windows.cosine: sin(pi (n + 1/2) / M)."""
    dtype = _checks("cosine", M, dtype, layout)
    if M == 0:
        return _empty(dtype, requires_grad)
    start = 0.5
    constant = math.pi / (M + 1 if not sym and M > 1 else M)
    k = _linspace(start * constant, (start + (M - 1)) * constant, M, dtype, requires_grad)
    return sin(k)


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None,
             requires_grad=False):
    """As torch.signal.windows.gaussian: exp(-((n - (M - 1) / 2) / std)^2 / 2)."""
    dtype = _checks("gaussian", M, dtype, layout)
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    if M == 0:
        return _empty(dtype, requires_grad)
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    constant = 1 / (std * math.sqrt(2))
    k = _linspace(start * constant, (start + (M - 1)) * constant, M, dtype, requires_grad)
    return exp(-(k ** 2))


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None,
           requires_grad=False):
    """As torch.signal.windows.kaiser: I0(beta sqrt(1 - (2n / (M - 1) - 1)^2)) / I0(beta)."""
    dtype = _checks("kaiser", M, dtype, layout)
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    if M == 0:
        return _empty(dtype, requires_grad)
    if M == 1:
        return _ones(dtype, requires_grad)
    beta = tensor(beta, dtype=dtype)      # (as PyTorch: beta in the dtype, no NaN at the ends)
    start = -beta
    constant = 2.0 * beta / (M if not sym else M - 1)
    end = minimum(beta, start + (M - 1) * constant)
    k = _linspace(start.item(), end.item(), M, dtype, requires_grad)
    return i0(sqrt(beta * beta - pow(k, 2))) / i0(beta)


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None,
                   requires_grad=False):
    """As torch.signal.windows.general_cosine: sum_i (-1)^i a_i cos(2 pi i n / (M - 1))."""
    dtype = _checks("general_cosine", M, dtype, layout)
    if M == 0:
        return _empty(dtype, requires_grad)
    if M == 1:
        return _ones(dtype, requires_grad)
    if not isinstance(a, Iterable):
        raise TypeError("Coefficients must be a list/tuple")
    if not a:
        raise ValueError("Coefficients cannot be empty")
    constant = 2 * math.pi / (M if not sym else M - 1)
    k = _linspace(0, (M - 1) * constant, M, dtype, requires_grad)
    a_i = tensor([(-1) ** i * w for i, w in enumerate(a)], dtype=dtype,
                 requires_grad=requires_grad)
    i = arange(a_i.shape[0], dtype=a_i.dtype, requires_grad=a_i.requires_grad)
    return (a_i.unsqueeze(-1) * cos(i.unsqueeze(-1) * k)).sum(0)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """As torch.signal.windows.general_hamming: alpha - (1 - alpha) cos(2 pi n / (M - 1))."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """As torch.signal.windows.hamming: general_hamming with alpha 0.54."""
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """As torch.signal.windows.hann: general_hamming with alpha 0.5."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """As torch.signal.windows.blackman: general_cosine with a = (0.42, 0.5, 0.08)."""
    _checks("blackman", M, dtype, layout)
    return general_cosine(M, a=[0.42, 0.50, 0.08], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """As torch.signal.windows.bartlett: the triangle 1 - |2n / (M - 1) - 1|."""
    dtype = _checks("bartlett", M, dtype, layout)
    if M == 0:
        return _empty(dtype, requires_grad)
    if M == 1:
        return _ones(dtype, requires_grad)
    start = -1
    constant = 2 / (M if not sym else M - 1)
    k = _linspace(start, start + (M - 1) * constant, M, dtype, requires_grad)
    return 1 - _abs(k)


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """As torch.signal.windows.nuttall: general_cosine with Nuttall's four coefficients."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)
