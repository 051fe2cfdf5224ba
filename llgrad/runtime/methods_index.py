"""gather / scatter_add / index_select / index_add / masked_fill methods, with PyTorch's
argument checks and messages."""
from ..ir import OPS
from . import dtypes
from .dispatch import call, scalar_type_name
from .inplace import call_inplace
from .methods_reduce import _def
from .methods_scatter import _check_index
from .creation_checks import fill_value_fits
from .numpy_scalars import python_number
from .shapes import broadcast_shapes, check_index_bounds, norm_dim
from .tensor import Tensor


def _need_tensor(x, fn, name, pos):
    if not isinstance(x, Tensor):       # (a list: PyTorch's TypeError, not an AttributeError)
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not "
                        f"{type(x).__name__}")


def _long_index(index, what):
    _need_tensor(index, what, "index", 2)
    if index._dtype.name not in ("int64", "int32"):    # (PyTorch's words differ by op)
        raise RuntimeError(f"{what}(): Expected dtype int32 or int64 for index"
                           if what == "index_select" else
                           f"{what}(): Expected dtype int32/int64 for index")
    return index


def gather(self, dim, index, *, sparse_grad=False):
    d = norm_dim(dim, self._data.ndim)
    _long_index(index, "gather")
    if max(index._data.ndim, 1) != max(self._data.ndim, 1):    # (0-d counts as 1-d)
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    ish, sh = index._data.shape, self._data.shape
    for k, (i, n) in enumerate(zip(ish, sh)):
        if k != d and i > n:
            raise RuntimeError(f"Size does not match at dimension {k} expected index {list(ish)} "
                               f"to be no larger than self {list(sh)} apart from dimension {d}")
    check_index_bounds(index, self._data.shape[d] if self._data.ndim else 1, d)
    return call(OPS["gather"], (self, index), {"dim": d})


def scatter_add(self, dim, index, src):
    d = _check_index(self, dim, index, src, "scatter_add")
    return call(OPS["scatter_add"], (self, index, src), {"dim": d})


def scatter_add_(self, dim, index, src):
    d = _check_index(self, dim, index, src, "scatter_add")
    return call_inplace(OPS["scatter_add"], self, (self, index, src), {"dim": d})


def index_select(self, dim, index):
    d = norm_dim(dim, self._data.ndim)
    _need_tensor(index, "index_select", "index", 2)
    if index._data.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    _long_index(index, "index_select")
    if index._data.ndim == 0 and self._data.ndim:
        index = index.reshape(1)        # (PyTorch: a 0-d index keeps the dim, of size 1)
    elif not self._data.ndim:           # (a 0-d self: one index, and a 0-d result)
        if index._data.size != 1:
            raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got "
                               f"{index._data.size} value(s)")
        index = index.reshape(())
    n = self._data.shape[d] if self._data.ndim else 1
    # (PyTorch's CPU kernel: its dim-1 loop raises this RuntimeError, the others IndexError)
    check_index_bounds(index, n, d, lambda bad: RuntimeError(
        f"INDICES element is out of DATA bounds, id={bad} axis_dim={n}")
        if d == 1 and self._data.ndim >= 2 else IndexError("index out of range in self"))
    return call(OPS["index_select"], (self, index), {"dim": d})


