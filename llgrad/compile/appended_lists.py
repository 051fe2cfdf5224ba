"""Python lists a compiled function appends to, replayed by compiled calls.

A training step that logs as it goes (`losses.append(loss.item())`, `self.history.append(
out.detach())`) grows a list the call reaches. The guard walk guards a list by its items, so
each such call looked new: it traced again until the recompile limit, then ran eagerly.

A list the user's code only appends to is replayed instead. Only appends: wherever the code
of the function and of the user's functions the guard walk follows names the list (the
global, closure variable, argument or attribute it is reached by, under each name it is
reached by), the next thing is `.append` or `.extend`, so nothing reads its length or its
items, and nothing rebinds the name. The first traced run that grows such a list is not
kept; the list is marked on the compiled function (an Appended in its dynamic set, which
holds the list, so its id names no other while marked), and from then on the guard walk
guards it without its items (guards._walk), and each compiled call appends what the traced
run appended, as attr_writes' slot writes put values: tensors (outputs of the graph),
numbers of `t.item()` (stand-ins, written as Python numbers) and constants the entry's
guards determine. A marked list that a run changed otherwise (an item replaced or removed),
that it appended something else to, or that the code now reads makes the call run eagerly.

A name passed on as a function's argument (`hook_backward(name, grads)` in a forward hook,
PyTorch's "Visualizing Gradients" tutorial, whose returned tensor hook appends to it) counts as
appended to where the function, a global or closure variable of the code, only appends to
that parameter (_passed_on)."""
import dis
import functools
import inspect

from ..runtime.derived_number import is_stand_in
from ..tracer.errors import TraceError
from ..tracer.pytree import flatten, unflatten

_GROWERS = ("append", "extend")
ARG_MARK = "<appended to> "        # (+ an argument's name: the lists passed there are marked)
_ATTRIBUTE_LOADS = ("LOAD_ATTR", "LOAD_METHOD")
APPENDED_TO = ("appended to",)      # the guard walk's structure item of a marked list


class _Append:
    """The slot of a write that appends (attr_write_replay.Write): the list grows by its values."""

    def __repr__(self):
        return "append"


APPEND = _Append()


class Appended:
    """A marked list in a compiled function's dynamic set: equal for the same list."""
    __slots__ = ("items",)

    def __init__(self, items):
        self.items = items

    def __hash__(self):
        return hash((Appended, id(self.items)))

    def __eq__(self, other):
        return type(other) is Appended and other.items is self.items


def marked(v, path, dynamic):
    """Whether list v, which the guard walk reaches at path, is marked in dynamic."""
    return bool(dynamic) and type(v) is list and (Appended(v) in dynamic or
                                                  ARG_MARK + path in dynamic)


def mark(cf, lists, forget_fast_paths):
    """Mark lists [(list, the arguments it was passed as)] on the compiled function cf (the
    next call's walk guards them as appended to: the list itself, and any list passed as
    those arguments), and forget its fast paths (a walker made before walks their items)."""
    new = frozenset(m for v, args in lists for m in [Appended(v), *(ARG_MARK + a for a in args)])
    new = new - cf._dynamic
    if new:
        cf._dynamic = cf._dynamic | new
        forget_fast_paths(cf)


def numbers_in(value):
    """value, or (where it holds stand-ins) a copy of its structure with their numbers: what
    the traced run's own slot holds after it, as eager's would."""
    leaves, tree = flatten(value)
    if not any(is_stand_in(x) for _, x in leaves):
        return value
    return unflatten(tree, [x.value if is_stand_in(x) else x for _, x in leaves])


def grown(slots, holder, path, before, dynamic, write):
    """What the traced run did to list `holder` (at guard path `path`, its items `before`
    the run) that is not a slot write: for a marked list, note the write of what it
    appended (write(items) -> whether calls can replay them) and give [] (a TraceError
    where the run changed it otherwise or the code no longer only appends to it); for a
    list the run grew that the code only appends to, [(holder, the arguments it was passed
    as)] (to mark); else []."""
    now = holder
    kept = len(now) >= len(before) and all(a is b for a, b in zip(now, before))
    if not marked(holder, path, dynamic):
        if not (kept and len(now) > len(before) and only_appended(slots, holder)):
            return []
        return [(holder, tuple(root[1] for root, steps, _ in slots.handles[id(holder)]
                               if root[0] == "arg" and not steps))]
    if not kept:
        raise TraceError(f"the function changes the list {path} other than by appending to "
                         "it, which compiled calls cannot replay")
    if not only_appended(slots, holder):
        raise TraceError(f"the function now reads the list {path} it appends to (compiled "
                         "calls append to it unread)")
    if len(now) > len(before):
        items = now[len(before):]
        if not write(list(items)):
            raise TraceError(f"the function appends a {type(items[0]).__name__} to the list "
                             f"{path}, which compiled calls cannot replay")
        now[len(before):] = numbers_in(list(items))
    return []


def only_appended(slots, holder):
    """Whether every name the Slots walk reached holder by is, in the code it follows, only
    appended to (see the module)."""
    codes = [c for c in (getattr(f, "__code__", None) for f in slots.funcs)
             if inspect.iscode(c)]
    if not any(_names_init(c) for c in codes if c.co_name != "__init__"):
        # (a class's __init__, which the walk meets among its functions, binds the list
        # when the object is made, not in a call: `self.history = []` there is no rebinding
        # unless the code the call runs calls an __init__ by name)
        codes = [c for c in codes if c.co_name != "__init__"]
    handles = slots.handles.get(id(holder), ())
    names = [_name(slots, root, steps, in_object) for root, steps, in_object in handles]
    if not names or None in names:
        return False
    if any(steps for _, steps, _ in handles) and any(
            _uses(code, "__dict__") != 0 or _uses(code, "vars") != 0 for code in codes):
        return False        # (an attribute read by its object's dict)
    # (an attribute's name is read by attribute loads and strings alone: a local variable of
    # that name, Trainer.fit's `epochs` beside History.epochs, reads no attribute)
    attrs = {n: all(steps and in_object for _, steps, in_object in handles) for n in names}
    funcs = {f.__code__: f for f in slots.funcs if inspect.iscode(getattr(f, "__code__", None))}
    appends = [_uses(code, name, True) if attrs[name] else _passed_on(funcs.get(code), code, name)
               for code in codes for name in set(names)]
    return None not in appends and any(appends)


