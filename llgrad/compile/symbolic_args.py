"""Python numbers passed to a compiled function that change between calls: after an argument
has been a second number (torch.compile's automatic dynamic), it is an input of the graph
instead of a guard, and the function is traced with a SymbolicScalar in its place
(runtime/symbolic_scalar.py), so a KL weight annealed every step, a temperature or a step
count costs one more trace, not one per value (and, past the recompile limit, eager calls).

A stand-in cannot pass `type(beta) is float` (isinstance holds), so a function whose code,
or the code of the user's functions and of the methods its call runs, names the builtin
`type` (or NumPy's `isscalar`) keeps its numbers guarded by value (type_reads.py: a method
the step never runs, an `__repr__` naming `type(self)`, does not count); a method or
attribute named `type` (Tensor.type: `mask.type(x.type())`) is no read of a number's type.

A stand-in returned (alone, in tuples, lists and dicts) is an output of the graph that each
compiled call returns as a Python number (returned_stand_ins).

The trace is kept only if it never read the number's value: a read (ScalarEscape), any
exception, a graph break, a SymbolicScalar elsewhere in the result, or Python state the run changed
(where one could have been stored) puts back what the traced run did (snapshot.py) and the
argument is guarded by value for good, as before; the call is traced again, so its result
and effects are eager's (and where that trace breaks the graph for the same reason, the
numbers are inputs again and the calls run eagerly: innocent_break)."""
import contextlib
import inspect
from collections import OrderedDict, defaultdict

import numpy as np

from ..runtime import trace_state
from ..runtime.derived_number import DerivedNumber, is_stand_in
from ..runtime.rendered_text import RenderedText
from ..runtime.symbolic_scalar import ITEM_READS, ScalarEscape, SymbolicScalar, \
    stand_ins as _active
from ..runtime.symbolic_uses import check_returned
from ..tracer.errors import TraceError
from ..tracer.item_reads import is_item_site
from ..tracer.trace import ControlFlowError
from ..tracer.pytree import fields_kind, flatten, remade_dict, remake_dict
from ..tracer.returned import ReturnedScalar
from . import type_reads
from .guards import signature_names, signature_of

_NUMBER_TYPES = (int, float)
# t.item() reads whose numbers steered a trace, each guarded by value from the next on, after
# which all of the function's are (each such read costs a trace)
MAX_READ_SITES = 4


def newly_dynamic(cf, args, kwargs, entered):
    """Note the numbers of cf's arguments in a call about to be traced; True if one of them
    is now dynamic (a second distinct number: the caller collects the call again).
    entered: the objects the guard walk entered (their classes' code is the user's too)."""
    marked = set()
    for path, v in _numbers(cf.fn, args, kwargs):
        if type(v) not in _NUMBER_TYPES or path in cf._dynamic or path in cf._static:
            continue
        seen = cf._numbers_seen.setdefault(path, v)
        if (type(seen), repr(seen)) != (type(v), repr(v)):
            marked.add(path)
    if marked and type_reads.reads_types(cf, entered):
        cf._static = cf._static | marked
        return False
    if marked:
        cf._dynamic = cf._dynamic | marked
        _forget_fast_paths(cf)
    return bool(marked)


@contextlib.contextmanager
def standing_in(cf, tensors, args, kwargs):
    """The traced run's (args, kwargs) (stand_ins); while it runs, what it prints is not
    given if it raises (replayed_output.py: the call is traced again, which prints it)."""
    call = stand_ins(cf, tensors, args, kwargs)
    _active.active = bool(cf._tracing_symbolic)
    try:
        yield call
    finally:
        _active.active = False


def stand_ins(cf, tensors, args, kwargs):
    """(args, kwargs) to trace with: each dynamic argument's number replaced by a
    SymbolicScalar of its input (collect made it); notes which were replaced."""
    cf._tracing_symbolic = set()
    if not cf._dynamic:
        return args, kwargs
    inputs = {p: t for p, t in tensors if p in cf._dynamic}
    try:
        bound = signature_of(cf.fn).bind(*args, **kwargs)
    except (TypeError, ValueError):
        bound = None
    if bound is None:           # (collect's names: arg0, arg1 ... and the keywords)
        args = [SymbolicScalar(inputs[f"arg{i}"], a, f"arg{i}") if f"arg{i}" in inputs
                else a for i, a in enumerate(args)]
        kwargs = {k: SymbolicScalar(inputs[k], v, k) if k in inputs else v
                  for k, v in kwargs.items()}
        cf._tracing_symbolic = {p for p in inputs}
        return tuple(args), kwargs
    for name, v in list(bound.arguments.items()):
        if name in inputs and type(v) in _NUMBER_TYPES:
            bound.arguments[name] = SymbolicScalar(inputs[name], v, name)
            cf._tracing_symbolic.add(name)
        elif type(v) is tuple and _var_positional(cf.fn, name):     # (*args: its items)
            paths = [f"{name}_{i}" for i in range(len(v))]
            bound.arguments[name] = tuple(
                SymbolicScalar(inputs[p], x, p) if p in inputs and type(x) in _NUMBER_TYPES
                else x for p, x in zip(paths, v))
            cf._tracing_symbolic.update(p for p in paths if p in inputs)
    return bound.args, bound.kwargs


