"""Numbers a compiled function returns that it read out of a tensor (`return loss.item()`).

`t.item()` while tracing is a value guard: the number could steer Python control flow, so
the trace holds only for that value. A number that goes straight into the return value
steers nothing: the source rewrite (convert.py) turns `.item()` calls that stand in a
`return` statement, alone, inside tuple, list and dict displays or as a list or dict
comprehension's item (`return [l.item() for l in losses]`), into `returned_item`,
which while tracing gives a ReturnedScalar: the tensor is an output of the graph, and each
compiled call returns its value as a Python number (no guard, no trace per value).

Python arithmetic with numbers on it in the return value (`return loss.item() / n`,
`-x.item()`, `round(x.item(), 4)`, a comparison `loss.item() < limit`: the rewrite makes it
returned_binop / returned_unop /
returned_call) stays an output, as does `float(loss)` or `int(n)` of a one-element tensor
(returned_number): the
compiled call computes it in Python on the number it reads (`post`), so the result is
eager's to the last bit. Two returned numbers of one kind (PyG's accuracy
`int(correct.sum()) / int(mask.sum())`, `correct.item() / total.item()`) are one output
holding both (ReturnedScalars). With anything else (a tensor, an integer with a float) the
number is read as `.item()` reads it: a value guard.
The rewrite also covers `v = x.item()` at the top of the function when v is only returned
(rules.returned_assignments)."""
import dataclasses
import operator
from collections import OrderedDict, defaultdict

from ..runtime import grad_mode, trace_state
from ..runtime.device import device
from ..runtime.dtypes import dtype, float64, int64
from ..runtime.sym_int import SymInt
from ..runtime.functions import stack
from ..runtime.tensor import Tensor
from .pytree import remade_dict, remake_dict


class ReturnedScalar:
    """t.item() as a graph output: `tensor` the traced 0-d value, `value` the number
    (post(t.item())), `post` the Python arithmetic done on the number (None: none)."""
    __slots__ = ("tensor", "value", "post")

    def __init__(self, tensor, post=None):
        self.tensor = tensor
        self.post = post
        number = tensor._data.reshape(()).item()
        self.value = number if post is None else post(number)

    def finish(self, number):
        """The returned number of a compiled call, from the output's number."""
        return number if self.post is None else self.post(number)

    def reader(self):
        """What a compiled call returns in this one's place, from the output tensor: a
        function of it that keeps no traced value alive."""
        post = self.post
        if post is None:
            return _item
        return lambda t: post(t._data.item())

    def _then(self, f):
        post = self.post
        return ReturnedScalar(self.tensor, f if post is None else lambda v: f(post(v)))

    def _guarded(self):
        """The number, as eager's t.item() reads it (a value guard while tracing)."""
        return self.finish(self.tensor.item())

    def __repr__(self):
        return f"ReturnedScalar({self.value!r})"


_NUMBERS = (int, float, bool)
_FLOAT_EXACT = 2 ** 53          # ints a float64 holds exactly
_BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
           "//": operator.floordiv, "%": operator.mod, "**": operator.pow,
           "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
           "==": operator.eq, "!=": operator.ne}
_UNARY = {"-": operator.neg, "+": operator.pos}


class ReturnedScalars(ReturnedScalar):
    """Python arithmetic on several returned numbers: `tensor` the 1-d graph output holding
    them, int64 where all are integers or bools, else float64 (which holds a float32's or a
    float64's number exactly, and an integer's while it is under 2**53: a guard of the trace
    where integers join floats), `kinds` their Python types, `post` the arithmetic on the
    tuple of numbers."""
    __slots__ = ("kinds", "parts")

    def __init__(self, parts, post):
        # parts: ((0-d tensor, its number's Python type), ...), one kind of number
        self.parts, self.kinds, self.post = parts, tuple(k for _, k in parts), post
        wide = float64 if float in self.kinds else int64
        self.tensor = stack([t.to(wide) for t, _ in parts])
        self.value = post(self._numbers(self.tensor._data.tolist()))

    def _numbers(self, raw):
        return tuple(k(v) for k, v in zip(self.kinds, raw))

    def finish(self, number):
        return self.post(self._numbers(number))

    def reader(self):
        post, numbers = self.post, self._numbers
        return lambda t: post(numbers(t._data.tolist()))

    def _then(self, f):
        post = self.post
        return ReturnedScalars(self.parts, lambda v: f(post(v)))

    def _guarded(self):
        return self.post(tuple(k(t.item()) for t, k in self.parts))

    def __repr__(self):
        return f"ReturnedScalars({self.value!r})"


