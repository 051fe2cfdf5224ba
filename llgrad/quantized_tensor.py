"""PyTorch's quantized tensors, as post-training dynamic quantization uses them: the dtypes
qint8 / quint8 / qint32, the quantization schemes, torch.quantize_per_tensor /
quantize_per_channel and the QuantizedTensor they return (int_repr, dequantize, q_scale,
...). A QuantizedTensor is a class of its own, not a Tensor: its integers are kept in a
NumPy array beside its quantization parameters, so the float tensors' paths never see one.
The rounding is PyTorch's x86 kernels': round-half-even(x * float32(1 / scale) + zero_point)."""
import numpy as np

from .quantized_tensor_methods import QuantizedMethods, dequantize
from .runtime import dtypes
from .runtime.dtypes import float32
from .runtime.tensor import Size, Tensor

# (torch's names: `from llgrad.quantized_tensor import *` fills llgrad's namespace)
__all__ = ["qint8", "quint8", "qint32", "qscheme", "per_tensor_affine", "per_channel_affine",
           "per_tensor_symmetric", "per_channel_symmetric", "per_channel_affine_float_qparams",
           "quantize_per_tensor", "quantize_per_channel", "dequantize"]

_NO_ARRAYS = ("llgrad makes quantized tensors with quantize_per_tensor / quantize_per_channel "
              "(or quantize_dynamic) only; no other operation accepts a quantized dtype")


class QuantizedDtype(dtypes.dtype):
    """A quantized dtype: a name (no tensor of it is made but by quantize_*), pickled as
    itself."""
    __slots__ = ()

    def __reduce__(self):
        return (_dtype_named, (self.name,))


def _quantized_dtype(name, itemsize, signed, tensor_type):
    d = dtypes._names_only(name, itemsize, 1, False, tensor_type, _NO_ARRAYS)
    q = QuantizedDtype.__new__(QuantizedDtype)
    for slot in dtypes.dtype.__slots__:
        setattr(q, slot, getattr(d, slot))
    q.is_signed = signed
    return q


qint8 = _quantized_dtype("qint8", 1, True, "QInt8Tensor")
quint8 = _quantized_dtype("quint8", 1, False, "QUInt8Tensor")
qint32 = _quantized_dtype("qint32", 4, True, "QInt32Tensor")
# quantized dtype -> (NumPy dtype of its integers, its llgrad integer dtype)
INT_OF = {qint8: (np.dtype(np.int8), dtypes.int8), quint8: (np.dtype(np.uint8), dtypes.uint8),
          qint32: (np.dtype(np.int32), dtypes.int32)}
BY_NAME = {d.name: d for d in INT_OF}


def _dtype_named(name):
    return BY_NAME[name]


