"""Tensors a compiled function puts into the objects it reads, replayed by compiled calls.

A char-RNN's forward keeps its hidden state so (`self.hidden = h.detach()`), and the hook
forms of weight_norm and spectral_norm set `module.weight = ...` in a forward pre-hook. A
compiled call runs no Python: a trace that made such a write used not to be kept, so every
call traced again. Instead, the trace finds each slot (an object's attribute, a dict's or
a list's item) of the objects and containers the call reaches, as the guard walk reaches
them from the arguments and from what the function captures, that holds another value
after the run; where the new value is a tensor, or a tuple, list or dict of tensors and
constants, its tensors become extra outputs of the graph (after the returned ones), and
each compiled call puts its own results into the same slot of the objects its call
reaches (Pending.finish), so the slot holds a tensor with eager's values, requires_grad
and history (a differentiable output is attached to the call's backward node as a
returned one is). On the next call the guard walk sees a tensor there as it sees any
input (dtype, shape, strides, requires_grad), so the entry serves it.

A global name or a closure cell the function, or a method or hook of the user's it reaches,
binds (`global h; h = ...`, `nonlocal h`) is such a slot too; a global only bound, never
read, with a value calls cannot replay makes the call run eagerly (no guard would see it).

A slot written with a constant (a bool, a string, None or a number, or a new structure of
them: module.train() inside a training step sets each module's `training`, a scheduler its
list of last lrs) is replayed as that constant: the entry's guards determine it, as they
determine a returned number. So is an optimiser's float hyper-parameter the call sets (a
warm-up's `g["lr"] = ...`, runtime/hypers.py). A slot written with a stand-in of a number
(a SymbolicScalar: the arithmetic of a number argument, or of a number slot the call
counts, symbolic_slots.py) gets a graph output that each call writes as a Python number.
A slot written with anything else (another object) is not replayed: the guard items show
that change (side_effects.py), and such a trace is not kept.

This module finds the slots and what the run wrote into them (Slots); each compiled call's
replay of those writes is attr_write_replay.py's (Write, Pending)."""
from functools import partial

from ..runtime import hypers
from ..runtime.derived_number import is_stand_in, number_reader
from ..runtime.tensor import Tensor
from ..tracer.pytree import flatten, with_constants
from ..tracer.errors import TraceError
from ..tracer.returned import is_constant
from . import array_writes, guard_values
from .appended_lists import APPEND, grown, marked, numbers_in
from .attr_write_replay import _EMPTY, Write, _bind, _owner, _slots, _value
from .code_reads import global_names, global_stores
from .leaf_hooks import leaf_hook_reads
from .slot_names import also_named, note_counter
from .function_reads import captured_reads, class_functions, followed_reads, user_function
from .guards import _is_object, signature_names


_FLAGS = (bool, str, type(None), int, float)     # constants put into slots calls replay


def _roots(fn, args, kwargs):
    """[(root, the guard walk's name for it, value)]: where the guard walk starts (in its
    order), each with how a later call finds it."""
    roots = []
    owner = _owner(fn)
    if owner is not None:
        roots.append((("owner",), "self", owner))
    roots += [(("arg", name), name, v) for name, v in signature_names(fn, args, kwargs)]
    roots += [(("read", where), f"captured {path}", v)
              for where, v, kind, path in captured_reads(fn)[1] if kind == "root"]
    return roots


def _named(path, k, position):
    """The guard walk's name for item or attribute k (at position) under path: pytree's."""
    return f"{path}_{k if isinstance(k, (str, int)) else position}"


def _reads(f, path):
    """What the user's function f reads from closure cells and globals, as walk items."""
    out = []
    for name, kind, key, v in followed_reads(f):
        if kind == "cell":
            out.append((("read", ("cell", f.__closure__[key])), (), f"{path}_{name}", v, False))
        elif kind == "global":
            out.append((("read", ("global", f.__globals__, key)), (), f"{path}_{name}", v,
                        False))
    return out


