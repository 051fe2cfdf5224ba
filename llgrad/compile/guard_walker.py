"""The guard walk of a call with objects, compiled to straight-line Python.

`guards.collect` walks a call's arguments generically: it binds the signature, classifies
every value, sorts every object's attributes and flattens every container, and names each
guard so a recompile can say which one changed. For a training step given a model, an
optimiser and a loss module that is ~350 us a call, longer than the compiled step itself.

A walker is that walk unrolled for one structure, as generated code (as Dynamo compiles its
guards): it reads the same values through direct attribute and item accesses, checks that
the structure is the one it was made for (types, attribute names, container lengths and
keys, which objects and tensors are the same object), and returns (flat key, tensor inputs)
or None when the structure differs (then the full walk runs). The flat key holds what
collect's key holds beyond the structure (Python scalars, the identities of what the walk
does not enter, tensors' dtypes, shapes, strides and requires_grad, their .grad layouts,
the grad mode), so equal
flat keys of one walker mean equal guard keys; the tensors come in collect's order.

Tensors the function reads from its closure and globals (a model held in a global) are
walked too, after the arguments, as collect() walks them; the walker re-reads each cell
and global name and checks it finds the same kind of value. Kept out (make_walker returns
None, every call takes the full walk): a **kwargs parameter (a *args parameter's tuple is
walked as collect walks it), a .grad that is also an input or shared, structures nested
deeper than _MAX_DEPTH, NumPy arrays larger than numpy_reads.SMALL (a small one is an
input guarded by its contents, as collect has it), a number in the state that is an input.
The pieces of the generated code (checks of types and containers) are walker_code.py's."""
import functools
import inspect

import numpy as np

from ..ir import promotion
from ..runtime import grad_mode, hypers
from . import captured_reads_narrow, dict_reads, method_marks, self_reads
from .appended_lists import ARG_MARK, Appended
from .attr_writes import Slots
from .arrays import walker_arrays, wrappable
from .guard_values import inputable
from .numpy_reads import SMALL
from .function_reads import class_functions, followed_reads, user_function
from .guards import (_DICT_VIEWS, _SCALARS, _is_object, _narrowed, _scalar_set,
                     dynamic_input, signature_names, tensor_keys)
from ..runtime.tensor import Storage, Tensor
from .class_state import bound, class_containers, slotted, user_classes
from .walker_bytecode import compiled_walker
from .walker_code import (_Dynamic, _Slot, _Source, _Unsupported, _container, _dynamic,
                          _fits, _types_are, _unpack)
from .walker_sources import _bound_sources, _captured, _number

_MISSING = object()


