"""torch.arange while a compiled function is traced: one `arange` node whose numbers are
attributes, and the window `arange(p, p + n)` of an int p that compile made an input.

A ring buffer's write pointer (`idx = torch.arange(self.position, self.position + n) %
capacity`) moves every call; compile makes such a number an input after its second value
(compile/symbolic_args.py), and arange reading it would specialise the trace to each value
(a trace per step, then eager calls past the recompile limit). Its length end - start is
what the shape needs: the trace records arange(0, end - start, step) + start (int64, the
same values eager's np.arange gives) with a guard that end - start keeps this call's value,
so every pointer position runs the one trace (torch.compile's automatic dynamic ints do
likewise). Other bounds (floats, a float or narrower dtype, requires_grad, a stand-in
step) read the numbers as before."""
import numpy as np

from ..ir import OPS
from . import dtypes, ranges, trace_state
from .creation_checks import requiring_grad
from .dispatch import call
from .symbolic_scalar import SymbolicScalar

_PLAIN_BOUND = 2 ** 62      # (a plain int bound farther out: eager's numbers, read)


def arange_node(start, step, n, dtype, requires_grad):
    """The traced arange of n values start + step * i (ints) in dtype."""
    t = call(OPS["arange"], (), {"start": int(start), "step": int(step), "size": n,
                                 "dtype": dtype.name})
    return requiring_grad(t) if requires_grad else t


def _int_bound(v):
    return type(v) is SymbolicScalar and type(v.value) is int or \
        type(v) is int and abs(v) < _PLAIN_BOUND


def shifted_arange(start, end, step, dtype, requires_grad):
    """arange(start, end, step) traced as arange(0, end - start, step) + start where start or
    end is an int stand-in (the other an int or one too), step an int and the result int64;
    else None (the caller reads the numbers)."""
    if trace_state.state.tracer is None or \
            type(start) is not SymbolicScalar and type(end) is not SymbolicScalar:
        return None
    if requires_grad or type(step) is not int or not (_int_bound(start) and _int_bound(end)) \
            or dtype is not None and dtypes.to_dtype(dtype) is not dtypes.int64:
        return None
    width = end - start         # (recorded: int64, checked against Python's int)
    length = width.value if type(width) is SymbolicScalar else width
    if type(width) is SymbolicScalar and not width == length:   # (a guard on the length)
        return None
    n = ranges.arange_size(0, length, step, np.int64)     # (PyTorch's errors: the sign)
    return arange_node(0, step, n, dtypes.int64, False) + start
