"""Guards as a user reads them: `x.shape[0] == 32`, `type(model) is MLP`,
`opt.param_groups[0]['lr'] == 0.01`, and what changed between two calls.

guards.collect names its items by paths such as `m__modules_0__parameters_weight` (the
attribute and key names joined by underscores: they also name graph inputs). Here a path is
found again in the objects the call passed, which tells the attribute `_modules` from a key
`modules_0`, and printed as Python: `m[0].weight` (a module's `_modules`, `_parameters`
and `_buffers` entries read as its attributes, as in PyTorch). Only for logs, explain and
warnings: nothing here runs on a call's path. (Names and the expression of one item are
guard_expressions.py's; here are an entry's guard list and what changed between calls.)"""
import reprlib

import numpy as np

from ..ir.interpret import evaluate
from ..ir.printer import _names
from ..runtime.creation import default_generator
from .guard_expressions import (Names, _is_tensor_item, _number, _split, _structure,
                                _type_name, expression, first_change)
from .guard_pairs import GONE, paired_items
from .log import user_line


def guard_lines(items, names, value_guards=(), graph=None):
    """The readable guard list of an entry: its guard items, then its value guards."""
    hypers = {_split(raw)[1] for raw, _ in items if _split(raw)[0] == "hyper"}
    lines = [expression(raw, v, names) for raw, v in items   # (a hyper-parameter's input:
             if _split(raw)[0] == "hyper" or _split(raw)[1] not in hypers]  # its own line)
    lines += value_guard_lines(value_guards, graph)
    return lines


def value_guard_lines(value_guards, graph=None):
    names = _value_names(graph)
    return [f"%{names.get(g.value, g.value.name or '?')} == {g.expected!r}  "
            f"(a value read from a tensor at {g.loc})" for g in value_guards]


def _value_names(graph):
    if graph is None:
        return {}
    try:
        return _names(graph)
    except Exception:
        return {}


# ---- what changed ------------------------------------------------------------------------------
def differences(old, new, names):
    """[(failed guard, how it changed)] between two calls' guard items [(raw, value)]:
    `x.shape[0] == 4 (now 8)`, with a summary such as `x: shape (4, 3) -> (8, 3)`."""
    old_d, out = dict(old), []
    for raw, was, now in paired_items(old, new):
        if now is GONE:
            kind, path = _split(raw)
            out.append((expression(raw, was, names), f"{names(path) or raw} is gone"))
            continue
        if now is was or now == was:
            continue
        out.append(_changed(raw, was, now, names))
    for raw, now in new:
        if raw not in old_d:
            kind, path = _split(raw)
            out.append((f"{names(path) or raw} did not exist", f"{names(path) or raw} is new: "
                        f"{expression(raw, now, names)}"))
    return out


def _changed(raw, was, now, names):
    kind, path = _split(raw)
    n = names(path) if path else raw
    if kind == "value" and _is_tensor_item(was) and _is_tensor_item(now):
        fields = ("dtype", "shape", "stride()", "requires_grad", "is", "grad_fn", "type")
        for k, (a, b) in enumerate(zip(was, now)):
            if a == b:
                continue
            if fields[k] == "shape":
                summary = f"{n}: shape {a} -> {b}"
                if len(a) != len(b):
                    return f"{n}.dim() == {len(a)} (now {len(b)})", summary
                dims = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
                return ", ".join(f"{n}.shape[{i}] == {a[i]} (now {b[i]})" for i in dims), summary
            if fields[k] == "is":
                return f"{n} is {names(a)} (now it is {names(b) if b != path else 'distinct'})", \
                    f"{n}: aliasing changed"
            if fields[k] == "type":
                return f"type({n}) is {_type_name(a)} (now {_type_name(b)})", \
                    f"{n}: class {_type_name(a)} -> {_type_name(b)}"
            if fields[k] == "grad_fn":
                return f"{n}.grad_fn is {'None' if a else 'not None'} (now " \
                       f"{'None' if b else 'not None'})", f"{n}: is_leaf {a} -> {b}"
            return f"{n}.{fields[k]} == {a} (now {b})", f"{n}: {fields[k]} {a} -> {b}"
    if kind == "grad":
        def g(v):
            return "None" if v is None else f"a {v[0]} tensor of shape {v[1]}"
        return f"{n}.grad is {g(was)} (now {g(now)})", f"{n}.grad: {g(was)} -> {g(now)}"
    if kind == "grad mode":
        if was[2] != now[2]:
            return expression(raw, was, names) + f" (now the default dtype is {now[2]})", \
                "default dtype changed"
        return expression(raw, was, names) + f" (now {now[0]}" + \
            (", inference mode" if now[1] else "") + ")", "grad mode changed"
    if kind == "structure":
        where, a, b = first_change(n, was, now)     # (the container in it that changed)
        return _structure(where, a) + f" (now: {_structure(where, b)})", \
            f"{where}: structure changed"
    if isinstance(was, tuple) and len(was) == 2 and isinstance(now, tuple) and len(now) == 2:
        if was[0] == "object" or now[0] == "object":
            return expression(raw, was, names) + f" (now {expression(raw, now, names)})", \
                f"{n}: another object"
        was, now = _number(was), _number(now)
        return f"{n} == {was} (now {now})", f"{n}: {was} -> {now}"
    # (a class read through an object, `class of self`, or by name, `class captured State`)
    if raw.startswith("class ") and _class_items(was) and _class_items(now):
        changed = _class_change(was, now)
        if changed is not None:
            return changed
    return expression(raw, was, names) + " (changed)", f"{n} changed"


