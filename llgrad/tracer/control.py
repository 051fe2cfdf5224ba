"""What converted code calls. tracer/convert.py rewrites a function's if/elif/else,
conditional expressions, while loops and the and/or/not of their conditions into calls of
these helpers, which decide at run time (AutoGraph's approach):

- a condition that is a traced tensor becomes IR control flow: both branches, or the loop's
  condition and body, are traced once each as regions (tracer/region.py) and one `cond` or
  `while_loop` node is recorded (control_ops.py), with its autograd node;
- anything else (a Python value, an eager tensor) runs with the plain Python semantics of
  the original statement.

Branches and loop bodies arrive as functions of the variables they assign that are read
later (`names`), returning their new values; a variable with no value yet arrives as an
`Undefined`. Errors name the user's line (`loc`, "file.py:12")."""
import contextlib
import operator

import numpy as np

from ..runtime import trace_state
from ..runtime.tensor import Tensor
from .control_ops import run_cond, run_while
from .errors import ControlFlowError, note_branch_alias
from .loop_numbers import inputs_behind, number_positions, python_number
from .item_reads import number_cast  # noqa: F401  (ag__.number_cast)
from .region import Region, snapshot, unify_captures
from .rules import RETVAL
from .returned import (ReturnedScalar, returned_array, returned_binop,  # noqa: F401
                       returned_call, returned_item, returned_number,  # (ag__.returned_*)
                       returned_unop)
from .trace import tensor_type

_SCALARS = (bool, int, float)


class Undefined:
    """The value of a variable that has none yet (assigned only in a branch not taken)."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<undefined variable {self.name!r}>"

    def _fail(self, *args, **kwargs):
        raise NameError(f"name {self.name!r} is not defined (it is assigned only in a "
                        "branch that did not run)")

    __getattr__ = __call__ = __bool__ = __iter__ = __getitem__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _fail
    __matmul__ = __rmatmul__ = __neg__ = __lt__ = __le__ = __gt__ = __ge__ = _fail


def ld(read, name):
    """The variable's value (read() reads it), or Undefined when it has none yet."""
    try:
        return read()
    except NameError:
        return Undefined(name)


def _traced(c):
    # (a batched tensor of llgrad.func.vmap is a Python condition: bool() decides, per
    # sample, as in eager)
    return isinstance(c, Tensor) and trace_state.state.tracer is not None and \
        isinstance(c._data, np.ndarray)


def py_cond(value, reason, loc):
    """The condition of a statement left in Python (it holds break, return, ...)."""
    if _traced(value):
        raise ControlFlowError(f"{loc}: {reason}")
    return value


# ---- and / or / not ---------------------------------------------------------------------------

def _logical(a, b, op):
    if not isinstance(b, Tensor):
        b = Tensor._from_array(np.array(bool(b)))
    return getattr(a, op)(b)


def and_(*operands):
    """`a and b and ...` (each operand a function): element-wise once a value is traced."""
    v = operands[0]()
    for f in operands[1:]:
        if _traced(v):
            v = _logical(v, f(), "logical_and")
        elif not v:
            return v
        else:
            v = f()
    return v


def or_(*operands):
    v = operands[0]()
    for f in operands[1:]:
        if _traced(v):
            v = _logical(v, f(), "logical_or")
        elif v:
            return v
        else:
            v = f()
    return v


def not_(v):
    return v.logical_not() if _traced(v) else not v


_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
            "==": operator.eq, "!=": operator.ne, "is": operator.is_,
            "is not": operator.is_not, "in": lambda a, b: a in b,
            "not in": lambda a, b: a not in b}


def compare(ops, *operands):
    """`a < b < c` (operands as functions): (a < b) and (b < c), each operand evaluated at
    most once and only when needed, as Python does."""
    values = [operands[0]()]

    def pair(k):
        def test():
            if len(values) == k + 1:
                values.append(operands[k + 1]())
            return _COMPARE[ops[k]](values[k], values[k + 1])
        return test
    return and_(*[pair(k) for k in range(len(ops))])


# ---- if ---------------------------------------------------------------------------------------

