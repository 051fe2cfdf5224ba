"""Python numbers given to a compiled function that change between calls (an annealing
weight, a temperature, a step count), as inputs of the graph rather than baked-in values.

After an argument has been a second number (as torch.compile's automatic dynamic does),
compile (compile/symbolic_args.py) makes it a 0-d float64 or int64 input, made from the
number at each call, and traces the function with a SymbolicScalar standing for it. The
trace holds for every value only if the number's value never steered it, which is sound by
construction here:

* the arithmetic a SymbolicScalar supports is recorded as ops and gives Python's result to
  the bit: + - * / with Python numbers and other SymbolicScalars (float64 arithmetic, or
  int64 while the result is in range; / only by a nonzero number), // and % of ints, a
  positive base to a power, either a SymbolicScalar (a float result, libm's pow), unary -
  and abs; and a SymbolicScalar as the number operand of a tensor's add, sub, mul, div,
  lerp, clamp or comparison (or as add's alpha) is the number PyTorch would take (cast to
  the op's computation dtype: `as_operands`);
* a comparison with a Python number or another SymbolicScalar gives this call's outcome
  and guards it (a traced flag: later calls with another outcome trace again);
* format(), str() and repr() while compile records the traced run's output give this
  call's text, which each compiled call writes formatted from its own number where the
  run wrote it (rendered_text.py: `print(f"step {step}: {loss.item():.4f}")`);
* every other way of reading the number (float(), int(), an index, bool(), hash, its
  float/int methods, pickling, the text read rather than written) raises ScalarEscape,
  a BaseException (a user's `except Exception` cannot swallow it), which ends the trace:
  the argument is then guarded by value, as before, and the call traced again.

Outside a trace (one leaked into Python state: compile retraces when it sees that) it acts
as the number it stood for."""
import numpy as np

from . import rendered_text, trace_state
from .dtypes import float64
# (the flags, imported from here by their users)
from .stand_in_flags import HYPER_READS, ITEM_READS, stand_ins  # noqa: F401
from .sym_int import plain
from .tensor import Tensor

_FLOAT_EXACT = 2 ** 53          # ints a float64 holds exactly
_INT64 = 2 ** 63
# ops whose number operands (at these places) PyTorch reads in self's dtype
_IN_SELF_DTYPE = {"lerp": (2,), "clamp": (1, 2), "clamp_min": (1,), "clamp_max": (1,)}
_SUPPORTED_OPS = frozenset(("add", "sub", "rsub", "mul", "div", "eq", "ne", "lt", "le", "gt",
                            "ge"))
_NUMBER_ATTRIBUTES = frozenset(n for t in (int, float) for n in dir(t)
                               if not n.startswith("_"))


ROUNDING = []       # round() of a stand-in: symbolic_math.round_of (it builds on this module)


class ScalarEscape(BaseException):
    """A traced function read a SymbolicScalar's value: the trace is not valid for other
    values (compile specialises the argument and traces again)."""
    def __init__(self, path, how):
        super().__init__(f"{path}: {how}")
        self.path = path


