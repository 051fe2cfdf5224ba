"""Advanced indexing: x[idx] (`index`) and x[idx] = v (`index_put`), with index specs of
tensors, slices, ints and None as NumPy reads them, and bool masks whose traced count is
fixed (see _fit_masks)."""
import numpy as np

from .ops_copy import iterator_relaid, preserve_copy
from .optable import c_order, defop


def np_index(spec, tensors):
    """Build a NumPy index tuple from a spec whose "T" entries take the next tensor."""
    it = iter(tensors)
    out = []
    for s in spec:
        if s == "T":
            out.append(next(it))
        elif isinstance(s, tuple) and s and s[0] == "slice":
            out.append(slice(*s[1:]))
        else:
            out.append(s)
    return tuple(out)


def _fit_masks(ix, counts):
    """The index tensors with each bool mask made to select exactly its traced count.

    Eager passes no counts: NumPy's semantics, whatever the mask. A traced index with a
    bool mask records `counts` (the True count of each mask, in order), which fixes the
    result's length in its IR type; the trace also guards each data mask's count, so a call
    whose mask selects another number of elements misses the guard and retraces. Until the
    guard is checked (after the forward ran), a mask whose count differs is cut to its first
    `count` Trues or padded with its first Falses: the graph still computes values of the
    types it declares and never reads or writes out of bounds, and the guard then discards
    them. A mask whose count matches is used as it is (exactly NumPy's x[mask])."""
    if counts is None:
        return ix
    out, it = [], iter(counts)
    for t in ix:
        if isinstance(t, np.ndarray) and t.dtype == np.bool_:
            want = next(it)
            have = int(np.count_nonzero(t))
            if have != want:
                flat = np.array(t).reshape(-1)
                if have > want:
                    flat[np.flatnonzero(flat)[want:]] = False
                else:
                    flat[np.flatnonzero(~flat)[:want - have]] = True
                t = flat.reshape(t.shape)
        out.append(t)
    return out


def check_broadcast(ix):
    """PyTorch's IndexError for index tensors of shapes that do not broadcast (a mask is as
    many index tensors as it has dims, each of its True count)."""
    if len(ix) < 2 and not (ix and ix[0].dtype == np.bool_ and ix[0].ndim > 1):
        return
    shapes = [s for t in ix for s in ([(int(np.count_nonzero(t)),)] * t.ndim
                                      if t.dtype == np.bool_ else [t.shape])]
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together "
                         f"with shapes {', '.join(str(list(s)) for s in shapes)}") from None


def _check_bounds(x, spec, ix):
    """PyTorch's IndexError for an index tensor's value outside its dim (which it numbers
    among the index tensors, NumPy by the array's axes), after the shapes' check."""
    check_broadcast(ix)
    axis = k = 0
    it = iter(ix)
    for s in spec:
        if s is None:
            continue
        if s == "T":
            t = next(it)
            if t.dtype == np.bool_:         # (PyTorch reads a mask as ndim index tensors)
                axis += t.ndim
                k += t.ndim - 1
            else:
                n = x.shape[axis] if axis < x.ndim else 1
                # (the ufuncs' reduce, as t.min() and t.max() call it, without their wrapper)
                if t.size and (np.minimum.reduce(t, axis=None) < -n or
                               np.maximum.reduce(t, axis=None) >= n):
                    flat = t.reshape(-1)
                    bad = int(flat[(flat < -n) | (flat >= n)][0])
                    raise IndexError(f"index {bad} is out of bounds for dimension {k} with "
                                     f"size {n}")
                axis += 1
            k += 1
        else:
            axis += 1


def _index(x, *ix, spec, counts=None):
    ix = _fit_masks(ix, counts)     # (first: a mask beside an index tensor is checked at its
    _check_bounds(x, spec, ix)      # traced count, not at a shape rule's all-False stand-in's)
    out = x[np_index(spec, ix)]
    if x.flags.c_contiguous and all(t.flags.c_contiguous for t in ix):
        return c_order(out)         # (PyTorch's result is row-major too, below)
    return _index_layout(out, x, spec, ix)