class qscheme:
    """A quantization scheme (torch.qscheme): per_tensor_affine, per_channel_affine, ..."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "llgrad." + self.name

    def __reduce__(self):
        return (_scheme_named, (self.name,))


per_tensor_affine = qscheme("per_tensor_affine")
per_channel_affine = qscheme("per_channel_affine")
per_tensor_symmetric = qscheme("per_tensor_symmetric")
per_channel_symmetric = qscheme("per_channel_symmetric")
per_channel_affine_float_qparams = qscheme("per_channel_affine_float_qparams")
SCHEMES = {s.name: s for s in (per_tensor_affine, per_channel_affine, per_tensor_symmetric,
                               per_channel_symmetric, per_channel_affine_float_qparams)}


def _scheme_named(name):
    return SCHEMES[name]


def _range(dt):
    info = np.iinfo(INT_OF[dt][0])
    return int(info.min), int(info.max)


def quantize_array(x, scale, zero_point, dt, per_channel=False):
    """x (float32) -> integers of dt: round(x * float32(1 / scale) + zero_point), the
    multiply-add fused (one float32 rounding, then half to even: fbgemm's Quantize, whose
    zero point is added before rounding), clamped; scale and zero_point broadcast. A NaN
    (also 0 * inf from a scale under float32's range) becomes what torch's kernels give:
    qint32 its minimum, qint8 / quint8 their maximum per tensor and 0 per channel."""
    with np.errstate(all="ignore"):
        inv = (np.float32(1) / np.asarray(scale, dtype=np.float32)).astype(np.float64)
        if dt is qint32:
            # (ATen's own loop, not fbgemm's: the product rounded to float32, the zero point
            # added in float32, then rint: two roundings, not fused)
            p = (x.astype(np.float64) * inv).astype(np.float32).astype(np.float64)
            q = np.rint((p + np.asarray(zero_point, np.float64)).astype(np.float32))
            q = q.astype(np.float64)
        else:
            fused = x.astype(np.float64) * inv + np.asarray(zero_point, np.float64)
            q = np.rint(fused.astype(np.float32)).astype(np.float64)
    lo, hi = _range(dt)
    nan_to = lo if dt is qint32 else (0 if per_channel else hi)
    q = np.where(np.isnan(q), nan_to, np.clip(q, lo, hi))
    return q.astype(INT_OF[dt][0])


class QuantizedTensor(QuantizedMethods):
    """A quantized tensor (what torch.quantize_per_tensor returns): integers of dtype qint8,
    quint8 or qint32 and the affine map back to floats, (q - zero_point) * scale, one
    scale and zero point for the whole tensor or one per index of `axis`."""
    is_quantized = True
    is_sparse = False
    requires_grad = False
    grad = None
    grad_fn = None

    def __init__(self, ints, dtype, scheme, scale, zero_point, axis=None):
        # (np.asarray, not ascontiguousarray, which makes a 0-d array 1-d)
        self._ints = np.asarray(ints, dtype=INT_OF[dtype][0], order="C")
        self.dtype = dtype
        self._qscheme = scheme
        if axis is None:
            self._scale, self._zero_point = float(scale), int(zero_point)
        else:
            self._scale = np.asarray(scale, dtype=np.float64).reshape(-1)
            zp_type = np.float32 if scheme is per_channel_affine_float_qparams else np.int64
            self._zero_point = np.asarray(zero_point, dtype=zp_type).reshape(-1)
        self._axis = axis

    # ---- metadata ----------------------------------------------------------------------------
    @property
    def shape(self):
        """The size, as Tensor.shape."""
        return Size(self._ints.shape)

    def size(self, dim=None):
        """As Tensor.size."""
        return self.shape if dim is None else self.shape[dim]

    def dim(self):
        """The number of dimensions."""
        return self._ints.ndim

    ndim = property(dim)

    def numel(self):
        """The number of elements."""
        return int(self._ints.size)

    def stride(self, dim=None):
        """As Tensor.stride (a QuantizedTensor is always contiguous)."""
        s = tuple(int(v) // self._ints.itemsize for v in self._ints.strides)
        return s if dim is None else s[dim]

    def element_size(self):
        """Bytes per element."""
        return self._ints.itemsize

    def is_contiguous(self, memory_format=None):
        """Always True."""
        return True

    @property
    def device(self):
        """The cpu device."""
        return Tensor._from_array(self._ints[:0]).device

    def qscheme(self):
        """The quantization scheme (per_tensor_affine or per_channel_affine)."""
        return self._qscheme

    def _per_tensor(self):
        if self._axis is not None:
            raise RuntimeError("Expected quantizer->qscheme() == kPerTensorAffine to be true, "
                               "but got false.  (Could this error message be improved?  If "
                               "so, please report an enhancement request to PyTorch.)")

    def _per_channel(self):
        if self._axis is None:
            raise RuntimeError("Expected quantizer->qscheme() == kPerChannelAffine || "
                               "quantizer->qscheme() == kPerChannelAffineFloatQParams to be "
                               "true, but got false.  (Could this error message be improved?  "
                               "If so, please report an enhancement request to PyTorch.)")

    def q_scale(self):
        """The scale of a per-tensor quantized tensor (a Python float)."""
        self._per_tensor()
        return self._scale

    def q_zero_point(self):
        """The zero point of a per-tensor quantized tensor (a Python int)."""
        self._per_tensor()
        return self._zero_point

    def q_per_channel_scales(self):
        """The scales of a per-channel quantized tensor (float64)."""
        self._per_channel()
        return Tensor._from_array(self._scale.copy())

    def q_per_channel_zero_points(self):
        """The zero points of a per-channel quantized tensor (int64)."""
        self._per_channel()
        return Tensor._from_array(self._zero_point.copy())

    def q_per_channel_axis(self):
        """The dimension a per-channel quantized tensor's parameters run along."""
        self._per_channel()
        return self._axis

    # ---- values ------------------------------------------------------------------------------
    def int_repr(self):
        """The integers, as a tensor of int8 / uint8 / int32."""
        return Tensor._from_array(self._ints.copy())

    def _bcast(self, v):
        shape = [1] * self._ints.ndim
        shape[self._axis] = -1
        return v.reshape(shape)

    def dequantize(self):
        """The float32 tensor (q - zero_point) * scale."""
        if self._qscheme is per_channel_affine_float_qparams:
            out = (self._ints.astype(np.float32) - self._bcast(self._zero_point)) * \
                self._bcast(self._scale.astype(np.float32))
            return Tensor._from_array(out.astype(np.float32, copy=False))
        # (the zero point comes off in integers, then one rounding; per tensor ATen subtracts
        # in int32, wrapping)
        with np.errstate(all="ignore"):     # (a scale of inf or NaN: NaNs, no warning)
            if self._axis is None:
                diff = (self._ints.astype(np.int64) - self._zero_point).astype(np.int32)
                out = diff.astype(np.float32) * np.float32(self._scale)
            else:
                # (per channel PyTorch multiplies by the float64 scale, then rounds)
                diff = self._ints.astype(np.int64) - self._bcast(self._zero_point)
                out = diff.astype(np.float32) * self._bcast(self._scale)
        return Tensor._from_array(np.asarray(out, dtype=np.float32))

    def clone(self):
        """A copy."""
        return QuantizedTensor(self._ints.copy(), self.dtype, self._qscheme, self._scale,
                               self._zero_point, self._axis)

    def detach(self):
        """self (a quantized tensor has no gradient)."""
        return self

    def __deepcopy__(self, memo):
        return self.clone()

    def __len__(self):
        return len(self._ints)

    def _like(self, ints, axis=None):
        return QuantizedTensor(ints, self.dtype, self._qscheme, self._scale, self._zero_point,
                               axis)

    def __getitem__(self, index):
        ints = self._ints[index]
        if self._axis is not None:
            raise NotImplementedError("llgrad: indexing a per-channel quantized tensor")
        return QuantizedTensor(ints, self.dtype, self._qscheme, self._scale, self._zero_point)

    def __reduce_ex__(self, protocol):
        return (QuantizedTensor, (self._ints, self.dtype, self._qscheme, self._scale,
                                  self._zero_point, self._axis))

    def __repr__(self):
        body = repr(self.dequantize())
        body = body[:-1]
        # (an empty tensor's repr already gives its size)
        params = [] if "size=" in body else [f"size={tuple(self._ints.shape)}"]
        params += [f"dtype={self.dtype!r}",
                  f"quantization_scheme={self._qscheme!r}"]
        if self._axis is None:
            params += [f"scale={self._scale}", f"zero_point={self._zero_point}"]
        else:
            params += [f"scale={self.q_per_channel_scales()!r}",
                       f"zero_point={self.q_per_channel_zero_points()!r}", f"axis={self._axis}"]
        return _add_suffixes(body, params, len("tensor("))


def _add_suffixes(text, suffixes, indent, width=80):
    """PyTorch's tensor repr tail: each suffix after ', ', or on a new line when the line
    would pass 80 characters."""
    parts = [text]
    last = len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if last + len(s) + 2 > width:
            parts.append(",\n" + " " * indent + s)
            last = indent + len(s)
        else:
            parts.append(", " + s)
            last += len(s) + 2
    return "".join(parts) + ")"


def _float_input(x):
    if not isinstance(x, Tensor):
        raise TypeError(f"quantize_per_tensor(): argument 'input' must be Tensor, not "
                        f"{type(x).__name__}")
    if x.dtype is not float32:
        name = {"float64": "Double", "float16": "Half", "int64": "Long", "int32": "Int",
                "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}[x.dtype.name]
        raise RuntimeError(f"Quantize only works on Float Tensor, got {name}")
    return x.detach().numpy()


def _qdtype(dtype):
    if dtype not in INT_OF:
        raise RuntimeError(f"Expected dtype to be one of qint8, quint8 or qint32, got {dtype}")
    return dtype


def _check_zero_points(zp, dt, kernel):
    lo, hi = _range(dt)
    for v in np.asarray(zp).reshape(-1):
        if v > hi:
            raise RuntimeError(f"{kernel} zero_point {int(v)} is above upper bound.")
        if v < lo:
            raise RuntimeError(f"{kernel} zero_point {int(v)} is below lower bound.")


def quantize_per_tensor(input, scale, zero_point, dtype):
    """As torch.quantize_per_tensor: the float32 tensor's values as integers of dtype
    (qint8, quint8, qint32), zero_point + round(input / scale), clamped to the dtype; a list
    of tensors takes a tensor of scales and one of zero points, one each."""
    if isinstance(input, (list, tuple)):
        scales = np.asarray(scale.detach().numpy() if isinstance(scale, Tensor) else scale)
        zps = np.asarray(zero_point.detach().numpy() if isinstance(zero_point, Tensor)
                         else zero_point)
        return [quantize_per_tensor(t, float(scales.reshape(-1)[i]),
                                    int(zps.reshape(-1)[i]), dtype)
                for i, t in enumerate(input)]
    if isinstance(scale, Tensor):
        scale = scale.item()
    if isinstance(zero_point, Tensor):
        zero_point = zero_point.item()
    x = _float_input(input)
    dtype = _qdtype(dtype)
    _check_zero_points(zero_point, dtype, "quantize_tensor_per_tensor_affine")
    return QuantizedTensor(quantize_array(x, scale, zero_point, dtype), dtype, per_tensor_affine,
                           scale, zero_point)


def _qparams_tensor(v, name, what):
    if not isinstance(v, Tensor):
        raise TypeError(f"quantize_per_channel(): argument '{name}' (position "
                        f"{2 if name == 'scales' else 3}) must be Tensor, not {type(v).__name__}")
    if v.dim() != 1:
        raise RuntimeError(f"{what} tensor must have dimension 1")
    return v.detach().numpy()


def _quantize_float_qparams(x, scale, zero_point, dt):
    """ATen's float-qparams loop: lrintf(x * float32(1 / scale) + zero_point) (an int64;
    NaN and overflow give its minimum), kept to its low 32 bits, then clamped; so values past
    2**31 wrap as torch's do."""
    with np.errstate(all="ignore"):
        inv = (np.float32(1) / scale).astype(np.float64)
        r = np.rint((x.astype(np.float64) * inv + zero_point.astype(np.float64))
                    .astype(np.float32)).astype(np.float64)
    big = ~(np.abs(r) < 2.0 ** 63)
    r64 = np.where(big, 0, r).astype(np.int64)
    r64[big] = np.iinfo(np.int64).min
    lo, hi = _range(dt)
    return np.clip(r64.astype(np.int32), lo, hi).astype(INT_OF[dt][0])


def quantize_per_channel(input, scales, zero_points, axis, dtype):
    """As torch.quantize_per_channel: one scale and zero point per index of dim `axis`
    (0 <= axis < input.dim(), as torch wants it); float zero points make the scheme
    per_channel_affine_float_qparams."""
    x = _float_input(input)
    dtype = _qdtype(dtype)
    sc = _qparams_tensor(scales, "scales", "scale").astype(np.float64)
    zp = _qparams_tensor(zero_points, "zero_points", "zero_points")
    if not 0 <= axis < x.ndim:
        raise RuntimeError(f"Channel axis out of range in per channel affine quantization. "
                           f"Got: {axis}Expected: [0, {x.ndim})")
    if sc.size != zp.size:
        raise RuntimeError("number of elements in scales and zero_points must match")
    if sc.size != x.shape[axis]:
        raise RuntimeError(f"length of scales must equal to channel, expected {x.shape[axis]} "
                           f"got, {sc.size}")
    shape = [1] * x.ndim
    shape[axis] = -1
    if zp.dtype.kind == "f":
        zp = zp.astype(np.float32)
        ints = _quantize_float_qparams(x, sc.astype(np.float32).reshape(shape), zp.reshape(shape),
                                       dtype)
        return QuantizedTensor(ints, dtype, per_channel_affine_float_qparams, sc, zp, axis)
    zp = zp.astype(np.int64)
    _check_zero_points(zp, dtype, "quantize_tensor_per_channel_affine")
    ints = quantize_array(x, sc.reshape(shape), zp.reshape(shape), dtype, per_channel=True)
    return QuantizedTensor(ints, dtype, per_channel_affine, sc, zp, axis)
