"""Tensor indexing, x[...]: basic indices (integers, slices, None, ...) as views, in
PyTorch's order with index tensors and masks (advanced indexing, one `index` op)."""
import warnings

import numpy as np

from ..ir import OPS
from .creation import tensor
from .dispatch import call
from .methods_views import select
from .shapes import (check_index_tensor, check_zero_dim_index, index_int, norm_slice,
                     sliced_shape)
from .symbolic_uses import getitem as stand_in_getitem, has_stand_in
from .tensor import Tensor


def _byte_masks(idx):
    """idx with uint8 index tensors read as bool masks, as PyTorch still reads them (with its
    deprecation warning)."""
    if not any(isinstance(i, Tensor) and i._dtype.name == "uint8" for i in idx):
        return idx
    warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                  "torch.bool instead.", UserWarning, stacklevel=3)
    return tuple(i.bool() if isinstance(i, Tensor) and i._dtype.name == "uint8" else i
                 for i in idx)


def _is_advanced(i, scalars=False):
    # (a 0-d integer tensor is an integer, but a 0-d uint8 one a mask, as PyTorch reads it;
    # under vmap a batched 0-d one differs per sample: an index tensor, as PyTorch's vmap;
    # scalars: every 0-d one an index tensor, which writes the same elements)
    return isinstance(i, (Tensor, list, tuple, range, np.ndarray)) and not (
        isinstance(i, Tensor) and i._data.ndim == 0 and i._dtype._cat == 1 and
        i._dtype.name != "uint8" and getattr(i, "_phys", None) is None and not scalars)


def _int_tensor(i):
    """Whether i is a 0-d integer tensor read as an int (not _is_advanced): x[r, :] with r
    an argmin's result takes getitem's tuple fast path, as x[0, :] does."""
    return type(i) is Tensor and not i._data.ndim and i._dtype._cat == 1 and \
        i._dtype.name != "uint8" and getattr(i, "_phys", None) is None


def _index_tensor(i):
    """An index tensor of a tensor, list, range or array (an empty list or range: int64,
    as PyTorch reads it)."""
    if isinstance(i, Tensor):
        return i
    arr = np.asarray(i)
    return tensor(arr.astype(np.int64) if arr.size == 0 and arr.dtype.kind == "f" else arr)


def _consumes(i):
    # a bool mask consumes as many dims as it has
    if i is None or i is Ellipsis or _is_bool(i):
        return 0
    return i._data.ndim if isinstance(i, Tensor) and i._dtype._cat == 0 else 1


def _expanded(idx, ndim):
    """(position in idx, index) pairs with each ... as the full slices it stands for. Every
    ... stands for the same number of dims (PyTorch's indexing steps over them again at each
    one, where NumPy allows one): full slices left past the last dim change nothing, any
    other index there is out of range."""
    used = sum(_consumes(i) for i in idx)
    if used > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    fill = ndim - used
    out = [(p, q) for p, i in enumerate(idx)
           for q in ([slice(None)] * fill if i is Ellipsis else [i])]
    past = used + fill * sum(1 for i in idx if i is Ellipsis) - ndim
    while past > 0 and out and type(out[-1][1]) is slice and out[-1][1] == slice(None):
        out.pop()
        past -= 1
    if past > 0:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    return out


def _expand_ellipsis(idx, ndim):
    return [i for _, i in _expanded(idx, ndim)]


def _is_bool(i):
    return isinstance(i, (bool, np.bool_))


def _basic_first(self, idx, scalars=False):
    """PyTorch's order for an index with index tensors: integers select and None / bools
    unsqueeze first (views), the tensors then index what is left, so x[0, :, [1, 3]] is
    (3, 2) (NumPy: (2, 3)); a bool (or 0-dim bool tensor) is an index tensor, [0] (True) or
    [] (False), on a new dim of 1. Returns that view and the index left."""
    t, d, rest = self, 0, []
    for i in _expand_ellipsis(idx, self._data.ndim):
        i = bool(i) if isinstance(i, Tensor) and not i._data.ndim and not i._dtype._cat else i
        if i is None or _is_bool(i):
            t = t.unsqueeze(d)
            rest.append(slice(None) if i is None else tensor(np.zeros(int(i), np.int64)))
            d += 1
        elif isinstance(i, slice) or _is_advanced(i, scalars):
            rest.append(i)
            d += i._data.ndim if isinstance(i, Tensor) and i._dtype._cat == 0 else 1
        else:
            t = select(t, d, index_int(i))
    return t, tuple(rest)