def _passed_on(f, code, name):
    """How many times code (of function f) appends to the variable `name`, counting the
    appends of the functions it passes it to as an argument (and so on: a worklist), or
    None where any of them names it otherwise or the function called is not known."""
    total, todo, seen = 0, [(f, code, name)], set()
    while todo:
        f, code, name = todo.pop()
        if (code, name) in seen:
            continue
        seen.add((code, name))
        found = _uses(code, name, passes=f is not None)
        if found is None:
            return None
        n, passes = found if type(found) is tuple else (found, ())
        total += n
        for op, callee_name, i in passes:
            g = _callee(f, op, callee_name)
            c = getattr(g, "__code__", None)
            if not inspect.isfunction(g) or i >= c.co_argcount:
                return None     # (a builtin, a class, a method or *args: not followed)
            todo.append((g, c, c.co_varnames[i]))
    return total


def _callee(f, op, name):
    """The function a LOAD_DEREF / LOAD_GLOBAL of name in f's code gives (None: unknown)."""
    if op == "LOAD_GLOBAL":
        return f.__globals__.get(name)
    cells = dict(zip(f.__code__.co_freevars, f.__closure__ or ()))
    try:
        return cells[name].cell_contents if name in cells else None
    except ValueError:      # (an empty cell)
        return None


_ARG_LOADS = ("LOAD_FAST", "LOAD_DEREF", "LOAD_CONST", "LOAD_GLOBAL")


def _one_push(x):
    return x.opname in _ARG_LOADS and not (x.opname == "LOAD_GLOBAL" and "NULL" in x.argrepr)


def _passed_arg(ins, i):
    """Where ins[i], a load, is the i-th positional argument of a call of a function loaded
    by a LOAD_DEREF or LOAD_GLOBAL, with every other argument a plain load: (the callee's
    load op, its name, i); else None."""
    j = i + 1
    while j < len(ins) and _one_push(ins[j]):
        j += 1
    later = j - i - 1                                       # (the arguments after it)
    if j < len(ins) and ins[j].opname == "PRECALL":         # (3.11)
        j += 1
    if j >= len(ins) or ins[j].opname != "CALL":
        return None
    index = ins[j].arg - 1 - later
    start = i - index - 1
    if index < 0 or start < 0 or not all(_one_push(ins[m]) for m in range(start + 1, i)):
        return None
    callee = ins[start]
    if callee.opname not in ("LOAD_DEREF", "LOAD_GLOBAL"):
        return None
    return callee.opname, callee.argval, index


def _names_init(code):
    """Whether code (its nested functions' included) names an __init__."""
    return "__init__" in code.co_names or any(
        _names_init(k) for k in code.co_consts if inspect.iscode(k))


def _name(slots, root, steps, in_object):
    """The name the code reaches a list by: the attribute (an object's, in_object), the
    argument, the global or the closure variable; None for anything else (an item)."""
    if steps:
        return steps[-1] if type(steps[-1]) is str and in_object else None
    if root[0] == "arg":
        return root[1]
    if root[0] != "read":
        return None
    where = root[1]
    if where[0] == "global":
        return where[2]
    if where[0] == "cell":
        for f in slots.funcs:
            code, cells = getattr(f, "__code__", None), getattr(f, "__closure__", None)
            for name, cell in zip(code.co_freevars if inspect.iscode(code) else (), cells or ()):
                if cell is where[1]:
                    return name
    return None


@functools.lru_cache(maxsize=1024)
def _uses(code, name, attribute=False, passes=False):
    """How many times code (its nested functions' included) appends to `name`, or None
    where it names it otherwise (a read, a store, the name as a string); attribute: name is
    an attribute's, which only attribute loads and stores and constants can name. passes:
    (that count, the calls code itself passes the variable to: _passed_arg's) instead, a
    pass no longer None."""
    n, stack, passed = 0, [code], []
    while stack:
        c = stack.pop()
        ins = list(dis.get_instructions(c))
        for i, x in enumerate(ins):
            named = x.argval == name if type(x.argval) is str else \
                type(x.argval) is tuple and name in x.argval
            if not named or x.opname in ("LOAD_CLOSURE", "MAKE_CELL"):
                continue        # (its nested function: scanned; a cell made for it)
            if attribute and not (x.opname in _ATTRIBUTE_LOADS or "ATTR" in x.opname or
                                  "CONST" in x.opname or x.opname == "KW_NAMES"):
                continue        # (a local, cell or global variable of that name)
            after = ins[i + 1] if i + 1 < len(ins) else None
            if x.opname == "LOAD_CONST" or not x.opname.startswith("LOAD_") or after is None \
                    or after.opname not in _ATTRIBUTE_LOADS or after.argval not in _GROWERS:
                p = _passed_arg(ins, i) if passes and c is code and not attribute else None
                if p is None:
                    return None
                passed.append(p)
                continue
            n += 1
        stack.extend(k for k in c.co_consts if inspect.iscode(k))
    return (n, tuple(passed)) if passes else n
