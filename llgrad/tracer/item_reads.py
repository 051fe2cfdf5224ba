"""What `t.item()` gives while a function is traced: its number, guarded by value (the trace
serves calls where t holds that number), or, in a compiled function's trace
(compile/symbolic_slots.py sets stand_ins.item_reads) and where the user's own code asks, a
SymbolicScalar of t's value (runtime/symbolic_scalar.py): `total += loss.item()` into the
state is then a graph value each compiled call writes back, and `loss.item() < best` a
guarded outcome, not a trace per value. A read of the stand-in's number (a format, a print,
an index) ends the trace, and that .item() read (its line, and its count there) is a value
guard from then on; after compile/symbolic_args.MAX_READ_SITES such reads, all of them are.
llgrad's own code and libraries get the number (they read it to decide)."""
import os
import sys

import numpy as np

from ..runtime import grad_mode, symbolic_math, trace_state
from ..runtime.dtypes import float64, int64
from ..runtime.saved_tensor import _PKG_DIR, _internal, users_file
from ..runtime.symbolic_scalar import ITEM_READS, SymbolicScalar, stand_ins
from ..runtime.tensor import Tensor

# the methods' wrapper of the meta device stands between item() and its caller
_WRAPPERS = frozenset((os.path.join(_PKG_DIR, "runtime", "meta_methods.py"),))
# llgrad's getters that read a number for their caller, deciding nothing themselves: the
# read is the caller's (`scale_before > scaler.get_scale()`, which tells a skipped step, is
# then a guarded outcome, not a trace per scale)
_GETTERS = frozenset(((os.path.join(_PKG_DIR, "amp", "grad_scaler.py"), "get_scale"),))


def item_value(tracer, t, value):
    """t.item() of the tracer's trace, whose number is value (see the module); a stand-in
    only of a float, or an integer tensor that int64 holds in every call (not uint64), and
    not at a read whose number a trace read before (item_site)."""
    if stand_ins.item_reads and (type(value) is float or (
            type(value) is int and t._data.dtype != np.uint64)) and \
            not hasattr(tracer, "parent"):
        site = _users_site()
        if site is not None and site not in stand_ins.read_sites:
            stand_ins.made, stand_ins.active = stand_ins.made | {site}, True
            x = t.detach().reshape(())
            return SymbolicScalar(x.to(float64 if type(value) is float else int64), value, site)
    tracer.guard(t, value)
    return value


def is_item_site(path):
    """Whether a stand-in's path is one t.item() read's (_users_site)."""
    return type(path) is str and path.startswith(ITEM_READS + " at ")


def _users_site():
    """The path of the stand-in of this t.item() read where the code that called it (past
    Tensor.item and wrappers) is the user's (not llgrad's, as user_location's test, nor a
    library's), else None: the read's line and its count among this trace's reads there.
    A read whose number steers Python is then guarded by value from the next trace on, and
    the function's other reads stay stand-ins (a prototypical network's loss reads a class
    id into eq() and, on the same line, the count of its shots into a view's shape)."""
    f = sys._getframe(3)
    while f is not None and (os.path.abspath(f.f_code.co_filename) in _WRAPPERS or (
            os.path.abspath(f.f_code.co_filename), f.f_code.co_name) in _GETTERS):
        f = f.f_back
    if f is None or _internal[f.f_code.co_filename] or not users_file(f.f_code.co_filename):
        return None
    line = f"{ITEM_READS} at {os.path.basename(f.f_code.co_filename)}:{f.f_lineno}"
    seen = stand_ins.site_counts
    seen[line] = k = seen.get(line, 0) + 1
    return f"{line} #{k}"


def number_cast(f, x):
    """`int(x)` / `float(x)` in a function that reads `.item()` (tracer/convert.py rewrites
    the calls: `n += int(correct.item())`, `int(acc.item() * n)`): of a stand-in while
    tracing, a stand-in of the result (runtime/symbolic_math.py: exact, or the number
    read); anything else as Python calls it."""
    if type(x) is SymbolicScalar and (f is int or f is float) and \
            trace_state.state.tracer is not None:
        return (symbolic_math.int_of if f is int else symbolic_math.float_of)(x)
    if f is float and isinstance(x, Tensor):    # (PyTorch's warning, at the user's line)
        trace_state.scalar_conversion_warning(x, grad_mode.state.grad_enabled)
    return f(x)
