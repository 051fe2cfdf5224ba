"""Results over the memory of a .grad the call set: a training step that returns
`w.grad.detach()`, `w.grad.data` or a view of it (`w.grad[0]`, `w.grad.view(-1)`). Eager's
result shares the gradient's memory, so a write through it changes w.grad; a compiled call
makes the gradient a buffer of its own (run.py copies an output array the results already
use), so such results are made over the .grad each call assigns again (`return w.grad`
itself is entry.grad_outputs)."""
import numpy as np

from ..ir.ops_shape import strided_view
from ..runtime.tensor import Storage, Tensor

_VIEW, _ALIAS, _ALIAS_VIEW, _DATA, _DATA_VIEW = range(5)


def note(entry, outs, tensors):
    """At trace time: the results over the memory of a .grad of an input that is no input
    itself (one the call made): (result, input, offset in bytes, strides in bytes, kind)."""
    inputs = {id(t) for _, t in tensors}
    entry.grad_views = []
    for i, (_, t) in enumerate(tensors):
        g = t._grad
        if g is None or id(g) in inputs:
            continue
        for k, o in enumerate(outs):
            if o is g or o._storage.base is not g._storage.base:
                continue
            if o._storage is g._storage:
                kind = _ALIAS if o._base is None else \
                    _VIEW if o._base is g or o._base is g._base else _ALIAS_VIEW
            else:
                kind = _DATA if o._base is None else _DATA_VIEW
            entry.grad_views.append((k, i, _ptr(o._data) - _ptr(g._data), o._data.strides,
                                     kind))


def remake(entry, tensors, results):
    """In a compiled call, after the .grad it set are assigned: those results over their
    memory again, as eager's are."""
    for k, i, off, strides, kind in entry.grad_views:
        g, arr = tensors[i]._grad, results[k]._data
        if g is None:
            continue
        size = arr.dtype.itemsize
        arr = strided_view(g._data, arr.shape, [st // size for st in strides], off // size)
        if kind == _VIEW:
            results[k] = Tensor._view_of(arr, g)
        elif kind in (_ALIAS, _DATA):
            results[k] = Tensor._from_array(arr, g._storage if kind == _ALIAS
                                            else Storage(g._storage.base))
        else:
            results[k] = Tensor._view_of(arr, g._alias() if kind == _ALIAS_VIEW else g.data)


def _ptr(a):
    return a.__array_interface__["data"][0]