def _kind(r):
    """The Python type of returned number r's read, or None where it cannot join others
    (a uint64 past int64, a post whose result's type varies with the number)."""
    t = r.tensor
    if t._dtype.is_complex or t._dtype.name == "uint64":
        return None
    return float if t._dtype.is_floating_point else (bool if t._dtype.name == "bool" else int)


def _parts(r):
    """r as ((tensor, kind), ...) and a function of those numbers giving r's number."""
    if type(r) is ReturnedScalars:
        return r.parts, r.post
    kind = _kind(r)
    return ((r.tensor, kind),), (lambda v, r=r: r.finish(v[0]))


def _joined(a, b, f):
    """f(a's number, b's number) of two returned numbers as one output, or None (see
    ReturnedScalars)."""
    tracer = trace_state.state.tracer
    if not all(type(r) in (ReturnedScalar, ReturnedScalars) for r in (a, b)) or \
            tracer is None or hasattr(tracer, "parent"):
        return None     # (ReturnedArray: its own read; a region's guard would be its own)
    (pa, fa), (pb, fb) = _parts(a), _parts(b)
    kinds = {k for _, k in pa + pb}
    if None in kinds:
        return None
    if float in kinds:      # (integers held in float64: exact under 2**53, Python's compare)
        for t, k in pa + pb:
            if k is int:
                if abs(t._data.item()) >= _FLOAT_EXACT:
                    return None
                tracer.guard(t.abs() < _FLOAT_EXACT, True)
    n = len(pa)
    return ReturnedScalars(pa + pb, lambda v: f(fa(v[:n]), fb(v[n:])))


def returned_binop(op, a, b):
    """`a op b` in a return value (convert.py): a returned number with a Python number, or
    with another returned number of its kind, stays an output; with anything else it is
    read as .item() reads it (a value guard)."""
    f = _BINARY[op]
    ra, rb = isinstance(a, ReturnedScalar), isinstance(b, ReturnedScalar)
    if ra and not rb and type(b) in _NUMBERS:
        return a._then(lambda v: f(v, b))
    if rb and not ra and type(a) in _NUMBERS:
        return b._then(lambda v: f(a, v))
    if ra and rb and (joined := _joined(a, b, f)) is not None:
        return joined
    return f(a._guarded() if ra else a, b._guarded() if rb else b)


def returned_unop(op, a):
    """`-a` / `+a` in a return value (convert.py)."""
    return a._then(_UNARY[op]) if isinstance(a, ReturnedScalar) else _UNARY[op](a)


_CASTS = (float, int, round, abs)


def returned_call(f, a, *rest):
    """`float(a)`, `int(a)`, `round(a, n)`, `abs(a)` of a returned number in a return value
    (`float(loss.item())`, convert.py): it stays an output."""
    if isinstance(a, ReturnedScalar):
        if f in _CASTS and all(type(r) in _NUMBERS for r in rest):
            return a._then(lambda v: f(v, *rest))
        a = a._guarded()
    return f(a, *rest)


def returned_number(f, x, assigned=False):
    """`float(x)` / `int(x)` of a one-element tensor x in a return value (convert.py): what
    eager's conversion does before reading the number (float's once-per-process warning)
    and the number as an output; anything else as Python calls it."""
    if (f is float or f is int) and isinstance(x, Tensor) and \
            trace_state.state.tracer is not None and x._data.size == 1:
        if f is float:
            trace_state.scalar_conversion_warning(x, grad_mode.state.grad_enabled)
        return returned_call(f, returned_item(x, assigned))
    return f(x)