class Slots:
    """The mutable holders a call reaches and what their slots held before the run."""

    def __init__(self, fn, args, kwargs):
        self.places = []        # (holder, root, steps, its guard path, copy of its slots)
        # the closure cells and global names the function and the user's functions the
        # walk meets read or bind (`nonlocal h`, `global h; h = ...`), with their values
        reads = captured_reads(fn)[1]
        self.names = [(where, f"captured {path}", _value(where), True) for where, _, kind, path
                      in reads if where[0] == "cell" and kind != "absent"]
        funcs = [getattr(fn, "__func__", fn)] + [v for _, v, kind, _ in reads if kind == "follow"]
        seen, self.funcs, self.handles, self.appended = set(), funcs, {}, []
        # aliases: (first path, another) of a list or dict reached twice (slot_names.py);
        # hooked: the tensors met whose hooks are walked after them (guards._walk_hooks)
        self.aliases, firsts, hooked, hooked_ids = [], {}, [], set()
        stack = [(root, (), path, v, False) for root, path, v in reversed(_roots(fn, args, kwargs))]
        while stack or hooked:
            if not stack:
                stack = [(("read", w), (), p, v, False) for w, p, v in reversed(
                    leaf_hook_reads(hooked.pop(0), seen, funcs))]
                continue
            root, steps, path, v, in_object = stack.pop()
            if type(v) is list:     # (each way the walk reaches a list: appended_lists.py)
                self.handles.setdefault(id(v), []).append((root, steps, in_object))
            tensor = isinstance(v, Tensor)
            if tensor and id(v) not in hooked_ids and guard_values.hooked(v):
                hooked_ids.add(id(v))
                hooked.append(v)
            # (a tensor's attributes the user set, BinaryNet's `weight.org = ...`, are slots
            # walked as an object's, as the guard walk enters them)
            if id(v) in seen or tensor and not v.__dict__:
                if isinstance(v, (list, dict)) and firsts.get(id(v), path) != path:
                    self.aliases.append((firsts[id(v)], path))
                continue
            if isinstance(v, (list, dict)):
                firsts[id(v)] = path
            if not tensor and not isinstance(v, (list, tuple, dict)) and not _is_object(v):
                f = user_function(v)        # (a hook, a Lambda's function: what it reads)
                if f is not None and id(f) not in seen:
                    seen.add(id(f))
                    funcs.append(f)
                    stack.extend(reversed(_reads(f, path)))
                continue
            seen.add(id(v))
            if not tensor and _is_object(v) and not isinstance(v, (list, dict)):
                for f in reversed(class_functions(type(v))):     # (walked after the
                    if id(f) not in seen:                        # attributes, as guards do)
                        seen.add(id(f))
                        funcs.append(f)
                        stack.extend(reversed(_reads(f, path)))
            if not isinstance(v, tuple):
                slots = _slots(v)
                self.places.append((v, root, steps, path,
                                    list(slots) if isinstance(slots, list) else dict(slots)))
            items = v.items() if isinstance(v, dict) else enumerate(v) \
                if isinstance(v, (list, tuple)) else sorted(vars(v).items())
            in_object = not isinstance(v, (list, tuple, dict))
            stack.extend((root, steps + (k,), _named(path, k, i), x, in_object)
                         for i, (k, x) in reversed(list(enumerate(items))))
        known = set()
        for f in funcs:
            space, code = getattr(f, "__globals__", None), getattr(f, "__code__", None)
            if space is None or code is None:
                continue
            read = global_names(code)       # (guarded: a change the guard items show)
            for name in read + global_stores(code):
                if (id(space), name) not in known:
                    known.add((id(space), name))
                    where = ("global", space, name)
                    self.names.append((where, f"captured {name}", _value(where), name in read))

    def writes(self, result=None, dynamic=frozenset(), written_first=()):
        """([Write], the tensors they put, in order, the guard walk's paths of those
        tensors): each slot that holds another value now, where that value is a tensor, a
        structure of tensors and constants, or a number argument's stand-in (a graph value
        written as a Python number: the slot gets that number now, as eager's would).
        self.counters: the slots whose number the run changed to another of its type.
        A structure that shares a container with another slot's, with the result or with
        what the call reaches makes the call run eagerly (a TraceError: compiled calls
        would write a copy into each). Lists appended to: appended_lists.grown (dynamic:
        the compiled function's, with its marked lists; self.appended: lists to mark).
        written_first: the modules whose `training` the run set before reading it
        (runtime/training_flag.py), written by each call even where the run left it as it
        was; self.blind: the guard walk's paths of those flags."""
        writes, tensors, paths = [], [], set()
        self.counters, self.blind, forced = [], [], {id(m) for m in written_first}
        holders = {id(h) for h, *_ in self.places} | array_writes.reached(self.places, self.names)
        seen = holders | _containers(result)
        for where, path, before, read in self.names:
            value = _value(where)
            if value is before:
                continue
            note_counter(self.counters, path, before, value)
            _shares(value, seen, path)
            if self._write(writes, tensors, paths, ("name", where), (), None, path, value,
                           holders):
                _bind(where, numbers_in(value))
            elif not read:
                raise TraceError(f"the function binds the global {where[-1]!r} to a value "
                                 f"of type {type(value).__name__}, which compiled calls "
                                 "cannot replay")
        for holder, root, steps, path, before in self.places:
            now = _slots(holder)
            if isinstance(now, list):
                if len(now) != len(before) or marked(holder, path, dynamic):
                    self.appended += grown(self, holder, path, before, dynamic, partial(
                        self._append, writes, tensors, paths, seen, holders, root, steps, path))
                    continue                # (else a structure change: the guards see it)
                changed = [(k, x) for k, x in enumerate(now) if x is not before[k]]
            else:
                # (also a hyper-parameter written as the object it held, `g["lr"] = 0.1`)
                changed = [(k, x) for k, x in now.items() if k not in before or
                           before[k] is not x or hypers.written_number(holder, k)
                           or k == "training" and id(holder) in forced]
            order = {k: i for i, k in enumerate(now)} if isinstance(now, dict) else None
            for slot, value in changed:
                where = _named(path, slot, slot if order is None else order[slot])
                if isinstance(holder, hypers.ParamGroup) and \
                        hypers.written_number(holder, slot):
                    _hyper_write(writes, tensors, paths, (root, steps, slot), where, value)
                    continue
                for name in also_named(where, self.aliases):
                    note_counter(self.counters, name, before[slot] if order is None else
                                  before.get(slot, _EMPTY), value)
                _shares(value, seen, where)
                if self._write(writes, tensors, paths, root, steps, slot, where, value,
                               holders):
                    now[slot] = numbers_in(value)
                    paths.update(name for name in also_named(where, self.aliases)[1:])
                    if slot == "training" and id(holder) in forced and type(value) is bool:
                        self.blind.append(where)
        return writes, tensors, paths

    def find(self, paths):
        """{path: (holder, key)} of the slots (of the holders reached, or ("name", where)
        for a global name or closure cell) the guard walk names by paths."""
        out = {}
        for where, path, _, _ in self.names:
            if path in paths:
                out[path] = ("name", where)
        for holder, _, _, path, _ in self.places:
            if isinstance(holder, hypers.ParamGroup):
                continue                    # (its numbers are hypers.py's)
            now = _slots(holder)
            keys = enumerate(now) if isinstance(now, dict) else ((k, k) for k in range(len(now)))
            for position, k in keys:
                for where in also_named(_named(path, k, position), self.aliases):
                    if where in paths:
                        out[where] = (holder, k)
        return out

    @staticmethod
    def _append(writes, tensors, paths, seen, holders, root, steps, path, items):
        _shares(items, seen, path)
        return Slots._write(writes, tensors, paths, root, steps, APPEND, path, items, holders)

    @staticmethod
    def _write(writes, tensors, paths, root, steps, slot, where, value, holders=()):
        """Note the write of value into a slot, if calls can replay it (else False)."""
        leaves, tree = flatten(value, where)
        tree, kept = with_constants(tree, leaves, partial(array_writes.constant, holders))
        if not kept and (isinstance(value, _FLAGS) or id(value) not in holders):
            # (a flag the call sets, as module.train() in a training step, a number, or a
            # new structure of them, as a scheduler's list of its last lrs: the constant
            # the trace wrote, which the entry's guards determine, as a returned number;
            # not a container the call reaches, which the slot would now share)
            writes.append(Write(root, steps, slot, array_writes.copying(tree), len(tensors), 0))
            paths.update([where] + array_writes.written_paths(leaves))  # (arrays: their items)
            return True
        # (stand-ins among them, a scheduler's list of last lrs: graph values each call
        # writes as Python numbers)
        numbers = [number_reader(x) for x in kept]     # (DerivedNumber: its post)
        if not kept or not all(isinstance(t, Tensor) or n for t, n in zip(kept, numbers)):
            return False
        writes.append(Write(root, steps, slot, tree, len(tensors), len(kept),
                            numbers=numbers if any(numbers) else None))
        tensors += [x.tensor if is_stand_in(x) else x for x in kept]
        paths.update(p for p, x in leaves if not is_constant(x))
        # (the slot's own items: a structure put where None was, an LSTM's `self.hidden =
        # tuple(...)` after a reset, is replayed whole; the guards see the old value)
        paths.update((where, f"structure of {where}"))
        return True


