"""Predicates, comparison aliases and the trigonometric and hyperbolic functions PyTorch has
as kernels and llgrad writes as compositions of the op table's ops: isinf / isposinf /
isneginf / isreal / isin, not_equal / greater_equal / less_equal and the in-place
comparisons (eq_, gt_, ...), the is_* queries of a tensor, the complex-number no-ops of a
real tensor (conj, real, angle, sgn, adjoint, ...), and tan, sinh, cosh, asinh, acosh,
atanh with their arc* aliases."""
import math

from . import dtypes
from .creation import tensor as _tensor
from .functions import _method_fn, _number_input, export, where
from .functions_math import attach, make_inplace
from .math_operands import floating, in_double
from .tensor import Tensor
from .saved_tensor import user_location
from .node_names import torch_node

# ---- non-finite values, membership ------------------------------------------------------------


def isinf(input):
    """As torch.isinf."""
    if not input._dtype.is_floating_point:
        return input != input                   # (all False, and batched under vmap)
    return input.abs() == math.inf


def isposinf(input):
    """As torch.isposinf."""
    return input == math.inf if input._dtype.is_floating_point else input != input


def isneginf(input):
    """As torch.isneginf."""
    return input == -math.inf if input._dtype.is_floating_point else input != input


def isreal(input):
    """As torch.isreal: whether each element's imaginary part is 0 (all True when real)."""
    if input._dtype.is_complex:
        return imag(input) == 0
    return (input == input) | (input != input)


def _number(v, beside):
    """A number of isin as PyTorch's Scalar overload compares it: cast to the floating dtype
    it promotes to with the tensor (0.7019 beside bfloat16 is the bfloat16 0.703125)."""
    d = dtypes.result_type(beside, v)
    return _tensor(v, dtype=d) if d.is_floating_point else _tensor(v)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """As torch.isin: whether each element of elements is in test_elements (either may be
    a number). Compares every pair, so it takes len(elements) * len(test_elements) memory."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin() received an invalid combination of arguments: at least one "
                        "of elements and test_elements must be a Tensor")
    e = elements if isinstance(elements, Tensor) else _number(elements, test_elements)
    t = test_elements if isinstance(test_elements, Tensor) else _number(test_elements, e)
    shape = tuple(e._data.shape)
    hit = (e.reshape(shape + (1,)) == t.reshape(-1)).any(-1)
    return hit.logical_not() if invert else hit


# ---- comparison aliases and in-place comparisons ------------------------------------------------

def not_equal(input, other):
    """As torch.not_equal (torch.ne)."""
    return input.ne(other)


def greater_equal(input, other):
    """As torch.greater_equal (torch.ge)."""
    return input.ge(other)


def less_equal(input, other):
    """As torch.less_equal (torch.le)."""
    return input.le(other)


for _f in (not_equal, greater_equal, less_equal, isinf, isposinf, isneginf, isreal):
    attach(_f)
export(isin)
for _n, _m in (("eq_", "eq"), ("ne_", "ne"), ("lt_", "lt"), ("le_", "le"), ("gt_", "gt"),
               ("ge_", "ge"), ("not_equal_", "ne"), ("greater_equal_", "ge"),
               ("less_equal_", "le"), ("greater_", "gt"), ("less_", "lt")):
    setattr(Tensor, _n, make_inplace((lambda m: lambda self, other: getattr(self, m)(other))(_m),
                                     _n))


# ---- what a tensor is ---------------------------------------------------------------------------

def _refuse(name, input):
    """PyTorch's argument check: a number, list or array is refused, not read as a tensor."""
    _number_input(name, input, (), {})


def is_floating_point(input):
    """As torch.is_floating_point."""
    if not isinstance(input, Tensor):
        _refuse("is_floating_point", input)
    return input._dtype.is_floating_point


def is_complex(input):
    """As torch.is_complex."""
    if not isinstance(input, Tensor):
        _refuse("is_complex", input)
    return input._dtype.is_complex


def is_nonzero(input):
    """As torch.is_nonzero: whether a one-element tensor is nonzero (a Python bool; inside
    llgrad.compile the value becomes a guard, as item() does)."""
    if not isinstance(input, Tensor):
        _refuse("is_nonzero", input)
    n = input._data.size
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.reshape(()).item() != 0)