def if_stmt(cond, then_fn, else_fn, values, names, loc, returned=()):
    """returned: the names that after the if are only returned (convert.py)."""
    if not _traced(cond):
        return then_fn(*values) if cond else else_fn(*values)
    return _stage_if(cond, then_fn, else_fn, values, names, loc, "if", returned)


def if_exp(cond, then_fn, else_fn, loc):
    if not _traced(cond):
        return then_fn() if cond else else_fn()
    return _stage_if(cond, lambda: (then_fn(),), lambda: (else_fn(),), (),
                     ("the conditional expression",), loc, "conditional expression")[0]


def _predicate(c, what):
    if c._data.size != 1:
        # (eager's first line as it is, where the condition is on the next)
        raise RuntimeError(f"Boolean value of Tensor with "
                           f"{'no values' if not c._data.size else 'more than one value'} "
                           f"is ambiguous\n(the condition of {what})")
    return c if c._dtype.name == "bool" else c != 0


def _stage_if(cond, then_fn, else_fn, values, names, loc, kind, returned=()):
    what = f"the tensor-dependent {kind} at {loc}"
    pred = _predicate(cond, what)
    regions = [Region("then", what), Region("else", what)]
    tracer = trace_state.state.tracer
    # in the function's own code (not a loop body, traced on stand-ins) the condition's value
    # is eager's: the branch eager does not take is traced with its Python effects put back
    taken = bool(pred._data) if getattr(tracer, "parent", None) is None and \
        tracer.untaken is not None else None
    results = []
    for r, fn, branch in zip(regions, (then_fn, else_fn), (True, False)):
        if taken is not None and branch != taken:
            with tracer.untaken(what):
                results.append(list(r.run(fn, *values)))
        elif taken is None:     # (inside another region: neither is known to be eager's)
            with _effects_free(what, "a branch inside tensor-dependent control flow"):
                results.append(list(r.run(fn, *values)))
        else:           # (eager's branch: a change of Python state in it stops the trace)
            with tracer.untaken(what, taken=True):
                results.append(list(r.run(fn, *values)))
    merged, items = [], ([], [])        # merged: per name, ("python", v) or ("output", k)
    numbers = {}        # output -> (eager's number, only returned): numbers both branches set
    for name, a, b in zip(names, *results):
        how = _merge(name, a, b, loc, kind)
        if how[0] == "python":
            merged.append(how)
            continue
        if isinstance(a, Tensor) != isinstance(b, Tensor) and name in returned:
            # (a tensor in one branch, a number in the other, returned: eager returns one
            # or the other)
            raise ControlFlowError(f"{loc}: variable {name!r} is {_describe(a)} in the if "
                                   f"branch and {_describe(b)} in the else branch of a {kind} "
                                   "whose condition is a tensor, and is returned")
        if not isinstance(a, Tensor) and not isinstance(b, Tensor):
            numbers[len(items[0])] = (a if taken else b, name in returned)
        merged.append(("output", len(items[0])))
        items[0].append(how[1])
        items[1].append(how[2])
    if not items[0]:        # nothing the branches assign is read later
        return tuple(v for _, v in merged)
    graphs = [r.finish(it, loc) for r, it in zip(regions, items)]
    union = unify_captures(graphs, [r.captures for r in regions], 0)
    outs = list(run_cond(pred, [t for t, _ in union], *graphs))
    outer = {k: t for r, it in zip(regions, items) for k, t in enumerate(it)
             if isinstance(t, Tensor) and not r.tracer._owns(t)}
    if outer:       # (a branch's `y = x`: eager's y is x, the cond's result a copy)
        note_branch_alias(tracer, list(outer.values()) + [outs[k] for k in outer], what)
    if taken is not None:
        for k, (value, only_returned) in numbers.items():
            outs[k] = python_number(outs[k], value, only_returned)
    return tuple(v if how == "python" else outs[v] for how, v in merged)


def _effects_free(what, part):
    """Around tracing code whose Python effects would not be eager's (part): the outermost
    tracer's `untaken` (compile's: those effects put back, and a change of Python state
    traces the function as plain Python instead), or nothing to do."""
    root = trace_state.state.tracer
    while getattr(root, "parent", None) is not None:
        root = root.parent
    untaken = getattr(root, "untaken", None)
    return contextlib.nullcontext() if untaken is None else untaken(what, part)


