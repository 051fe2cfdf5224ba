"""A guard item as a user reads it (readable.py's pieces): its raw path found again in the
objects the call passed and printed as Python (Names: `m__modules_0__parameters_weight` ->
`m[0].weight`), and the item as a condition (expression: `x.shape[0] == 32`, `type(model)
is MLP`, `opt.param_groups[0]['lr'] == 0.01`)."""
import inspect
import re

from ..runtime.tensor import Tensor
from .function_reads import captured_reads
from .guards import APPENDED_TO, _is_object, signature_names

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
                         ("zero or not: ", "hyper"), ("attributes read of ", "attributes read"),
                         ("attributes of ", "attributes")):
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
    if kind == "attributes":        # (an object walked whole: its names, in their order)
        return f"list(vars({n})) == {list(value)!r}"
    if kind == "attributes read":   # (the names the function reads that it has)
        return f"{n} has the attributes {list(value)!r} of those the function reads"
    if kind == "contents":
        return f"{n}: the contents of a NumPy array of {len(value)} bytes are unchanged"
    if kind == "hyper":
        return f"{n} {'==' if value[1] else '!='} 0" + (
            " and past float32's range" if value[2:] and value[2] else "") + (
            " and past [-1, 1], which the step refuses" if value[3:] and value[3] else "") + \
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


def _bare(outline):
    """A structure outline without sharing()'s ids of the containers in it."""
    if type(outline) is tuple and len(outline) == 2 and outline != APPENDED_TO and \
            outline[0] is not None and not isinstance(outline[0], type):
        return outline[0]
    return outline


def first_change(n, was, now):
    """The outermost container in which two structure outlines of n differ: (its path, its
    outline then, now), a dict whose keys changed (their order too: `load_state_dict` puts
    an optimiser group's 'params' last) or a list whose length did; (n, was, now) where the
    difference is not below n (the sharing of its containers, a leaf become a container)."""
    a, b = _bare(was), _bare(now)
    if a == b or a is None or b is None or APPENDED_TO in (a, b) or a[0] is not b[0]:
        return n, was, now
    kind, (ca, cb) = a[0], (a[1], b[1])
    if kind is dict:
        if [k for k, _ in ca] != [k for k, _ in cb]:
            return n, a, b
        pairs = [(f"{n}[{k[1]!r}]" if isinstance(k, tuple) else f"{n}[<{_type_name(k)}>]", x, y)
                 for (k, x), (_, y) in zip(ca, cb)]
    elif len(ca) != len(cb):
        return n, a, b
    else:
        pairs = [(f"{n}[{i}]", x, y) for i, (x, y) in enumerate(zip(ca, cb))]
    for path, x, y in pairs:
        if x != y:
            return first_change(path, x, y)
    return n, was, now