def _index_add_args(self, dim, index, source, alpha):
    """PyTorch's checks of index_add_ (in its order and words); the dim and the alpha (an
    integer tensor truncates a float alpha)."""
    d = norm_dim(dim, self._data.ndim)
    if index._dtype not in (dtypes.int64, dtypes.int32):
        raise RuntimeError(f"index_add_(): Expected dtype int32/int64 for index but got: "
                           f"{scalar_type_name(index._dtype)}")
    if index._data.ndim > 1:
        raise IndexError(f"index_add_(): Index is supposed to be a vector, but got dim: "
                         f"{index._data.ndim} with type: {scalar_type_name(index._dtype)} and "
                         f"size: {list(index._data.shape)}")
    if isinstance(source, Tensor) and source._dtype is not self._dtype:
        raise RuntimeError(f"index_add_(): self ({scalar_type_name(self._dtype)}) and source "
                           f"({scalar_type_name(source._dtype)}) must have the same scalar type")
    ss, xs = source._data.shape, self._data.shape
    k = ss[d] if len(ss) > d else 1
    if index._data.size != k:
        raise RuntimeError(f"index_add_(): Number of indices ({index._data.size}) should be "
                           f"equal to source.size(dim): ({k}), for dim: {d}")
    if len(ss) != len(xs) or any(a != b for i, (a, b) in enumerate(zip(ss, xs)) if i != d):
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the "
                           f"specified dimension. Got self.shape = {list(xs)} source.shape = "
                           f"{list(ss)}")
    # (PyTorch's kernel scatters for alpha 1 along the first or last of 2+ dims, else it
    # adds slice by slice, with this IndexError)
    scatters = len(xs) > 1 and d in (0, len(xs) - 1) and alpha == 1
    check_index_bounds(index, xs[d] if xs else 1, d, None if scatters else (
        lambda bad: IndexError("index out of range in self")))
    if self._dtype._cat == 1:       # (integers: alpha wrapped into the dtype)
        alpha = dtypes.wrap_int(fill_value_fits(int(alpha), self._dtype), self._dtype)
    return d, alpha


def _index_add_0d(self, dim, index, source):
    """PyTorch's checks of index_add on a 0-d self (its dim 0 one of size 1): a 0-d source
    and one index."""
    norm_dim(dim, 0)
    if isinstance(source, Tensor) and source._data.ndim:
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the "
                           f"specified dimension. Got self.shape = [] source.shape = "
                           f"{list(source._data.shape)}")
    if index._data.size != 1:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    return index.reshape(1), source.reshape(1)


def index_add(self, dim, index, source, alpha=1):
    if not self._data.ndim:
        index, source = _index_add_0d(self, dim, index, source)
        return index_add(self.reshape(1), 0, index, source, alpha).reshape(())
    d, alpha = _index_add_args(self, dim, index, source, alpha)
    return call(OPS["index_add"], (self, index, source), {"dim": d, "alpha": alpha})


def index_add_(self, dim, index, source, alpha=1):
    if not self._data.ndim:
        index, source = _index_add_0d(self, dim, index, source)
        index_add_(self.reshape(1), 0, index, source, alpha)
        return self
    d, alpha = _index_add_args(self, dim, index, source, alpha)
    return call_inplace(OPS["index_add"], self, (self, index, source), {"dim": d, "alpha": alpha})


def _masked_fill_args(self, mask, value):
    _need_tensor(mask, "masked_fill", "mask", 1)
    if mask._dtype._cat != 0:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{dtypes.C_NAMES[mask._dtype.name]}")
    if isinstance(value, Tensor) and value._data.ndim:
        raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value._data.ndim} dimension(s).")
    if isinstance(value, Tensor) and value._dtype is not self._dtype:
        fill_value_fits(value.item(), self._dtype)      # (PyTorch reads it as a number)
    return fill_value_fits(python_number(value), self._dtype)      # (-1 into uint8: 255)


def masked_fill(self, mask, value):
    value = _masked_fill_args(self, mask, value)
    if mask._data.shape != self._data.shape:
        broadcast_shapes(mask._data.shape, self._data.shape)    # (PyTorch's error: mask is a)
    return call(OPS["masked_fill"], (self, mask, value), {})


def masked_fill_(self, mask, value):
    value = _masked_fill_args(self, mask, value)
    return call_inplace(OPS["masked_fill"], self, (self, mask, value), {})


for _n, _f in (("gather", gather), ("scatter_add", scatter_add), ("scatter_add_", scatter_add_),
               ("index_select", index_select), ("index_add", index_add),
               ("index_add_", index_add_), ("masked_fill", masked_fill),
               ("masked_fill_", masked_fill_)):
    _def(_n, _f)