def is_same_size(input, other):
    """As torch.is_same_size."""
    return tuple(input._data.shape) == tuple(other._data.shape)


def is_signed(input):
    """As torch.is_signed: False for uint8 and bool."""
    if not isinstance(input, Tensor):
        _refuse("is_signed", input)
    return input._dtype not in (dtypes.uint8, dtypes.bool_)


def is_conj(input):
    """As torch.is_conj: False (llgrad's conj() computes the conjugate; no lazy bit)."""
    if not isinstance(input, Tensor):
        _refuse("is_conj", input)
    return False


def is_neg(input):
    """As torch.is_neg: False (llgrad has no lazy negation)."""
    return False


def resolve_conj(input):
    """As torch.resolve_conj: input itself (llgrad has no conjugate bit)."""
    return input


def resolve_neg(input):
    """As torch.resolve_neg: input itself (llgrad has no lazy negation)."""
    return input


def conj(input):
    """As torch.conj: input itself for a real tensor; a complex one's conjugate (computed:
    llgrad has no lazy conjugate view, so writes to it do not reach input)."""
    return input._op("conj_physical") if input._dtype.is_complex else input


def conj_physical(input):
    """As torch.conj_physical: for a real tensor, a copy-free identity."""
    return input._op("conj_physical") if input._dtype.is_complex else input


def real(input):
    """As torch.real: input itself for a real tensor, a complex one's real parts (a view)."""
    return input._op("view_as_real").select(-1, 0) if input._dtype.is_complex else input


def imag(input):
    """As torch.imag: a complex tensor's imaginary parts (a view); raises for a real one."""
    if input._dtype.is_complex:
        return input._op("view_as_real").select(-1, 1)
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


def angle(input):
    """As torch.angle: the argument of each complex element; of a real tensor, pi where
    negative, 0 elsewhere, nan kept."""
    if input._dtype.is_complex:
        return input._op("angle_complex")
    x = floating(input)
    out = where(x < 0, math.pi, 0.0).to(x._dtype)
    return where(x.isnan(), x, out) if x._dtype.is_floating_point else out


@torch_node("SgnBackward0")
def sgn(input):
    """As torch.sgn: sign for a real tensor, z / |z| (0 at 0) for a complex one."""
    if input._dtype.is_complex:
        # (0 at 0 through the where, so the gradient there is 0 as PyTorch's sgn_backward)
        a = input.abs()
        zero = a == 0
        return where(zero, 0, input / a.masked_fill(zero, 1))
    return input.sign()


def adjoint(input):
    """As torch.adjoint: the transpose of the last two dims (a view)."""
    if input._data.ndim < 2:
        raise RuntimeError("tensor.adjoint() is only supported on matrices or batches of "
                           f"matrices. Got {input._data.ndim}-D tensor.")
    return conj(input.transpose(-2, -1))


def _mH(self):
    """As torch.Tensor.mH: the conjugate transpose of the last two dims."""
    if self._data.ndim < 2:
        raise RuntimeError("tensor.mH is only supported on matrices or batches of matrices. "
                           f"Got {self._data.ndim}-D tensor.")
    return conj(self.transpose(-2, -1))


def _H(self):
    """As torch.Tensor.H: the transpose of a matrix (real tensors)."""
    nd = self._data.ndim
    if nd != 2:
        raise RuntimeError("tensor.H is only supported on matrices (2-D tensors). Got "
                           f"{nd}-D tensor." + (" For batches of matrices, consider using "
                                                "tensor.mH" if nd > 2 else ""))
    return conj(self.transpose(0, 1))


for _f in (is_complex, is_nonzero, is_same_size, is_signed, is_conj, is_neg, resolve_conj,
           resolve_neg, conj, conj_physical, angle, sgn, adjoint):
    attach(_f)
for _f in (is_floating_point, real, imag):
    export(_f)
# (attributes, not methods, of PyTorch's Tensor)
Tensor.real = property(real, doc="As torch.Tensor.real: a view of the real parts (the tensor "
                                  "itself when real).")