class SymbolicScalar:
    """Stands for the Python number of argument `path` while a compiled function is traced:
    `tensor` the graph value (0-d float64 or int64), `value` the number of this call."""
    __slots__ = ("tensor", "value", "path")
    takes_sizes = True      # (a SymInt's operator defers to this class's reflected one)
    def __init__(self, tensor, value, path):
        self.tensor, self.value, self.path = tensor, value, path

    @property
    def __class__(self):
        # (isinstance(beta, float) holds as it does eagerly: a branch on the number's type
        # must not differ; type(beta) is still SymbolicScalar, which llgrad's code checks)
        return type(self.value)

    def _escape(self, how):
        """The number for a read that steers Python (an escape while tracing)."""
        if trace_state.state.tracer is not None:
            raise ScalarEscape(self.path, how)
        return self.value

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """A NumPy ufunc given the number (np.clip(epoch, 0, n), np.exp(-t), and a NumPy
        scalar's operator: np.float32(0.1) * n is a float32 eagerly): an escape of this
        number (not a TypeError, which would leave compile not knowing which number the
        trace could not take); outside a trace, the ufunc of the numbers."""
        self._escape(f"an operand of NumPy's {ufunc.__name__}")
        plain = [x.value if type(x) is SymbolicScalar else x for x in inputs]
        return getattr(ufunc, method)(*plain, **kwargs)

    def __float__(self):
        return float(self._escape("float()"))

    def __int__(self):
        return int(self._escape("int()"))

    def __index__(self):
        return self._escape("used as an index or a size").__index__()

    def __bool__(self):
        return bool(self._escape("bool()"))

    def __complex__(self):
        return complex(self._escape("complex()"))

    def __hash__(self):
        return hash(self._escape("hash()"))

    def __round__(self, n=None):
        if trace_state.state.tracer is None or not ROUNDING:
            return round(self._escape("round()"), n)
        return ROUNDING[0](self, n)         # (symbolic_math.round_of, which puts itself there)

    def __trunc__(self):
        return int(self._escape("math.trunc()"))

    def __floor__(self):
        return self._escape("math.floor()").__floor__()

    def __ceil__(self):
        return self._escape("math.ceil()").__ceil__()

    def __format__(self, spec):
        return self._rendered(spec, "formatted", True)

    def __repr__(self):
        return self._rendered("", "repr()")

    def __str__(self):
        return self._rendered("", "str()")

    def _rendered(self, spec, how, formatted=False):
        """format(number, spec) for output: while compile records the traced run's output,
        a piece each compiled call formats with its own number (rendered_text.py); else the
        number read (an escape while tracing). (str() and repr() of an int or a float are
        its format with no spec.)"""
        rendering = rendered_text.active()
        if rendering is None or not rendered_text.value_free(spec):
            return format(self._escape(how), spec)
        kind = type(self.value)
        text = format(self.value, spec)     # (a bad spec raises here, as eager's format)
        # (its text kept or read: the number guarded by value, as t.item()'s digits are; the
        # run goes on, so what it did is not done twice by a second run)
        return rendering.add(self.tensor, lambda a: format(kind(a.item()), spec), text,
                             lambda at: trace_state.state.tracer.guard(self.tensor, self.value),
                             formatted)

    def __reduce_ex__(self, protocol):
        return (type(self._escape("pickled or copied")), (self.value,))

    def __getattr__(self, name):
        if name in _NUMBER_ATTRIBUTES:      # (.real, .is_integer(), ...: the number's own)
            return getattr(self._escape(f".{name}"), name)
        raise AttributeError(name)

    # ---- comparisons: with a tensor, the tensor's op; with a number, its outcome guarded;
    # with anything else, an escape
    def _compare(self, other, name, op):
        if isinstance(other, Tensor):
            return other._op(_REFLECTED_COMPARISON[name], self)
        other = plain(other)
        tracer = trace_state.state.tracer
        if type(other) in (int, float, SymbolicScalar) and tracer is not None and \
                not hasattr(tracer, "parent"):      # (a region's guard would be its own)
            return _outcome(self, other, name, op)
        other = other.value if type(other) is SymbolicScalar else other
        return op(self._escape(f"compared ({name})"), other)

    def __eq__(self, other):
        return self._compare(other, "eq", lambda a, b: a == b)

    def __ne__(self, other):
        return self._compare(other, "ne", lambda a, b: a != b)

    def __lt__(self, other):
        return self._compare(other, "lt", lambda a, b: a < b)

    def __le__(self, other):
        return self._compare(other, "le", lambda a, b: a <= b)

    def __gt__(self, other):
        return self._compare(other, "gt", lambda a, b: a > b)

    def __ge__(self, other):
        return self._compare(other, "ge", lambda a, b: a >= b)

    # ---- arithmetic ------------------------------------------------------------------------
    def __add__(self, other):
        return _arith(self, other, "+", False)

    def __radd__(self, other):
        return _arith(self, other, "+", True)

    def __sub__(self, other):
        return _arith(self, other, "-", False)

    def __rsub__(self, other):
        return _arith(self, other, "-", True)

    def __mul__(self, other):
        return _arith(self, other, "*", False)

    def __rmul__(self, other):
        return _arith(self, other, "*", True)

    def __truediv__(self, other):
        return _arith(self, other, "/", False)

    def __rtruediv__(self, other):
        return _arith(self, other, "/", True)

    def __neg__(self):
        _int64_holds(self, self.tensor)
        return _checked(self, -self.tensor, -self.value)

    def __pos__(self):
        return self

    def __abs__(self):
        _int64_holds(self, self.tensor)
        return _checked(self, self.tensor.abs(), abs(self.value))

    def _unsupported(self, other, name):
        if isinstance(other, Tensor):
            return NotImplemented           # (the tensor's reflected operator decides)
        return self._escape(name)

    def __floordiv__(self, other):
        return _arith(self, other, "//", False)

    def __rfloordiv__(self, other):
        return _arith(self, other, "//", True)

    def __mod__(self, other):
        return _arith(self, other, "%", False)

    def __rmod__(self, other):
        return _arith(self, other, "%", True)

    def __pow__(self, other):
        return _power(self, other, False)

    def __rpow__(self, other):
        return _power(self, other, True)

    def __divmod__(self, other):
        return divmod(self._escape("divmod()"), other)


