"""The pieces of a guard walker's generated code (guard_walker.py): the source as it is built
(_Source: lines, named constants, fresh names), the checks of numbers, types and containers
(as pytree.flatten reads them), and the markers of what becomes an input rather than a key
(a dynamic number, an optimiser's hyper-parameter slot)."""
import itertools

from ..runtime import hypers

_MAX_DEPTH = 40


class _Source:
    """The walker's code as it is generated: lines, the constants they name, fresh names."""

    def __init__(self):
        self.lines, self.env, self.key = [], {}, []
        self.arrays = False         # (whether it walks NumPy arrays: inputs made each call)
        self._n = itertools.count()

    def var(self, prefix="v"):
        return f"{prefix}{next(self._n)}"

    def const(self, obj):
        name = self.var("c")
        self.env[name] = obj
        return name

    def check(self, failing):
        self.lines.append(f"if {failing}: return None")

    def type_is(self, x, v):
        if v is None:
            self.check(f"{x} is not None")
        else:
            self.check(f"type({x}) is not {self.const(type(v))}")


def _fits(src, x):
    """Code returning None (the full walk) where number x is an int past int64, which is
    guarded by value, not an input (guard_values.inputable)."""
    src.check(f"type({x}) is int and not {-2 ** 63} <= {x} < {2 ** 63}")


def _unpack(src, x, n):
    """Names for the n items of the sequence in x, bound by one unpacking."""
    names = [src.var() for _ in range(n)]
    if n:
        src.lines.append(", ".join(names) + ("," if n == 1 else "") + f" = {x}")
    return names


def _types_are(src, names, values):
    """One check of the types of several values (not containers: those check their own
    type with their length): fewer lines than a check each, for a walk that is as long as
    the structure is big."""
    pairs = [(n, v) for n, v in zip(names, values) if not isinstance(v, (list, tuple, dict))]
    if pairs:
        got = "(" + "".join(f"type({n}), " for n, _ in pairs) + ")"
        src.check(f"{got} != {src.const(tuple(type(v) for _, v in pairs))}")


def _container(src, x, v, depth, dynamic=None, held=None):
    """Structure checks of the container v in x, as pytree.flatten reads it; -> its leaves
    [(name, value)] in flatten's order. held: gets (name, container) of each holding an
    input number."""
    if depth > _MAX_DEPTH:
        raise _Unsupported("nested too deep")
    same = f"type({x}) is not {src.const(type(v))} or len({x}) != {len(v)}"
    if isinstance(v, dict):
        keys = list(v)
        if all(type(k) is str for k in keys):
            src.check(f"{same} or tuple({x}) != {src.const(tuple(keys))}")
        else:       # (tensors keying optimiser state, numbers: by identity, kept alive)
            src.const(keys)
            src.check(f"{same} or tuple(map(id, {x})) != {src.const(tuple(map(id, keys)))}")
        values = f"{x}.values()" if type(v) is dict else f"dict.values({x})"
        names, items = _unpack(src, values, len(v)), list(dict.values(v))
    else:
        src.check(same)
        names, items = _unpack(src, x, len(v)), list(v)
    _types_are(src, names, items)
    slots = {(s.key, s.index): s for s in hypers.slots_of(v)}
    leaves = []
    for k, name, item in zip(list(v) if isinstance(v, dict) else range(len(v)), names, items):
        if dynamic and (id(v), k) in dynamic:      # (a number in a list or dict: an input)
            leaves.append((name, _dynamic(dynamic[id(v), k], item)))
            if held is not None and (not held or held[-1][1] is not v):
                held.append((x, v))
        elif isinstance(item, (list, tuple, dict)):
            sub = _container(src, name, item, depth + 1, dynamic, held)
            if any((k, i) in slots for i in range(len(sub))):   # (Adam's betas: each float
                sub = [(n, _Slot(x, k, i) if (k, i) in slots else leaf)     # an input)
                       for i, (n, leaf) in enumerate(sub)]
            leaves += sub
        else:
            leaves.append((name, _Slot(x, k, None) if (k, None) in slots else item))
    return leaves


class _Slot:
    """A dynamic hyper-parameter of the ParamGroup in `group` (guards' HyperSlot)."""

    def __init__(self, group, key, index):
        self.group, self.key, self.index = group, key, index


class _Unsupported(Exception):
    pass


def _dynamic(path, value):
    """The leaf of dynamic number `path`, `value` in the call the walker is made for: none
    where that is no number (None put in its place: the full walk guards it by value)."""
    if type(value) not in (int, float):
        raise _Unsupported
    return _Dynamic(path)


class _Dynamic:
    """An object's attribute whose number is an input (guards._walk's dynamic path)."""
    __slots__ = ("path",)

    def __init__(self, path):
        self.path = path
