"""SGD's eager update of one parameter without the dispatcher's per-op bookkeeping: the same
ops of the table as SGD.step's tensor calls (dispatch.run_impl on the same operands and
attributes, so the values are those of the tensor calls, bit for bit), each in-place result
written into its tensor with the version bump and write location call_inplace gives it.

It serves the common case only: no tracer, vmap, profiler or forward AD, Python-number
hyper-parameters, plain writable float tensors of one dtype and shape, and a momentum buffer
already made (the first step makes it with the tensor calls). Anything else returns False
before writing and SGD.step's tensor calls run, their checks and messages included.
Non-empty C-contiguous arrays take one native loop (compile/eager_optim.py; one ctypes call
costs less than one NumPy pass's dispatch) doing the same operations in the same order: the
same bits again."""
from typing import NamedTuple

import numpy as np

from ..compile import eager_optim
from ..ir import OPS
from ..ir.np_address import data_pointer
from ..runtime import dispatch, trace_state
from ..runtime.dtypes import float32, float64
from ..runtime.tensor import Tensor
from ._eager_adam import _plain, _write, where

_ADD, _MUL, _NEG = (OPS[n] for n in ("add", "mul", "neg"))
_NUMPY = {float32: np.float32, float64: np.float64}
_NUMBERS = (int, float)
# (a Python number of magnitude under these rounds to a finite value of the dtype; NaN
# compares False)
_LARGEST = {float32: float(np.finfo(np.float32).max), float64: float("inf")}
_tstate = trace_state.state
_new = Tensor._from_array
ENABLED = True          # (tests turn it off to compare with the tensor calls)
__all__ = ["Settings", "settings", "update", "where"]


class Settings(NamedTuple):
    """A group's hyper-parameters, read once per step, and the native loop's constants per
    dtype (None where one is not finite in the dtype: the tensor calls then run, their
    overflow included)."""
    lr: float
    momentum: float
    dampening: float
    weight_decay: float
    nesterov: bool
    maximize: bool
    constants: dict


def settings(group):
    """The group's Settings when the update here applies to it (then the caller takes one
    write location for the step with where()), else None."""
    if not ENABLED or _tstate.tracer is not None or dispatch.batching is not None or \
            dispatch.profiler is not None or dispatch.forward_ad is not None or \
            group["differentiable"]:
        return None
    lr, momentum, dampening, weight_decay = (group[k] for k in (
        "lr", "momentum", "dampening", "weight_decay"))
    if not all(type(v) in _NUMBERS for v in (lr, momentum, dampening, weight_decay)):
        return None
    return Settings(lr, momentum, dampening, weight_decay, group["nesterov"],
                    group["maximize"], {})


def _constants(s, dt):
    """The native loop's constants for dtype dt: each as the tensor calls' NumPy ops take a
    Python number, the dtype's value of it. None if one is not finite there: then the tensor
    calls run, with PyTorch's error for an alpha the dtype cannot hold (after the writes
    before it, as there)."""
    found = s.constants.get(dt, False)
    if found is False:
        values = (s.weight_decay, s.momentum, 1 - s.dampening, -s.lr)
        found = s.constants[dt] = tuple(float(_NUMPY[dt](v)) for v in values) \
            if all(abs(v) < _LARGEST[dt] for v in values) else None
    return found


def update(p, states, s, loc):
    """SGD.step's update of p (from p.grad and its entry of the optimiser's states, read
    only with a momentum, as torch.optim.SGD does) under Settings s, or False (nothing
    written)."""
    grad, dt = p.grad, p._dtype
    if dt not in _NUMPY:
        return False
    shape = p._data.shape
    buf = states[p].get("momentum_buffer") if s.momentum != 0 else None
    if s.momentum != 0 and buf is None:
        return False
    tensors = (p, grad) if buf is None else (p, grad, buf)
    constants = _constants(s, dt)
    if constants is None or \
            not all(_plain(t, dt, shape) and t._data.flags.writeable for t in tensors):
        return False
    if _native(p, grad, buf, s, constants, loc):
        return True
    run = dispatch.run_impl
    # (the calls of SGD.step, in order: each comment is the tensor call it stands for)
    if s.maximize:
        grad = _new(run(_NEG, (grad,), {}))                             # -p.grad
    if s.weight_decay != 0:
        grad = _new(run(_ADD, (grad, p), {"alpha": s.weight_decay}))    # grad.add(p, ...)
    if buf is not None:
        _write(buf, run(_MUL, (buf, s.momentum), {}), loc)              # buf.mul_(momentum)
        _write(buf, run(_ADD, (buf, grad), {"alpha": 1 - s.dampening}), loc)    # .add_(...)
        grad = _new(run(_ADD, (grad, buf), {"alpha": s.momentum})) \
            if s.nesterov else buf                                      # grad.add(buf, ...)
    _write(p, run(_ADD, (p, grad), {"alpha": -s.lr}), loc)              # p.add_(grad, -lr)
    return True


def _native(p, grad, buf, s, constants, loc):
    """The update as one native loop (compile/eager_optim.py), when the arrays are
    C-contiguous and apart and the kernel ready; False
    otherwise (nothing written)."""
    arrays = (p._data, grad._data) if buf is None else (p._data, grad._data, buf._data)
    if arrays[0].size == 0 or not all(a.flags.c_contiguous for a in arrays):
        return False
    ptrs = [data_pointer(a) for a in arrays]
    nbytes = arrays[0].nbytes
    for i, a in enumerate(ptrs):        # (the loop's pointers are noalias)
        for b in ptrs[i + 1:]:
            if a < b + nbytes and b < a + nbytes:
                return False
    fn = eager_optim.sgd_kernel(p._dtype.name, s.maximize, s.weight_decay != 0,
                                buf is not None, buf is not None and s.nesterov)
    if fn is None:
        return False
    fn(ptrs[0], ptrs[1], ptrs[2] if buf is not None else None, arrays[0].size, *constants)
    for t, writes in ((p, 1), (buf, 2)):
        if t is not None:
            st = t._storage
            st.version += writes
            st.write_loc = loc
    return True
