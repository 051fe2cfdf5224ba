"""The data address of an ndarray, read in one subscript: native kernels take their
operands' addresses on every call, and `ndarray.ctypes.data` builds a ctypes object per read
(~1-3 us, more than a small kernel's work)."""
import ctypes
import sys

import numpy as np

__all__ = ["data_pointer"]

_from_address = ctypes.c_void_p.from_address
# The address space as one array of machine words: the word at address a is _WORDS[a >> 3].
# Reading an ndarray's data pointer with it is one subscript, where from_address(...).value
# makes a ctypes object per read (~0.1 us, three times per call of a one-input kernel). It
# reads exactly what from_address reads (an address _probe_data_offset verified), nothing
# is touched when it is made, and it is None off 64-bit hosts.
_WORDS = (ctypes.c_uint64 * (sys.maxsize // 8)).from_address(0) \
    if ctypes.sizeof(ctypes.c_void_p) == 8 else None


def _probe_data_offset():
    """The offset of the data pointer in an ndarray object (PyArrayObject.data), verified
    on a few arrays; None if it cannot be confirmed (then ndarray.ctypes is used)."""
    for off in (16, 24, 32):
        ok = True
        for a in (np.zeros(3), np.arange(10.0)[2::3], np.ones((2, 3), np.float32).T):
            if _from_address(id(a) + off).value != a.ctypes.data:
                ok = False
                break
        if ok:
            return off
    return None


def _words_read(off):
    """Whether _WORDS reads the data pointer at `off` as from_address does."""
    a = np.arange(4.0)[1:]
    return off is not None and not off % 8 and _WORDS[(id(a) + off) >> 3] == a.ctypes.data


_DATA_OFFSET = _probe_data_offset()
if _WORDS is not None and not _words_read(_DATA_OFFSET):
    _WORDS = None                       # (then from_address reads the pointers)


def data_pointer(a):
    """The address of an ndarray's first element (cheaply, for exact ndarrays)."""
    if _WORDS is not None and type(a) is np.ndarray:
        return _WORDS[(id(a) + _DATA_OFFSET) >> 3]
    return a.ctypes.data
