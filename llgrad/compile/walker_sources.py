"""Where a guard walker's values come from (guard_walker.py): the call's arguments, and what
the compiled function reads from closure cells and globals, as code of the walker; and the
key expression of a number it meets."""
import inspect

import numpy as np

from .function_reads import captured_reads
from .guards import _SCALARS, signature_of


def _number(x, v):
    """The key expression of scalar x (of v's type): a float's zero with its sign, as
    guards.scalar_guard keys it."""
    return f"({x} or repr({x}))" if isinstance(v, (float, np.floating)) else x


def _captured(src, fn, uses=None):
    """Code that reads what fn reads from closure cells and globals (guards.captured_reads)
    and checks that each read finds what it found when the walker was made: the same
    function or class, the same kind of value (a number's value goes to the key, as
    collect guards it), a cell still empty, a name still absent; -> the roots to walk,
    [(name, value)]. uses: captured_reads's."""
    roots = []
    for where, v, kind, _ in captured_reads(fn, uses)[1]:
        if where[0] == "cell":
            cell = src.const(where[1])
            if kind == "empty":
                src.lines += [f"try: {cell}.cell_contents", "except ValueError: pass",
                              "else: return None"]
                continue
            x = src.var("cv")
            src.lines += [f"try: {x} = {cell}.cell_contents", "except ValueError: return None"]
        elif where[0] == "attr":                # (a followed function's defaults, code)
            x = src.var("av")
            src.lines.append(f"{x} = {src.const(where[1])}.{where[2]}")
        else:
            space, name = src.const(where[1]), where[2]
            if kind == "absent":
                src.check(f"{name!r} in {space}")
                continue
            x = src.var("gv")
            src.lines.append(f"{x} = {space}.get({name!r}, MISSING)")
        if kind == "root":
            src.type_is(x, v)
            roots.append((x, v))
        elif isinstance(v, _SCALARS):           # (guarded by value: guards.captured_guards)
            src.type_is(x, v)
            if v is not None:
                src.key.append(_number(x, v))
        elif inspect.ismodule(v):
            src.type_is(x, v)
        else:                                   # a function, class, compiled function
            src.check(f"{x} is not {src.const(v)}")
    return roots


def _bound_sources(fn, bound, args, kwargs):
    """Where each bound argument comes from in a call (args[i], the tuple args[i:] a *args
    parameter holds, kwargs[name]), or None for a **kwargs parameter or an order the walker
    does not reproduce."""
    try:
        kinds = {n: p.kind for n, p in signature_of(fn).parameters.items()}
    except (TypeError, ValueError):
        kinds = {}
    exprs, i = [], 0
    for name, _ in bound:
        kind = kinds.get(name)
        if kind is inspect.Parameter.VAR_KEYWORD:
            return None
        if kind is inspect.Parameter.VAR_POSITIONAL:
            exprs.append(f"args[{i}:]")
            i = len(args)
        elif i < len(args):
            exprs.append(f"args[{i}]")
            i += 1
        elif name in kwargs:
            exprs.append(f"kwargs[{name!r}]")
        else:
            return None
    return exprs if i == len(args) and len(exprs) == len(bound) else None
