"""What a compiled function's call depends on: its tensor inputs (arguments, tensors held
by objects such as modules and optimisers, and the inputs' .grad) and the guard items that
decide which compiled specialisation applies. What the user's functions it reaches read from
closure cells and globals is function_reads.py's."""
import functools
import inspect

import numpy as np

from ..ir.promotion import default_float
from ..tracer.pytree import flatten
from ..runtime import backward_hooks, grad_mode, hypers
from ..runtime.meta_tensor import MetaStorage
from ..runtime.random_state import _Generator, default_generator
from ..runtime.tensor import Tensor
from . import captured_reads_narrow, dict_reads, log, method_marks, numpy_reads, self_reads
from .appended_lists import APPENDED_TO, marked
from .arrays import arrays_as_tensors, wrappable
from .class_state import (Same, bound, class_containers, class_state, held, routine, slotted,
                          user_classes)
from .function_reads import (_children, captured_guards, captured_reads, class_functions,
                             user_function)
from .guard_values import (_SCALARS, Entries, _scalar_set, dynamic_input,  # noqa
                           dynamic_numbers, hooked, identity, inputable, outline, scalar_guard,
                           sharing, without_grads)

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


def sparse_guard(v, path):
    """A sparse tensor's guard item: sparse ops read its indices, and some (to_dense, the dense
    reading) its values, in NumPy, which a trace keeps as constants: both guarded by value
    (its values are an input too); one requiring grad runs eagerly (its values change)."""
    if v.requires_grad or v._sp_values.requires_grad:
        return ("unguarded", f"{path} is a sparse tensor that requires grad")
    return ("sparse", Entries(v))


def _walk(roots, tensors, guards, entered=None, dynamic=frozenset(), only=None, narrow=None):
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
    increments), guarded by their type alone; only: (object, names) of a bound method's
    object entered through those attributes alone (self_reads.py; met again: Reentered);
    narrow: {id(object): (object, names)} of the objects that, met first as a root (what
    the function captures), are entered through those names alone (captured_reads_narrow.py;
    met again other than as a root: Reentered)."""
    seen, first = set(), {}     # first: an object's id -> the path it was first met at
    narrowed = set()            # the ids of the objects entered through narrow's names
    stack = list(reversed(roots))
    n_roots = len(stack)        # (the roots lie below what the walk pushes)
    while stack:
        path, v = stack.pop()
        at_root = len(stack) < n_roots
        n_roots = min(n_roots, len(stack))
        if isinstance(v, Tensor) and v.is_sparse:   # (its values an input, its entries guarded)
            guards.append((path, sparse_guard(v, path)))
            stack.append((f"{path}._sp_values", v._sp_values))
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
                                                    hypers.past_float32(v.value),
                                                    hypers.refused_in_step(v.key, v.value))))
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
                if only is not None and v is only[0] or id(v) in narrowed and not at_root:
                    raise self_reads.Reentered()
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
            names = only[1] if only is not None and v is only[0] else \
                _narrowed(narrow, v) if at_root else None
            if names is not None:       # (the names its method, or the function, uses)
                narrowed.add(id(v))
                items = [(k, x) for k, x in items if k in names]
                guards.append((f"attributes read of {path}", tuple(k for k, _ in items)))
            else:   # (the key holds values alone: cfg.scale = 2. -> cfg.factor = 2. differs;
                # in their order, which a function walked whole may read: vars(cfg))
                guards.append((f"attributes of {path}", tuple(vars(v))))
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


def _narrowed(narrow, v):
    """The names object v is entered through at a root (narrow: _walk's), or None."""
    got = narrow.get(id(v)) if narrow else None
    return got[1] if got is not None and got[0] is v else None


def tensor_keys(d, path):
    """[(path, key)] of the tensors keying dict d, walked as tensors (before d's values)
    so that the guards hold which input each is: a parameter replaced in its group (the
    state of the old one then no longer belongs to it) changes them."""
    return [(f"{path} key {i}", k) for i, k in enumerate(d) if isinstance(k, Tensor)]


def captured_tensors(fn):
    """The tensors fn reads besides its arguments [(name, tensor)]: in its closure cells and
    the globals its code reads, directly or inside containers and objects (a module's
    parameters), and likewise for the user functions found there (helpers it calls). They
    are inputs of the graph like arguments: a parameter trained or written in place between
    calls cannot be baked in as a constant."""
    tensors = []
    _walk(captured_reads(fn)[0], tensors, [])
    return tensors


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
    names = self_reads.read_names(fn) if owner is not None else None
    n_t, n_g, n_e = len(tensors), len(guards), len(entered or ())
    try:
        _walk(roots, tensors, guards, entered=entered, dynamic=dynamic,
              only=None if names is None else (owner, names))
    except self_reads.Reentered:        # (the object met again: walked whole)
        del tensors[n_t:], guards[n_g:]
        if entered is not None:
            del entered[n_e:]
        _walk(roots, tensors, guards, entered=entered, dynamic=dynamic)
    uses = []
    captured, reads = captured_reads(fn, uses)
    n_t, n_g, n_e = len(tensors), len(guards), len(entered or ())
    try:
        _walk(captured, tensors, guards, entered=entered, dynamic=dynamic,
              narrow=captured_reads_narrow.narrowing(uses))
    except self_reads.Reentered:        # (a narrowed object met again: walked whole)
        del tensors[n_t:], guards[n_g:]
        if entered is not None:
            del entered[n_e:]
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
        if type(t._storage) is MetaStorage:     # (a meta tensor has no data: its calls are
            guards.append((f"{path}.device", "meta"))   # not a CPU entry's; a trace breaks)
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
