"""dtypes with PyTorch's names, and PyTorch's type-promotion rules."""
import numpy as np


class dtype:
    __slots__ = ("name", "np", "is_floating_point", "itemsize", "_cat", "_tensor_type")

    def __init__(self, name, npdt, cat, tensor_type):
        self.name = name
        self.np = np.dtype(npdt)
        self.is_floating_point = cat == 2
        self.itemsize = self.np.itemsize
        self._cat = cat                     # 0 bool, 1 integer, 2 floating
        self._tensor_type = tensor_type

    def __repr__(self):
        return "llgrad." + self.name

    def __reduce__(self):
        return (from_name, (self.name,))


float32 = dtype("float32", np.float32, 2, "FloatTensor")
float64 = dtype("float64", np.float64, 2, "DoubleTensor")
float16 = dtype("float16", np.float16, 2, "HalfTensor")
int64 = dtype("int64", np.int64, 1, "LongTensor")
int32 = dtype("int32", np.int32, 1, "IntTensor")
int16 = dtype("int16", np.int16, 1, "ShortTensor")
int8 = dtype("int8", np.int8, 1, "CharTensor")
uint8 = dtype("uint8", np.uint8, 1, "ByteTensor")
bool_ = dtype("bool", np.bool_, 0, "BoolTensor")
float = float32   # noqa: A001  (PyTorch aliases)
double = float64
half = float16
long = int64
int = int32       # noqa: A001

ALL = (float32, float64, float16, int64, int32, int16, int8, uint8, bool_)
_BY_NP = {d.np: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}


def from_name(name):
    return _BY_NAME[name]


def from_numpy_dtype(npdt):
    try:
        return _BY_NP[np.dtype(npdt)]
    except KeyError:
        raise TypeError(f"can't convert np.ndarray of type numpy.{np.dtype(npdt).name}. "
                        "The only supported types are: float64, float32, float16, int64, "
                        "int32, int16, int8, uint8, and bool.") from None


def to_dtype(d):
    """Accept an llgrad dtype, a NumPy dtype or a Python type."""
    if isinstance(d, dtype):
        return d
    if d is builtins_float:
        return float32
    if d is builtins_int:
        return int64
    if d is builtins_bool:
        return bool_
    return from_numpy_dtype(d)


import builtins as _b  # noqa: E402
builtins_float, builtins_int, builtins_bool = _b.float, _b.int, _b.bool

_default = {2: float32, 1: int64, 0: bool_}


def default_for_scalar(value):
    if isinstance(value, builtins_bool):
        return bool_
    if isinstance(value, builtins_int):
        return int64
    return float32


def _cat_of_scalar(v):
    return 0 if isinstance(v, builtins_bool) else 1 if isinstance(v, builtins_int) else 2


def promote_types(a, b):
    if a is b:
        return a
    if a._cat != b._cat:            # PyTorch: float32 + int64 -> float32 (NumPy says float64)
        return a if a._cat > b._cat else b
    return from_numpy_dtype(np.promote_types(a.np, b.np))


def result_type(*operands):
    """PyTorch's rule: dimensioned tensors decide, then 0-dim tensors, then Python scalars,
    each of the later groups only when it is of a higher category (bool < int < float)."""
    dim_t = zero_t = None
    scal_cat = -1
    for o in operands:
        d = getattr(o, "_dtype", None)
        if d is None:
            if o is None:
                continue
            scal_cat = max(scal_cat, _cat_of_scalar(o))
        elif o._data.ndim:
            dim_t = d if dim_t is None else promote_types(dim_t, d)
        else:
            zero_t = d if zero_t is None else promote_types(zero_t, d)
    res = dim_t
    if zero_t is not None and (res is None or zero_t._cat > res._cat):
        res = zero_t
    if scal_cat >= 0 and (res is None or scal_cat > res._cat):
        res = _default[scal_cat]
    return res
