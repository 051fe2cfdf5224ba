"""dtypes with PyTorch's names; PyTorch's type promotion on them (ir/promotion.py)."""
import builtins

import numpy as np

from ..ir import bfloat16 as bf16_values, promotion


class dtype:
    """An element type (llgrad.float32, llgrad.int64, ...), as torch.dtype; .np is the NumPy
    dtype, .itemsize its bytes."""
    __slots__ = ("name", "np", "is_floating_point", "is_signed", "is_complex", "itemsize",
                 "_cat", "_tensor_type", "_plain")

    def __init__(self, name, npdt, cat, tensor_type, itemsize=None):
        self.name = name
        self.np = np.dtype(npdt)
        self.is_floating_point = cat == 2
        self.is_signed = self.np.kind in "ifc"      # (PyTorch's: bool and uint8 are not)
        self.is_complex = cat == 3
        self.itemsize = itemsize or self.np.itemsize
        self._cat = cat                     # 0 bool, 1 integer, 2 floating, 3 complex
        self._tensor_type = tensor_type
        # False for what the dispatcher treats apart: complex (only ops declared for it) and
        # bfloat16 (computed in float32, rounded: dispatch_bf16.py)
        self._plain = cat < 3 and name != "bfloat16"

    def __repr__(self):
        return "llgrad." + self.name

    def __reduce__(self):
        return (from_name, (self.name,))

    def to_real(self):
        """As torch.dtype.to_real: a complex dtype's part dtype; any other itself."""
        return _BY_NAME[_PARTS[self.name]] if self.name in _PARTS else self

    def to_complex(self):
        """As torch.dtype.to_complex: the complex dtype of a floating one's precision."""
        for c, part in _PARTS.items():
            if self.name in (c, part):
                return _BY_NAME[c] if c in _BY_NAME else NAMES_ONLY[c]
        raise RuntimeError(f"Unknown Complex ScalarType for {scalar_type_name(self)}")


_PARTS = {"complex32": "float16", "complex64": "float32", "complex128": "float64"}


float32 = dtype("float32", np.float32, 2, "FloatTensor")
float64 = dtype("float64", np.float64, 2, "DoubleTensor")
float16 = dtype("float16", np.float16, 2, "HalfTensor")
int64 = dtype("int64", np.int64, 1, "LongTensor")
int32 = dtype("int32", np.int32, 1, "IntTensor")
int16 = dtype("int16", np.int16, 1, "ShortTensor")
int8 = dtype("int8", np.int8, 1, "CharTensor")
uint8 = dtype("uint8", np.uint8, 1, "ByteTensor")
bool_ = dtype("bool", np.bool_, 0, "BoolTensor")
complex64 = dtype("complex64", np.complex64, 3, "ComplexFloatTensor")
complex128 = dtype("complex128", np.complex128, 3, "ComplexDoubleTensor")
# (its memory: float32 of the opposite byte order, holding bfloat16 values: ir/bfloat16.py)
bfloat16 = dtype("bfloat16", bf16_values.STORAGE, 2, "BFloat16Tensor", itemsize=2)
float = float32   # noqa: A001  (PyTorch aliases)
double = float64
half = float16
long = int64
int = int32       # noqa: A001

ALL = (float32, float64, float16, int64, int32, int16, int8, uint8, bool_, complex64,
       complex128, bfloat16)
_BY_NP = {d.np: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}

# The wide unsigned dtypes exist as names (dtype tables, iinfo, comparisons) but no llgrad
# tensor has them: PyTorch runs only some ops on them (mul, eq, sort, cumsum, but not add or
# gt) and promotes them with nothing, rules llgrad does not reproduce; making one raises.
uint16 = dtype("uint16", np.uint16, 1, "UInt16Tensor")
uint32 = dtype("uint32", np.uint32, 1, "UInt32Tensor")
uint64 = dtype("uint64", np.uint64, 1, "UInt64Tensor")


class _NoArrays:
    """The .np of a dtype NumPy has no arrays of here (complex32): any
    attribute raises why (NumPy asks an object given as a dtype for its .dtype), so every
    path that would make such an array (creation, .to, astype, view) stops with that error."""
    __slots__ = ("message",)

    def __init__(self, message):
        self.message = message

    def __getattr__(self, name):
        raise NotImplementedError(self.message)


_NO_COMPLEX = ("llgrad has no complex32 tensors (NumPy has no complex half); use complex64")


def _names_only(name, itemsize, cat, is_complex, tensor_type, message):
    """A dtype that exists as a name (comparisons, dtype tables, finfo) but has no tensors."""
    d = dtype.__new__(dtype)
    d.name, d.np, d.itemsize, d._cat, d._tensor_type = name, _NoArrays(message), itemsize, \
        cat, tensor_type
    d.is_floating_point, d.is_complex, d.is_signed = cat == 2, is_complex, True
    d._plain = False
    return d


complex32 = _names_only("complex32", 4, 3, True, "ComplexHalfTensor", _NO_COMPLEX)
chalf, cfloat, cdouble = complex32, complex64, complex128
NAMES_ONLY = {d.name: d for d in (uint16, uint32, uint64, complex32)}


def from_name(name):
    return _BY_NAME[name] if name in _BY_NAME else NAMES_ONLY[name]


def unsupported(npdt):
    """The error for a tensor of a NumPy dtype llgrad has no tensors of."""
    if npdt.kind == "c":
        return NotImplementedError(_NO_COMPLEX if npdt.itemsize < 8 else
                                   f"llgrad has no tensors of NumPy dtype {npdt}")
    if npdt.name in NAMES_ONLY:
        return NotImplementedError(
            f"llgrad has no {npdt.name} tensors: PyTorch runs only some ops on uint16 / uint32 / "
            f"uint64 (not add or comparisons such as gt) and promotes them with no other dtype, "
            f"which llgrad does not reproduce; use int32 or int64")
    return TypeError(f"llgrad has no tensors of NumPy dtype {npdt}")


