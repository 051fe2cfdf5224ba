"""llgrad.special: PyTorch's torch.special names over llgrad's ops (the aliases: expit is
sigmoid, gammaln lgamma, psi digamma, ...) and PyTorch's compositions of them (ndtr, log_ndtr,
ndtri, erfcx, xlog1py, entr, multigammaln), differentiable through their ops.

i0 is torch.i0, gammainc and gammaincc igamma / igammac (NumPy-evaluated,
runtime/functions_numeric_more.py); zeta, i0e / i1 / i1e and the Bessel, Airy and
orthogonal-polynomial families are special_series.py's. Where PyTorch has a kernel of its
own and llgrad a composition, the composition loses precision at the far tails: erfcx overflows
for x above ~26 (float64) where PyTorch's stays finite (an asymptotic series there), ndtri's
absolute error near 0 and 1 is that of erfinv(2p - 1) (formed in float64 for the narrower
floats)."""
import math

from .ir import OPS
from .runtime.dispatch import call
from .runtime.dtypes import get_default_dtype
from .runtime.math_operands import float_type
from .runtime.functions import where
from .runtime.functions_numeric_more import i0 as _i0, igamma as _igamma, igammac as _igammac
from .runtime.functions_special import mvlgamma
from .runtime.node_names import torch_node
from .runtime.numpy_names import wrap_namespace as _wrap_numpy_names
from .runtime.tensor import Tensor
from .special_series import FUNCTIONS as _SERIES

__all__ = ["digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1",
           "gammainc", "gammaincc", "gammaln", "i0", "log1p", "log_ndtr", "log_softmax", "logit",
           "logsumexp", "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round", "sinc",
           "softmax", "xlog1py", "xlogy"]
__all__ = sorted(__all__ + list(_SERIES))
globals().update(_SERIES)      # (airy_ai .. zeta: llgrad/special_series.py)

_SQRT1_2 = math.sqrt(0.5)


