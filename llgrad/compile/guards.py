"""What a compiled function's call depends on: its tensor inputs (arguments, tensors held
by objects such as modules and optimisers, and the inputs' .grad) and the guard items that
decide which compiled specialisation applies."""
import functools
import inspect

import numpy as np

from ..ir.promotion import default_float
from ..tracer.pytree import flatten
from ..runtime import backward_hooks, grad_mode, hypers
from ..runtime.random_state import _Generator, default_generator
from ..runtime.tensor import Tensor
from . import dict_reads, log, method_marks, numpy_reads
from .appended_lists import APPENDED_TO, marked
from .arrays import arrays_as_tensors, wrappable
from .code_reads import (function_parts, global_names, module_attributes, unguarded_reads,
                         users_file, users_module)
from .class_state import (LIBRARIES as _LIBRARIES, Same, bound, class_containers, class_key,
                          class_state, held, routine, slotted, user_classes)
from .guard_values import (_SCALARS, _scalar_set, dynamic_input, dynamic_numbers,  # noqa
                           hooked, identity, inputable, outline, scalar_guard, sharing,
                           without_grads)

_SMALL_ARRAY = numpy_reads.SMALL
_DICT_VIEWS = (type(type.__dict__), type({}.keys()), type({}.values()), type({}.items()))
WALK_HOOKS = "<the tensors' hooks>"    # (in collect's `dynamic`, which is never a path)


def _is_object(v):
    # (the default generator by identity: its draws and state are the trace's; not another's)
    return hasattr(v, "__dict__") and not (routine(v) or inspect.isclass(v) or inspect.ismodule(v)
                                           or isinstance(v, Tensor) or v is default_generator)


def signature_names(fn, args, kwargs):
    try:
        return list(signature_of(fn).bind(*args, **kwargs).arguments.items())
    except (TypeError, ValueError):
        return [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())


def signature_of(fn):
    """fn's signature; a module's is its forward's (its __call__ takes *args, **kwargs)."""
    forward = getattr(fn, "forward", None)
    if not inspect.isroutine(fn) and inspect.ismethod(forward):
        return inspect.signature(forward)
    return inspect.signature(fn)