def _walk(src, roots, dynamic=None, appended=frozenset(), marks=frozenset(), only=None,
          narrow=None, captured=frozenset()):
    """guards._walk's traversal, emitting code; -> the tensors' names in collect's order
    (each tensor once) and the names of the distinct objects. dynamic: {(id(holder),
    attribute name, key or index): path} of the numbers that are inputs; appended: the ids
    of the lists calls only append to (appended_lists.py), checked by identity alone; only:
    (object, names) of a method's object entered through those names (self_reads.py);
    narrow: guards._walk's, for the roots named in captured (what the function captures)."""
    tensors, first_tensor = [], {}     # names of distinct tensors; id -> name
    objects, first_object = [], {}
    followed = set()                   # ids of the user's functions followed
    classes = set()                    # ids of the user's classes read as values, walked
    narrowed = set()                   # ids of the objects entered through names alone
    stack = list(reversed(roots))
    while stack:
        x, v, depth, checked = stack.pop()
        if not checked and not isinstance(v, (list, tuple, dict)):
            src.type_is(x, v)
        if type(v) is _Dynamic:         # (its type checked with its object's attributes)
            n = src.var("n")
            _fits(src, x)
            src.lines.append(f"{n} = DYNAMIC({x}, {v.path!r})")
            tensors.append(n)
        elif type(v) is _Slot:          # (its type checked with its container's)
            h = src.var("h")
            src.key.append(f"{x} == 0")     # (and whether past float32's range: hypers.py)
            src.key.append(f"(abs({x}) > {hypers.FLOAT32_MAX!r} and {x} - {x} == 0)")
            if v.key == "betas":    # (and whether the step refuses it: hypers.py)
                src.key.append(f"abs({x}) > 1")
            src.lines.append(f"{h} = HYPER({v.group}, {v.key!r}, {v.index!r}, {x})")
            tensors.append(h)
        elif isinstance(v, Tensor):
            if id(v) in first_tensor:
                src.check(f"{x} is not {first_tensor[id(v)]}")
            else:
                if v.__dict__:      # (attributes set on it: the full walk enters them)
                    raise _Unsupported("a tensor with attributes")
                src.check(f"{x}.__dict__")
                first_tensor[id(v)] = x
                tensors.append(x)
        elif isinstance(v, _SCALARS):
            if v is not None:
                src.key.append(_number(x, v))
        elif type(v) is np.ndarray and wrappable(v) and v.size <= SMALL:
            # (a small array is an input and guarded by its contents, as collect has it: a
            # method of the model that names a global array no longer costs the full walk)
            if id(v) in first_tensor:
                src.check(f"{x} is not {first_tensor[id(v)]}")
            else:
                first_tensor[id(v)] = x
                src.key.append(f"{x}.tobytes()")
                src.arrays = True
                tensors.append(x)
        elif isinstance(v, np.ndarray) or type(v) in _DICT_VIEWS:   # (an input whose memory
            # other inputs may share, a larger array, a mappingproxy: the full
            raise _Unsupported("a NumPy array or a view of a dict")     # walk, guards.py)
        elif id(v) in appended and type(v) is list:
            src.check(f"{x} is not {src.const(v)}")
        elif isinstance(v, (list, tuple, dict)):
            held = []
            leaves = _container(src, x, v, depth, dynamic, held)
            for h, hv in held:  # (holders of input numbers, as objects: two made one
                if id(hv) in first_object:      # would each be written back)
                    src.check(f"{h} is not {first_object[id(hv)]}")
                else:
                    first_object[id(hv)] = h
                    objects.append(h)
            stack.extend((n, item, depth + 1, True) for n, item in reversed(leaves))
            if isinstance(v, dict):     # (guards.tensor_keys; the keys' identities checked)
                stack.extend((src.const(k), k, depth + 1, True)
                             for _, k in reversed(tensor_keys(v, x)))
        elif type(v) is functools.partial or slotted(v) or bound(v):
            raise _Unsupported("what is held outside a __dict__")     # (class_state.held)
        elif _is_object(v):
            at_root = depth == 0 and x in captured
            if id(v) in first_object:
                if only is not None and v is only[0] or id(v) in narrowed and not at_root:
                    raise _Unsupported("the method's object met again")   # (a full walk)
                src.check(f"{x} is not {first_object[id(v)]}")
                continue
            first_object[id(v)] = x
            objects.append(x)
            for c in user_classes(type(v)):     # what its classes hold (class_state.py)
                if id(c) not in followed:
                    followed.add(id(c))
                    _holds(src, c)
            stack.extend((src.const(c), c, depth + 1, False)    # (as guards._walk does)
                         for _, c in reversed(class_containers(type(v), x, classes)))
            for f in reversed(class_functions(type(v))):    # (its type is checked above)
                if id(f) not in followed and method_marks.mark(f) not in marks:
                    followed.add(id(f))
                    stack.extend(reversed(_follow(src, f, depth)))
            attrs = sorted(vars(v).items(), key=lambda kv: kv[0])
            d = src.var("d")
            src.lines.append(f"{d} = {x}.__dict__")
            names = only[1] if only is not None and v is only[0] else \
                _narrowed(narrow, v) if at_root else None
            if names is not None:       # (the names its method, or the function, uses)
                narrowed.add(id(v))
                attrs = [(k, a) for k, a in attrs if k in names]
                src.check(f"{d}.keys() & {src.const(names)} != "
                          f"{src.const(frozenset(k for k, _ in attrs))}")
            else:
                src.check(f"tuple({d}) != {src.const(tuple(vars(v)))}")   # (in order: guards)
            names = _unpack(src, "(" + "".join(f"{d}[{k!r}], " for k, _ in attrs) + ")",
                            len(attrs))
            _types_are(src, names, [a for _, a in attrs])
            stack.extend((n, _dynamic(dynamic[id(v), k], a) if dynamic and (id(v), k) in dynamic
                          else a, depth + 1, True)
                         for n, (k, a) in reversed(list(zip(names, attrs))))
        elif _scalar_set(v):
            src.check(f"{x} != {src.const(frozenset(v))}")
        else:
            src.key.append(f"id({x})")
            if inspect.isclass(v) and user_classes(v) and id(v) not in classes:
                classes.add(id(v))              # (a class read as a value: guards._walk)
                for c in user_classes(v):
                    if id(c) not in followed:
                        followed.add(id(c))
                        _holds(src, c)
                for f in reversed(class_functions(v)):
                    if id(f) not in followed:
                        followed.add(id(f))
                        stack.extend(reversed(_follow(src, f, depth)))
                stack.extend((src.const(c), c, depth + 1, False)
                             for _, c in reversed(class_containers(v, x, classes)))
            f = user_function(v)
            if f is not None and id(f) not in followed:
                followed.add(id(f))
                stack.extend(reversed(_follow(src, f, depth)))
    return tensors, objects