_REFLECTED_COMPARISON = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt",
                         "ge": "le"}
_PYTHON = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
           "/": lambda a, b: a / b, "//": lambda a, b: a // b, "%": lambda a, b: a % b,
           "**": lambda a, b: a ** b}


def _power(s, other, reflected):
    """s ** other (other ** s when reflected) where the base is a positive number and the
    result a float (a bias correction's `beta ** t`, a decay's `gamma ** epoch`, Noam's
    `step ** -0.5`): float64 pow, glibc's as Python's (the pow op of one element); else the
    number read."""
    if isinstance(other, Tensor):
        return NotImplemented
    other = plain(other)
    base, exponent = (other, s) if reflected else (s, other)
    bv = base.value if type(base) is SymbolicScalar else base
    ev = exponent.value if type(exponent) is SymbolicScalar else exponent
    if type(bv) in (int, float) and type(ev) in (int, float) and bv > 0 and \
            float in (type(bv), type(ev)):
        return _arith(s, other, "**", reflected)
    return _PYTHON["**"](*((other, s._escape("**")) if reflected else (s._escape("**"), other)))


def _arith(s, other, sign, reflected):
    """s <sign> other (other <sign> s when reflected) as a SymbolicScalar, where the recorded
    ops give Python's number to the bit; else an escape (the number read)."""
    if isinstance(other, Tensor):
        return NotImplemented               # (Tensor's reflected operator: as_operands)
    # (a SymInt, `meter.n += x.shape[0]` at a second batch size: its int is a constant
    # operand below, which a size template remakes at each size, as it does a shape)
    other = plain(other)
    if type(other) is SymbolicScalar:
        o_t, o_v = other.tensor, other.value
    elif type(other) in (int, float):
        o_t, o_v = None, other
    else:
        return _PYTHON[sign](*((other, s._escape(sign)) if reflected else
                               (s._escape(sign), other)))
    a, b = (o_v, s.value) if reflected else (s.value, o_v)
    as_float = type(a) is float or type(b) is float or sign == "/"
    if (sign in ("/", "//", "%") and b == 0) or (as_float and any(
            type(v) is int and abs(v) >= _FLOAT_EXACT for v in (a, b))) or (
            as_float and sign in ("//", "%")):      # (ints only: Python's floor semantics)
        s._escape(f"{sign} with {o_v!r}")
    value = _PYTHON[sign](a, b)
    if not as_float and abs(value) >= _INT64:
        s._escape(f"{sign}: an int past int64")
    st = s.tensor.to(float64) if as_float else s.tensor
    if o_t is not None:
        ot = o_t.to(float64) if as_float else o_t
    else:
        ot = _exact(o_v) if as_float else o_v
    x, y = (ot, st) if reflected else (st, ot)
    if sign == "**" and not isinstance(y, Tensor):
        # (a number exponent would be inlined as multiplies or sqrt, a stand-in base's
        # `step ** -0.5` then rounding otherwise than Python's libm pow)
        y = _float_operand(st, y)
    if sign in ("/", "**") and not isinstance(x, Tensor):
        # (a number over a tensor is PyTorch's reciprocal times the number, rounded twice:
        # 0.1 / 5 would be 0.020000000000000004, Python's 0.02)
        x = _float_operand(st, x)
    if sign in ("/", "//", "%") and isinstance(y, Tensor):
        _require(y != 0)                    # (Python's ZeroDivisionError in a later call)
    for v, vt in ((s.value, s.tensor), (o_v, o_t)):
        if as_float and type(v) is int and vt is not None:
            _require(vt.abs() < _FLOAT_EXACT)
    if not as_float:
        _int64_holds(s, _PYTHON[sign](*(v.to(float64) if isinstance(v, Tensor) else _exact(v)
                                        for v in (x, y))))
    t = _PYTHON[sign](x, y)     # (int64 // and % round as Python's: toward minus infinity)
    if sign == "**":                        # (Python raises where pow overflows)
        _require(t.isfinite() & (x > 0) if isinstance(x, Tensor) else t.isfinite())
    return _checked(s, t, value)


