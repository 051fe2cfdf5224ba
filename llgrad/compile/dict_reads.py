"""A dict argument the compiled function only subscripts with constant keys is guarded by
those keys alone.

A collated batch often carries more than the step reads: `{"input_ids": ..., "labels": ...,
"id": ["s3", "s9", ...]}`. Its strings were guarded by value, as any Python value the
function might branch on, so each step's new ids traced again, and past the recompile limit
the step ran eagerly. When the function's own code uses the argument only as `batch["k"]`
(a constant key, the dict not passed on, stored, iterated, reassigned or captured by a
nested function), nothing else of it can reach the call's result: the walks (guards.collect,
guard_walker.make_walker) see a dict of the keys read, so the other keys' values are neither
guarded nor inputs, and a key read but missing still changes the structure (the next call
traces, and raises KeyError as eager does).

Kept to what the bytecode shows for certain: a plain function or a bound method's function
(no decorator's wrapper in between, which may read every argument), an exact dict, no name
that reaches frames (`locals()`, `sys._getframe`), and no number under the dict that is an
input of the graph (symbolic_slots finds those by the dict's identity)."""
import dis
import functools
import inspect

_FRAME_NAMES = frozenset(("locals", "vars", "eval", "exec", "globals", "_getframe",
                          "currentframe", "stack", "f_locals", "getframeinfo"))
_KEY_TYPES = (str, int)


@functools.lru_cache(maxsize=1024)
def _subscripted(code, name):
    """The constant keys code subscripts its local `name` with, in first-use order, or None
    where it uses `name` any other way."""
    if name in code.co_cellvars or _FRAME_NAMES & set(code.co_names):
        return None
    ins = list(dis.get_instructions(code))
    keys = {}
    for i, x in enumerate(ins):
        if x.argval != name:
            if type(x.argval) is tuple and name in x.argval:    # (3.13's LOAD_FAST_LOAD_FAST)
                return None
            continue
        if x.opname in ("STORE_FAST", "DELETE_FAST"):
            return None
        if x.opname in ("LOAD_FAST", "LOAD_FAST_CHECK"):
            const, sub = ins[i + 1:i + 2], ins[i + 2:i + 3]
            if not (const and sub and const[0].opname == "LOAD_CONST"
                    and type(const[0].argval) in _KEY_TYPES
                    and sub[0].opname == "BINARY_SUBSCR"):
                return None
            keys.setdefault(const[0].argval, None)
        elif x.opname.startswith(("LOAD_", "STORE_", "DELETE_")) and \
                x.opname.endswith(("FAST", "DEREF", "CLOSURE")):
            return None
    return tuple(keys)


def _code(fn):
    """The code a call of fn runs first, or None where that is not certain."""
    f = fn.__func__ if inspect.ismethod(fn) else fn
    if not inspect.isfunction(f) or hasattr(f, "__wrapped__"):
        return None
    return f.__code__


def narrowed(fn, bound, dynamic=frozenset()):
    """bound ([(name, value)], the call's arguments) with each dict argument fn only
    subscripts with constant keys replaced by a dict of those keys (the ones it has), and
    {name: keys} of those replaced."""
    code = _code(fn)
    if code is None:
        return bound, {}
    out, keys_of = [], {}
    for name, v in bound:
        keys = _subscripted(code, name) if type(v) is dict else None
        if keys is None or any(str(p).startswith(name) for p in dynamic):
            out.append((name, v))
            continue
        keys_of[name] = keys
        out.append((name, {k: v[k] for k in keys if k in v}))
    return out, keys_of


def narrow(keys):
    """A function of an argument: the dict of its `keys` (those it has), or None when it is
    not an exact dict (the walker's type check then fails: the full walk decides)."""
    def read(v):
        if type(v) is not dict:
            return None
        return {k: v[k] for k in keys if k in v}
    return read
