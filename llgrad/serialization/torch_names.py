"""PyTorch's names as a checkpoint spells them, without importing torch: the dtype and
storage-class tables, the globals llgrad writes (torch._utils._rebuild_tensor_v2, torch.Size,
...) and the objects that torch's storage classes and the dtypes llgrad lacks load as."""
import numpy as np

from .. import quantized_tensor
from ..runtime import dtypes

# llgrad dtype -> (torch's dtype name, torch's legacy storage class name)
_TORCH_NAMES = {
    dtypes.float32: ("float32", "FloatStorage"), dtypes.float64: ("float64", "DoubleStorage"),
    dtypes.float16: ("float16", "HalfStorage"), dtypes.int64: ("int64", "LongStorage"),
    dtypes.int32: ("int32", "IntStorage"), dtypes.int16: ("int16", "ShortStorage"),
    dtypes.int8: ("int8", "CharStorage"), dtypes.uint8: ("uint8", "ByteStorage"),
    dtypes.bool_: ("bool", "BoolStorage"), dtypes.complex64: ("complex64", "ComplexFloatStorage"),
    dtypes.complex128: ("complex128", "ComplexDoubleStorage"),
    dtypes.bfloat16: ("bfloat16", "BFloat16Storage"),
}
# torch dtype names (and aliases) that have an llgrad dtype
_DTYPE_BY_TORCH_NAME = {"float32": dtypes.float32, "float": dtypes.float32,
                        "float64": dtypes.float64, "double": dtypes.float64,
                        "float16": dtypes.float16, "half": dtypes.float16,
                        "int64": dtypes.int64, "long": dtypes.int64, "int32": dtypes.int32,
                        "int": dtypes.int32, "int16": dtypes.int16, "short": dtypes.int16,
                        "int8": dtypes.int8, "uint8": dtypes.uint8, "bool": dtypes.bool_,
                        "complex64": dtypes.complex64, "cfloat": dtypes.complex64,
                        "complex128": dtypes.complex128, "cdouble": dtypes.complex128,
                        "bfloat16": dtypes.bfloat16}
_OTHER_TORCH_DTYPES = ("complex32",
                       "chalf", "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2",
                       "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "quint4x2",
                       "quint2x4", "bits8", "bits16",
                       "bits1x8", "bits2x4", "bits4x2", "int1", "int2", "int3", "int4", "int5",
                       "int6", "int7", "uint1", "uint2", "uint3", "uint4", "uint5", "uint6",
                       "uint7", "float4_e2m1fn_x2")


class _TorchName:
    """A global of torch's namespace as data.pkl names it (module, name): pickled as the
    GLOBAL opcode itself, so saving needs no torch."""
    __slots__ = ("module", "name")

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args, **kwargs):
        # never called: pickle only checks that a reduce's function is callable
        return None

    def __repr__(self):
        return f"{self.module}.{self.name}"


_REBUILD_TENSOR_V2 = _TorchName("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAMETER = _TorchName("torch._utils", "_rebuild_parameter")
_REBUILD_PARAMETER_WITH_STATE = _TorchName("torch._utils", "_rebuild_parameter_with_state")
_REBUILD_FROM_TYPE_V2 = _TorchName("torch._tensor", "_rebuild_from_type_v2")
_REBUILD_SPARSE = _TorchName("torch._utils", "_rebuild_sparse_tensor")
_GET_LAYOUT = _TorchName("torch.serialization", "_get_layout")
_TORCH_TENSOR = _TorchName("torch", "Tensor")
_TORCH_SIZE = _TorchName("torch", "Size")
_TORCH_DEVICE = _TorchName("torch", "device")
_STORAGE_TYPE = {d: _TorchName("torch", s) for d, (_, s) in _TORCH_NAMES.items()}
# quantized tensors: torch._utils._rebuild_qtensor over a QInt8Storage (...) of their integers
_REBUILD_QTENSOR = _TorchName("torch._utils", "_rebuild_qtensor")
_QUANTIZED_STORAGE = {quantized_tensor.qint8: "QInt8Storage",
                      quantized_tensor.quint8: "QUInt8Storage",
                      quantized_tensor.qint32: "QInt32Storage"}
_QSCHEME_NAME = {s: _TorchName("torch", n) for n, s in quantized_tensor.SCHEMES.items()}


class _StorageType:
    """What torch.FloatStorage (etc.) loads as: the dtype of the storages it names."""
    __slots__ = ("name", "np")

    def __init__(self, name, npdt):
        self.name, self.np = name, npdt

    def __repr__(self):
        return f"torch.{self.name}"


_STORAGE_TYPES = {s: _StorageType(s, d.np) for d, (_, s) in _TORCH_NAMES.items()}
for _q, _s in _QUANTIZED_STORAGE.items():
    _STORAGE_TYPES[_s] = _StorageType(_s, quantized_tensor.INT_OF[_q][0])
# (2-byte words on disk, the high halves of float32s: bfloat16's memory here is float32's)
_STORAGE_TYPES["BFloat16Storage"] = _StorageType("BFloat16Storage", np.dtype("V2"))
_STORAGE_TYPES["UntypedStorage"] = _StorageType("UntypedStorage", np.dtype(np.uint8))
_STORAGE_TYPES["TypedStorage"] = _STORAGE_TYPES["UntypedStorage"]


class _OtherDtype:
    """A PyTorch dtype llgrad has no counterpart for (it loads as this, for the record; a
    tensor of it cannot be made)."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"
