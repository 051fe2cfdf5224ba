"""Whether the user's code a compiled function runs may read a Python number's type: a
SymbolicScalar standing for a number (symbolic_args.py, symbolic_slots.py) cannot pass
`type(beta) is float` (isinstance holds), nor a RenderedText `type(s) is str`, so such a
function keeps its numbers guarded by value.

Which code counts is what the call can run: the compiled function's own code and the
user's functions it reads (captured_reads), the functions held as values in the containers
and objects the guard walk entered (a callback list, a module's hooks: called by whoever
holds them) and the methods of those objects' classes. The methods are many (an
`__repr__` with `type(self).__name__`, an init helper's `if type(m) == nn.Linear`) and
most never run in the step, so a method that names `type` (or its helpers do) and sits
in its class as a plain function is watched rather than counted: during the trace it is
replaced in its class by ran_functions' recorder, which calls `check` first. A watched
method that runs in a trace made with stand-ins ends the trace (ScalarEscape: the run's
effects are put back and its numbers guarded by value, symbolic_args.retry); one that
runs before any stand-in exists turns them off for the rest of the run. Either way the
compiled function reads types from then on (TYPES_READ in its static set).

A method called other than through its class (a bound method kept in a list, in a
closure or a global) is one of the values above, counted as the code it runs."""
import dis
import functools
import inspect
import threading

from ..runtime import trace_state
from ..runtime.symbolic_scalar import HYPER_READS, ITEM_READS, ScalarEscape, stand_ins
from .class_state import user_classes
from .function_reads import captured_reads, class_functions, user_function
from .method_marks import KEPT, recorded

_TYPE_READS = frozenset(("type", "isscalar"))
# in a compiled function's static set: a watched method ran in one of its traces
TYPES_READ = "a method naming type() ran"


class _Watching(threading.local):
    cf = None       # the compiled function whose trace (with no type reads) runs here


watching = _Watching()


def reads_types(cf, entered):
    """Whether the code cf's call can run names `type` or `isscalar`, the watched methods
    of the entered objects' classes left out (see the module)."""
    if TYPES_READ in cf._static:
        return True
    fn = cf.fn
    fns = [getattr(fn, "__func__", fn), getattr(type(fn), "forward", None)]
    fns += _follows(fn)
    for cls in _classes(entered):
        plain = {f for f, _ in _plain_methods(cls)}
        fns += [f for f in class_functions(cls) if f not in plain]
    fns += [f for o in entered for f in _held_functions(o)]
    return any(names_types(f) for f in fns if user_function(f) is not None)


def readers(cf, entered):
    """{function: [(class, name)]} of the watched methods of the entered objects' classes."""
    own = getattr(cf.fn, "__func__", cf.fn)
    out = {}
    for cls in _classes(entered):
        for f, place in _plain_methods(cls):
            if f is not own and names_types(f):
                out.setdefault(f, []).append(place)
    return out


def _classes(entered):
    """The classes of the entered objects, and the classes entered as values (a config
    class, an autograd.Function), each once."""
    out = {}
    for o in entered:
        if not isinstance(o, (list, tuple, dict)):
            out.setdefault(o if inspect.isclass(o) else type(o))
    return list(out)


def _plain_methods(cls):
    """[(function, (class, name))] of the plain functions cls's user classes hold (each
    class's own: a recorder replaces it there), under names Python looks up as attributes."""
    return [(f, (c, name)) for c in user_classes(cls) for name, v in vars(c).items()
            if name not in KEPT and inspect.isfunction(f := recorded(v))     # (KEPT: counted)
            and user_function(f) is not None]


def _held_functions(o):
    """The user's functions o (a container, an object) holds as values: bound methods,
    functions and partials' functions (called by what holds them, not through a class)."""
    if isinstance(o, dict):
        values = list(o.values())
    elif isinstance(o, (list, tuple)):
        values = list(o)
    elif inspect.isclass(o):        # (its functions are its methods: _plain_methods)
        return []
    else:
        values = list(getattr(o, "__dict__", {}).values())
    values = [getattr(v, "func", v) if type(v) is functools.partial else v for v in values]
    return [getattr(v, "__func__", v) for v in values if inspect.isroutine(v)]


def _follows(f):
    return [v for _, v, kind, _ in captured_reads(f)[1] if kind == "follow"]


def names_types(f):
    """Whether f's code (nested code included), or that of the user's functions it reads,
    names `type` or `isscalar`."""
    f = getattr(f, "__func__", f)
    return any(_code_names_types(getattr(g, "__func__", g).__code__)
               for g in [f] + _follows(f) if user_function(g) is not None)


@functools.lru_cache(maxsize=4096)
def _code_names_types(code):
    codes = [code]
    while codes:
        code = codes.pop()
        if _names_type_reads(code):
            return True
        codes += [c for c in code.co_consts if hasattr(c, "co_names")]
    return False


def _names_type_reads(code):
    names = _TYPE_READS & set(code.co_names)
    if names != {"type"}:
        return bool(names)
    # (co_names holds attribute names too: `.type(` alone is Tensor.type, not the builtin)
    return any(i.argval == "type" and i.opname in ("LOAD_GLOBAL", "LOAD_NAME")
               for i in dis.get_instructions(code))


def check(f):
    """Called by a watched method's recorder before f runs: in a trace of a compiled
    function that does not read types (watching.cf), end the trace where a stand-in or a
    text standing for a value exists (it could meet `type()`), else let none be made from
    here on; the compiled function reads types from now on."""
    cf = watching.cf
    state = trace_state.state
    if cf is None or state.tracer is None:
        return
    watching.cf = None
    cf._static = cf._static | {TYPES_READ, HYPER_READS, ITEM_READS}
    stand_ins.hyper_reads = stand_ins.item_reads = False
    state.types_read = True
    rendering = state.rendering
    if stand_ins.active or (rendering is not None and rendering.pieces):
        # (its path is none of the trace's: retry guards every number it stood for)
        stand_ins.made = stand_ins.made | {TYPES_READ}
        raise ScalarEscape(None, f"{f.__qualname__} (which names type()) ran")
