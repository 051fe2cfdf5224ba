"""Writes by index: x[idx] = value (PyTorch's rules: leading size-1 dims of the value
dropped, basic indices as a view written by copy_/fill_, advanced ones as index_put_) and
index_put / index_put_."""
import numpy as np

from ..ir import OPS
from ..ir.bfloat16 import round_number
from ..ir.ops_index import check_broadcast
from . import trace_state
from .creation_checks import fill_value_fits
from .dispatch import call, scalar_type_name
from .inplace import call_inplace
from .methods_getitem import (_as_tuple, _basic_first, _byte_masks, _index_tensor,
                              _is_advanced, _is_bool, _spec, getitem)
from .methods_views import _def
from .shapes import check_index_tensor, check_zero_dim_index
from .symbolic_scalar import SymbolicScalar
from .tensor import Tensor


def _strip_ones(value):
    """The value of x[idx] = value without its leading size-1 dims (PyTorch's
    slicePrefix1sSize: x[0] = t of shape (1, n) writes a row)."""
    shape = value._data.shape
    k = 0
    while k < len(shape) and shape[k] == 1:
        k += 1
    return value.view(shape[k:]) if k else value


def setitem(self, idx, value):
    check_zero_dim_index(self._data.ndim, idx)
    if idx is False:        # (PyTorch's: a lone False writes nothing and checks nothing; a
        return              # lone True writes by copy_, as x[None] = value)
    idx = _as_tuple(None if idx is True else idx)
    if not isinstance(value, (Tensor, bool, int, float, complex, np.generic, SymbolicScalar)):
        kind = type(value)      # (PyTorch takes a tensor or a number: no list, no array)
        kind = kind.__name__ if kind.__module__ == "builtins" else \
            f"{kind.__module__}.{kind.__name__}"
        raise TypeError(f"can't assign a {kind} to a torch.{self._dtype._tensor_type}")
    if isinstance(value, Tensor):
        value = _strip_ones(value)
    elif isinstance(value, (int, float)):   # (PyTorch's overflow error; float16 and
        # bfloat16 take any number, as their copy_ rounds it: x[0] = 1e9 is inf)
        value = float(np.float16(value)) if self._dtype.name == "float16" else \
            round_number(value) if self._dtype.name == "bfloat16" else \
            fill_value_fits(value, self._dtype)
    # (traced, a 0-d integer tensor is an index tensor, not a number read and guarded by
    # value: a greedy matcher's `cost[r, :] = inf` at the argmin's row is then one trace)
    scalars = trace_state.state.tracer is not None
    if any(_is_advanced(i, scalars) or _is_bool(i) for i in idx):
        _byte_mask_fill(self, idx, value)
        t, rest = _slices_first(*_basic_first(self, _byte_masks(idx), scalars))
        spec, tensors = _spec(t, rest, scalars)
        if not isinstance(value, Tensor):
            value = Tensor._from_array(np.asarray(value, dtype=self._data.dtype))
        elif not (len(tensors) == 1 and tensors[0]._dtype._cat == 0 and value._data.size == 1):
            check_broadcast([i._data for i in tensors])     # (PyTorch's first check)
            _same_dtype(t, value, ())   # (PyTorch's masked_fill path alone converts the value)
        elif value._dtype is not t._dtype:      # (that path reads the value as a number)
            fill_value_fits(value.item(), t._dtype)
            value = value.to(t._dtype)
        try:
            call_inplace(OPS["index_put"], t, (t, value) + tuple(tensors),
                         {"spec": spec, "accumulate": False})
        except (RuntimeError, TypeError, ValueError):   # (PyTorch's words for a value that
            # does not fit; NumPy's mask assignment raises TypeError / ValueError)
            _value_fits(self, idx, value)
            raise
        except IndexError:      # (PyTorch checks the value's shape before the bounds)
            _value_fits(self, tuple(_in_bounds(i) for i in idx), value)
            raise
        return
    target = getitem(self, idx)
    if isinstance(value, Tensor):
        if value._data.shape != target._data.shape:
            wide = value.expand(target._data.shape)     # (PyTorch's error when it cannot)
            if value._storage is target._storage:   # (x[i] += v: the same memory, as there)
                value = wide
        target.copy_(value)
    else:   # (PyTorch copies the number in: an error where a 0 stride repeats an element;
        # other shared memory is written element by element, inplace_overlap.py)
        if any(s == 0 and n > 1 for n, s in zip(target._data.shape, target.stride())):
            raise RuntimeError("unsupported operation: more than one element of the written-to "
                               "tensor refers to a single memory location. Please clone() the "
                               "tensor before performing the operation.")
        target.fill_(value)


