"""The user's math.sqrt, cos, exp and floor of a stand-in number while a trace runs.

A number the traced function reads from its state and changes each call (an optimiser's
`state["step"]`) is traced as a SymbolicScalar (symbolic_slots.py); math's C functions read
its value (float()), which ends the trace and guards the number by value: a hand-written
AdamW's `step_size = lr * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)` (Hugging Face's
classic AdamW, AdaHessian, RAdam) then traced once per step and ran eagerly from the
recompile limit on. While a trace runs, `standing_in()` puts wrappers in the math module in
the place of those functions: a SymbolicScalar argument gets runtime/symbolic_math.py's
traced version (math's number to the bit, or the number read where it cannot be), any other
argument math's own function. Other threads calling them meanwhile get math's result too
(the wrapper compares equal to the function it wraps). A function bound before the trace
(`from math import sqrt`) is not reached: its stand-in escapes, as before."""
import contextlib
import math
import threading

from ..runtime import symbolic_math
from ..runtime.symbolic_scalar import SymbolicScalar

_TRACED = {"sqrt": symbolic_math.sqrt, "cos": symbolic_math.cos, "exp": symbolic_math.exp,
           "floor": symbolic_math.floor}
_lock = threading.Lock()
_active = [0]                   # traces under way, all threads (the wrappers are in place
_originals = {}                 # while it is not 0)


class _MathWrapper:
    """math.<name> while a trace runs: a plain object, equal to (and hashing as) the
    function it wraps."""

    def __init__(self, name, fn):
        self.__wrapped__, self.__name__, self.__doc__ = fn, name, fn.__doc__
        self.__qualname__ = name
        self._traced = _TRACED[name]

    def __call__(self, *args):
        if len(args) == 1 and type(args[0]) is SymbolicScalar:
            return self._traced(args[0])
        return self.__wrapped__(*args)

    def __eq__(self, other):
        return other is self or other is self.__wrapped__

    def __hash__(self):
        return hash(self.__wrapped__)

    def __repr__(self):
        return repr(self.__wrapped__)


@contextlib.contextmanager
def standing_in():
    """math's sqrt, cos, exp and floor wrapped while the block runs (see the module)."""
    with _lock:
        if _active[0] == 0:
            for name in _TRACED:
                fn = getattr(math, name)
                if not isinstance(fn, _MathWrapper):
                    _originals[name] = fn
                    setattr(math, name, _MathWrapper(name, fn))
        _active[0] += 1
    try:
        yield
    finally:
        with _lock:
            _active[0] -= 1
            if _active[0] == 0:
                for name, fn in _originals.items():
                    setattr(math, name, fn)
                _originals.clear()
