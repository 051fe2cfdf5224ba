"""CPU autocast's casts (torch.autocast("cpu"), llgrad/amp/autocast_mode.py sets the dtype).

PyTorch's CPU autocast runs the ops of two lists on other dtypes than their operands':
matrix products, convolutions, scaled dot-product attention and the LSTM layer in the
autocast dtype (bfloat16 by default), and the losses and a few reductions in float32.
An op of llgrad's table says which list it is on (OpDef.autocast: "lower" or "fp32") and the
dispatcher casts its operands here; a function made of several ops (cross_entropy is
log_softmax then nll_loss) casts its own at its start (`autocast_float32`), as PyTorch's
composite does before its first op. The casts are ops (ToCopyBackward0), so gradients flow
back in each operand's dtype. float64 tensors, and tensors of the dtype already, are left
as they are (PyTorch's is_eligible). Backward runs without autocast, as PyTorch's does."""
import threading

from .dtypes import float32, float64
from .tensor import Tensor


class _State(threading.local):
    def __init__(self):
        self.dtype = None       # the lower-precision dtype while CPU autocast is on


state = _State()


def _cast(x, to):
    if isinstance(x, Tensor) and x._dtype._cat == 2 and x._dtype is not float64 and \
            x._dtype is not to:
        return x.to(to)
    if isinstance(x, (list, tuple)) and any(isinstance(v, Tensor) for v in x):
        return type(x)(_cast(v, to) for v in x)
    return x


def cast_operands(op, inputs):
    """op's operands as CPU autocast gives them (the dispatcher's call, for ops declared on
    one of its lists), or inputs themselves without autocast."""
    low = state.dtype
    if low is None:
        return inputs
    to = low if op.autocast == "lower" else float32
    return [_cast(x, to) for x in inputs]


def autocast_lower(*xs):
    """xs (a function's tensor arguments) as CPU autocast gives them to a function of
    several ops on PyTorch's lower-precision list (linear, conv2d, einsum, attention): in
    the autocast dtype; as they are without autocast. A tuple, whatever their number."""
    low = state.dtype
    return xs if low is None else tuple(_cast(x, low) for x in xs)


def autocast_float32(*xs):
    """xs as CPU autocast gives them to a function of several ops on PyTorch's float32
    list (cross_entropy: log_softmax then nll_loss, in float32 from the start)."""
    return xs if state.dtype is None else tuple(_cast(x, float32) for x in xs)


class suspended:
    """with suspended(): no autocast inside (a backward pass)."""
    __slots__ = ("prev",)

    def __enter__(self):
        self.prev, state.dtype = state.dtype, None

    def __exit__(self, *exc):
        state.dtype = self.prev
        return False
