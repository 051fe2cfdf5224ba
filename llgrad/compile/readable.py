"""Guards as a user reads them: `x.shape[0] == 32`, `type(model) is MLP`,
`opt.param_groups[0]['lr'] == 0.01`, and what changed between two calls.

guards.collect names its items by paths such as `m__modules_0__parameters_weight` (the
attribute and key names joined by underscores: they also name graph inputs). Here a path is
found again in the objects the call passed, which tells the attribute `_modules` from a key
`modules_0`, and printed as Python: `m[0].weight` (a module's `_modules`, `_parameters`
and `_buffers` entries read as its attributes, as in PyTorch). Only for logs, explain and
warnings: nothing here runs on a call's path."""
import inspect
import re

import numpy as np

from ..ir.interpret import evaluate
from ..ir.printer import _names
from ..runtime.creation import default_generator
from ..runtime.tensor import Tensor
from .guard_pairs import GONE, paired_items
from .guards import APPENDED_TO, _is_object, captured_reads, signature_names
from .log import user_line

_SPECIAL = re.compile(r"\._(modules|parameters|buffers)\[('([A-Za-z_][A-Za-z0-9_]*)'|'(\d+)')\]")


def _pretty(text):
    """`m._modules['0']._parameters['weight']` -> `m[0].weight`."""
    return _SPECIAL.sub(lambda m: f".{m.group(3)}" if m.group(3) else f"[{m.group(4)}]", text)


class Names:
    """Raw guard paths of one call -> readable Python expressions."""

    def __init__(self, fn, args, kwargs):
        roots = list(signature_names(fn, args, kwargs))
        owner = getattr(fn, "__self__", None) if inspect.ismethod(fn) else \
            (fn if _is_object(fn) else None)
        if owner is not None:
            roots.insert(0, ("self", owner))
        self.roots = {name: (name, v) for name, v in roots}
        try:
            for where, v, kind, path in captured_reads(fn)[1]:
                self.roots[f"captured {path}"] = (path.rpartition(".")[2], v)
        except Exception:       # (a function whose globals cannot be read: raw names)
            pass
        inner = getattr(fn, "_llgrad_inner", None)
        if inner is not None and "args" in self.roots:      # a transform: its fn's names
            try:
                for i, (pname, v) in enumerate(signature_names(inner, args, {})):
                    if i < len(args) and v is args[i]:
                        self.roots[f"args_{i}"] = (pname, v)
            except Exception:
                pass
        self._order = sorted(self.roots, key=len, reverse=True)
        self._cache = {}
        self._tensors = {}      # id(tensor) -> readable path (to name tensor dict keys)

    def __call__(self, raw):
        """A readable name for a raw path (the raw path if it cannot be found)."""
        hit = self._cache.get(raw)
        if hit is None:
            hit = self._cache[raw] = self._resolve(raw)
        return hit

    def _resolve(self, raw):
        for root in self._order:
            if raw == root or raw.startswith(root + "_"):
                text, v = self.roots[root]
                found = self._descend(v, raw[len(root):], text, 0)
                if found is not None:
                    return _pretty(found)
        return raw

    def _descend(self, v, rest, text, depth):
        if not rest:
            if isinstance(v, Tensor):
                self._tensors.setdefault(id(v), _pretty(text))
            return text
        if depth > 64:
            return None
        for token, child, sub in self._children(v):
            tok = "_" + token
            if rest == tok or rest.startswith(tok + "_"):
                found = self._descend(child, rest[len(tok):], text + sub, depth + 1)
                if found is not None:
                    return found
        if rest == "_grad" and isinstance(v, Tensor):        # an input's .grad tensor
            return text + ".grad"
        return None

    def _children(self, v):
        if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
            return [(str(i), x, f"[{i}]") for i, x in enumerate(v)]
        if isinstance(v, tuple):
            return [(f, x, f".{f}") for f, x in zip(v._fields, v)]
        if isinstance(v, dict):
            out = []
            for i, (k, x) in enumerate(v.items()):
                if isinstance(k, (str, int)):
                    out.append((str(k), x, f"[{k!r}]"))
                else:
                    label = self._tensors.get(id(k)) or f"<{type(k).__name__} #{i}>"
                    out.append((str(i), x, f"[{label}]"))
            return out
        if _is_object(v):
            # longest names first: `_modules` before `_mod` when both could match
            items = sorted(vars(v).items(), key=lambda kv: -len(kv[0]))
            return [(k, x, f".{k}") for k, x in items]
        return []


# ---- guard items as expressions ----------------------------------------------------------------
def _type_name(t):
    return getattr(t, "__qualname__", None) or getattr(t, "__name__", None) or str(t)