def _index_layout(out, x, spec, ix):
    """out (x[spec], from NumPy) laid out as PyTorch's index kernel lays it out: its
    TensorIterator over x's view by the spec's ints, slices and Nones (unsqueeze's strides)
    with its indexed dims restrided to 0 (moved to the front when they are not adjacent) and
    the index tensors (a mask: its nonzero()), in that order (ops_copy.iterator_relaid)."""
    if any(st < 0 for st in x.strides):
        return c_order(out)
    consumed = sum(t.ndim if isinstance(t, np.ndarray) and t.dtype == np.bool_ else 1
                   for t in np_index(spec, ix) if t is not None and t is not Ellipsis)
    shape, ys = list(x.shape), [st // x.itemsize for st in x.strides]
    at, arrays, it, d = [], [], iter(ix), 0
    for s in spec:
        if s == "T":
            t = next(it)
            for a in (np.nonzero(t) if t.dtype == np.bool_ else (t,)):
                at.append(d)
                arrays.append(a)
                d += 1
        elif s is Ellipsis:
            d += x.ndim - consumed
        elif s is None:
            ys.insert(d, shape[d] * ys[d] if d < len(shape) else 1)     # (unsqueeze's)
            shape.insert(d, 1)
            d += 1
        elif isinstance(s, tuple) and s and s[0] == "slice":
            start, _, step = slice(*s[1:]).indices(shape[d])
            shape[d] = len(range(*slice(*s[1:]).indices(shape[d])))
            ys[d] *= step
            d += 1
        else:                       # an int: select
            del shape[d], ys[d]
    if any(st < 0 for a in arrays for st in a.strides):
        return c_order(out)
    bshape = np.broadcast_shapes(*[a.shape for a in arrays])
    nb = len(bshape)
    if at == list(range(at[0], at[0] + len(at))):       # adjacent: in place of their dims
        before, after = list(range(at[0])), list(range(at[-1] + 1, len(shape)))
    else:                                               # else first (PyTorch's transpose)
        before, after = [], [k for k in range(len(shape)) if k not in at]
    rshape = tuple(shape[k] for k in before) + bshape + tuple(shape[k] for k in after)
    if rshape != out.shape:
        return c_order(out)
    operands = [(rshape, [ys[k] for k in before] + [0] * nb + [ys[k] for k in after])]
    for a in arrays:
        st = [0] * (nb - a.ndim) + [0 if n == 1 else s // a.itemsize
                                    for n, s in zip(a.shape, a.strides)]
        operands.append((rshape, [0] * len(before) + st + [0] * len(after)))
    return iterator_relaid(out, operands)


def _with_counts(c, **attrs):
    counts = c.attrs.get("counts")
    return attrs if counts is None else dict(attrs, counts=counts)


defop("index", _index, args=("self", "*indices"),
      save=("indices",), grad_fn="IndexBackward0", nondiff=("indices",),
      vjp=lambda c, g: (g.new_zeros(c.shape(0))._op(
          "index_put", g, *c.indices, **_with_counts(c, spec=c.spec, accumulate=True)),), complex=True)


def _index_put(x, values, *ix, spec, accumulate=False, counts=None):
    out = preserve_copy(x)          # (an expanded x's copy is row-major, as PyTorch's clone)
    ix = _fit_masks(ix, counts)
    _check_bounds(x, spec, ix)
    idx = np_index(spec, ix)
    if accumulate and any(isinstance(t, np.ndarray) and t.dtype != np.bool_ for t in idx):
        np.add.at(out, idx, values)
    elif accumulate:
        # (masks, slices and ints name each element once: no repeats for add.at to sum in
        # turn, and += is the same sums at a sixth of its time, e.g. a masked selection's
        # backward, IndexBackward0 of logits[mask])
        out[idx] += values
    else:
        out[idx] = values
    return out


def _index_put_vjp(c, g):
    gx = g if c.accumulate else g._op("index_put", g.new_zeros(()), *c.indices,
                                      **_with_counts(c, spec=c.spec, accumulate=False))
    gv = g._op("index", *c.indices, **_with_counts(c, spec=c.spec)) if c.needs(1) else None
    return (gx if c.needs(0) else None, gv)


defop("index_put", _index_put, args=("self", "values", "*indices"), save=("indices",),
      grad_fn="IndexPutBackward0", promote=(0, 1), vjp=_index_put_vjp, nondiff=("indices",),
      eager_kernel="shaped", complex=True)
