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
import functools
import threading

from . import grad_mode
from .dtypes import float32, float64
from .tensor import Tensor


class _State(threading.local):
    def __init__(self):
        self.dtype = None       # the lower-precision dtype while CPU autocast is on
        self.cache_enabled = True
        self.casts = {}         # id(weight) -> (weight, its cast): PyTorch's weight-cast cache
        self.nesting = 0        # autocast contexts entered (the cache clears leaving the last)
        self.held = None        # the dtype a running backward pass suspended


state = _State()


def _cast(x, to):
    if isinstance(x, Tensor) and x._dtype._cat == 2 and x._dtype is not float64 and \
            x._dtype is not to:
        if to is state.dtype and x._dtype is float32 and state.cache_enabled and \
                x._requires_grad and x._grad_fn is None and x._base is None and \
                grad_mode.state.grad_enabled:
            # A float32 weight's cast is made once per autocast region and reused, as
            # PyTorch's cached_cast does: its uses' gradients add up in the autocast dtype
            # before the one cast back. (Casts under no_grad are not kept, as PyTorch's.)
            hit = state.casts.get((id(x), to))
            if hit is None or hit[0] is not x:
                hit = state.casts[id(x), to] = (x, x.to(to))
            return hit[1]
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


def autocast_promote(*xs):
    """xs as CPU autocast gives them to an op of PyTorch's promote list (cat, stack,
    index_copy): floating tensors in the widest floating dtype among them."""
    if state.dtype is None:
        return xs
    dts = {x._dtype for x in xs if isinstance(x, Tensor) and x._dtype._cat == 2}
    to = float64 if float64 in dts else float32 if float32 in dts else None
    return xs if to is None or len(dts) < 2 else tuple(_cast(x, to) for x in xs)


def _run_as(fn, to):
    @functools.wraps(fn)
    def f(*args, **kwargs):
        # (an out= form is on no list: PyTorch's composite runs its ops under autocast)
        if state.dtype is None or kwargs.get("out") is not None:
            return fn(*args, **kwargs)
        if to is not None:
            args = [_cast(a, to) for a in args]
            kwargs = {k: _cast(v, to) for k, v in kwargs.items()}
        with suspended():           # (PyTorch's kernel runs below its autocast layer)
            return fn(*args, **kwargs)
    return f


def float32_list(fn):
    """fn, a function of several ops on PyTorch's float32 list (linalg, pools, pads, the FFT):
    its floating tensor arguments in float32 and its ops run without autocast, so a matrix
    product inside it (pinv's) stays in float32 as in PyTorch's kernel."""
    return _run_as(fn, float32)


def on_no_list(fn):
    """fn, a function on none of PyTorch's lists whose llgrad form uses a listed op inside
    (adaptive_avg_pool2d's averaging product): its ops run without autocast, in its
    operands' dtype as PyTorch's kernel does."""
    return _run_as(fn, None)


class suspended:
    """with suspended(): no autocast inside (a backward pass)."""
    __slots__ = ("prev", "held")

    def __enter__(self):
        self.prev, state.dtype = state.dtype, None
        self.held, state.held = state.held, self.prev

    def __exit__(self, *exc):
        state.dtype, state.held = self.prev, self.held
        return False


class resumed:
    """with resumed(): the autocast a backward pass suspended, on again (a custom Function's
    backward: PyTorch runs user code under the autocast state backward() was called in)."""
    __slots__ = ("prev",)

    def __enter__(self):
        self.prev, state.dtype = state.dtype, state.held

    def __exit__(self, *exc):
        state.dtype = self.prev
        return False
