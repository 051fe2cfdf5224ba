"""What the user's functions a compiled call reaches read besides its arguments: which
functions the guard walk follows (the user's, not a library's), what each reads from
closure cells, globals, modules and defaults (followed_reads, captured_reads), the guard
items of those values (captured_guards), and the functools caches whose results no guard
can see (cache_reads_state)."""
import functools
import inspect

from .code_reads import (function_parts, global_names, module_attributes, unguarded_reads,
                         users_file, users_module)
from .class_state import LIBRARIES as _LIBRARIES, Same, bound, class_key, routine, user_classes
from .guard_values import _SCALARS, dynamic_input, inputable, scalar_guard


def user_function(v):
    """v's function when v is one of the user's functions (or a method bound to one): the
    walk follows what it reads; else None."""
    f = getattr(v, "__func__", v) if inspect.ismethod(v) else v
    return f if _followed(f) and users_file(f.__code__.co_filename) else None


def class_functions(cls):
    """The user's functions defined by cls and its bases (methods, static and class methods,
    property accessors), each once, in MRO and definition order; () for library classes
    (as the classes define them now: a method replaced is followed)."""
    return _class_functions(class_key(cls))


@functools.lru_cache(maxsize=256)
def _class_functions(functions):
    out = []
    for f in functions:
        if f not in out and user_function(f) is not None:
            out.append(f)
    return tuple(out)


def followed_reads(f):
    """What the user's function f reads from closure cells and globals, in order, as
    (name, kind, key, value): kind "cell" (key: the cell's index), "global" (key: the
    name), "empty" (a cell not yet filled), "absent" (a name not in its globals) or
    "module" (an attribute of one of the user's modules: key (its globals, the name))."""
    out = []
    code = f.__code__
    for i, (name, cell) in enumerate(zip(code.co_freevars, f.__closure__ or ())):
        try:
            out.append((name, "cell", i, cell.cell_contents))
        except ValueError:
            out.append((name, "empty", i, None))
    space = f.__globals__
    for name in global_names(code):
        out.append((name, "global", name, space[name]) if name in space else
                   (name, "absent", name, None))
    for name, attr, mspace in module_attributes(code, space, f.__closure__):
        out.append((f"{name}.{attr}", "module", (mspace, attr), mspace[attr]))
    return out + [(name, "attr", name, v) for name, v in function_parts(f)]


def _children(f, path):
    # (a module of the user's it names is walked through the attributes it reads, as fn's)
    return [(f"{path}_{name}", v) for name, kind, _, v in followed_reads(f) if kind in ("module",
            "attr") or kind in ("cell", "global") and not (inspect.ismodule(v) and users_module(v))]


def _followed(v):
    """A function whose own captured values count as fn's: one of the user's (a helper fn
    calls, or the function a transform wraps), not a library's."""
    return inspect.isfunction(v) and not (v.__module__ or "").startswith(_LIBRARIES)


def captured_guards(reads, guards, tensors=None, dynamic=frozenset()):
    """Guard items for what fn reads from closure cells and globals besides tensors: a
    Python number by value (an input, in tensors, where its path is dynamic: a global step
    counter), a function or class by identity (modules are not guarded), as an argument
    would be. A model's `training`, an optimiser's learning rate and a global step size
    changed between calls re-trace rather than stay baked into the trace (the values inside
    captured objects are guarded by the walk of the captured roots)."""
    for where, v, kind, path in reads:
        if kind == "skip" and inputable(v) and f"captured {path}" in dynamic:
            tensors.append((f"captured {path}", dynamic_input(v, f"captured {path}")))
            guards.append((f"captured {path}", ("dynamic number", type(v).__name__)))
        elif kind == "skip" and isinstance(v, _SCALARS):
            guards.append((f"captured {path}", scalar_guard(v)))
        elif kind == "unguarded":           # (side_effects.unguardable)
            guards.append((f"captured {path}", ("unguarded", v)))
        elif kind in ("skip", "follow") and not inspect.ismodule(v):
            guards.append((f"captured {path}", ("object", type(v).__name__, Same(v))))


