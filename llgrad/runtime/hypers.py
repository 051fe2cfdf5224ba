"""Optimiser hyper-parameters that a compiled step reads at each call instead of baking in.

A learning-rate schedule changes `param_groups[i]['lr']` between training steps (and
OneCycleLR the momentum or Adam's betas): as a guarded Python number each new value would
trace the step again. An optimiser names the keys a schedule may change (its
`dynamic_hypers`) and keeps its groups as ParamGroup dicts; the guards (compile/guards.py)
see a float there as an input of the graph, a 0-d float64 tensor made from the value at each
call (`hyper_input`), keeping only whether it is zero in the guard key, and the optimiser's
step reads it with `hyper(group, key)`: the number eagerly, that input while tracing.

Whatever else reads such a float while a compiled function is traced (the user's code
logging the lr, scaling it, a scheduler's list of last lrs) reads through ParamGroup's
accessors a SymbolicScalar of its input (runtime/symbolic_scalar.py): arithmetic on it is
recorded, and a read of its number (a format, a branch) ends the trace, after which such
reads make the value a guard of the trace (the compiled code then serves that value only).

A traced function may set a float hyper-parameter itself (a warm-up written into the step:
`for g in opt.param_groups: g["lr"] = base * min(1.0, (it + 1) / warmup)`): the value
written is a Python number, which the entry's guards determine, or a SymbolicScalar (the
arithmetic of a number argument that changes between calls, runtime/symbolic_scalar.py),
a value of the graph. The rest of the trace reads what was written (hyper() gives the
number, or the stand-in's graph value), and every compiled call writes it again
(compile/attr_writes.py: the constant, or the graph's output as a Python float); the
traced run's own group is left holding the number eager's would (`settle`). Any other
write (a tensor, a tuple such as betas, an int stand-in) stops the trace (the call runs
eagerly, with a warning)."""
import os
import sys
import threading

import numpy as np

from . import trace_state
from .symbolic_scalar import HYPER_READS, SymbolicScalar, stand_ins
from .tensor import Tensor


class _Inputs(threading.local):
    def __init__(self):
        self.by_slot = {}           # (id(group), key, index or None) -> the call's tensor
        self.written = {}           # (id(group), key, None) -> (group, key) the trace wrote


_inputs = _Inputs()


def _reset():
    _inputs.by_slot, _inputs.written = {}, {}


def new_call():
    """Forget the previous call's inputs (the guard walk of a call starts; a walk made while a
    trace records, of the traced run's state, keeps the trace's own)."""
    if trace_state.state.tracer is None:
        _inputs.by_slot = {}


_FLOATS = (float, np.float64)


def dynamic_slots(group):
    """[(key, index or None, value)] of group's dynamic hyper-parameters that are Python
    floats or NumPy float64s (a tuple's floats one by one, index their position; its tensors,
    inputs already, are left out: OneCycleLR writes a float beta1 beside a tensor beta2), in
    the group's key order. (A float64 computes as a float does: DINO's schedules are NumPy
    arrays whose items the loop writes into the groups.)"""
    out = []
    dyn = group.dynamic
    for key in dict.__iter__(group):
        if key not in dyn:
            continue
        v = dict.__getitem__(group, key)
        if type(v) in _FLOATS:
            out.append((key, None, v))
        elif type(v) is tuple and any(type(e) in _FLOATS for e in v) and \
                all(type(e) in _FLOATS or isinstance(e, Tensor) for e in v):
            out.extend((key, i, e) for i, e in enumerate(v) if type(e) in _FLOATS)
    return out


def hyper_input(group, key, index, value, register=True):
    """The graph input standing for group[key] (or its index-th element) in this call; the
    full guard walk registers it for hyper() to find while the call is traced (a compiled
    walker's, register=False, serves a call that runs compiled code)."""
    t = Tensor._from_array(np.array(value, dtype=np.float64))
    slot = (id(group), key, index)
    t.__dict__["_llgrad_hyper"] = slot      # (the same input in every walk: guards.identity)
    if register and trace_state.state.tracer is None:
        _inputs.by_slot[slot] = t
    return t


def trace_inputs(tensors):
    """The trace of a call starts with `tensors` [(path, Tensor)] as its inputs: hyper()
    finds the hyper-parameter inputs among them (whatever walk made them)."""
    _inputs.by_slot = {t.__dict__["_llgrad_hyper"]: t for _, t in tensors
                       if "_llgrad_hyper" in t.__dict__}
    _inputs.written = {}


def settle():
    """After a traced run: each group slot the run wrote with a stand-in holds its number,
    as eager's would (the entry has taken what was written: attr_writes.py)."""
    for group, key in _inputs.written.values():
        value = dict.get(group, key)
        if type(value) is SymbolicScalar:
            dict.__setitem__(group, key, value.value)
        elif type(value) is tuple and any(type(e) is SymbolicScalar for e in value):
            dict.__setitem__(group, key, tuple(e.value if type(e) is SymbolicScalar else e
                                               for e in value))
    _inputs.written = {}


def written_number(group, key):
    """Whether the running trace wrote group[key] with a number it replays (hyper()'s
    value from then on)."""
    return (id(group), key, None) in _inputs.written


