"""Numbers in the Python state a compiled function reaches that the function changes at each
call: a hand-written optimiser's step count (`self.t += 1`), a scheduler's `last_epoch`, a
global step counter. A compiled call runs no Python, so such a number is replayed: a traced
run that changed a number slot to another number of its type (attr_writes: Slots.counters)
makes that slot dynamic, as a number argument that changes is (symbolic_args.py); so does a
number the caller changes between calls (a scheduler stepped by the loop whose last lr the
step prints, a loss weight annealed on the module: newly_dynamic). From then
on the guard walk gives its number as an input of the graph (guards.collect: a 0-d float64
or int64 tensor, guarded by its type alone), the trace runs with a SymbolicScalar standing
in the slot, so `self.t += 1` and what is computed from it (Adam's bias corrections
`1 - beta ** t`) are graph values, and the stand-in the run leaves there is an output each
compiled call writes back as a Python number (attr_writes: Write.numbers).

Soundness is the stand-in's (runtime/symbolic_scalar.py): a read of its value (an index,
a format, a branch other than a comparison with a number, whose outcome is guarded) ends
the trace with ScalarEscape and the slot is guarded by value for good; so does a stand-in
left anywhere a call cannot replay (a list it was appended to: the side-effect check), after
the run's effects are put back. The traced run itself ends with each slot holding the
number eager's run would (`settle`)."""
import contextlib
import weakref

from ..runtime import trace_state
from ..runtime.symbolic_scalar import HYPER_READS, ITEM_READS, ScalarEscape, SymbolicScalar
from .attr_write_replay import _bind, _child, _resolve, _slots, _value
from .attr_writes import Slots
from . import caller_lists, math_stand_ins, py_draws, symbolic_args, type_reads
from .guards import signature_names


def newly_dynamic(cf, guards, args, kwargs, entered):
    """Note the Python numbers (int and float, not bool) the guard walk found in the state
    the call reaches, in a call no entry serves; make those that another number now holds
    on the same object (the loop changed it in place: a scheduler stepped by the loop whose
    last lr the step prints, a loss weight or a temperature annealed on the module) dynamic,
    as a number argument that changes is: one more trace, not one per value (and eager
    calls past the recompile limit). A number of another object at that path (a new model
    bound to the captured name, the next of several layers given) stays guarded by value,
    as does one no stand-in can take the place of (in a tuple, an optimiser's group). True
    if one became so (the caller collects the call again). The arguments' numbers first
    (symbolic_args.newly_dynamic)."""
    if symbolic_args.newly_dynamic(cf, args, kwargs, entered):
        return True
    if caller_lists.newly_grown(cf, guards, args, kwargs):     # (a History's losses list)
        return True
    own = {name for name, _ in signature_names(cf.fn, args, kwargs)}
    seen, now = cf._numbers_seen, {}
    for path, g in guards:
        if type(g) is tuple and len(g) == 2 and g[0] in ("int", "float") and \
                path not in own and path not in cf._dynamic and path not in cf._static:
            first = seen.get(("slot", path))
            if first is None or first[0] != g:
                now[path] = g
    if not now:
        return False
    owners, changed = _owners(cf, args, kwargs, set(now)), []
    for path, g in now.items():
        first = seen.get(("slot", path))
        if first is not None and _same(first[1], owners.get(path)):
            changed.append(path)
        else:       # (first seen, or another object's: compared with this one from now on)
            seen[("slot", path)] = (g, owners.get(path))
    return bool(changed) and mark(cf, changed, entered)


def _owners(cf, args, kwargs, paths):
    """{path: a weak reference to (or the id of) the object nearest above the number slot at
    path (a module, a scheduler: not the list or dict that holds the number)} of the paths
    whose slot can hold a stand-in (Slots.find)."""
    slots = Slots(cf.fn, args, kwargs)
    at = {id(h): (root, steps) for h, root, steps, _, _ in slots.places}
    out, bound = {}, [None]
    for path, (holder, _) in slots.find(paths).items():
        if isinstance(holder, str):         # (a global name or a closure cell: its own)
            out[path] = ("name", path)
            continue
        root, steps = at[id(holder)]
        try:
            v = _resolve(root, cf.fn, args, kwargs, bound)
            owner = v
            for k in steps:
                v = _child(v, k)
                if not isinstance(v, (list, tuple, dict)):
                    owner = v
        except (LookupError, AttributeError, TypeError, ValueError):
            continue                # (not found again: the number stays guarded by value)
        try:
            out[path] = weakref.ref(owner)
        except TypeError:
            out[path] = ("id", id(owner))
    return out