def _walk(roots, tensors, guards, entered=None, dynamic=frozenset()):
    """Depth-first over values: tensors are inputs; Python scalars are guarded by value;
    containers are entered (their structure guarded); objects (modules, optimisers) are
    entered through their attributes, each once (iteratively, so deep nesting is fine).

    An object is guarded by its type and what its attributes hold, not by its identity (as
    Dynamo treats modules): another instance with the same attributes (a new loss module
    each call, the next of several identical layers) runs the same compiled code, its own
    tensors as the inputs. Sets of Python scalars are guarded by value; what else the walk
    cannot enter (functions, NumPy arrays) by identity. What the function captures is
    guarded alike (a list it appends to changes its structure: the next call traces).

    The user's functions the walk meets (a module's hooks, a Lambda module's function) and
    the methods of the user's classes whose objects it enters are followed: what they read
    from closure cells and globals is walked as their children (followed_reads), as what
    the compiled function itself reads is: a tensor there is an input, not a constant, and
    a Python value a guard.

    entered: a list that receives every container and object entered (snapshot.py);
    dynamic: the paths whose numbers are inputs (symbolic_args.py: a counter the call
    increments), guarded by their type alone."""
    seen, first = set(), {}     # first: an object's id -> the path it was first met at
    stack = list(reversed(roots))
    while stack:
        path, v = stack.pop()
        if isinstance(v, Tensor) and v.is_sparse:   # (compiled code takes strided tensors)
            guards.append((path, ("unguarded", f"{path} is a sparse tensor")))
        elif isinstance(v, Tensor):
            tensors.append((path, v))
            if v.__dict__ and id(v) not in seen:    # (what the user set on it: x.scale = 2.)
                seen.add(id(v))
                items = sorted(vars(v).items(), key=lambda kv: kv[0])
                guards.append((f"attributes of {path}", tuple(k for k, _ in items)))
                stack.extend((f"{path}_{k}", x) for k, x in reversed(items))
        elif type(v) in (int, float) and path in dynamic and inputable(v):
            tensors.append((path, dynamic_input(v, path)))
            guards.append((path, ("dynamic number", type(v).__name__)))
        elif isinstance(v, _SCALARS):
            guards.append((path, scalar_guard(v)))
        elif type(v) is hypers.HyperSlot:     # (an optimiser's lr: an input, hypers.py)
            guards.append((f"zero or not: {path}", ("hyper", v.value == 0,   # (readable.py)
                                                    hypers.past_float32(v.value))))
            tensors.append((path, hypers.hyper_input(v.group, v.key, v.index, v.value)))
        elif type(v) in _DICT_VIEWS:   # (a mappingproxy, d.keys(): the dict it shows, as one)
            stack.append((f"{path}.mapping", dict(getattr(v, "mapping", v))))
        elif isinstance(v, (list, tuple, dict)):
            if entered is not None:
                entered.append(v)
            if marked(v, path, dynamic):    # (a list calls only append to, not read)
                guards.append((f"structure of {path}", APPENDED_TO))
                continue
            leaves, tree = flatten(v, path)
            at = hypers.slots_within(v, path)
            if at:
                leaves = [(p, at.get(p, x)) for p, x in leaves]
            guards.append((f"structure of {path}", sharing(outline(tree), v, dynamic)))
            stack.extend(reversed(leaves))
            if isinstance(v, dict):     # tensors keying it (an optimiser's state), first:
                stack.extend(reversed(tensor_keys(v, path)))    # which tensor each is counts
        elif type(v) is functools.partial or slotted(v) or bound(v):
            # what a partial calls, and with, a slotted object's attributes, what a method
            # is bound to, are not in a __dict__ (guard_walker.py leaves these to this walk)
            guards.append((path, ("object", type(v))))
            if id(v) not in seen:
                seen.add(id(v))
                items = held(v, path)
                guards.append((f"attributes of {path}", tuple(p for p, _ in items)))
                stack.extend(reversed(items))
        elif isinstance(v, np.ndarray) and not (type(v) is np.ndarray and wrappable(v)):
            guards.append((path, numpy_reads.unwrapped(v)))  # (no input: np.matrix, memmap)
        elif _is_object(v):
            if id(v) in first:  # (met again: which object it is counts, st["m"] = Mode.B)
                guards.append((path, ("the object at", first[id(v)])))
                continue
            first[id(v)] = path
            if entered is not None:
                entered.append(v)
            guards.append((path, ("object", type(v))))
            if user_classes(type(v)):   # (what its class holds: class_state.py)
                guards.append((f"class of {path}", class_state(type(v))))
                stack.extend(reversed(class_containers(type(v), f"type({path})", seen)))
            for f in reversed(class_functions(type(v))):    # (entered after the attributes)
                if id(f) not in seen and method_marks.mark(f) not in dynamic:  # (not run)
                    seen.add(id(f))
                    stack.extend(reversed(_children(f, path)))
            items = sorted(vars(v).items(), key=lambda kv: kv[0])
            stack.extend((f"{path}_{k}", x) for k, x in reversed(items))
        elif type(v) is np.ndarray and wrappable(v):
            # a NumPy array is an input, as a tensor over its memory (the tracer links
            # from_numpy / as_tensor / tensor of it to that input, trace.py): its contents
            # are read at each call; a small one is guarded by its contents too, in case
            # the function computes on it with NumPy
            tensors.append((path, v))      # (made a tensor by arrays_as_tensors)
            if v.size <= _SMALL_ARRAY or numpy_reads.MARK + path in dynamic:  # (a larger one
                # once a trace may have read it with NumPy: numpy_reads.py)
                guards.append((f"contents of {path}", v.tobytes()))
        elif _scalar_set(v):                # (a module's names of non-persistent buffers)
            guards.append((path, (type(v).__name__, frozenset(v))))
        else:
            # (by identity: Same holds v, so no other object takes its id while the entry lives)
            guards.append((path, ("object", type(v).__name__, Same(v))))
            if inspect.isclass(v) and user_classes(v) and id(v) not in seen:
                # a class of the user's read as a value (a config class, an
                # autograd.Function): what it holds guarded as an object's class is, its
                # methods followed, its lists and dicts walked (guard_walker.py alike)
                seen.add(id(v))
                if entered is not None:
                    entered.append(v)
                guards.append((f"class {path}", class_state(v)))
                for f in reversed(class_functions(v)):
                    if id(f) not in seen:
                        seen.add(id(f))
                        stack.extend(reversed(_children(f, path)))
                stack.extend(reversed(class_containers(v, path, seen)))
            if entered is not None and isinstance(v, (np.random.Generator,
                                                      np.random.RandomState, _Generator)):
                entered.append(v)           # (a draw from it: snapshot.foreign_random)
            f = user_function(v)
            if f is not None and id(f) not in seen:
                seen.add(id(f))
                stack.extend(reversed(_children(f, path)))


def tensor_keys(d, path):
    """[(path, key)] of the tensors keying dict d, walked as tensors (before d's values)
    so that the guards hold which input each is: a parameter replaced in its group (the
    state of the old one then no longer belongs to it) changes them."""
    return [(f"{path} key {i}", k) for i, k in enumerate(d) if isinstance(k, Tensor)]


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