def _var_positional(fn, name):
    try:
        return signature_of(fn).parameters[name].kind is inspect.Parameter.VAR_POSITIONAL
    except (KeyError, TypeError, ValueError):
        return False


def _numbers(fn, args, kwargs):
    """[(path, value)] of the call's arguments, a *args tuple's items each under the guard
    walk's name (args_0, args_1, ...): a number passed through *args (a training step's
    `def step(*batch)` given a mixup weight) changes as a named one does."""
    out = []
    for path, v in signature_names(fn, args, kwargs):
        if type(v) is tuple and _var_positional(fn, path):
            out += [(f"{path}_{i}", x) for i, x in enumerate(v)]
        else:
            out.append((path, v))
    return out


def retry(cf, exc, snapshot, state_only=False, key=None):
    """After a traced run with stand-ins that cannot be kept (exc: what it raised, or None):
    put back what it did, guard its numbers by value from now on, and return True (the
    caller calls again); False where the trace had no stand-ins (or exc is an interrupt).
    state_only (what the run changed in Python state, as text, an optimiser's first step
    making its state, where nothing else went wrong): put back what it did and return
    "eager": the caller runs this call eagerly, the numbers staying inputs (the next call
    traces again), and the recompile-limit warning names the change if none is ever kept."""
    if exc is not None and innocent_raise(cf, exc):
        return False
    paths = cf._tracing_symbolic
    if not paths or (exc is not None and not isinstance(exc, (Exception, ScalarEscape))):
        return False
    if state_only and exc is None:
        cf._not_kept = f"the traced run changed {state_only}"
        cf._tracing_symbolic = set()
        snapshot.restore()
        return "eager"
    if isinstance(exc, ScalarEscape) and exc.path in paths:
        paths = {exc.path}
    if key is not None and isinstance(exc, TraceError) and not isinstance(exc, ControlFlowError):
        # (a graph break: the trace with values, next, tells whether the numbers made it)
        cf._stand_in_break = (paths, str(exc).split("\n")[0], key, cf.n_traces)
    if isinstance(exc, Exception) and not isinstance(exc, TraceError):
        # (the user's own exception: the trace with values, next, tells whether the
        # numbers made it; innocent_raise)
        cf._stand_in_raise = (paths, cf._dynamic & paths, cf._static, type(exc), str(exc),
                              cf.n_traces)
    cf._tracing_symbolic = set()
    cf._sizes.restarted += 1    # (this call is traced again: that trace is what counts)
    snapshot.restore()
    cf._dynamic = cf._dynamic - paths
    cf._static = cf._static | paths
    if sum(map(is_item_site, cf._static)) >= MAX_READ_SITES:
        cf._static = cf._static | {ITEM_READS}      # (every read guarded: retraces bounded)
    _forget_fast_paths(cf)
    return True


def innocent_raise(cf, exc):
    """After retry above made the numbers of a trace that raised the user's exception value
    guards, the call's trace with their values raised the same one: the numbers did not
    cause it, so they are inputs (or stand-in reads) again, as before, and the exception
    goes to the caller as eager's (a step raising on the loss.item() it checks on its first
    call: not a value guard per loss, a trace per call, from then on); else False."""
    record, cf._stand_in_raise = getattr(cf, "_stand_in_raise", None), None
    if record is None or record[5] + 1 != cf.n_traces or type(exc) is not record[3] or \
            str(exc) != record[4]:
        return False
    paths, dynamic, static = record[:3]     # (the trace with stand-ins: retry's `restarted`)
    cf._static = static | (cf._static - paths - {ITEM_READS})
    cf._dynamic = cf._dynamic | dynamic
    _forget_fast_paths(cf)
    return True


def innocent_break(cf, reason):
    """After retry above made the numbers of a trace that broke the graph value guards, the
    call's trace with their values broke it for the same reason: the numbers did not, so
    they are inputs again and the key of the calls with stand-ins runs eagerly, returned
    (SAC's update, given its step count, whose backward reaches the graph that made its
    alpha: not a trace per count up to the recompile limit); else None."""
    record, cf._stand_in_break = getattr(cf, "_stand_in_break", None), None
    if record is None or record[1] != reason or record[3] + 1 != cf.n_traces:
        return None
    paths, _, key, _ = record
    cf._static = cf._static - paths
    cf._dynamic = cf._dynamic | paths
    _forget_fast_paths(cf)
    return key