def _byte_mask_fill(self, idx, value):
    """PyTorch's error for x[byte_mask] = one number: its index_put_ hands a lone mask and a
    one-element value to masked_fill_, which takes bool masks only (more values: index_put_,
    which reads the uint8 tensor as a mask; a 0-d one is read as a Python bool)."""
    # (a Python bool is an index tensor too: x[mask, True] = 1 goes to index_put_ whole)
    adv = [i for i in idx if _is_advanced(i) or _is_bool(i)]
    if len(adv) == 1 and isinstance(adv[0], Tensor) and adv[0]._dtype.name == "uint8" and \
            adv[0]._data.ndim and (not isinstance(value, Tensor) or value._data.size == 1):
        getitem(self.detach(), idx)     # (a mask of the wrong shape: PyTorch's IndexError first)
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with dtype "
                           "unsigned char")


def _slices_first(t, rest):
    """PyTorch's applySlicing for a write: a slice that is not the whole dim makes a view of
    t first, which the index tensors then index (x[i, 1:3] = v: x's grad_fn is CopySlices,
    as PyTorch's)."""
    d, out = 0, []
    for i in rest:
        if isinstance(i, slice) and i.indices(t._data.shape[d]) != (0, t._data.shape[d], 1):
            t, i = t[(slice(None),) * d + (i,)], slice(None)
        out.append(i)
        d += i._data.ndim if isinstance(i, Tensor) and i._dtype._cat == 0 else 1
    return t, tuple(out)


def _in_bounds(i):
    """Index i with its integer index tensor (or list) zeroed: the indexing result's shape,
    out-of-range indices aside."""
    if not _is_advanced(i):
        return i
    t = _index_tensor(i)
    return t if t._dtype._cat != 1 or t._dtype.name == "uint8" else t.detach() * 0


def _value_fits(self, idx, value):
    """PyTorch's error for a value that does not broadcast to the shape of self[idx] (the
    value to the result's shape, not the other way)."""
    shape = getitem(self.detach(), idx)._data.shape
    try:
        fits = np.broadcast_shapes(value._data.shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(value._data.shape)} "
                           f"cannot be broadcast to indexing result of shape {list(shape)}"
                           ) from None


def _same_dtype(self, values, indices):
    d = 0
    for t in indices:
        if isinstance(t, Tensor):
            check_index_tensor(self._data.shape, t, d)
            d += t._data.ndim if t._dtype._cat == 0 else 1
    if isinstance(values, Tensor) and values._dtype is not self._dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{scalar_type_name(self._dtype)} for the destination and "
                           f"{scalar_type_name(values._dtype)} for the source.")


def _index_put_values(self, indices, values, accumulate):
    """values checked as PyTorch's index_put_ checks them: one bool mask and a one-element
    value is its masked_fill_ (the value read as a number, of any dtype); else the dtypes
    must match and the value broadcast to the indexing result."""
    if not accumulate and isinstance(values, Tensor) and values._data.size == 1 and \
            len(indices) == 1 and isinstance(indices[0], Tensor) and \
            indices[0]._dtype.name == "bool":
        if values._dtype is not self._dtype:
            fill_value_fits(values.item(), self._dtype)
            values = values.to(self._dtype)
        return values
    if isinstance(values, Tensor) and values._dtype is not self._dtype:
        _value_fits(self, tuple(indices), values)       # (checked before the dtypes)
    _same_dtype(self, values, indices)
    return values


def _check_indices(self, indices):
    """PyTorch's index_put_ checks of its indices (before the values'): tensors, no more of
    them than self has dims, masks that fit."""
    ndim = self._data.ndim
    for k, t in enumerate(indices):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {k} in argument 0, but got "
                            f"{type(t).__name__}")
    if len(indices) > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim} (got {len(indices)})")
    d = 0
    for t in indices:
        check_index_tensor(self._data.shape, t, d)
        d += t._data.ndim if t._dtype._cat == 0 else 1
        if d > ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, "
                             f"{ndim - 1}], but got {ndim})")


def _index_put(run, self, indices, values, accumulate):
    byte = any(isinstance(t, Tensor) and t._dtype.name == "uint8" for t in indices)
    if byte:                        # (masks, as x[i] reads them)
        indices = _byte_masks(tuple(indices))
    _check_indices(self, indices)
    if byte and not accumulate and len(indices) == 1 and isinstance(values, Tensor) and \
            values._data.size == 1:     # (PyTorch's masked_fill_ path takes only bool)
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with dtype "
                           "unsigned char")
    values = _index_put_values(self, indices, values, accumulate)
    try:
        return run(self, values, tuple(indices), {"spec": tuple("T" for _ in indices),
                                                  "accumulate": accumulate})
    except (RuntimeError, TypeError, ValueError):       # (PyTorch's words for a value of a
        if isinstance(values, Tensor):                  # shape that does not fit)
            _value_fits(self, tuple(indices), values)
        raise


def index_put_(self, indices, values, accumulate=False):
    return _index_put(lambda s, v, ix, attrs: call_inplace(OPS["index_put"], s, (s, v) + ix,
                                                           attrs),
                      self, indices, values, accumulate)


def index_put(self, indices, values, accumulate=False):
    return _index_put(lambda s, v, ix, attrs: call(OPS["index_put"], (s, v) + ix, attrs),
                      self, indices, values, accumulate)


Tensor.__setitem__ = setitem
_def("index_put_", index_put_)
_def("index_put", index_put)
