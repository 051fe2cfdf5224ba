"""In-place updates of a module's buffers (a batch norm's running statistics and its batch
count) without call_inplace's bookkeeping where it has none to do: eagerly, with no tracer,
vmap, profiler or forward AD, into a plain tensor that does not require grad. The values are
the table's NumPy implementations on the same operands, written in place (mul rounds each
element once, add with an alpha is one fused multiply-add: the native eager kernels run_impl
may pick give the same bits); the version bumps and write location are call_inplace's.
Anything else returns False before writing and the caller makes the tensor calls (their
checks and messages included). A batch norm's
training forward made five in-place calls for its buffers: half its time on a (256, 128)
batch."""
import numpy as np

from ..ir import fused_madd
from ..ir.fused_madd import fma
from . import dispatch, trace_state
from .dtypes import float32, float64, int64
from .saved_tensor import user_position
from .tensor import Tensor

# (a Python number of magnitude under these is finite in the dtype: add_'s alpha check passes)
_FLOAT_LARGEST = {float32: 3.4028234663852886e38, float64: float("inf")}
_tstate = trace_state.state
__all__ = ["blend", "increment"]


def _plain(t):
    return type(t) is Tensor and not t._requires_grad and t._grad_fn is None and \
        not t._inference and t._data.flags.writeable and _tstate.tracer is None and \
        dispatch.batching is None and dispatch.profiler is None and dispatch.forward_ad is None


def _bump(t, loc):
    st = t._storage
    st.version += 1
    st.write_loc = loc


def increment(t):
    """t.add_(1) for an int64 batch count; False (nothing written) where it does not apply."""
    if not _plain(t) or t._dtype is not int64:
        return False
    a = t._data
    np.add(a, 1, out=a)                                 # (int64 wraps, as PyTorch's)
    _bump(t, user_position())
    return True


def blend(buf, stat, momentum):
    """buf.mul_(1 - momentum).add_(stat, alpha=momentum) for a float buffer and an array stat
    of its dtype and shape; False (nothing written) where it does not apply, or where
    momentum is out of the dtype's range (then add_'s check raises PyTorch's error)."""
    a = buf._data
    if not _plain(buf) or type(momentum) not in (int, float) or stat.dtype != a.dtype or \
            stat.shape != a.shape or not abs(momentum) < _FLOAT_LARGEST.get(buf._dtype, 0):
        return False
    loc = user_position()
    np.multiply(a, 1 - momentum, out=a)                 # buf.mul_(1 - momentum)
    _bump(buf, loc)
    # .add_(stat, alpha=momentum): the native fused multiply-add at any size (NumPy's exact
    # emulation is ~8 passes, a call's worth of time per statistic), the same bits
    native = fused_madd.native_axpy()
    r = native(a, stat, momentum, a.dtype, min_elements=0) if native is not None else None
    a[...] = fma(stat, momentum, a, a.dtype) if r is None else r
    _bump(buf, loc)
    return True
