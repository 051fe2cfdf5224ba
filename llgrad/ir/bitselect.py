"""np.where without branches, for the ops that select per element (where, masked_fill).

NumPy's where branches on every element: on a mask with no pattern (ReLU's backward, a
dropout mask) the mispredictions cost ~6 ns an element, 3-6 ms for a 2 MB float32 gradient
(measured: 10x a multiply of the same arrays). Selecting through the bit patterns instead
(the mask widened to all-ones or all-zeros words, then and/or) runs at memory speed and
copies each element's bits exactly, as np.where does (NaN payloads, -0.0)."""
import math

import numpy as np

MIN_ELEMENTS = 4096         # below this, np.where's own overhead is the smaller


def where(cond, a, b):
    """np.where(cond, a, b) for NumPy arrays (0-d too) a and b of one numeric dtype and a
    bool cond; any other operands go to np.where itself."""
    # (a NumPy scalar is a 0-d operand of its own dtype, as np.where takes it; a Python
    # number is a weak scalar to np.where: it takes the array's float dtype)
    a, b = _operand(a, b), _operand(b, a)
    if not all(isinstance(v, np.ndarray) for v in (cond, a, b)):
        return np.where(cond, a, b)
    dt = a.dtype
    if b.dtype != dt or dt.kind not in "fiu" or dt.itemsize not in (1, 2, 4, 8) \
            or cond.dtype != np.bool_:
        return np.where(cond, a, b)
    shape = _broadcast(cond.shape, a.shape, b.shape)
    if math.prod(shape) < MIN_ELEMENTS:
        return np.where(cond, a, b)
    word = np.dtype(f"u{dt.itemsize}")
    # a 0-d zero on one side (masked_fill(m, 0): ReLU's backward; where(m, x, 0)): the other
    # side's bits times the mask as 0 or 1 words, one product (half the passes of and/or)
    for zero, other, pick in ((a, b, np.logical_not), (b, a, None)):
        if zero.ndim == 0 and zero.view(word) == 0:
            keep = np.broadcast_to(cond, shape)
            out = (pick(keep) if pick else keep).view(np.uint8).astype(word)
            return np.multiply(out, other.view(word), out=out).view(dt)
    if cond.shape != shape:
        # a mask that broadcasts (attention's (T, T) causal mask over (B, heads, T, T)):
        # its words made once at its own size (NumPy's cast of a broadcast array is ~5x a
        # pass), the passes over the result broadcasting them
        take_b = cond.astype(word)
        np.subtract(take_b, word.type(1), out=take_b)     # True -> 0, False -> all ones
        out = np.empty(shape, word)
        np.bitwise_and(b.view(word), take_b, out=out)
        np.invert(take_b, out=take_b)
        np.bitwise_or(out, np.bitwise_and(a.view(word), take_b), out=out)
        return out.view(dt)
    take_b = np.broadcast_to(cond, shape).astype(word)
    np.subtract(take_b, word.type(1), out=take_b)         # True -> 0, False -> all ones
    out = np.bitwise_and(b.view(word), take_b)
    np.invert(take_b, out=take_b)
    np.bitwise_or(out, np.bitwise_and(a.view(word), take_b, out=take_b), out=out)
    return out.view(dt)


def _broadcast(*shapes):
    """np.broadcast_shapes(*shapes), without its cost (several microseconds, as much as a
    small where) in the common cases: equal shapes and 0-d operands."""
    out = ()
    for s in shapes:
        if s and s != out:
            if out:
                return _broadcast_same_rank(shapes) or np.broadcast_shapes(*shapes)
            out = s
    return out


def _broadcast_same_rank(shapes):
    """The broadcast shape of shapes of one rank (0-d ones aside) whose dims agree or are 1
    (a (B, 1) mask over (B, N)); None for anything else (np.broadcast_shapes decides)."""
    shapes = [s for s in shapes if s]
    rank = len(shapes[0])
    out = list(shapes[0])
    for s in shapes[1:]:
        if len(s) != rank:
            return None
        for d, n in enumerate(s):
            if n != out[d]:
                if out[d] == 1:
                    out[d] = n
                elif n != 1:
                    return None
    return tuple(out)


def _operand(v, other):
    if isinstance(v, np.generic):
        return np.asarray(v)
    if type(v) in (float, int) and isinstance(other, np.ndarray) and other.dtype.kind == "f":
        if -65504 <= v <= 65504:    # (float16's range: no dtype overflows, no errstate)
            return np.asarray(v, other.dtype)
        with np.errstate(over="ignore"):
            return np.asarray(v, other.dtype)
    return v