def walker_input(group, key, index, value):
    return hyper_input(group, key, index, value, register=False)


class HyperSlot:
    """A dynamic slot of a ParamGroup met by a guard walk: group[key] (its index-th
    element), whose value is a graph input, not a guard."""
    __slots__ = ("group", "key", "index", "value")

    def __init__(self, group, key, index, value):
        self.group, self.key, self.index, self.value = group, key, index, value

    def path(self, group_path):
        """The leaf path pytree.flatten gives the slot under group_path."""
        tail = "" if self.index is None else f"_{self.index}"
        return f"{group_path}_{self.key}{tail}"


def slots_of(group):
    """group's dynamic slots as HyperSlots, or () for a plain dict."""
    if type(group) is not ParamGroup or not group.dynamic:
        return ()
    return [HyperSlot(group, k, i, v) for k, i, v in dynamic_slots(group)]


def slots_within(v, path):
    """{leaf path: HyperSlot} of the optimiser groups (ParamGroup) within the container v
    (an optimiser's param_groups list), named as pytree.flatten names their leaves."""
    out, stack = {}, [(v, path)]
    while stack:
        c, p = stack.pop()
        for s in slots_of(c):
            out[s.path(p)] = s
        if isinstance(c, dict):
            items = [(k if isinstance(k, (str, int)) else i, x)
                     for i, (k, x) in enumerate(dict.items(c))]
        elif isinstance(c, list) or (isinstance(c, tuple) and not hasattr(c, "_fields")):
            items = list(enumerate(c))
        else:
            continue
        stack.extend((x, f"{p}_{n}") for n, x in items if isinstance(x, (list, tuple, dict)))
    return out


def _traced(group, key, index):
    tracer = trace_state.state.tracer
    if tracer is None or type(group) is not ParamGroup:
        return None
    t = _inputs.by_slot.get((id(group), key, index))
    if t is not None and not tracer.knows(t):      # (never a constant in its place)
        tracer.graph_break(f"the optimiser's {key!r} was not an input of this trace")
    return t


def hyper(group, key):
    """group[key] for an optimiser's own arithmetic: while a trace records, the graph input
    that stands for it (a tuple of them for a tuple such as betas), else the value."""
    v = dict.__getitem__(group, key)
    if trace_state.state.tracer is None or type(group) is not ParamGroup:
        return v
    if type(v) is tuple and (id(group), key, None) in _inputs.written:
        return tuple(e.tensor if type(e) is SymbolicScalar else e for e in v)
    if type(v) is tuple:
        ts = tuple(e if isinstance(e, Tensor) else _traced(group, key, i)
                   for i, e in enumerate(v))
        if any(t is None for t in ts):
            return v
        _in_range(group, key, [e for e in v if not isinstance(e, Tensor)])
        return ts
    if (id(group), key, None) in _inputs.written:
        return v.tensor if type(v) is SymbolicScalar else v     # (what the trace wrote)
    t = _traced(group, key, None)
    if t is not None:
        _in_range(group, key, (v,))
    return v if t is None else t


FLOAT32_MAX = float(np.finfo(np.float32).max)


def past_float32(v):
    """Whether v is finite and past float32's range (a guard of the walk, guards.py)."""
    return abs(v) > FLOAT32_MAX and v - v == 0


def refused_in_step(key, v):
    """Whether the optimiser's step refuses v with its own check (Adam's beta2 past [-1, 1],
    optim/adam.py): the guard key tells such a beta apart (guards.py, guard_walker.py), so
    that a compiled call with it traces again and runs the check, not the graph."""
    return key == "betas" and abs(v) > 1


def _in_range(group, key, values):
    """Beside float32 parameters, a number past float32's range runs eagerly (a graph
    break; the guard key tells such numbers apart, so the entries of others serve none):
    eager's update checks it or rounds it to inf op by op (add_'s alpha refuses it: "value
    cannot be converted to type float without overflow"), where the graph would cast its
    float64 input to float32. (A step on float16 parameters is not traced: optim/_hooks.)"""
    past = [v for v in values if past_float32(v)]
    if past and any(isinstance(p, Tensor) and p.dtype.name == "float32"
                    for p in dict.get(group, "params", ())):
        trace_state.state.tracer.graph_break(
            f"the optimiser's {key!r} ({past[0]!r}) is past float32's range, which its "
            "parameters' updates check op by op")


def raw(group, key):
    """group[key] as the Python value, for a decision the guard key already holds (whether
    it is zero), without making it a value guard."""
    return dict.__getitem__(group, key)


_HERE = __file__
_PYTREE = os.path.join("tracer", "pytree.py")
# the guard machinery, which reads a group's values to see what a call depends on (the
# walk, the snapshot, the slots written): any other reader while tracing, llgrad's own
# code included (an optimiser's state_dict()), gets a value guard
_GUARD_FILES = tuple(os.path.join("compile", f) for f in (
    "guards.py", "guard_walker.py", "attr_writes.py", "snapshot.py", "side_effects.py",
    "readable.py", "function_reads.py", "walker_code.py", "attr_write_replay.py",
    "guard_expressions.py"))