def _containers(value):
    """The ids of the lists, dicts and sets in value (a structure of them and tuples)."""
    ids, stack = set(), [value]
    while stack:
        v = stack.pop()
        if isinstance(v, (list, dict, set)) and id(v) not in ids:
            ids.add(id(v))
            stack.extend(v.values() if isinstance(v, dict) else v)
        elif isinstance(v, tuple):
            stack.extend(v)
    return ids


def _shares(value, seen, where):
    """Note the containers of value, written at where; a TraceError (the call runs eagerly)
    if one is in seen: another slot's value, the result, a container the call reaches,
    which eager's slot shares, where each compiled call would write a copy of its own (and
    an equal one would go unseen by the guards)."""
    ids = _containers(value)
    if ids & seen:
        raise TraceError(f"the function puts a {type(value).__name__} into {where} that it "
                         "also returns, puts elsewhere or reaches, which compiled calls "
                         "cannot replay (each would write a copy)")
    seen |= ids


def _hyper_write(writes, tensors, paths, at, where, value):
    """Note the traced run's write of an optimiser hyper-parameter (runtime/hypers.py): a
    number as the constant, a stand-in as its graph value, written as a float by each call
    (its group holds the number again by hypers.settle)."""
    Slots._write(writes, tensors, paths, *at, where, value)
    paths.add(f"zero or not: {where}")      # (the guard walk's item for whether it is zero)
    if type(value) is tuple:                # (Adam's betas: an item per element)
        paths.update(f"zero or not: {where}_{i}" for i in range(len(value)))
