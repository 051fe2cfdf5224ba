"""Window functions, as PyTorch's torch.hann_window, hamming_window, blackman_window,
bartlett_window and kaiser_window: periodic (the default: a window of length N + 1 without
its last point, for spectral analysis) or symmetric, computed in float64 and rounded to the
dtype (PyTorch computes in the dtype: a float32 value may be an ulp apart)."""
import numpy as np

from . import dtypes
from .creation import _finish
from .device import check as check_device
from .functions import export

_C_NAMES = {"int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
            "uint8": "unsigned char", "bool": "bool"}


def _window(name, window_length, periodic, dtype, requires_grad, device, values):
    if not isinstance(window_length, int) or isinstance(window_length, bool):
        raise TypeError(f"{name}(): argument 'window_length' (position 1) must be int, not "
                        f"{type(window_length).__name__}")
    check_device(device)
    d = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    if not d.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: TensorOptions(dtype="
                           f"{_C_NAMES.get(d.name, d.name)}, device=cpu, layout=Strided "
                           "(default), requires_grad=" + ("true" if requires_grad else
                                                          "false (default)")
                           + ", pinned_memory=false, memory_format=(nullopt))")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got "
                           f"window_length={window_length}")
    if window_length <= 1:
        arr = np.ones(window_length)
    else:
        n = window_length + 1 if periodic else window_length
        arr = values(np.arange(n, dtype=np.float64), n)[:window_length]
    return _finish(arr.astype(d.np), None, requires_grad)


def _cosine_sum(*coeffs):
    def values(k, n):
        out = np.zeros(k.shape)
        for j, a in enumerate(coeffs):
            out += (-1) ** j * a * np.cos(2 * np.pi * j * k / (n - 1))
        return out
    return values


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                pin_memory=False, requires_grad=False):
    """As torch.hann_window: 0.5 - 0.5 cos(2 pi k / (N - 1))."""
    return _window("hann_window", window_length, periodic, dtype, requires_grad, device,
                   _cosine_sum(0.5, 0.5))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, pin_memory=False, requires_grad=False):
    """As torch.hamming_window: alpha - beta cos(2 pi k / (N - 1))."""
    return _window("hamming_window", window_length, periodic, dtype, requires_grad, device,
                   _cosine_sum(alpha, beta))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    pin_memory=False, requires_grad=False):
    """As torch.blackman_window: 0.42 - 0.5 cos(2 pi k / (N - 1)) + 0.08 cos(4 pi k / (N - 1))."""
    return _window("blackman_window", window_length, periodic, dtype, requires_grad, device,
                   _cosine_sum(0.42, 0.5, 0.08))


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    pin_memory=False, requires_grad=False):
    """As torch.bartlett_window: the triangle 1 - |2k / (N - 1) - 1|."""
    return _window("bartlett_window", window_length, periodic, dtype, requires_grad, device,
                   lambda k, n: 1 - np.abs(2 * k / (n - 1) - 1))


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, pin_memory=False, requires_grad=False):
    """As torch.kaiser_window: I0(beta sqrt(1 - (2k / (N - 1) - 1)^2)) / I0(beta)."""
    def values(k, n):
        r = 2 * k / (n - 1) - 1
        return np.i0(beta * np.sqrt(np.maximum(1 - r * r, 0))) / np.i0(beta)
    return _window("kaiser_window", window_length, periodic, dtype, requires_grad, device,
                   values)


for _f in (hann_window, hamming_window, blackman_window, bartlett_window, kaiser_window):
    export(_f)