def _as_tuple(idx):
    """idx as a tuple of indices (so is a list holding a sequence, tensor, slice, None or
    ...: NumPy's old rule, PyTorch's still, with its deprecation warning)."""
    if type(idx) is tuple:
        return idx
    if type(idx) is list and len(idx) < 32 and any(
            isinstance(i, (Tensor, list, tuple, range, np.ndarray, slice)) or i is None or
            i is Ellipsis for i in idx):
        warnings.warn("Using a non-tuple sequence for multidimensional indexing is deprecated "
                      "and will be changed in pytorch 2.9; use x[tuple(seq)] instead of x[seq]. "
                      "In pytorch 2.9 this will be interpreted as tensor index, "
                      "x[torch.tensor(seq)], which will result either in an error or a "
                      "different result", UserWarning, stacklevel=3)
        return tuple(idx)
    return (idx,)


_BASIC = (int, slice, type(None))      # (exact types: a bool is an index tensor)
_SLICE = OPS["slice"]   # (called directly: Tensor._op's layer was ~10% of a view's time)


def getitem(self, idx):
    if type(idx) is slice and self._data.ndim:          # fast path: x[a:b:c]
        # a lone slice is always sliced, even x[:] (PyTorch's get_item disables the
        # full-slice shortcut for it: SliceBackward0); in a tuple a full slice is skipped
        start, stop, step = norm_slice(idx, self._data.shape[0])
        return call(_SLICE, (self,), {"dim": 0, "start": start, "end": stop, "step": step})
    if type(idx) is int and self._data.ndim:            # fast path: x[i]
        return select(self, 0, idx)
    if type(idx) is tuple and all(type(i) in _BASIC or _int_tensor(i) for i in idx) and \
            sum(1 for i in idx if i is not None) <= self._data.ndim:   # (no count(None):
        # its == asks each tensor in idx its __eq__)
        items, pos = idx, range(len(idx))   # (x[:, 0], x[:, None], C[r, :]: nothing to expand)
    elif has_stand_in(idx):     # (a compiled function's changing int: symbolic_uses.py)
        return stand_in_getitem(self, idx, getitem)
    else:
        check_zero_dim_index(self._data.ndim, idx)
        idx = _as_tuple(idx)
        if any(_is_advanced(i) or _is_bool(i) for i in idx):
            return _advanced_index(*_basic_first(self, _byte_masks(idx)))
        # (PyTorch names an integer out of range by its position in the index: ... counts
        # one)
        pairs = _expanded(idx, self._data.ndim)
        pos, items = [p for p, _ in pairs], [i for _, i in pairs]
    t, d, changed = self, 0, False
    for p, i in zip(pos, items):
        if i is None:
            t, d, changed = t.unsqueeze(d), d + 1, True
        elif isinstance(i, slice):
            n = t._data.shape[d]
            start, stop, step = norm_slice(i, n)
            if (start, stop, step) != (0, n, 1):
                t, changed = call(_SLICE, (t,), {"dim": d, "start": start, "end": stop,
                                                 "step": step}), True
            d += 1
        else:
            k, n = index_int(i), t._data.shape[d]
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for dimension {p} with size {n}")
            t, changed = select(t, d, k), True
    return t if changed else self._op("alias")


def _spec(self, idx, scalars=False):
    spec, tensors, d, n = [], [], 0, self._data.ndim
    items = [_index_tensor(i) if _is_advanced(i, scalars) else i
             for i in _expand_ellipsis(idx, n)]
    shape = sliced_shape(self._data.shape, items)   # (a mask's error names the sliced shape)
    for i in items:
        if isinstance(i, Tensor):
            check_index_tensor(shape, i, d)
            spec.append("T")
            tensors.append(i)
            d += i._data.ndim if i._dtype._cat == 0 else 1
        elif isinstance(i, slice):
            spec.append(("slice", i.start, i.stop, i.step))
            d += 1
        else:
            spec.append(i if i is None else int(i))
            d += i is not None
    return tuple(spec), tensors


def _advanced_index(self, idx):
    spec, tensors = _spec(self, idx)
    return call(OPS["index"], (self,) + tuple(tensors), {"spec": spec})


Tensor.__getitem__ = getitem