def _t(x, name):
    if not isinstance(x, Tensor):
        raise TypeError(f"special_{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


def _out(r, out):
    return r if out is None else out.copy_(r)


def expit(input, *, out=None):
    """As torch.special.expit: sigmoid."""
    return _out(_t(input, "expit").sigmoid(), out)


def logit(input, eps=None, *, out=None):
    """As torch.special.logit: log(p / (1 - p)), p clamped to [eps, 1 - eps] when eps is given."""
    return _out(_t(input, "logit").logit(eps), out)


def erf(input, *, out=None):
    return _out(_t(input, "erf").erf(), out)


def erfc(input, *, out=None):
    return _out(_t(input, "erfc").erfc(), out)


def erfinv(input, *, out=None):
    return _out(_t(input, "erfinv").erfinv(), out)


@torch_node("SpecialErfcxBackward0")
def erfcx(input, *, out=None):
    """As torch.special.erfcx: exp(x^2) erfc(x) (see the module on its range)."""
    x = _t(input, "erfcx")
    if not x.dtype.is_floating_point:
        x = x.float()
    big = 26.0 if x.dtype.name == "float64" else 9.0     # exp(x^2) erfc(x) under/overflows
    safe = where(x > big, x, 1.0)
    w = (safe * safe).reciprocal()          # the asymptotic series 1 / (x sqrt(pi)) (1 - ...)
    series = (1 - w / 2 * (1 - w * 1.5 * (1 - w * 2.5 * (1 - w * 3.5)))) / (safe * math.sqrt(
        math.pi))
    small = where(x > big, 0.0, x)
    return _out(where(x > big, series, (small * small).exp() * small.erfc()), out)


@torch_node("MulBackward1")
def ndtr(input, *, out=None):
    """As torch.special.ndtr: the standard normal CDF, (1 + erf(x / sqrt 2)) / 2 (PyTorch's
    composition, whose lower tail rounds to 0 below about -5.5 in float32)."""
    x = _t(input, "ndtr")
    return _out(((x * _SQRT1_2).erf() + 1) * 0.5, out)


@torch_node("SpecialLogNdtrBackward0")
def log_ndtr(input, *, out=None):
    """As torch.special.log_ndtr: log of the standard normal CDF, PyTorch's formulas: log1p of
    -erfc(x / sqrt 2) / 2 from -1 up (the upper tail keeps its precision), log(erfcx(-t) / 2)
    - t^2 with t = x / sqrt 2 below (finite far down the lower tail)."""
    x = _t(input, "log_ndtr")
    low = x < -1
    upper = (-(where(low, 0.0, x) * _SQRT1_2).erfc() * 0.5).log1p()
    t = where(low, x, -2.0) * _SQRT1_2
    lower = (erfcx(-t) * 0.5).log() - t * t
    return _out(where(low, lower, upper), out)


@torch_node("SpecialNdtriBackward0")
def ndtri(input, *, out=None):
    """As torch.special.ndtri: the inverse of ndtr, sqrt 2 erfinv(2p - 1)."""
    p = _t(input, "ndtri")
    if not p.is_floating_point():       # (in the default dtype: 2p - 1 would wrap in uint8)
        p = p.to(get_default_dtype())
    # (2p - 1 in float64 for the narrower floats: in float32 it rounds to -1 for p < 3e-8 and
    # ndtri(1e-10) was -inf where PyTorch's is -6.36)
    q = p.double() if p.dtype.itemsize < 8 else p
    return _out(((q * 2 - 1).erfinv() * math.sqrt(2.0)).to(p.dtype), out)


def gammaln(input, *, out=None):
    return _out(_t(input, "gammaln").lgamma(), out)


def digamma(input, *, out=None):
    return _out(_t(input, "digamma").digamma(), out)


psi = digamma


def polygamma(n, input, *, out=None):
    return _out(_t(input, "polygamma").polygamma(n), out)


def multigammaln(input, p, *, out=None):
    """As torch.special.multigammaln (torch.mvlgamma): the multivariate log-gamma of dimension
    p, p (p - 1) / 4 log(pi) + sum_j lgamma(x - j / 2) (inf outside (p - 1) / 2, as PyTorch
    no longer checks the domain)."""
    return _out(mvlgamma(_t(input, "multigammaln"), p), out)


def xlogy(input, other, *, out=None):
    """As torch.special.xlogy: x log(y), 0 where x is 0 (unless y is nan)."""
    return _out(input.xlogy(other) if isinstance(input, Tensor) else
                _xlogy_number(input, other), out)


def _xlogy_number(x, other):
    from_other = other.new_zeros(()) + x
    return from_other.xlogy(other)


@torch_node(lambda input, other, **k: "SpecialXlog1PyBackward" + ("1" if not isinstance(input, Tensor) else "2" if not isinstance(other, Tensor) else "0"))
def xlog1py(input, other, *, out=None):
    """As torch.special.xlog1py: x log1p(y), 0 where x is 0 (unless y is nan)."""
    x = input if isinstance(input, Tensor) else other.new_zeros(()) + input
    y = other if isinstance(other, Tensor) else x.new_zeros(()) + other
    rt = float_type(x, y)
    return _out(call(OPS["xlog1py_float"], (x.to(rt), y.to(rt)), {}), out)


@torch_node("SpecialEntrBackward0")
def entr(input, *, out=None):
    """As torch.special.entr: -x log x for x > 0, 0 at 0, -inf below (nan stays nan), with
    PyTorch's gradient -(1 + log x) (inf at 0, nan below)."""
    x = _t(input, "entr")
    if not x.is_floating_point():       # (integers and bools: in the default dtype)
        x = x.to(get_default_dtype())
    return _out(call(OPS["entr"], (x,), {}), out)


def sinc(input, *, out=None):
    return _out(_t(input, "sinc").sinc(), out)


def expm1(input, *, out=None):
    return _out(_t(input, "expm1").expm1(), out)


def exp2(input, *, out=None):
    return _out(_t(input, "exp2").exp2(), out)


def log1p(input, *, out=None):
    return _out(_t(input, "log1p").log1p(), out)


def round(input, *, decimals=0, out=None):  # noqa: A001 (PyTorch's name)
    return _out(_t(input, "round").round(decimals=decimals), out)


def logsumexp(input, dim, keepdim=False, *, out=None):
    return _out(_t(input, "logsumexp").logsumexp(dim, keepdim), out)


def softmax(input, dim, *, dtype=None):
    return _t(input, "softmax").softmax(dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    return _t(input, "log_softmax").log_softmax(dim, dtype=dtype)


for _f in (erf, erfc, erfinv, gammaln, digamma, polygamma, sinc, expm1, exp2, log1p, round,
           logsumexp, softmax, log_softmax):
    if not _f.__doc__:
        _f.__doc__ = f"As torch.special.{_f.__name__}."


def i0(input, *, out=None):
    """As torch.special.i0: the modified Bessel function of the first kind, order 0."""
    return _out(_i0(_t(input, "i0")), out)


def gammainc(input, other, *, out=None):
    """As torch.special.gammainc (torch.igamma): the regularised lower incomplete gamma."""
    return _out(_igamma(_t(input, "gammainc"), other), out)


def gammaincc(input, other, *, out=None):
    """As torch.special.gammaincc (torch.igammac): the regularised upper incomplete gamma."""
    return _out(_igammac(_t(input, "gammaincc"), other), out)


# (x= / a= / x1= for input=, x2= for other=: PyTorch's NumPy-style names, as llgrad.*'s)
_wrap_numpy_names(globals(), __all__)
