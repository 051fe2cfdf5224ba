"""Flatten nested lists, tuples and dicts of arguments and results into leaves plus a
structure that puts them back."""
import dataclasses
from collections import OrderedDict, defaultdict


def flatten(obj, path="", out=None, objects=None):
    """-> (leaves [(path, leaf)], tree). Dict keys are visited in insertion order. objects:
    a test of the objects (made_dataclasses') whose attributes are a node too (a result's
    dataclass, remade with them: fields_kind)."""
    out = [] if out is None else out
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        trees = [flatten(x, f"{path}_{i}" if path else str(i), out, objects)[1]
                 for i, x in enumerate(obj)]
        return out, (type(obj), trees)
    if isinstance(obj, tuple):                      # a namedtuple
        trees = [flatten(x, f"{path}_{f}", out, objects)[1] for f, x in zip(obj._fields, obj)]
        return out, (type(obj), trees)
    if type(obj) in (OrderedDict, defaultdict):
        # (a node around its items that makes the same type again: a compiled call's
        # defaultdict, as GradScaler.update() writes one, still makes missing keys)
        factory = getattr(obj, "default_factory", None)
        return out, (dict_kind(type(obj), factory), [flatten(dict(obj), path, out, objects)[1]])
    if remade_dict(obj):
        return out, (dict_kind(type(obj), _SUBCLASS),
                     [flatten(dict(obj), path, out, objects)[1]])
    if isinstance(obj, dict):
        keys = list(obj)
        # keys that are not names (a tensor keying optimiser state) are named by position
        names = [k if isinstance(k, (str, int)) else i for i, k in enumerate(keys)]
        trees = [flatten(obj[k], f"{path}_{n}" if path else str(n), out, objects)[1]
                 for k, n in zip(keys, names)]
        return out, (dict, list(zip(keys, trees)))
    if objects is not None and objects(obj):
        attrs = vars(obj)
        trees = [flatten(v, f"{path}_{n}" if path else n, out, objects)[1]
                 for n, v in attrs.items()]
        return out, (fields_kind(type(obj), tuple(attrs)), trees)
    out.append((path, obj))
    return out, None


def made_dataclasses(given):
    """flatten's test of the objects it takes apart: a plain dataclass's instance (its state
    all in its __dict__: no __slots__, not a container, not llgrad's) that is none of the
    objects `given` (what the call was given and reaches: eager returns those themselves)."""
    ids = set(map(id, given))

    def test(obj):
        cls = type(obj)
        return dataclasses.is_dataclass(cls) and id(obj) not in ids and \
            type(getattr(obj, "__dict__", None)) is dict and \
            not isinstance(obj, (list, tuple, dict, type)) and \
            not any("__slots__" in vars(c) for c in cls.__mro__[:-1]) and \
            not (cls.__module__ or "").startswith("llgrad")
    return test


_FIELDS_KINDS = {}


def fields_kind(cls, names):
    """The tree kind of a dataclass instance holding attributes `names`: a class (one per
    type and names, so guards compare it by identity) that, called with their values, gives
    a new instance of cls holding them, as eager's does (neither __init__ nor __post_init__
    run again: what they set is among the values; a frozen one's too)."""
    key = (cls, names)
    kind = _FIELDS_KINDS.get(key)
    if kind is None:
        if len(_FIELDS_KINDS) >= 256:
            _FIELDS_KINDS.clear()

        def remake(_, *values):
            obj = object.__new__(cls)
            obj.__dict__.update(zip(names, values))
            return obj
        kind = _FIELDS_KINDS[key] = type(f"{cls.__name__}_fields", (), {
            "__new__": remake, "_fields": names})
    return kind


_DICT_KINDS = {}
_SUBCLASS = object()        # (dict_kind's factory of a remade_dict's type)


def remade_dict(obj):
    """Whether obj is a dict of a subclass of the user's (an attribute dict, `class
    Output(dict)` whose __getattr__ reads its items) that holds nothing but its items: a
    result's tree remakes its type, not a plain dict (one holding attributes too is not
    remade: compile/symbolic_args.py runs a function returning it eagerly)."""
    cls = type(obj)
    return cls is not dict and isinstance(obj, dict) and \
        not isinstance(obj, (OrderedDict, defaultdict)) and \
        not (cls.__module__ or "").startswith("llgrad") and getattr(obj, "__dict__", None) == {}


def remake_dict(cls, items):
    """An object of remade_dict's kind cls holding items (its __init__ not run: it holds
    nothing else)."""
    obj = cls.__new__(cls)
    dict.update(obj, items)
    return obj


def dict_kind(cls, factory):
    """The tree kind of an OrderedDict or a defaultdict (with its default_factory): a class
    (one per type and factory, so guards compare it by identity) that, called with [a plain
    dict], gives that type with its items."""
    key = (cls, factory)
    kind = _DICT_KINDS.get(key)
    if kind is None:
        if len(_DICT_KINDS) >= 256:     # (a factory made anew per call, a lambda: bounded;
            _DICT_KINDS.clear()         # a kind made again only retraces what used it)

        def remake(_, items):
            if factory is _SUBCLASS:
                return remake_dict(cls, items[0])
            return cls(items[0]) if cls is OrderedDict else cls(factory, items[0])
        kind = _DICT_KINDS[key] = type(f"{cls.__name__}_items", (), {"__new__": remake})
    return kind


class Constant:
    """The kind of a tree node that stands for a constant, not a leaf: (Constant, value).
    A compiled function that returns None or a Python number beside its tensors gets that
    value back on every call (a number computed from a tensor, `loss.item()`, is a value
    guard of the trace, so a call that would give another one traces again)."""


def with_constants(tree, leaves, is_constant):
    """(tree with the leaves that is_constant(leaf) holds for as Constant nodes, the other
    leaves in order). leaves: flatten's [(path, leaf)]."""
    kept = []
    return _with_constants(tree, iter(leaves), is_constant, kept), kept


def _with_constants(t, it, is_constant, kept):
    if t is None:
        leaf = next(it)[1]
        if is_constant(leaf):
            return (Constant, leaf)
        kept.append(leaf)
        return None
    kind, children = t
    if kind is dict:
        return (kind, [(k, _with_constants(c, it, is_constant, kept)) for k, c in children])
    return (kind, [_with_constants(c, it, is_constant, kept) for c in children])


def unflatten(tree, leaves):
    # (a module-level helper, not a closure that calls itself: such a closure is a
    # reference cycle that would keep every leaf alive until the next garbage collection)
    return _build(tree, iter(leaves))


def _build(t, it):
    if t is None:
        return next(it)
    kind, children = t
    if kind is Constant:
        return children
    if kind is dict:
        return {k: _build(c, it) for k, c in children}
    items = [_build(c, it) for c in children]
    return kind(*items) if hasattr(kind, "_fields") else kind(items)


def unflattener(tree):
    """A function leaves -> structure for one tree, quick for the common shapes (one
    leaf, a flat tuple or list of leaves); others go through unflatten."""
    if tree is None:
        return lambda leaves: leaves[0]
    kind, children = tree
    if kind is Constant:
        return lambda leaves: children
    if kind in (tuple, list) and all(c is None for c in children):
        return kind
    return lambda leaves: unflatten(tree, leaves)
