"""The bounds of random_(from, to) and randint as ATen checks and adjusts them: integer
dtypes' ranges, and a float dtype's bound that rounds past itself moved back inside."""
import warnings

import numpy as np

from ..ir import bfloat16 as bf16_values
from . import dtypes

_C_NAMES = {"int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
            "uint8": "unsigned char", "bool": "bool", "float16": "c10::Half",
            "bfloat16": "c10::BFloat16"}
_MANTISSA = {"float16": 11, "float32": 24, "float64": 53, "bfloat16": 8}
_FLOAT_C = {"float16": "c10::Half", "float32": "float", "float64": "double",
            "bfloat16": "c10::BFloat16"}


def _as_dtype(dt, v):
    """int64(scalar_t(v)) as ATen rounds an integer into dt (through float for float16 and
    bfloat16), or None past the dtype's range."""
    f = np.float64(v) if dt is dtypes.float64 else np.float32(v)
    f = np.float16(f) if dt is dtypes.float16 else \
        bf16_values.round_to(np.array(f)) if dt is dtypes.bfloat16 else f
    return int(f) if np.isfinite(f) else None


def float_bounds(dt, low, high):
    """ATen's update_from / update_to of random_(from, to) on a float tensor: a bound that
    the dtype rounds past moves back inside by its step there (to=5000 on float16: 4996)."""
    digits = _MANTISSA[dt.name]
    up, down = _as_dtype(dt, low + 1), _as_dtype(dt, high - 1)
    if up is not None and up < low:
        low = up + (1 << (abs(low + 1).bit_length() - 1 - digits + 1))
    if down is not None and down >= high:
        high = down - (1 << (abs(high - 1).bit_length() - 1 - digits + 1))
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' casted to dtype to be less than 'to' "
                           f"casted to dtype, but got from={low} >= to={high}")
    return low, high


def check_bounds(dt, low, high, stacklevel=4):
    if dt.is_floating_point:
        m, most = 2 ** _MANTISSA[dt.name], float(np.finfo(np.float32).max) \
            if dt is dtypes.bfloat16 else float(np.finfo(dt.np).max)
        for value, what in ((low, "from"), (high - 1, "to - 1")):
            if not -most <= value <= most:
                raise RuntimeError(f"{what} is out of bounds for {_FLOAT_C[dt.name]}")
            if not -m <= value <= m:
                warnings.warn(f"{what} is out of bounds [-(2^{_MANTISSA[dt.name]}), "
                              f"2^{_MANTISSA[dt.name]}]. Due to precision limitations "
                              f"{_FLOAT_C[dt.name]} can "
                              "support discrete uniform distribution only within this range. "
                              "This warning will become an error in version 1.7 release, "
                              "please fix the code in advance", UserWarning, stacklevel=stacklevel)
        return
    if dt is dtypes.bool_:
        lo, hi = 0, 1
    else:
        info = np.iinfo(dt.np)
        lo, hi = int(info.min), int(info.max)
    if not lo <= low <= hi:
        raise RuntimeError(f"from is out of bounds for {_C_NAMES[dt.name]}")
    if not lo <= high - 1 <= hi:
        raise RuntimeError(f"to - 1 is out of bounds for {_C_NAMES[dt.name]}")


def random_bounds(dt, low, high):
    """random_(from, to)'s bounds for a tensor of dtype dt (torch.randint's too): from < to,
    a float's bounds as the dtype holds them, an integer's within its range."""
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")
    if dt.is_floating_point:
        low, high = float_bounds(dt, int(low), int(high))
    check_bounds(dt, low, high, stacklevel=5)
    return low, high