def captured_tensors(fn):
    """The tensors fn reads besides its arguments [(name, tensor)]: in its closure cells and
    the globals its code reads, directly or inside containers and objects (a module's
    parameters), and likewise for the user functions found there (helpers it calls). They
    are inputs of the graph like arguments: a parameter trained or written in place between
    calls cannot be baked in as a constant."""
    tensors = []
    _walk(captured_reads(fn)[0], tensors, [])
    return tensors


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


def captured_reads(fn):
    """(roots [(path, value)] the captured tensors are found under, reads): every closure
    cell and global name (and default, code, attribute) that fn and the user functions it
    calls read, in order, as (where, value, kind, path): where ("cell", cell), ("global",
    globals, name) or ("attr", function, name); kind "root" (walked), "follow" (a user
    function, read in turn), "skip" (a module, function, class, Python number, compiled
    function), "empty" (a cell not yet filled), "absent" (a name not in the globals) or
    "unguarded" (value: why no guard can follow what the code reads, code_reads.py)."""
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
            else:
                kind = "skip"
            reads.append((where, v, kind, path))
    return roots, reads


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


def collect(fn, args, kwargs, entered=None, dynamic=frozenset()):
    """-> (tensor inputs [(name, tensor)], guard items [(name, value)], n_own): the first
    n_own inputs are fn's own tensors, the rest their existing .grad; the guard items end
    with one .grad item per own tensor, then the grad mode (without_grads relies on it).
    entered: a list that receives the containers and objects walked (snapshot.py).
    dynamic: the arguments (and the slots of what the walk reaches) whose Python numbers
    are inputs, not guards (symbolic_args.py), and WALK_HOOKS when the tensors' hooks are
    walked too (_walk_hooks: a step whose backward runs them, leaf_hooks.py)."""
    tensors, guards = [], []
    hypers.new_call()
    log.ready()     # (llgrad's own loggers, made inside a trace, are no change of the call's)
    roots, _ = dict_reads.narrowed(fn, signature_names(fn, args, kwargs), dynamic)
    if dynamic:
        roots = dynamic_numbers(roots, dynamic, tensors, guards)
    owner = getattr(fn, "__self__", None) if inspect.ismethod(fn) else \
        (fn if _is_object(fn) else None)        # a bound method's object, or a module
    if owner is not None:
        roots.insert(0, ("self", owner))
    _walk(roots, tensors, guards, entered=entered, dynamic=dynamic)
    captured, reads = captured_reads(fn)
    _walk(captured, tensors, guards, entered=entered, dynamic=dynamic)
    captured_guards(reads, guards, tensors, dynamic)
    if WALK_HOOKS in dynamic:
        _walk_hooks(tensors, guards, entered, dynamic)
    tensors = arrays_as_tensors(tensors)
    firsts = {}
    for path, t in tensors:     # one tensor reached twice is one graph input; its class is
        firsts.setdefault(id(t), path)      # guarded (`isinstance(x, nn.Parameter)` inside)
        guards.append((path, (t._dtype.name, t._data.shape, t.stride(), t.requires_grad,
                              firsts[id(t)], t._grad_fn is None, type(t))))
    tensors = [(p, t) for p, t in tensors if firsts[id(t)] == p]
    grads = []
    for path, t in tensors:     # an existing .grad is state the function may accumulate into
        g = t._grad
        guards.append((f"{path}.grad", None if g is None else
                       (g._dtype.name, g._data.shape, g.stride())))
        if g is not None and id(g) not in firsts:
            grads.append((f"{path}_grad", g))
    # (with the default float dtype: what llgrad.zeros(3) and a Python float make)
    guards.append(("grad mode", (grad_mode.state.grad_enabled, grad_mode.state.inference,
                                 default_float())))
    return tensors + grads, guards, len(tensors)


def _walk_hooks(tensors, guards, entered, dynamic):
    """The tensors' hooks (`register_hook`, AccumulateGrad's) by identity; what function hooks
    read is walked as fn's reads (a step's backward traces them: backward_hooks.py)."""
    done, k = set(), 0
    while k < len(tensors):         # (a hook's captured tensors are inputs too: walked on)
        path, t = tensors[k]
        k += 1
        if not isinstance(t, Tensor) or id(t) in done or not hooked(t):
            continue
        done.add(id(t))
        fns = backward_hooks.leaf_hooks(t)      # (None: its AccumulateGrad node's own hooks)
        guards.append((f"hooks of {path}", fns))
        for f in () if fns is None else fns[0] + fns[1]:    # (plain functions)
            captured, reads = captured_reads(f)
            _walk(captured, tensors, guards, entered=entered, dynamic=dynamic)
            captured_guards(reads, guards, tensors, dynamic)