def _is_tensor_item(value):
    return isinstance(value, tuple) and len(value) == 7 and isinstance(value[1], tuple) \
        and isinstance(value[0], str)


def _split(raw):
    """(kind, path) of a guard item's name."""
    for prefix, kind in (("structure of ", "structure"), ("contents of ", "contents"),
                         ("zero or not: ", "hyper")):
        if raw.startswith(prefix):
            return kind, raw[len(prefix):]
    if raw == "grad mode":
        return "grad mode", ""
    if raw.endswith(".grad"):
        return "grad", raw[:-5]
    return "value", raw


def expression(raw, value, names):
    """One guard item as a Python condition (or a few joined by `and`)."""
    kind, path = _split(raw)
    n = names(path) if path else ""
    if kind == "grad mode":
        grad, inference, default = value
        return f"llgrad.is_grad_enabled() == {grad}" + (
            " and llgrad.is_inference_mode_enabled()" if inference else "") + (
            f" and llgrad.get_default_dtype() == llgrad.{default}"
            if default != "float32" else "")
    if kind == "structure":
        return _structure(n, value)
    if kind == "contents":
        return f"{n}: the contents of a NumPy array of {len(value)} bytes are unchanged"
    if kind == "hyper":
        return f"{n} {'==' if value[1] else '!='} 0" + (
            " and past float32's range" if value[2:] and value[2] else "") + \
            "  (its value an input, read at each call)"
    if kind == "grad":
        if value is None:
            return f"{n}.grad is None"
        dt, shape, stride = value
        return f"{n}.grad.dtype == {dt} and {n}.grad.shape == {shape} and " \
               f"{n}.grad.stride() == {stride}"
    if _is_tensor_item(value):
        dt, shape, stride, rg, first, leaf, cls = value
        text = f"{n}.dtype == {dt} and {n}.shape == {shape} and {n}.stride() == {stride} " \
               f"and {n}.requires_grad == {rg}"
        if cls.__name__ != "Tensor":
            text += f" and type({n}) is {_type_name(cls)}"
        if not leaf:
            text += f" and {n}.grad_fn is not None"
        if first != path:
            text += f" and {n} is {names(first)}"
        return text
    if isinstance(value, tuple) and value and value[0] == "object":
        if len(value) == 2:
            return f"type({n}) is {_type_name(value[1])}"
        return f"{n} is the same {value[1]} object (id {id(getattr(value[2], 'v', None)):#x})"
    if isinstance(value, tuple) and len(value) == 2 and value[0] in ("set", "frozenset"):
        return f"{n} == {set(value[1]) or 'set()'}"
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return f"{n} == {_number(value)}"
    return f"{n} == {value!r}"


def _number(value):
    """A scalar guard's value as Python writes it (a float's zero is kept as its repr, so
    that its sign counts: guards.scalar_guard)."""
    kind, v = value
    return v if isinstance(v, str) and kind != "str" else repr(v)


def _structure(n, outline):
    if outline == APPENDED_TO:
        return f"{n} is a list the function only appends to"
    if type(outline) is tuple and len(outline) == 2 and not isinstance(outline[0], type):
        shared = outline[1] and len(set(outline[1])) < len(outline[1])  # (guards.py: sharing)
        return _structure(n, outline[0]) + (" (containers in it shared)" if shared else "")
    if outline is None:
        return f"{n} is a leaf"
    kind, children = outline
    if kind is dict:
        keys = [k[1] if isinstance(k, tuple) else f"<{_type_name(k)}>" for k, _ in children]
        if all(isinstance(k, tuple) for k, _ in children):
            return f"list({n}.keys()) == {keys!r}"
        kinds = {}
        for k, _ in children:
            name = repr(k[1]) if isinstance(k, tuple) else _type_name(k)
            kinds[name] = kinds.get(name, 0) + 1
        return f"len({n}) == {len(children)} (keys: " + \
            ", ".join(f"{c} {k}" if c > 1 else k for k, c in kinds.items()) + ")"
    if kind is list:
        return f"len({n}) == {len(children)}"
    return f"type({n}) is {_type_name(kind)} and len({n}) == {len(children)}"


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
        return expression(raw, was, names) + f" (now: {_structure(n, now)})", \
            f"{n}: structure changed"
    if isinstance(was, tuple) and len(was) == 2 and isinstance(now, tuple) and len(now) == 2:
        if was[0] == "object" or now[0] == "object":
            return expression(raw, was, names) + f" (now {expression(raw, now, names)})", \
                f"{n}: another object"
        was, now = _number(was), _number(now)
        return f"{n} == {was} (now {now})", f"{n}: {was} -> {now}"
    return expression(raw, was, names) + " (changed)", f"{n} changed"


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