def _float_operand(like, v):
    """Number v as a 0-d float64 operand: an int a traced full, whose int a size template
    remakes (`lr / x.shape[0]`, `x.shape[0] ** p`; an array would trace each size again)."""
    if type(v) is int:
        return like.new_full((), v, dtype=float64)
    return scalar_input(float(v))


def _exact(v):
    """Number v as an operand of float64 arithmetic: an int float64 holds exactly stays an
    int (the same number, and a size a template remakes, where its float would not be)."""
    return v if type(v) is int and abs(v) < _FLOAT_EXACT else float(v)


def _outcome(s, other, name, op):
    """s compared with the Python number or stand-in other while tracing: this call's
    outcome, with a guard that every call the entry serves has the same one (a step
    counter's `step < warmup` or `(i + 1) % k == 0`, Noam's `min(step ** -0.5, step *
    warmup ** -1.5)`, costs a trace per outcome, not one per value)."""
    standing = type(other) is SymbolicScalar
    ov = other.value if standing else other
    as_float = type(s.value) is float or type(ov) is float
    if type(other) is int and abs(other) >= (_FLOAT_EXACT if as_float else _INT64):
        return op(s._escape(f"compared ({name})"), other)
    out = op(s.value, ov)
    for v, t in ((s.value, s.tensor), (ov, other.tensor if standing else None)):
        if as_float and type(v) is int and t is not None:
            _require(t.abs() < _FLOAT_EXACT)    # (exact in float64, as Python compares it)
    if standing:
        o = other.tensor.to(float64) if as_float else other.tensor
    else:
        o = _exact(other) if as_float else other
    flag = getattr(s.tensor.to(float64) if as_float else s.tensor, name)(o)
    _require(flag if out else flag.logical_not())
    return out


def _require(flag):
    """A value guard of the trace (tracer.guard): the traced 0-d bool flag holds in every
    call its entry serves. The checks of this file hold for the number of the traced call
    only; a later call where they fail traces again (and raises as Python and PyTorch do)."""
    tracer = trace_state.state.tracer
    if tracer is not None and hasattr(tracer, "parent"):
        # (inside a tensor if / while: a region's guard on its own value is refused; the
        # numbers are guarded by value instead, the region kept)
        raise ScalarEscape("", "a check inside tensor-dependent control flow")
    if tracer is not None:
        tracer.guard(flag, True)


def _int64_holds(s, t):
    """For an int SymbolicScalar s: a guard that t, the float64 (or int64) value of an int
    result, is well inside int64 (a Python int past it is not the graph's wrapped one)."""
    if type(s.value) is int:
        _require(t.to(float64).abs() < 2.0 ** 62)


def _checked(s, t, value):
    """The SymbolicScalar of t (whose value this call must be `value`, bit for bit: else an
    escape, never a number that differs from Python's)."""
    got = t._data.reshape(()).item()
    if type(got) is not type(value) or repr(got) != repr(value):
        s._escape(f"arithmetic gave {got!r} where Python gives {value!r}")
    return SymbolicScalar(t, value, s.path)


def scalar_input(value):
    """The graph input of a dynamic number: a 0-d float64 (float) or int64 (int) tensor."""
    return Tensor._from_array(np.array(value, dtype=np.float64 if type(value) is float
                                       else np.int64))