def _class_items(v):
    """Whether v is class_state's guard value: ((class, ((name, Same(value)), ...)), ...)."""
    return isinstance(v, tuple) and all(
        isinstance(c, tuple) and len(c) == 2 and isinstance(c[0], type) for c in v)


def _class_change(was, now):
    """The first class attribute that differs between two class_state values, as
    `Net.calls == 7 (now 8)` (not the class's whole namespace)."""
    def shown(s):
        return "unset" if s is None else reprlib.repr(s.v)
    for (c, items), (_, items_now) in zip(was, now):
        before, after = dict(items), dict(items_now)
        for k in [*before, *(k for k in after if k not in before)]:
            if before.get(k) != after.get(k):
                what = f"{c.__name__}.{k}"
                return f"{what} == {shown(before.get(k))} (now {shown(after.get(k))})", \
                    f"{what} changed"
    return None


def nearest(entries, guards):
    """The entry whose guard items differ least from `guards` (None if there are none)."""
    best, best_n = None, None
    new = dict(guards)
    for e in entries:
        n = sum(1 for raw, v in e.guard_items if not (new.get(raw, _GONE) is v or
                                                      new.get(raw, _GONE) == v))
        n += len(set(new) - {raw for raw, _ in e.guard_items})
        if best_n is None or n < best_n:
            best, best_n = e, n
    return best


_GONE = object()


def value_guard_failures(entry, tensors):
    """[(guard, traced value, value now)] of the entry's value guards that these inputs
    fail, found by running its forward graph on the interpreter (a log's slow path)."""
    fwd = entry.forward
    if not fwd.guards:
        return []
    arrays = [np.array(t._data) for _, t in tensors]
    if entry.rng_index is not None:
        arrays.append(default_generator.state.copy())
    try:
        _, env = evaluate(fwd, arrays)
    except Exception:
        return []
    out = []
    for g in fwd.guards:
        now = np.asarray(env[g.value]).reshape(()).item()
        if now != g.expected:
            out.append((g, g.expected, now))
    return out


def why_retrace(cf, key, guards, tensors, args, kwargs):
    """The recompiles channel's line: why this call traces again (the guard that failed,
    old and new value) and where the call was made."""
    name = getattr(cf.fn, "__name__", "fn")
    head = f"{name}: recompiling (trace {cf.n_traces + 1}, limit {cf.recompile_limit}) " \
           f"for the call at {user_line(3)}: "
    if cf._not_kept:
        return head + "the last traced run changed Python state, so it was not kept"
    try:
        names = Names(cf.fn, args, kwargs)
        same = [e for e in cf.cache.get(key, ()) if not isinstance(e, str)]
        if same:
            fails = []
            for e in same:
                fails += value_guard_failures(e, tensors)
            if fails:
                g, was, now = fails[0]
                return head + f"value guard failed: {g.expected!r} was read from a tensor " \
                              f"at {g.loc}, now {now!r}"
            return head + "a value guard failed (a value read from a tensor while tracing)"
        near = nearest(cf.entries, guards)
        diffs = differences(near.guard_items, guards, names) if near is not None else []
    except Exception as e:          # (a log line: never in the way of the call)
        return head + f"guards changed (could not describe them: {type(e).__name__}: {e})"
    if not diffs:
        return head + "guards changed"
    failed, summary = diffs[0]
    more = ""
    if len(diffs) > 1:
        rest = [d[0] for d in diffs[1:4]]
        more = f"; {len(diffs) - 1} more changed: " + "; ".join(rest) + \
            ("; ..." if len(diffs) > 4 else "")
    return head + f"guard failed: {failed}  [{summary}]{more}"


def limit_change(cf, guards, args, kwargs):
    """[what changed] for the recompile-limit warning: the guards this call fails on the
    nearest entry, else the raw items that differ from the last entry's, else why no entry
    was kept or the value guards the traces read."""
    if not cf.entries and not cf._not_kept:     # (nothing to compare this call with)
        return ["none: no call traced yet" if not cf.n_traces else
                "none: every call traced so far runs eagerly"]
    last = dict(cf.entries[-1].guard_items) if cf.entries else {}
    changed = []
    try:
        near = nearest(cf.entries, guards)
        if near is not None:
            changed = [f"{failed} ({summary})" for failed, summary in
                       differences(near.guard_items, guards, Names(cf.fn, args, kwargs or {}))]
    except Exception:       # (a message: never in the way of the call)
        changed = []
    if not changed:
        changed = [f"{n}: {last.get(n)!r} -> {v!r}" for n, v in guards if last.get(n) != v]
    if cf._not_kept:
        return [f"none kept: {cf._not_kept}, which a compiled call cannot replay"]
    if not changed:     # a value read while tracing (bool(t), .item(), a mask's count)
        reads = [f"{g.expected!r} at {g.loc}" for g in
                 (cf.entries[-1].forward.guards if cf.entries else ())]
        changed = ["a value guard (the traced values: " + "; ".join(reads) + ")"
                   if reads else "a value guard"]
    return changed