Tensor.imag = property(imag, doc="As torch.Tensor.imag: a view of the imaginary parts; raises "
                                  "for a real tensor.")
Tensor.mH = property(_mH)
Tensor.H = property(_H)
Tensor.sgn_ = make_inplace(sgn, "sgn_")


def conj_physical_(input):
    """As torch.conj_physical_: input itself for a real tensor."""
    return input


attach(conj_physical_)


# ---- trigonometric and hyperbolic functions ----------------------------------------------------

def _in_double(x, fn):
    return in_double(floating(x), fn)


def _no_complex(x, name):
    # (their real formulas compare and take signs: a complex input would fail inside them)
    if x._dtype.is_complex:
        raise dtypes.complex_unsupported(name, user_location())


def _odd(x, f):
    """f(|x|) with x's sign, written so that the gradient at 0 is f'(0) (abs would give 0)."""
    pos = ~x.signbit()          # (-0 takes the odd branch: f(-0) = -0, as PyTorch's)
    out = f(where(pos, x, -x))
    return where(pos, out, -out)


_BIG = 2.0 ** 28        # beyond it 1 + a**2 == a**2 in float64 (and a**2 may overflow)


@torch_node("TanBackward0")
def tan(input):
    """As torch.tan: sin / cos, computed in float64."""
    return _in_double(input, lambda x: x.sin() / x.cos())


def _sinh_abs(a):
    # a >= 0: (e**a - 1) + (1 - e**-a), two terms >= 0, so no cancellation near 0
    return (a.expm1() - (-a).expm1()) * 0.5


@torch_node("SinhBackward0")
def sinh(input):
    """As torch.sinh, from expm1 in float64 (complex: (e**z - e**-z) / 2)."""
    if input._dtype.is_complex:
        return (input.exp() - (-input).exp()) * 0.5
    return _in_double(input, lambda x: _odd(x, _sinh_abs))


@torch_node("CoshBackward0")
def cosh(input):
    """As torch.cosh, from exp in float64 (complex: (e**z + e**-z) / 2)."""
    if input._dtype.is_complex:
        return (input.exp() + (-input).exp()) * 0.5
    def f(x):
        e = where(x >= 0, x, -x).exp()
        return (e + e.reciprocal()) * 0.5
    return _in_double(input, f)


def _asinh_abs(a):
    big = a > _BIG
    s = a.masked_fill(big, 0)
    small = (s + s * s / (1 + (1 + s * s).sqrt())).log1p()
    return where(big, a.masked_fill(~big, 1).log() + math.log(2.0), small)


@torch_node("AsinhBackward0")
def asinh(input):
    """As torch.asinh: log1p(a + a**2 / (1 + sqrt(1 + a**2))) with x's sign, in float64."""
    _no_complex(input, "asinh")
    return _in_double(input, lambda x: _odd(x, _asinh_abs))


@torch_node("AcoshBackward0")
def acosh(input):
    """As torch.acosh: log1p(t + sqrt(t) sqrt(t + 2)) for t = x - 1, in float64 (nan below
    1; the gradient at 1 inf, as PyTorch's, where sqrt(t (t + 2)) would give inf * 0)."""
    _no_complex(input, "acosh")
    def f(x):
        big = x > _BIG
        t = x.masked_fill(big, 1) - 1
        small = (t + t.sqrt() * (t + 2).sqrt()).log1p()
        return where(big, x.masked_fill(~big, 1).log() + math.log(2.0), small)
    return _in_double(input, f)


@torch_node("AtanhBackward0")
def atanh(input):
    """As torch.atanh: (log1p(x) - log1p(-x)) / 2, in float64 (the gradient at +-1 inf, as
    PyTorch's)."""
    _no_complex(input, "atanh")
    return _in_double(input, lambda x: (x.log1p() - (-x).log1p()) * 0.5)


for _f, _alias in ((tan, None), (sinh, None), (cosh, None), (asinh, "arcsinh"),
                   (acosh, "arccosh"), (atanh, "arctanh")):
    attach(_f, *((_alias,) if _alias else ()))
    for _n in (_f.__name__,) + ((_alias,) if _alias else ()):
        setattr(Tensor, _n + "_", make_inplace(_f, _n + "_"))
        _method_fn(_n + "_")