def _describe(v):
    if isinstance(v, Tensor):
        return str(tensor_type(v)).split("{")[0]
    return type(v).__name__


def _merge(name, a, b, loc, kind):
    """("python", value) when both branches leave the same Python value, else
    ("output", then item, else item): each a Tensor or (scalar, dtype, shape)."""
    ua, ub = isinstance(a, Undefined), isinstance(b, Undefined)
    if ua and ub:
        return ("python", a)
    if ua or ub:
        branch = "else" if ua else "if"
        raise ControlFlowError(f"{loc}: variable {name!r} is assigned only in the {branch} branch of "
                         f"{'an' if kind == 'if' else 'a'} {kind} whose condition is a tensor, "
                         "and is used after it; give it a value before the if, or in both "
                         "branches")
    ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
    if ta and tb:
        if a is b:
            return ("python", a)
        if (a._dtype, a._data.shape) != (b._dtype, b._data.shape):
            raise ControlFlowError(f"{loc}: variable {name!r} is {_describe(a)} in the if branch but "
                             f"{_describe(b)} in the else branch of a {kind} whose condition "
                             "is a tensor; both branches must give the same dtype and shape")
        return ("output", a, b)
    sa, sb = isinstance(a, _SCALARS), isinstance(b, _SCALARS)
    if name == RETVAL and (sa or sb) and not (type(a) is type(b) and a == b):
        # (a graph output would return a tensor where eager returns the Python number: the
        # if is left as Python, its condition a value guard)
        raise ControlFlowError(f"{loc}: the function returns a Python number from a branch "
                               f"of a {kind} whose condition is a tensor ({_describe(a)} and "
                               f"{_describe(b)}), which a traced branch cannot give")
    if (ta and sb) or (sa and tb):
        t = a if ta else b
        spec = lambda v: (v, t._dtype.name, tuple(t._data.shape))  # noqa: E731
        return ("output", a if ta else spec(a), b if tb else spec(b))
    if sa and sb:
        if type(a) is type(b) and a == b:
            return ("python", a)
        if type(a) is not type(b):
            # (eager's variable has the type of the branch it takes: `1` or `0.5`)
            raise ControlFlowError(f"{loc}: variable {name!r} is {_describe(a)} in the if "
                                   f"branch and {_describe(b)} in the else branch of a {kind} "
                                   "whose condition is a tensor")
        # (float64: the Python float exactly)
        dtype = "float64" if float in (type(a), type(b)) else \
            "int64" if int in (type(a), type(b)) else "bool"
        return ("output", (a, dtype, ()), (b, dtype, ()))
    if a is b:
        return ("python", a)
    raise ControlFlowError(f"{loc}: variable {name!r} is {_describe(a)} in the if branch and "
                     f"{_describe(b)} in the else branch of a {kind} whose condition is a "
                     "tensor; only tensors and numbers may differ between the branches")


# ---- while ------------------------------------------------------------------------------------

def while_stmt(test, body, values, names, loc, returned=(), read_after=None):
    """Python iterations while the condition is a Python value; from the first one whose
    condition is a traced tensor, the rest of the loop is a while_loop node. read_after:
    the names read after the loop; returned: those only returned (convert.py)."""
    while True:
        c = test(*values)
        if _traced(c):
            return _stage_while(test, body, tuple(values), names, loc, returned=returned,
                                read_after=names if read_after is None else read_after)
        if not c:
            return values
        values = body(*values)