def _holds(src, c):
    """A check that class c holds what it holds now, by identity (the values kept alive)."""
    held = tuple(vars(c).values())
    src.const(held)
    src.check(f"tuple(map(id, {src.const(c)}.__dict__.values())) != "
              f"{src.const(tuple(map(id, held)))}")


def _follow(src, f, depth):
    """Code that reads what the user's function f reads from closure cells and globals
    (guards.followed_reads: the same function, known by its identity in the key or by its
    object's type) -> the values to walk, [(name, value, depth, checked)]."""
    fc, out, same = src.const(f), [], []
    for _, kind, key, v in followed_reads(f):
        if kind == "attr" and (v is None or inspect.iscode(v) or (key == "__dict__" and not v)
                               or (type(v) is tuple and all(isinstance(d, _SCALARS) for d in v))):
            # (its defaults, code, attributes: the same, or none; stricter than collect)
            same.append(f"{fc}.{key}" if key == "__dict__" else f"{fc}.{key} is not {src.const(v)}")
        elif kind == "empty":
            src.lines += [f"try: {fc}.__closure__[{key}].cell_contents", "except ValueError: pass",
                          "else: return None"]
        elif kind == "absent":
            src.check(f"{key!r} in {fc}.__globals__")
        else:
            x = src.var("fv")
            if kind == "module":
                src.lines.append(f"{x} = {src.const(key[0])}.get({key[1]!r}, MISSING)")
            elif kind == "attr":                # (guards.followed_reads: defaults, code)
                src.lines.append(f"{x} = {fc}.{key}")
            elif kind == "cell":
                src.lines += [f"try: {x} = {fc}.__closure__[{key}].cell_contents",
                              "except ValueError: return None"]
            else:
                src.lines.append(f"{x} = {fc}.__globals__.get({key!r}, MISSING)")
            out.append((x, v, depth + 1, False))
    if same:
        src.check(" or ".join(same))
    return out


def _dynamic_attributes(fn, args, kwargs, paths):
    """{(id(holder), its attribute name, key or index): path} of the dynamic numbers at
    paths (symbolic_slots) in objects, dicts and lists, or None where one is a global name
    or a closure cell's (the full walk serves those calls)."""
    found = Slots(fn, args, kwargs).find(paths) if paths else {}
    if len(found) != len(paths) or any(h == "name" for h, _ in found.values()):
        return None
    return {(id(h), k): path for path, (h, k) in found.items()}


