"""Complex tensors' functions and methods (PyTorch's names): view_as_real, view_as_complex,
complex, polar, and Tensor.cfloat / cdouble. The ops are ir/ops_complex.py's; which ops of
the table take complex operands, each declaration says (`complex=True`)."""
import builtins

from . import dtypes
from .functions import export
from .tensor import Tensor
from .autocast_cast import float32_list


def _tensor_arg(name, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


def view_as_real(input):
    """As torch.view_as_real: a complex tensor's memory as a real tensor with a last dim of
    2 (real, imaginary), sharing it: writes through one are seen in the other."""
    return _tensor_arg("view_as_real", input)._op("view_as_real")


@float32_list
def view_as_complex(input):
    """As torch.view_as_complex: a float tensor whose last dim is (real, imaginary), of
    stride 1, as a complex tensor sharing its memory."""
    return _tensor_arg("view_as_complex", input)._op("view_as_complex")


def complex(real, imag):
    """As torch.complex: real + i imag, of two float tensors of one dtype."""
    _tensor_arg("complex", real)
    if not isinstance(imag, Tensor):
        raise TypeError("complex(): argument 'imag' (position 2) must be Tensor, not "
                        f"{type(imag).__name__}")
    _same_floating(real, imag)
    return real._op("complex", imag)


def _same_floating(a, b):
    """PyTorch's checks of complex / polar's two parts, in its words (Float, Double)."""
    name = dtypes.scalar_type_name
    if a._dtype is not b._dtype:
        raise RuntimeError(f"Expected object of scalar type {name(a._dtype)} but got scalar "
                           f"type {name(b._dtype)} for second argument")
    if not a._dtype.is_floating_point:
        raise RuntimeError("Expected both inputs to be Half, Float or Double tensors but got "
                           f"{name(a._dtype)} and {name(b._dtype)}")
    if a._dtype is dtypes.float16:      # (PyTorch's result would be complex32)
        raise NotImplementedError(dtypes._NO_COMPLEX)


@float32_list
def polar(abs, angle):
    """As torch.polar: abs * (cos(angle) + i sin(angle))."""
    _tensor_arg("polar", abs)
    _same_floating(abs, angle)
    return complex(abs * angle.cos(), abs * angle.sin())


def _cfloat(self, memory_format=None):
    """As torch.Tensor.cfloat: self.to(complex64)."""
    return self.to(dtypes.complex64)


def _cdouble(self, memory_format=None):
    """As torch.Tensor.cdouble: self.to(complex128)."""
    return self.to(dtypes.complex128)


def _complex_scalar(self):
    """As torch.Tensor.__complex__: complex(t) of a one-element tensor."""
    if self._data.size != 1:
        raise ValueError("only one element tensors can be converted to Python scalars")
    return builtins.complex(self.item())


def _set_real(self, value):
    """As `t.real = value`: a copy into the real parts (all of a real tensor)."""
    Tensor.real.fget(self).copy_(value)


def _set_imag(self, value):
    """As `t.imag = value`: a copy into the imaginary parts; a real tensor has none."""
    Tensor.imag.fget(self).copy_(value)


for _f in (view_as_real, view_as_complex, complex, polar):
    export(_f)
Tensor.cfloat, Tensor.cdouble, Tensor.__complex__ = _cfloat, _cdouble, _complex_scalar
Tensor.real = property(Tensor.real.fget, _set_real, doc=Tensor.real.__doc__)
Tensor.imag = property(Tensor.imag.fget, _set_imag, doc=Tensor.imag.__doc__)