def _stage_while(test, body, values, names, loc, dtypes=None, returned=(), read_after=()):
    """dtypes: {position: dtype} for Python-number loop variables (by default the dtype of
    the number; retraced once with the dtype the body gives, e.g. float64 for `t = 0.0`
    followed by `t = t + dt` with a float64 dt)."""
    what = f"the tensor-dependent while loop at {loc}"
    carried, init, numbers = [], [], {}
    for k, (name, v) in enumerate(zip(names, values)):
        if isinstance(v, Undefined):
            raise ControlFlowError(f"{loc}: variable {name!r} is assigned in a while loop whose "
                             "condition is a tensor, and read in it or after it, but has no "
                             "value before the loop; give it one before the loop")
        if isinstance(v, Tensor):
            carried.append(k)
            init.append(v)
        elif isinstance(v, _SCALARS):
            carried.append(k)
            numbers[k] = (dtypes or {}).get(k) or _scalar_dtype(v)
            init.append(Tensor._from_array(np.array(v, dtype=numbers[k])))

    def region(key, fn, result):
        r = Region(key, what)
        ph = [snapshot(t) for t in init]
        args = list(values)
        for k, p in zip(carried, ph):
            args[k] = p
        inputs = [(names[k], p, None) for k, p in zip(carried, ph)]
        out = r.run(lambda: result(fn(*args)), inputs=inputs)
        return r, r.finish(out, loc)

    def cond_result(c):
        if isinstance(c, Tensor):
            return [_predicate(c, what)]
        return [(bool(c), "bool", ())]

    retype = {}

    def body_result(out):
        items = []
        for k, (name, v) in enumerate(zip(names, out)):
            if k not in carried:
                if v is not values[k]:
                    raise ControlFlowError(f"{loc}: variable {name!r} ({_describe(values[k])}) "
                                     f"changes in {what}; only tensors and numbers can be "
                                     "loop variables")
                continue
            t = init[carried.index(k)]
            want = (t._dtype, tuple(t._data.shape))
            if isinstance(v, Tensor) and (v._dtype, tuple(v._data.shape)) == want:
                items.append(v)
            elif isinstance(v, _SCALARS):
                items.append((v, t._dtype.name, want[1]))
            elif k in numbers and dtypes is None and isinstance(v, Tensor) and not v.shape:
                retype[k] = v._data.dtype          # a number that the body makes a tensor
                items.append(v.to(t._dtype))
            else:
                raise ControlFlowError(f"{loc}: loop variable {name!r} is {_describe(t)} before "
                                 f"{what} but {_describe(v)} after an iteration; it must "
                                 "keep its dtype and shape")
        return items

    with _effects_free(what, "its condition or body (traced once, run by eager at each "
                             "iteration)"):
        rc, cond_g = region("cond", test, cond_result)
        rb, body_g = region("body", body, body_result)
    if retype:
        return _stage_while(test, body, values, names, loc, {**numbers, **retype}, returned,
                            read_after)
    # numbers whose next values the body computes from such numbers alone (a counter,
    # `a, b = b, a + b`, `t = t + 0.1`) are Python numbers through eager's loop: a float is
    # a float64 loop variable (eager adds doubles), and after the loop a number (below)
    kept = number_positions(body_g, {j for j, k in enumerate(carried) if k in numbers})
    doubles = {carried[j]: np.dtype(np.float64) for j in kept
               if np.dtype(numbers[carried[j]]).kind == "f" and
               np.dtype(numbers[carried[j]]) != np.float64}
    if doubles:
        return _stage_while(test, body, values, names, loc, {**numbers, **doubles}, returned,
                            read_after)
    union = unify_captures([cond_g, body_g], [rc.captures, rb.captures], len(carried))
    finals = run_while(init, [t for t, _ in union], cond_g, body_g)
    top = getattr(trace_state.state.tracer, "parent", None) is None
    # a Python number whose next value the body computes from it alone (a counter) is a
    # Python number after eager's loop too: read back as one (a value guard, like any
    # number read out of a tensor), or, an integer that is only returned, as an output
    stay_numbers = {k for j, k in enumerate(carried) if k in numbers and
                    names[k] in read_after and inputs_behind(body_g, j) <= {j}}
    out = list(values)
    for j, (k, f) in enumerate(zip(carried, finals)):
        if k in stay_numbers:
            out[k] = ReturnedScalar(f) if names[k] in returned and \
                type(values[k]) in (int, bool) else type(values[k])(f.item())
        elif top and j in kept and names[k] in read_after:
            out[k] = python_number(f, f._data.reshape(()).item(), names[k] in returned)
        else:
            out[k] = f
    return tuple(out)


def _scalar_dtype(v):
    return np.bool_ if isinstance(v, bool) else np.int64 if isinstance(v, int) else np.float32
