"""scatter, scatter_ and scatter_reduce(_) (ops of llgrad/ir/ops_sort.py): PyTorch's index
checks and messages, scatter's legacy reduce= ("add", "multiply": no derivative, as
PyTorch's), and scatter_reduce's aliases "max" / "min" (its forward takes them; a backward
through one raises, as PyTorch's)."""
from ..ir import OPS
from .creation_checks import fill_value_fits
from .dispatch import call
from .functions import _method_fn
from .functions_settings import warn_once
from .inplace import call_inplace
from .methods_sort import _def
from .node_names import failing_node, no_derivative
from .shapes import check_index_bounds, norm_dim
from .tensor import Tensor
from .user_frames import user_stacklevel


def _check_index(self, dim, index, src, what):
    if not isinstance(index, Tensor) or index._dtype.name not in ("int64", "int32"):
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")  # (all three)
    d = norm_dim(dim, self._data.ndim)
    if max(index._data.ndim, 1) != max(self._data.ndim, 1) and index._data.size:  # (0-d: 1-d)
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    check_index_bounds(index, self._data.shape[d] if self._data.ndim else 1, d)
    if isinstance(src, Tensor):
        if src._dtype is not self._dtype:
            raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
        ish, sh, ssh = index._data.shape, self._data.shape, src._data.shape
        if max(len(ssh), 1) != max(len(ish), 1) and index._data.size:
            raise RuntimeError("Index tensor must have the same number of dimensions as src "
                               "tensor")
        if any(i > n for k, (i, n) in enumerate(zip(ish, sh)) if k != d) or \
                any(i > n for i, n in zip(ish, ssh)):
            raise RuntimeError(f"Expected index {list(ish)} to be no larger than self "
                               f"{list(sh)} apart from dimension {d} and to be no larger size "
                               f"than src {list(ssh)}")
    return d


_LEGACY = {"add": "sum", "multiply": "prod"}
_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _scatter_args(self, dim, index, src, value, reduce):
    if src is None:
        src = value
    d = _check_index(self, dim, index, src, "scatter")
    if not isinstance(src, Tensor):
        src = fill_value_fits(src, self._dtype)     # (PyTorch's overflow error)
    if reduce is None:
        return OPS["scatter"], (self, index, src), {"dim": d}
    if reduce not in _LEGACY:
        raise RuntimeError("reduce argument must be either add or multiply.")
    if isinstance(src, Tensor):
        # (once per process, as PyTorch's TORCH_WARN_ONCE)
        warn_once("scatter reduce", "The reduce argument of torch.scatter with Tensor src is "
                  "deprecated and will be removed in a future PyTorch release. Use "
                  "torch.scatter_reduce instead for more reduction options.", UserWarning,
                  stacklevel=user_stacklevel() + 1)
    else:
        src = self.new_full(index._data.shape, src)
    return OPS["scatter_reduce"], (self, index, src), {"dim": d, "reduce": _LEGACY[reduce],
                                                       "include_self": True}


def scatter(self, dim, index, src=None, value=None, *, reduce=None):
    op, inputs, attrs = _scatter_args(self, dim, index, src, value, reduce)
    out = call(op, inputs, attrs)
    # (PyTorch has no derivative for scatter with reduce=: a backward through it raises)
    return out if reduce is None else no_derivative(out, "scatter")


def scatter_(self, dim, index, src=None, value=None, *, reduce=None):
    op, inputs, attrs = _scatter_args(self, dim, index, src, value, reduce)
    out = call_inplace(op, self, inputs, attrs)
    return out if reduce is None else no_derivative(out, "scatter_")


# (PyTorch's forward also takes "max" and "min" for amax and amin; a backward through it
# then raises)
_ALIASES = {"max": "amax", "min": "amin"}


def _alias_node(out, reduce):
    if reduce not in _ALIASES:
        return out
    return failing_node(out, "ScatterReduceBackward0", "Expected 'reduce' to be one of 'sum', "
                        f"'prod', 'mean', 'amax', 'amin' but got {reduce}.", RuntimeError)


def _scatter_reduce_args(self, dim, index, src, reduce, include_self):
    if reduce not in _REDUCES and reduce not in _ALIASES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    d = _check_index(self, dim, index, src, "scatter_reduce")
    return (self, index, src), {"dim": d, "reduce": _ALIASES.get(reduce, reduce),
                                "include_self": bool(include_self)}


def scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
    inputs, attrs = _scatter_reduce_args(self, dim, index, src, reduce, include_self)
    out = call(OPS["scatter_reduce"], inputs, attrs)
    return _alias_node(out, reduce)


def scatter_reduce_(self, dim, index, src, reduce, *, include_self=True):
    inputs, attrs = _scatter_reduce_args(self, dim, index, src, reduce, include_self)
    out = call_inplace(OPS["scatter_reduce"], self, inputs, attrs)
    return _alias_node(out, reduce)


for _n, _f in (("scatter", scatter), ("scatter_", scatter_), ("scatter_reduce", scatter_reduce),
               ("scatter_reduce_", scatter_reduce_)):
    _def(_n, _f)
for _n in ("scatter", "scatter_reduce"):
    _method_fn(_n)
