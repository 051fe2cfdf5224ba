"""The methods and functions of the special ops of ir/ops_special.py whose arguments the op
table cannot declare: atan2 / arctan2 (both operands tensors, as in PyTorch), polygamma(n,
input) (n first, a non-negative int), and the torch.<name>_ functions of the in-place
methods (torch.asin_, ...). asin ... lgamma, digamma are the table's own methods."""
import math

from ..ir import OPS
from .dispatch import call
from .functions import _method_fn, export
from .inplace import call_inplace
from .node_names import torch_node
from .tensor import Tensor

_ATAN2, _POLYGAMMA, _POLYGAMMA_ = OPS["atan2"], OPS["polygamma"], OPS["polygamma_"]


def _need_tensor(fn, arg, position, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {position}) must be Tensor, not "
                        f"{type(x).__name__}")


def _atan2_forms(name):
    """The function, method and in-place method atan2 under name (atan2 or arctan2, the
    name errors give)."""
    def function(input, other, *, out=None):
        _need_tensor(name, "input", 1, input)
        _need_tensor(name, "other", 2, other)
        r = call(_ATAN2, (input, other), {})
        return r if out is None else out.copy_(r)

    def method(self, other):
        _need_tensor(name, "other", 1, other)
        return call(_ATAN2, (self, other), {})

    def inplace(self, other):
        _need_tensor(name + "_", "other", 1, other)
        return call_inplace(_ATAN2, self, (self, other), {})
    function.__name__ = function.__qualname__ = name
    function.__doc__ = (f"As torch.{name}: the angle of (other, input), in the quadrant "
                        "their signs give.")
    return function, method, inplace


atan2, _atan2_method, _atan2_ = _atan2_forms("atan2")
arctan2, _arctan2_method, _arctan2_ = _atan2_forms("arctan2")


def _check_n(fn, n, position):
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"{fn}(): argument 'n' (position {position}) must be int, not "
                        f"{type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")


def polygamma(n, input, *, out=None):
    """As torch.polygamma: the n-th derivative of digamma (n >= 0)."""
    _check_n("polygamma", n, 1)
    _need_tensor("polygamma", "input", 2, input)
    r = call(_POLYGAMMA, (input,), {"n": n})
    return r if out is None else out.copy_(r)


def _polygamma_method(self, n):
    _check_n("polygamma", n, 1)
    return call(_POLYGAMMA, (self,), {"n": n})


def _polygamma_(self, n):
    _check_n("polygamma_", n, 1)
    return call_inplace(_POLYGAMMA_, self, (self,), {"n": n})


@torch_node("MvlgammaBackward0")
def mvlgamma(input, p):
    """As torch.mvlgamma: the multivariate log-gamma of dimension p, p (p - 1) / 4 log(pi) +
    sum_j lgamma(x - j / 2) (inf outside its domain, as PyTorch no longer checks it)."""
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    x = input if input._dtype.is_floating_point else input.float()
    r = x.lgamma()
    for j in range(1, p):
        r = r + (x - j / 2).lgamma()
    # (PyTorch's sums the terms along a new dim: a row-major result whatever x's layout)
    return (r + p * (p - 1) / 4 * math.log(math.pi)).contiguous()


export(atan2)
export(arctan2)
export(polygamma)
export(mvlgamma)
Tensor.mvlgamma = mvlgamma
for _name, _fn, _doc in (("atan2", _atan2_method, "As torch.Tensor.atan2."),
                         ("arctan2", _arctan2_method, "As torch.Tensor.arctan2."),
                         ("atan2_", _atan2_, "In-place atan2, as torch.Tensor.atan2_."),
                         ("arctan2_", _arctan2_, "In-place atan2, as torch.Tensor.arctan2_."),
                         ("polygamma", _polygamma_method, "As torch.Tensor.polygamma."),
                         ("polygamma_", _polygamma_, "In-place polygamma, as "
                                                     "torch.Tensor.polygamma_.")):
    def _m(self, *args, _fn=_fn, **kwargs):        # (x.polygamma(n=1), x.atan2(other=y))
        return _fn(self, *args, **kwargs)
    _m.__name__, _m.__qualname__, _m.__doc__ = _name, f"Tensor.{_name}", _doc
    setattr(Tensor, _name, _m)

# PyTorch's torch.<name>_ functions of the in-place methods
for _n in ("asin_", "arcsin_", "acos_", "arccos_", "atan_", "arctan_", "erfc_"):
    _method_fn(_n)