def _same(a, b):
    if a is None or b is None:
        return False
    if isinstance(a, weakref.ref) and isinstance(b, weakref.ref):
        return a() is not None and a() is b()
    return a == b


def mark(cf, paths, entered):
    """Make the number slots at paths (the guard walk's names) dynamic, unless they were
    guarded by value for good or the user's code reads types (symbolic_args: a stand-in
    cannot pass `type(n) is int`); True if one became so (the next call traces with it)."""
    paths = frozenset(paths) - cf._static - cf._dynamic
    if not paths:
        return False
    if type_reads.reads_types(cf, entered):
        cf._static = cf._static | paths
        return False
    cf._dynamic = cf._dynamic | paths
    symbolic_args._forget_fast_paths(cf)
    return True


@contextlib.contextmanager
def standing_in(cf, tensors, args, kwargs, entered=()):
    """symbolic_args.standing_in, with a stand-in in each dynamic number slot the call
    reaches as well (each holds its number again when the block ends), and an optimiser's
    float hyper-parameter read by the user's code, or its t.item(), as one (runtime/hypers.py,
    tracer/item_reads.py), unless such a read's number was read before or the user's code
    reads types (a stand-in would fail `type(v) is float`): then it is a value guard."""
    # (math.sqrt / cos / floor of a stand-in: traced, not a read of its number)
    with symbolic_args.standing_in(cf, tensors, args, kwargs) as call, \
            math_stand_ins.standing_in():
        placed = _place(cf, tensors, args, kwargs)
        flags = symbolic_args._active
        reads_types = type_reads.reads_types(cf, entered)
        if reads_types:
            cf._static = cf._static | {HYPER_READS, ITEM_READS}
        flags.hyper_reads, flags.made = HYPER_READS not in cf._static, frozenset()
        flags.item_reads = ITEM_READS not in cf._static
        flags.read_sites, flags.site_counts = cf._static, {}
        # (and a value's text is no RenderedText: rendered_text.active)
        outer, trace_state.state.types_read = trace_state.state.types_read, reads_types
        # (a method left out of reads_types that runs: type_reads.check)
        watching, type_reads.watching.cf = type_reads.watching.cf, None if reads_types else cf
        try:
            with py_draws.standing_in(cf, reads_types):     # (random.random(): py_draws.py)
                yield call
        finally:
            trace_state.state.types_read = outer
            type_reads.watching.cf = watching
            _settle(placed)
            # (a hyper-parameter read as a stand-in is a path the trace stands on: retry)
            cf._tracing_symbolic |= flags.made
            flags.hyper_reads = flags.item_reads = False
            flags.made, flags.read_sites, flags.site_counts = frozenset(), frozenset(), {}


def _place(cf, tensors, args, kwargs):
    """Put a SymbolicScalar of its input into each dynamic slot (not an argument) that holds a
    number; -> the slots placed."""
    inputs = {p: t for p, t in tensors if p in cf._dynamic and p not in cf._tracing_symbolic}
    if not inputs:
        return []
    placed, unplaced = [], set(inputs)
    for path, slot in Slots(cf.fn, args, kwargs).find(inputs).items():
        value = _get(slot)
        if type(value) is SymbolicScalar and any(h is slot[0] and k == slot[1] for h, k in placed):
            unplaced.discard(path)      # (the slot under another path: Slots.aliases)
            continue
        if type(value) not in (int, float):
            continue
        _put(slot, SymbolicScalar(inputs[path], value, path))
        placed.append(slot)
        unplaced.discard(path)
        cf._tracing_symbolic.add(path)
    if unplaced:
        # a slot its input stands for that holds no stand-in (an optimiser's param group
        # entry: Slots does not reach into it) would be read as this call's number, baked
        # into the trace while the guard takes any number: guarded by value instead
        # (symbolic_args.retry: the call is collected again)
        _settle(placed)
        path = min(unplaced)
        cf._tracing_symbolic.add(path)
        raise ScalarEscape(path, "its slot cannot hold a stand-in")
    symbolic_args._active.active = bool(cf._tracing_symbolic)
    return placed


def _settle(placed):
    for slot in placed:
        value = _get(slot)
        if type(value) is SymbolicScalar:   # (left as placed, or a run that did not finish)
            _put(slot, value.value)


def _get(slot):
    holder, key = slot
    return _value(key) if holder == "name" else _slots(holder)[key]


def _put(slot, value):
    holder, key = slot
    if holder == "name":
        _bind(key, value)
    else:
        _slots(holder)[key] = value