def from_numpy_dtype(npdt):
    """The dtype of a NumPy array a user gives (big-endian float32 is float32: bfloat16's
    memory is llgrad's own)."""
    try:
        return _BY_NP[np.dtype(npdt).newbyteorder("=")]
    except KeyError:
        raise TypeError(f"can't convert np.ndarray of type numpy.{np.dtype(npdt).name}. "
                        "The only supported types are: float64, float32, float16, complex64, "
                        "complex128, int64, int32, int16, int8, uint8, and bool.") from None


def to_dtype(d):
    """Accept an llgrad dtype, a NumPy dtype or a Python type (float is float64, whatever
    the default dtype, as PyTorch's argument parser reads it)."""
    if isinstance(d, dtype):
        if d.np.__class__ is _NoArrays:     # (complex32: no tensors to make)
            raise NotImplementedError(d.np.message)
        return d
    if d is builtins_float:
        return float64
    if d is builtins_int:
        return int64
    if d is builtins_bool:
        return bool_
    return from_numpy_dtype(d)


import builtins as _b  # noqa: E402
builtins_float, builtins_int, builtins_bool = _b.float, _b.int, _b.bool


def get_default_dtype() -> dtype:
    """The default floating dtype: what creation functions make from Python floats and
    what a Python float (or an integer operand of exp, div, ...) promotes to."""
    return _BY_NAME[promotion.default_float()]


def set_default_dtype(d: dtype) -> None:
    """Set the default floating dtype (float32 or float64), as torch.set_default_dtype."""
    if not isinstance(d, dtype):        # (a Python or NumPy type: PyTorch refuses it)
        raise TypeError("invalid dtype object: only floating-point types are supported as the "
                        "default type")
    if not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    promotion.set_default_float(to_dtype(d).name)


def cast_array(arr, d):
    """NumPy array arr as dtype d's memory (a copy only where the dtype changes): astype,
    but rounded once to bfloat16 for bfloat16 (astype would keep float32's extra bits)."""
    if d is bfloat16:
        return bf16_values.round_to(arr)
    return arr.astype(d.np, copy=False)


def default_complex():
    """The complex dtype of the default floating dtype's precision: a Python complex's."""
    return _BY_NAME[promotion.complex_of(promotion.default_float())]


def default_for_scalar(value):
    return _BY_NAME[promotion.result_dtype([value])]


def _cat_of_scalar(v):
    return promotion.scalar_category(v)


def promote_types(a, b):
    return a if a is b else _BY_NAME[promotion.promote_types(a.name, b.name)]


def result_type(*operands):
    """PyTorch's rule (ir/promotion.py): dimensioned tensors decide, then 0-dim tensors,
    then Python scalars, each of the later groups only when it is of a higher category."""
    name = promotion.result_dtype([(o._dtype.name, bool(o._data.ndim))
                                   if hasattr(o, "_dtype") else o for o in operands])
    return None if name is None else _BY_NAME[name]


def no_bool_kernel(operands, kernel):
    """PyTorch's error where operands promote to bool and its kernel has no bool version."""
    first = operands[0] if operands else None
    if getattr(first, "_dtype", None) is not None and first._dtype._cat:
        return          # (a result's category is its operands' highest: not bool)
    if result_type(*operands) is bool_:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


# the C++ names PyTorch's messages give dtypes ("expected dtype float for `end` but got dtype
# long int")
C_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half",
           "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
           "uint8": "unsigned char", "bool": "bool", "complex64": "c10::complex<float>",
           "complex128": "c10::complex<double>", "bfloat16": "c10::BFloat16"}


def check_int_operand(v):
    """v, a Python int operand, as PyTorch's argument parser takes it: in [-2**63, 2**64)
    (past int64's range it is read as uint64), OverflowError outside."""
    if v < -0x8000000000000000:
        raise OverflowError("can't convert negative int to unsigned")
    if v > 0xFFFFFFFFFFFFFFFF:
        raise OverflowError("int too big to convert")
    return v


def wrap_int(v, d):
    """A Python int operand as PyTorch reads it next to a tensor of integer dtype d: cast
    into d first, wrapping (uint8 tensor % -3 is % 253; int8 tensor // 300 is // 44)."""
    if type(v) is not builtins.int and not isinstance(v, np.integer) or d._cat != 1:
        return v
    check_int_operand(builtins.int(v))
    return builtins.int(np.array(builtins.int(v) & 0xFFFFFFFFFFFFFFFF, np.uint64).astype(d.np))


def int_scales(d, beta, alpha):
    """{"beta", "alpha"} of addmm / addmv / addbmm / baddbmm as PyTorch reads them for an
    integer dtype d: a float scale is cast to int64 (truncated; 0.6 is 0), not an error as
    it is for add's alpha and addr."""
    if d._cat == 1:
        beta, alpha = (builtins.int(v) if isinstance(v, builtins.float) else v
                       for v in (beta, alpha))
    return {"beta": beta, "alpha": alpha}


def scalar_type_name(d):
    """PyTorch's name of a dtype in its messages: Float, Long, ..."""
    return {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
            "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
            "bool": "Bool", "complex64": "ComplexFloat", "complex128": "ComplexDouble",
            "bfloat16": "BFloat16"}[d.name]


def complex_unsupported(op_name, where):
    """The error for an op of the table with no complex version given a complex tensor."""
    return NotImplementedError(f"llgrad: {op_name} is not implemented for complex tensors "
                               f"(at {where})")