def make_walker(fn, args, kwargs, dynamic=frozenset()):
    """The walker of calls shaped like fn(*args, **kwargs), or None (see the module);
    dynamic: the paths whose numbers are inputs (guards.collect's)."""
    bound = signature_names(fn, args, kwargs)
    exprs = _bound_sources(fn, bound, args, kwargs)
    bound, narrowed = dict_reads.narrowed(fn, bound, dynamic)     # (as collect walks them)
    appended = {id(m.items) for m in dynamic if type(m) is Appended}     # (appended_lists)
    paths = {p for p in dynamic if type(p) is not Appended and not p.startswith(ARG_MARK)} \
        - {name for name, _ in bound} - method_marks.marks(dynamic)    # (_walk's: not paths)
    slots = _dynamic_attributes(fn, args, kwargs, paths)
    if exprs is None or slots is None:
        return None
    src = _Source()
    src.check(f"len(args) != {len(args)}")
    src.check(f"tuple(kwargs) != {src.const(tuple(kwargs))}" if kwargs else "kwargs")
    roots, numbers = [], []
    for x, (name, a) in zip(exprs, bound):
        if name in narrowed:        # (the dict of the keys the function reads)
            d = src.var("d")
            src.lines.append(f"{d} = {src.const(dict_reads.narrow(narrowed[name]))}({x})")
            x = d
        if type(a) is list and ARG_MARK + name in dynamic:
            src.type_is(x, a)       # (a list calls only append to: appended_lists.py)
        elif name in dynamic and inputable(a):    # (first, as collect has them)
            src.type_is(x, a)
            _fits(src, x)
            numbers.append(src.var("n"))
            src.lines.append(f"{numbers[-1]} = DYNAMIC({x}, {name!r})")
        else:
            roots.append((x, a, 0, False))
    owner = getattr(fn, "__self__", None) if inspect.ismethod(fn) else \
        (fn if _is_object(fn) else None)        # as collect() finds it
    if owner is not None:
        roots.insert(0, (src.const(owner), owner, 0, False))
    uses = []
    captured = [(x, v, 0, True) for x, v in _captured(src, fn, uses)]    # (types checked)
    roots += captured
    names = self_reads.read_names(fn) if owner is not None else None
    try:
        tensors, objects = _walk(src, roots, slots, appended, dynamic,
                                 None if names is None else (owner, names),
                                 captured_reads_narrow.narrowing(uses),
                                 frozenset(x for x, _, _, _ in captured))
    except _Unsupported:
        return None
    tensors = numbers + tensors
    if len(objects) > 1:            # objects told apart when made must stay apart
        src.check(f"len({{{', '.join(f'id({o})' for o in objects)}}}) != {len(objects)}")
    if len(tensors) > 1:
        src.check(f"len({{{', '.join(f'id({t})' for t in tensors)}}}) != {len(tensors)}")
    # each tensor's layout, requires_grad and .grad (fastpath.fast_key's parts); its .grad
    # an input of the graph after the tensors (none that is an input or shared: full walk)
    if src.arrays:      # (each a tensor over it, unless its memory meets another input's)
        made = [src.var("w") for _ in tensors]
        src.lines += [f"made = ARRAYS([{', '.join(tensors)}])", "if made is None: return None",
                      f"{', '.join(made)}, = made"]
        tensors = made
    src.lines.append("grads = []")
    parts = []
    for t in tensors:
        g, d = src.var("g"), src.var("a")
        src.lines += [f"{d} = {t}._data", f"{g} = {t}._grad",
                      f"if {g} is not None: grads.append({g})",
                      # (hooks are guarded by the full walk: guards.hooked; so is a
                      # meta tensor, whose calls a CPU entry does not serve)
                      f"if {t}._hooks or ({t}._acc is not None and {t}._acc._hooked) or "
                      f"type({t}._storage) is not STORAGE: return None"]
        # (flat in the key; requires_grad read as fast_key reads it: the property only
        # for a view)
        parts += [f"{t}._dtype", f"{d}.shape", f"{d}.strides",
                  f"{t}._requires_grad or ({t}._base is not None and {t}.requires_grad)",
                  f"{t}._grad_fn is None", f"type({t})",
                  f"None if {g} is None else ({g}._dtype, {g}._data.shape, "
                  f"{g}._data.strides)"]
    ts = "[" + ", ".join(tensors) + "]"
    src.lines += [f"tensors = {ts}",
                  "if grads:",
                  "    everything = tensors + grads",
                  "    if len(set(map(id, everything))) != len(everything): return None",
                  "    tensors = everything",
                  "st = grad_mode.state"]
    key = src.key + parts + ["st.grad_enabled", "st.inference", "DEFAULT[2]"]
    src.lines.append("return (walker_id, " + "".join(k + ", " for k in key) + "), tensors")
    src.env.update(grad_mode=grad_mode, MISSING=_MISSING, HYPER=hypers.walker_input,
                   DYNAMIC=dynamic_input, ARRAYS=walker_arrays, STORAGE=Storage,
                   DEFAULT=promotion._DEFAULT,     # (the default float dtype: guards.collect)
                   walker_id=object())     # (keys of two walkers never compare equal)
    code = "def walk(args, kwargs):\n" + "".join(f"    {ln}\n" for ln in src.lines)
    try:
        exec(compiled_walker(code, f"<guard walker of {getattr(fn, '__name__', 'fn')}>"),
             src.env)       # noqa: S102 (our own text)
    except (SyntaxError, RecursionError, MemoryError):     # too large for the parser
        return None
    walk = src.env["walk"]
    walk.source = code
    return walk
