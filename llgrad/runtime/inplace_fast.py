"""The common case of an eager in-place op, without call_inplace's general checks: a dense
(C-contiguous, writeable; for fill_ and zero_ any view with a cell per element) plain tensor
written by operands of its dtype and shape or by Python numbers of its category or below,
none of them on the meta device, with no tracer, vmap, profiler or forward AD active and no
autograd to record (grad mode off, or nothing involved requires grad, is a view of a tensor
that does, or was made under no_grad). There none of PyTorch's checks can raise (no leaf or
view of a leaf written with grad on, no inference tensor, no repeated or shared memory, no
broadcast into t, no cast to a lower category), and nothing is recorded: what is left is the
op's value written into t, the version bump and the write location, as call_inplace does
them. Anything else returns False before writing anything, and call_inplace takes its
general path. An optimiser's step, a gradient's zeroing or a user's x.add_(y) spent most of
its per-call time in those checks on small tensors."""
import numpy as np

from ..ir.geometry import geometry_overlaps
from . import dispatch, grad_mode, trace_state
from .dispatch import run_impl
from .saved_tensor import user_position
from .symbolic_operands import stand_ins
from .tensor import Storage, Tensor

_tstate = trace_state.state
_INT64 = (-1 << 63, 1 << 63)


def _distinct_cells(op, a, inputs):
    """Whether a number filled into the strided view a writes each element to a cell of its
    own: then the write is NumPy's assignment, as into a dense tensor (a greedy matcher's
    cost[:, c] = inf, a column; a repeated or shared cell takes the general path)."""
    if op.name not in ("fill", "zero") or len(inputs) > 1 and isinstance(inputs[1], Tensor):
        return False
    size = a.itemsize
    return not geometry_overlaps(a.shape, [s // size for s in a.strides]) and \
        all(s % size == 0 for s in a.strides)


def write(op, t, inputs, attrs):
    """Write op(*inputs, **attrs) into t the short way; False (nothing done) where the
    general path is needed."""
    if _tstate.tracer is not None or dispatch.batching is not None \
            or dispatch.profiler is not None or dispatch.forward_ad is not None \
            or stand_ins.active or not inputs or inputs[0] is not t:
        return False
    storage = t._storage        # (a meta tensor's is a MetaStorage: meta_dispatch.py's)
    if storage.__class__ is not Storage:
        return False
    dt, a = t._dtype, t._data
    if not dt._plain or t._inference or not a.flags.writeable:
        return False
    if not a.flags.c_contiguous and not _distinct_cells(op, a, inputs):
        return False
    cat, grad = dt._cat, grad_mode.state.grad_enabled
    if grad:
        if t._requires_grad or t._creation is not None or t._multi_view:
            return False
        b = t._base     # (a view of a base with no history: x[1:3] = v, no grad to flow)
        if b is not None and (b._requires_grad or b._grad_fn is not None):
            return False
    if op.float_out and cat < 2:        # (exp_ of an integer tensor: the cast error)
        return False
    shape = a.shape
    for i in range(1, len(inputs)):
        x = inputs[i]
        tx = type(x)
        if tx is Tensor or isinstance(x, Tensor):     # (a Parameter: its class only marks it)
            if x._dtype is not dt or x._data.shape != shape or x._storage is storage or \
                    x._storage.__class__ is not Storage or \
                    grad and (x._requires_grad or x._base is not None):
                return False
        elif tx is float:
            if cat < 2:
                return False
        elif tx is int:
            if cat < 1 or not _INT64[0] <= x < _INT64[1]:
                return False
        elif tx is not bool and x is not None:
            return False
    name = op.name
    if name == "copy":
        out = inputs[1]._data if isinstance(inputs[1], Tensor) else run_impl(op, inputs, attrs)
    elif name == "zero":
        out = 0                         # (zeros_like's value, written without the array)
    elif name == "fill" and not isinstance(inputs[1], Tensor):
        out = inputs[1]                 # (full_like's cast of the number, in the write)
    else:
        try:
            out = run_impl(op, inputs, attrs)
        except OverflowError:           # (a number out of t's range: the general path's)
            return False
    a[...] = out if isinstance(out, np.ndarray) else np.asarray(out)
    storage.version += 1
    storage.write_loc = user_position()
    return True