def captured_reads(fn, uses=None):
    """(roots [(path, value)] the captured tensors are found under, reads): every closure
    cell and global name (and default, code, attribute) that fn and the user functions it
    calls read, in order, as (where, value, kind, path): where ("cell", cell), ("global",
    globals, name) or ("attr", function, name); kind "root" (walked), "follow" (a user
    function, read in turn), "skip" (a module, function, class, Python number, compiled
    function), "empty" (a cell not yet filled), "absent" (a name not in the globals) or
    "unguarded" (value: why no guard can follow what the code reads, code_reads.py).
    uses: a list that receives (value, function, ref) of each root read, ref ("global" or
    "cell", the name the function's code loads it by) or None (captured_reads_narrow.py)."""
    roots, reads, seen, todo = [], [], set(), [getattr(fn, "__func__", fn)]
    top = todo[0]       # (whose defaults are passed as arguments: defaults.py)
    while todo:
        f = todo.pop()
        code = getattr(f, "__code__", None)
        if code is None or id(f) in seen:
            continue
        seen.add(id(f))
        values = []
        for name, cell in zip(code.co_freevars, getattr(f, "__closure__", None) or ()):
            path = f"{f.__name__}.{name}"
            try:
                values.append((path, cell.cell_contents, ("cell", cell)))
            except ValueError:                      # (a cell not yet filled)
                reads.append((("cell", cell), None, "empty", path))
        space = getattr(f, "__globals__", {})
        for name in global_names(code):
            if name in space:
                values.append((name, space[name], ("global", space, name)))
            else:
                reads.append((("global", space, name), None, "absent", name))
        values += [(f"{name}.{attr}", mspace[attr], ("global", mspace, attr)) for name, attr,
                   mspace in module_attributes(code, space, f.__closure__, libraries=True)]
        own = function_parts(f) if f is not top else [("__dict__", f.__dict__)] \
            if any(x is f for _, x, _ in values) else ()    # (fn reading its attributes)
        values += [(f"{f.__name__}.{n}", v, ("attr", f, n)) for n, v in own]
        cells = {p.rpartition(".")[2]: x for p, x, w in values if w[0] == "cell"}
        reads += [(("global", {}, what), why, "unguarded", what)     # (a call runs eagerly)
                  for what, why in unguarded_reads(code, space, cells)]
        for path, v, where in values:
            why = cache_reads_state(v, path)
            if why is not None:     # (a call runs eagerly)
                reads.append((("global", {}, path), why, "unguarded", path))
                continue
            inner = getattr(v, "fn", None) if hasattr(type(v), "_traced_fn") else None
            if _followed(v) or _followed(inner):   # (a compiled function: what its function
                todo.append(inner or v)             # reads is the caller's, inlined)
                kind = "follow"
            elif bound(v) or not (inspect.ismodule(v) or routine(v) or isinstance(v, _SCALARS)
                                  or (inspect.isclass(v) and not user_classes(v))
                                  or hasattr(type(v), "_traced_fn")):
                roots.append((f"captured {path}", v))
                kind = "root"
                if uses is not None:
                    uses.append((v, f, _ref(f, path, where)))
            else:
                kind = "skip"
            reads.append((where, v, kind, path))
    return roots, reads


def _ref(f, path, where):
    """How f's code loads the value read at where: ("cell", its free name), ("global",
    the name) for a name of f's own globals, else None (a module's attribute, a default)."""
    if where[0] == "cell":
        return ("cell", path.rpartition(".")[2])
    if where[0] == "global" and where[1] is f.__globals__ and "." not in path:
        return ("global", path)
    return None


_CACHE_WRAPPER = type(functools.lru_cache()(len))     # (functools.cache's too)


def cache_reads_state(v, path):
    """Why no guard follows a call of v, a functools cache (lru_cache, cache) over one of the
    user's functions that reads closure cells or globals besides modules, functions and
    classes: what it returns is what those held when it was first called with the same
    arguments (cache_clear() then gives the new values), which no guard sees; else None."""
    f = v.__wrapped__ if type(v) is _CACHE_WRAPPER else None
    if not _followed(f):
        return None
    names = [n for n, kind, _, x in followed_reads(f) if kind in ("cell", "global", "module")
             and not (inspect.ismodule(x) or routine(x) or inspect.isclass(x))]
    return f"it calls {path}, a functools cache over a function that reads {names[0]}, " \
        "whose cached results a compiled call cannot see" if names else None
