"""llgrad.finfo and llgrad.iinfo: the numeric limits of a dtype, PyTorch's attributes
(bits, eps, max, min, tiny, smallest_normal, resolution; bits, max, min) as Python numbers,
and PyTorch's reprs."""
import numpy as np

from . import dtypes


_REAL_OF = {"complex32": dtypes.float16, "complex64": dtypes.float32,
            "complex128": dtypes.float64}
_BF16_MAX = float.fromhex("0x1.fep127")
_NAMED = (dtypes.bfloat16, dtypes.complex32, dtypes.complex64, dtypes.complex128)


def _g(x):
    return f"{x:g}"


class finfo:
    """finfo(dtype=None): the limits of a floating dtype (the default dtype when None)."""

    def __init__(self, type=None):     # noqa: A002  (PyTorch's argument name)
        d = dtypes.get_default_dtype() if type is None else type \
            if type in _NAMED else dtypes.to_dtype(type)
        d = _REAL_OF.get(d.name, d)         # (a complex dtype's limits: its parts')
        if d is dtypes.bfloat16:            # (no NumPy bfloat16 to ask)
            self.bits, self.eps, self.max, self.min = 16, 2.0 ** -7, _BF16_MAX, -_BF16_MAX
            self.tiny = self.smallest_normal = 2.0 ** -126
            self.resolution, self.dtype = 0.01, d.name
            return
        if not d.is_floating_point:
            raise TypeError("torch.finfo() requires a floating point input type. Use "
                            "torch.iinfo to handle 'torch.finfo'")
        f = np.finfo(d.np)
        self.bits = int(f.bits)
        self.eps = float(f.eps)
        self.max = float(f.max)
        self.min = float(f.min)
        self.tiny = self.smallest_normal = float(f.smallest_normal)
        self.resolution = float(10.0 ** -int(f.precision))
        self.dtype = d.name

    def __eq__(self, other):
        return isinstance(other, finfo) and other.dtype == self.dtype

    def __hash__(self):
        return hash(("finfo", self.dtype))

    def __repr__(self):
        return (f"finfo(resolution={_g(self.resolution)}, min={_g(self.min)}, "
                f"max={_g(self.max)}, eps={_g(self.eps)}, "
                f"smallest_normal={_g(self.smallest_normal)}, tiny={_g(self.tiny)}, "
                f"dtype={self.dtype})")


class iinfo:
    """iinfo(dtype): the limits of an integer dtype."""

    def __init__(self, type):          # noqa: A002
        d = dtypes.float32 if type in _NAMED else dtypes.to_dtype(type)   # (PyTorch's error)
        if d.name == "bool":
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if d.is_floating_point:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to "
                            "handle 'torch.iinfo'")
        i = np.iinfo(d.np)
        self.bits, self.max, self.min = int(i.bits), int(i.max), int(i.min)
        self.dtype = d.name

    def __eq__(self, other):
        return isinstance(other, iinfo) and other.dtype == self.dtype

    def __hash__(self):
        return hash(("iinfo", self.dtype))

    def __repr__(self):
        return f"iinfo(min={_g(self.min)}, max={_g(self.max)}, dtype={self.dtype})"