def returned_stand_ins(result, made=None):
    """result with each stand-in it holds (in tuples, lists, dicts and the dataclasses made
    by the call: made, pytree.made_dataclasses' test) as a ReturnedScalar
    of the stand-in's graph value: a counter the step returns (`return loss, self.step`) is
    an output each compiled call returns as the Python number, not a value guard. Only the
    containers holding a stand-in are copies (one the call also put elsewhere stays itself,
    for attr_writes' check of shared containers). A result over a copy standing for a view
    indexed by a stand-in ends the trace (runtime/symbolic_uses.py)."""
    tracer = trace_state.state.tracer
    if tracer is not None:
        check_returned(tracer, [x for _, x in flatten(result)[0]])
    _check_dicts(result)
    return _returned(result, made)


def _check_dicts(result):
    """Stop the trace where result holds a dict of the user's subclass that a compiled call
    could not give back as eager's (one holding attributes besides its items: a tree remakes
    the others, pytree.remade_dict); a plain dict in its place would differ silently."""
    stack = [result]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if type(v) not in (dict, OrderedDict, defaultdict) and not remade_dict(v) and \
                    not (type(v).__module__ or "").startswith("llgrad"):
                raise TraceError(f"the function returned a {type(v).__name__} (a dict subclass "
                                 "holding attributes besides its items), which a compiled call "
                                 "would give back as a plain dict")
            stack.extend(v.values())
        elif type(v) in (list, tuple) or isinstance(v, tuple) and hasattr(v, "_fields"):
            stack.extend(v)


def _returned(result, made=None):
    if type(result) is SymbolicScalar:
        return ReturnedScalar(result.tensor)
    if type(result) is DerivedNumber:       # (`round(acc.item(), 4)`: its post on each number)
        return ReturnedScalar(result.tensor, result.post)
    if type(result) is RenderedText:        # (`return f"{loss:.3f}"`: each call's text)
        return _returned_text(result)
    if not _returns_stand_in(result, made):
        return result
    if made is not None and made(result):     # (a dataclass: a new one, as compiled calls')
        return fields_kind(type(result), tuple(vars(result)))(
            *(_returned(x, made) for x in vars(result).values()))
    if isinstance(result, dict):
        out = {k: _returned(v, made) for k, v in result.items()}
        return remake_dict(type(result), out) if remade_dict(result) else out
    if hasattr(result, "_fields"):          # (a namedtuple: `Metrics(loss.item(), acc)`)
        return type(result)(*(_returned(x, made) for x in result))
    return type(result)(_returned(x, made) for x in result)


def _returned_text(text):
    """A RenderedText the function returns, as the text of its value each call (a
    ReturnedScalar whose post formats the number); else (a value of several numbers, a text
    also written) the value read, which raises or guards it, and the text as a constant."""
    piece = object.__getattribute__(text, "piece")
    rendering = trace_state.state.rendering
    if piece.tensor._data.size != 1 or rendering is None or piece not in rendering.pending:
        piece.escape()
        return str.__str__(text)
    rendering.pending.remove(piece)
    return ReturnedScalar(piece.tensor, lambda n, render=piece.render: render(np.asarray(n)))


def _returns_stand_in(v, made=None):
    """Whether v is or holds (in plain tuples, namedtuples, lists, dicts and dataclasses
    made by the call) a stand-in."""
    if is_stand_in(v) or type(v) is RenderedText:
        return True
    if type(v) in (list, tuple) or isinstance(v, tuple) and hasattr(v, "_fields"):
        return any(_returns_stand_in(x, made) for x in v)
    if type(v) is dict or remade_dict(v):
        return any(_returns_stand_in(x, made) for x in v.values())
    if made is not None and made(v):
        return any(_returns_stand_in(x, made) for x in vars(v).values())
    return False


def holds_symbolic(result):
    """Whether a SymbolicScalar is in result (its containers walked, without recursion)."""
    stack = [result]
    while stack:
        v = stack.pop()
        if is_stand_in(v):
            return True
        if isinstance(v, (list, tuple, set, frozenset)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif hasattr(v, "__dict__") and not isinstance(v, type) and \
                any(type(x) is SymbolicScalar for x in vars(v).values()):
            return True
    return False


def _forget_fast_paths(cf):
    """The flat keys and the walkers guard numbers by value: a function with dynamic
    arguments takes the full walk (guards.collect)."""
    cf._fast.clear()
    cf._walkers = []
