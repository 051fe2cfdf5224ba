"""An elementwise in-place op on a view whose elements share memory without a 0 stride
(x.as_strided((3, 3), (2, 1)), x.unfold(0, 4, 2)): PyTorch's has_internal_overlap says
"too hard" there, not "yes", so it raises nothing and its TensorIterator runs the op element
by element in its loop order, each element reading what an earlier one wrote into the
shared cell: x.unfold(0, 4, 2).mul_(2) doubles the shared elements twice, copy_ leaves the
last element's value. NumPy's assignment would write one result per cell instead.

The elements that address one cell form a chain in loop order; different cells are
independent. So the op runs in waves: wave k computes the k-th element of every chain from
the memory as the earlier waves left it (a few vectorised calls where the chains are
short, as unfold's and as_strided's windows make them)."""
import numpy as np

from ..ir.geometry import geometry_overlaps, iterator_dims
from .tensor import Tensor


def shares_cells(t):
    """Whether t's elements overlap in memory with no 0 stride among them (a 0 stride is
    PyTorch's "yes", an error, decided before this)."""
    a = t._data
    if a.flags.c_contiguous or a.flags.f_contiguous or a.size < 2:     # (the usual case)
        return False
    shape, strides = a.shape, t.stride()
    if any(s == 0 and n > 1 for n, s in zip(shape, strides)):
        return False
    return geometry_overlaps(shape, strides)


def _loop_order(t, inputs):
    """t's elements (C-order flat indices) in the order PyTorch's TensorIterator visits
    them: dims sorted by the operands' strides, t's first (the output), innermost fastest."""
    shape = t._data.shape
    operands = [(shape, t.stride())] + [(x._data.shape, x.stride()) for x in inputs
                                        if isinstance(x, Tensor) and x is not t]
    perm = iterator_dims(shape, operands)          # innermost first
    flat = np.arange(t._data.size).reshape(shape)
    return flat.transpose(perm[::-1]).reshape(-1)


def write_sequentially(t, inputs, attrs, compute, cast):
    """Run compute(inputs, attrs) -> array on t's elements chain by chain (module doc),
    writing each wave's results (through cast, t's dtype's rounding) into t's memory."""
    shape, strides = t._data.shape, t.stride()
    order = _loop_order(t, inputs)
    cells = (np.stack(np.unravel_index(order, shape), -1) * np.asarray(strides)).sum(-1) \
        if order.size else order
    # the rank of each element within its cell's chain, in loop order
    by_cell = np.argsort(cells, kind="stable")
    sorted_cells = cells[by_cell]
    starts = np.r_[0, np.flatnonzero(sorted_cells[1:] != sorted_cells[:-1]) + 1]
    run = np.repeat(starts, np.diff(np.r_[starts, sorted_cells.size]))
    rank = np.empty_like(order)
    rank[by_cell] = np.arange(order.size) - run
    memory = _writeable(t)
    for k in range(int(rank.max()) + 1):
        pos = order[rank == k]
        at = np.unravel_index(pos, shape)
        wave = []
        for x in inputs:
            if isinstance(x, Tensor):       # (read now: t's own cells as earlier waves left them)
                a = np.broadcast_to(memory if x is t else x._data, shape)
                wave.append(Tensor._from_array(np.ascontiguousarray(a[at])))
            else:
                wave.append(x)
        out = compute(wave, attrs)
        memory[at] = cast(np.broadcast_to(out, pos.shape))


def write_changed(t, out):
    """An indexed op's result (scatter_, index_fill_, ...) on such a view: PyTorch writes
    only the positions the op addresses, so only the elements whose value changes are
    written (in C order, the last into a shared cell winning): an unchanged element's stale
    value must not overwrite what another element wrote into the cell."""
    old = t._data
    same = (out == old) | ((out != out) & (old != old))
    _writeable(t)[~same] = np.broadcast_to(out, old.shape)[~same]


def _writeable(t):
    """t's memory as a writeable array (unfold's NumPy view is read-only)."""
    base = t._storage.base
    offset = t._data.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return np.ndarray(t._data.shape, t._data.dtype, base, offset, t._data.strides)
