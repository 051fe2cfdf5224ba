"""bfloat16 values in NumPy, which has no bfloat16 dtype.

A bfloat16 tensor's memory is a float32 array of the opposite byte order ('>f4' on this
little-endian machine) whose every value is a bfloat16 value: a dtype NumPy computes with
correctly (it swaps bytes as it reads) but that no other llgrad dtype uses, so the array
itself says its elements are bfloat16 (Tensor._from_array reads the dtype from it), every
view and copy of it keeps that, and any computation NumPy does on it returns a plain
float32 array. Ops compute as PyTorch's CPU kernels compute bfloat16: on float32 values,
the result rounded once to the nearest bfloat16 (ties to even), which `round_to` does.
Native code is never given such an array: its byte order is not the machine's."""
import numpy as np

STORAGE = np.dtype(np.float32).newbyteorder("S")      # float32, the machine's order swapped
_F32 = np.dtype(np.float32)


def is_storage(a):
    """Whether NumPy array a holds bfloat16 values."""
    return getattr(a, "dtype", None) == STORAGE


def round_to(x):
    """x (any real array or number) rounded to bfloat16, as a STORAGE array: through float32
    (PyTorch's conversions go through float), then to the nearest bfloat16, ties to even;
    a NaN stays a NaN (PyTorch's canonical one), an overflow becomes inf. A STORAGE array
    is rounded too: NumPy makes one of any values (astype), so none is trusted."""
    f = np.asarray(x)
    f = np.asarray(f, dtype=_F32) if f.dtype.kind != "c" else f.real.astype(_F32)
    bits = f.view(np.uint32) if f.flags.c_contiguous else np.ascontiguousarray(f).view(np.uint32)
    lsb = (bits >> 16) & 1
    rounded = (bits + np.uint32(0x7FFF) + lsb) & np.uint32(0xFFFF0000)
    rounded = np.where(np.isnan(f), np.uint32(0x7FC00000), rounded)
    return rounded.reshape(f.shape).view(_F32).astype(STORAGE)


def round_number(v):
    """A Python float rounded to the nearest bfloat16 (a Python float)."""
    return float(round_to(np.float32(v)))


def to_float32(a):
    """The float32 values of a bfloat16 array (exact), in the machine's byte order."""
    return a.astype(_F32)