def returned_item(t, assigned=False):
    """t.item() in a return statement, or assigned to a variable only returned (then the
    number is t's value now: a copy, in case t is written before the return)."""
    if not isinstance(t, Tensor) or trace_state.state.tracer is None or t._data.size != 1:
        return t.item()     # (not a tensor, not tracing, or item()'s own error)
    value = t.detach().reshape(())
    return ReturnedScalar(value.clone() if assigned else value)


def _item(t):
    return t._data.item()


class ReturnedArray(ReturnedScalar):
    """`t.numpy()` / `t.tolist()` in a return statement (convert.py): t is a graph output and
    each compiled call returns the conversion of its own result tensor, made as eager makes
    it (numpy(): an array of the result's memory), with no guard on the values."""
    __slots__ = ("how",)

    def __init__(self, tensor, how):
        self.tensor, self.post, self.how = tensor, None, how
        # (what eager's call returns, read past the tracer: t.numpy() is t's own array)
        self.value = tensor._data if how == "numpy" else tensor._data.tolist()

    def reader(self):
        return _as_numpy if self.how == "numpy" else _as_list

    def _then(self, f):         # (arithmetic on it: eager's read, then the Python)
        return f(self._guarded())

    def _guarded(self):
        """The conversion as eager's call reads it while tracing (numpy(): the function
        runs eagerly; a small tolist(): value guards)."""
        return getattr(self.tensor, self.how)()


def _as_numpy(t):
    return t.numpy()


def _as_list(t):
    return t.tolist()


def returned_array(t, how):
    """t.numpy() / t.tolist() standing alone in a return value (convert.py), eager's checks
    first (numpy() of a tensor that requires grad raises, of bfloat16 too)."""
    if not isinstance(t, Tensor) or trace_state.state.tracer is None:
        return getattr(t, how)()
    if how == "numpy":
        if t.requires_grad and grad_mode.state.grad_enabled:
            return t.numpy()        # (its error)
        if t._dtype.name == "bfloat16":
            return t.numpy()
    return ReturnedArray(t.detach(), how)


def is_constant(leaf):
    """Leaves of a compiled function's result that are values, not outputs (a dtype or a
    device: `return out.dtype`, fixed by the guarded inputs as the trace is)."""
    return leaf is None or type(leaf) in (int, float, bool, str, dtype, device, SymInt)


def values_in(result):
    """result with each ReturnedScalar replaced by its number (what eager returned), and
    each SymInt (a size returned by a trace at a second size) by its int."""
    if isinstance(result, ReturnedScalar):
        return result.value
    if type(result) is SymInt:
        return result.plain()
    if isinstance(result, (list, tuple)) and not hasattr(result, "_fields"):
        return type(result)(values_in(x) for x in result)
    if isinstance(result, tuple):
        return type(result)(*(values_in(x) for x in result))
    if isinstance(result, dict):
        out = {k: values_in(v) for k, v in result.items()}
        # (the types pytree.py's trees keep: the trace's call returns what the others do)
        if type(result) is OrderedDict:
            return OrderedDict(out)
        if remade_dict(result):
            return remake_dict(type(result), out)
        return defaultdict(result.default_factory, out) if type(result) is defaultdict else out
    if dataclasses.is_dataclass(type(result)) and _holds_returned(result):
        out = object.__new__(type(result))      # (a dataclass symbolic_args copied)
        out.__dict__.update({k: values_in(v) for k, v in vars(result).items()})
        return out
    return result


def _holds_returned(v):
    """Whether v is or holds (in tuples, lists, dicts, dataclasses) a ReturnedScalar."""
    if isinstance(v, ReturnedScalar):
        return True
    if isinstance(v, dict):
        return any(map(_holds_returned, v.values()))
    if isinstance(v, (list, tuple)):
        return any(map(_holds_returned, v))
    d = getattr(v, "__dict__", None) if dataclasses.is_dataclass(type(v)) else None
    return type(d) is dict and any(map(_holds_returned, d.values()))