# the snapshot of a traced run's Python state, whose restore (after tracing the branch of a
# tensor `if` that eager does not take) puts back the values the trace started from
_RESTORE_FILES = (os.path.join("compile", "snapshot.py"),)


def _by_guards(files=_GUARD_FILES):
    """Whether the read (or write) in progress is the guard machinery's: the nearest frame
    outside this file and pytree's flatten is in one of `files`."""
    f = sys._getframe(2)
    while f is not None and (f.f_code.co_filename == _HERE or
                             f.f_code.co_filename.endswith(_PYTREE)):
        f = f.f_back
    return f is not None and f.f_code.co_filename.endswith(files)


def _read(group, key, value):
    """A read of group[key] that is not hyper(): while tracing, its value becomes a guard
    (unless the guard machinery reads it)."""
    tracer = trace_state.state.tracer
    if tracer is None or key not in group.dynamic or _by_guards() or \
            (id(group), key, None) in _inputs.written:
        return value
    if type(value) is tuple:        # (Adam's betas: an item per element)
        out = tuple(_read_number(tracer, _traced(group, key, i), e) for i, e in enumerate(value))
        return out if any(type(e) is SymbolicScalar for e in out) else value
    return _read_number(tracer, _traced(group, key, None), value)


def _read_number(tracer, t, value):
    """A traced slot's number (t its input, or None): a stand-in of the input where reads
    stay graph values (`g["lr"] * 0.9` written back, a scheduler's list of last lrs,
    OneCycleLR's `(momentum, *g["betas"][1:])`), else guarded by value."""
    if t is not None and stand_ins.hyper_reads and type(value) is float:
        stand_ins.made, stand_ins.active = stand_ins.made | {HYPER_READS}, True
        return SymbolicScalar(t, value, HYPER_READS)
    if t is not None:
        tracer.guard(t, value)
    return value


_NO_VALUE = object()


def _write(group, key, value=_NO_VALUE):
    """A write of group[key]: while tracing, a dynamic one is noted where compiled calls
    replay it (a Python number, a float stand-in, into a float slot) and stops the trace
    otherwise, unless it is the snapshot putting back the value the trace started from."""
    tracer = trace_state.state.tracer
    if tracer is not None and key in group.dynamic and \
            any(k == key for k, _, _ in dynamic_slots(group)) and \
            not _by_guards(_RESTORE_FILES):
        if _replayable(value) or (type(value) is tuple and all(map(_replayable, value)) and
                                  len(value) == len(dict.__getitem__(group, key))):
            _inputs.written[(id(group), key, None)] = (group, key)
            return
        tracer.graph_break(f"a write of an optimiser's param group {key!r} inside the "
                           "compiled function (compiled calls read it, they do not replay "
                           "writes to it)")


def _replayable(value):
    """Whether compiled calls can write value into a float hyper-parameter slot (or into
    one element of a tuple of them, Adam's betas): a number (a NumPy float64 too: ConvMixer's
    `np.interp(...)[0]` learning rate), or a float stand-in."""
    return type(value) in (int, float, np.float64) or \
        (type(value) is SymbolicScalar and type(value.value) is float)


class ParamGroup(dict):
    """An optimiser's parameter group: a dict (as PyTorch's), which knows the keys a
    schedule may change between compiled calls (`dynamic`), and reports reads and writes of
    them made while a trace records (see the module's docstring)."""
    __slots__ = ("dynamic",)

    def __init__(self, *args, dynamic=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.dynamic = frozenset(dynamic)

    def __reduce_ex__(self, protocol):
        return (_rebuild, (dict(dict.items(self)), tuple(self.dynamic)))

    # reads (while tracing, the dynamic ones become value guards)
    def __getitem__(self, key):
        return _read(self, key, dict.__getitem__(self, key))

    def get(self, key, default=None):
        return _read(self, key, dict.get(self, key, default))

    def __iter__(self):         # (a Python __iter__: dict(group), {**group} read items here)
        return dict.__iter__(self)

    def items(self):
        return [(k, self[k]) for k in dict.__iter__(self)]

    def values(self):
        return [self[k] for k in dict.__iter__(self)]

    def copy(self):
        return dict(self.items())

    def __repr__(self):
        return repr(dict(self.items()))

    def __eq__(self, other):
        return dict(self.items()) == other

    def __ne__(self, other):
        return not self == other

    __hash__ = None

    # writes (while tracing, a write to a dynamic one stops the trace)
    def __setitem__(self, key, value):
        _write(self, key, value)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key):
        _write(self, key)
        dict.__delitem__(self, key)

    def update(self, *args, **kwargs):
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def pop(self, key, *default):
        if key in self:
            _write(self, key)
        return dict.pop(self, key, *default)

    def popitem(self):
        if dict.__len__(self):
            _write(self, next(reversed(dict.keys(self))))
        return dict.popitem(self)

    def clear(self):
        for k in list(dict.__iter__(self)):
            _write(self, k)
        dict.clear(self)


def _rebuild(items, dynamic):
    return ParamGroup(items, dynamic=dynamic)
