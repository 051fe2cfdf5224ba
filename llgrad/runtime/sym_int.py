"""SymInt: a size the user's code reads in a second trace that differs from the first's
(llgrad.SymInt, as torch.SymInt).

It knows the int the size is, and that size as a function of the one symbol the two calls
differ in (`at(c)`: k * c**e for a size read, composed through the arithmetic the user's
code does on it). It is not an int, so every use Python makes of it calls one of its
methods, and what the user's code does with it is watched while the trace runs
(size_reads.SizeReads):
- arithmetic with ints gives SymInts again (B * T, C // H, B - 1);
- a comparison or truth test gives its bool and notes a check: the same comparison at size
  c must come out the same for the trace to stand for a call at c;
- any other use that makes a plain number or text of it (int(), float(), `/`, an index,
  range(), NumPy, str(), hash(), a dict key) refuses the template: the trace then stands
  for its own size only (compile traces it again with ints: dynamic_sizes.py).
llgrad's own code (its modules and functions) reads it as the int it is: what it does with
sizes shows in the graph, which compile fits and verifies at each size. Outside its trace
it acts as that int (but for isinstance(x, int)); a copy or a pickle of it is the int."""
import math
import numbers
import operator
import sys

from . import trace_state


# llgrad's frames that act for the user's code, so that a size read or used through them
# is the user's: converted control flow's helpers (a chained comparison, `and` / `or` /
# `not`, an if's truth test), converted return values' operators (`return loss.item(), B * 2`),
# and the wrappers that only pass a call on (x.size(0) and x.stride() through numpy_names'
# keyword wrapper, llgrad.numel(x) through out_args' and functions' method forwarders)
_ON_BEHALF = "llgrad.tracer.control"
_FORWARDERS = frozenset({("llgrad.runtime.numpy_names", "f"), ("llgrad.runtime.out_args", "f"),
                         ("llgrad.runtime.functions", "fn"),
                         ("llgrad.tracer.returned", "returned_binop"),
                         ("llgrad.tracer.returned", "returned_unop")})


def users_code(depth):
    """Whether the frame `depth` above the caller (past llgrad's frames acting for it) is
    the user's code, not llgrad's own."""
    frame = sys._getframe(depth + 1)
    while frame.f_back is not None and (
            frame.f_globals.get("__name__") == _ON_BEHALF or
            (frame.f_globals.get("__name__"), frame.f_code.co_name) in _FORWARDERS):
        frame = frame.f_back
    name = frame.f_globals.get("__name__") or ""
    return not (name == "llgrad" or name.startswith("llgrad."))


def running_reads():
    """The running trace's SizeReads (its top tracer's), or None (no trace)."""
    tracer = trace_state.state.tracer
    while tracer is not None and getattr(tracer, "parent", None) is not None:
        tracer = tracer.parent
    return getattr(tracer, "size_reads", None)


def _at(x):
    return x._at if type(x) is SymInt else (lambda c, v=int(x): v)


def plain(x):
    """x, or the int a SymInt x is (for llgrad's own code that hands a size to NumPy)."""
    return x._value if type(x) is SymInt else x


class SymInt:
    """A size that knows itself as a function of the size (`_at`), in the trace (`_reads`)
    that made it. Not an int: every use Python makes of it calls one of its methods (an
    int subclass's value is read directly by a list index, range(), NumPy, `0.5 * B`), so
    each use is seen. After its trace, and in llgrad's own code, it acts as its int
    (`operator.index`, arithmetic and comparisons give plain ints and bools); registered as
    a numbers.Integral."""
    __slots__ = ("_value", "_at", "_reads")

    def __init__(self, value, at, reads):
        self._value, self._at, self._reads = value, at, reads

    def plain(self):
        """The int this size is."""
        return self._value

    def __getattr__(self, name):     # (int's other methods and properties: bit_length, real)
        if name.startswith("__") or not hasattr(int, name):
            raise AttributeError(f"'int' object has no attribute '{name}'")
        reads = _watched(self)
        if reads is not None:
            reads.refuse(f"a size read as int.{name}")
        return getattr(self._value, name)


numbers.Integral.register(SymInt)


def _watched(x, depth=2):
    """The SizeReads to note a use of SymInt x in: its trace's, while it runs, if the use
    is the user's code's."""
    reads = x._reads
    return reads if reads is running_reads() and users_code(depth) else None


def _takes_sizes(x):
    """Whether x's reflected operator takes a SymInt itself: a compiled function's dynamic
    number (runtime/symbolic_scalar.py), which passes for an int but keeps the size a graph
    value (the plain int in its arithmetic would refuse the template)."""
    return getattr(type(x), "takes_sizes", False)


def _is_int(x):
    return type(x) in (int, bool, SymInt)


def _arithmetic(name, fn, reflected=False):
    unary = name in _UNARY

    def method(self, *other):
        if unary:
            out = fn(self._value)
        elif len(other) > 1:        # (pow(B, e, m): a number the template does not follow)
            out = pow(self._value, *map(plain, other))
            reads = _watched(self)
            if reads is not None:
                reads.refuse("a size in a three-argument pow")
            return out
        else:
            o = other[0]
            if not isinstance(o, (int, float, complex, SymInt)) and \
                    not isinstance(o, numbers.Number) or _takes_sizes(o):
                return NotImplemented       # (a tensor, an array, a list: their own method)
            a, b = (plain(o), self._value) if reflected else (self._value, plain(o))
            out = fn(a, b)
        reads = _watched(self)
        if reads is None:
            return out
        if type(out) is not int or not (unary or _is_int(other[0])):
            reads.refuse(f"a size in `{name}` with {type(other[0]).__name__}" if other else
                         f"a size in `{name}`")
            return out
        fa = self._at
        if unary:
            return _derived(out, lambda c: fn(fa(c)), reads)
        fb = _at(other[0])
        return _derived(out, (lambda c: fn(fb(c), fa(c))) if reflected else
                        (lambda c: fn(fa(c), fb(c))), reads)
    method.__name__ = name
    return method


def rule(x, y, a, b, max_power=3):
    """x at size a, y at size b -> None (the same number), (k, e): k * s**e at size s,
    (k, 1, m): k * s + m (m != 0, an affine size: a KV cache's s + 1; two sizes always fit
    one, so a template with such a rule serves only once a third trace confirms it:
    compile/size_templates.py), or (p, e, 0, q): p * s**e / q, q > 1, a size a pool divides
    (s / 2 of a 2x2 pool, its plane's s**2 / 4): used only at the sizes it is an integer at
    (`exact`: at the others each op rounds its own way), and, as an affine rule, once a
    third trace confirms it ((s + 3) // 2 is 2 * s / 3 at 6 and 9, not at 12);
    ValueError if none. (No quotient with an offset: three sizes of a rounded number fall
    on one, ceil(2 * s / 3) at 5, 7 and 9 on (s + 3) / 2, wrong at 11.)"""
    if x == y:
        return None
    for e in range(1, max_power + 1):
        if x % a ** e == 0 and y % b ** e == 0 and x // a ** e == y // b ** e:
            return x // a ** e, e
    for e in range(1, max_power + 1):
        if x * b ** e == y * a ** e:
            g = math.gcd(x, a ** e)
            return x // g, e, 0, a ** e // g
    if a != b and (y - x) % (b - a) == 0:
        k = (y - x) // (b - a)
        return k, 1, x - k * a
    raise ValueError(f"{x} at size {a} and {y} at size {b} is not k * size**e (+ m)")


def at(r, c):
    """A rule's number at size c (r: rule's (k, e), (k, 1, m) or (p, e, 0, q))."""
    if len(r) > 3:
        return (r[0] * c ** r[1] + r[2]) // r[3]
    return r[0] * c ** r[1] + (r[2] if len(r) > 2 else 0)


def affine(r):
    """Whether rule r needs a third trace's confirmation: an offset (two sizes fit one
    through any two numbers) or a quotient (a rounded number's two values fit one)."""
    return r is not None and len(r) > 2


def exact(r, c):
    """Whether rule r's number at size c is an integer without rounding: a quotient
    p * c**e / q fitted at a and b says nothing of how an op rounds at other c."""
    return r is None or len(r) < 4 or (r[0] * c ** r[1] + r[2]) % r[3] == 0


def kept_sign(r, a, b, c):
    """Whether rule r at size c stays on the side of 0 and 1 its fits at a and b are on: an
    affine size (s - 2) fitted at 3 and 4 is no evidence for the empty dimension it is at 2,
    nor an offset s - 1 for a negative one at 0."""
    if r is None or len(r) == 2:
        return True
    lo, v = min(at(r, a), at(r, b)), at(r, c)
    return not (lo >= 1 > v or lo >= 0 > v)


def _derived(value, at_c, reads):
    """A SymInt the user's code computed: a template puts, where it lands in a graph, the
    number k * c**e (+ m) its two traces' values fit (or the one number, if they are
    equal), so its own value at c must be that: `(B >> 4) + 1` is 2 at 16 and at 24, but 3
    at 40."""
    a, b = reads.symbol
    try:
        r = rule(at_c(a), value, a, b)
    except (ValueError, ArithmeticError):   # (not a size a template can hold: not fitted)
        r = False
    if r is not False:      # (an affine fit's check: kept for a template with affine rules)
        first = at_c(a)
        reads.check(lambda c: at_c(c) == (first if r is None else at(r, c)),
                    affine=affine(r))
    return SymInt(value, at_c, reads)


def _comparison(name, fn):
    def method(self, other):
        if not isinstance(other, (numbers.Number, SymInt)) or _takes_sizes(other):
            return NotImplemented       # (a tensor's own comparison; None, a str: unequal)
        out = fn(self._value, plain(other))
        reads = _watched(self)
        if reads is not None:
            fa, fb = self._at, (_at(other) if _is_int(other) else lambda c: other)
            reads.check(lambda c: fn(fa(c), fb(c)) == out)
        return out
    method.__name__ = name
    return method


def _refusing(name, what, base):
    def method(self, *args):
        out = base(self._value, *[plain(a) for a in args])
        if out is not NotImplemented:       # (`B / x`: the tensor's __rtruediv__ decides)
            reads = _watched(self)
            if reads is not None:
                reads.refuse(f"a size {what}")
        return out
    method.__name__ = name
    return method


def _bool(self):
    out = self._value != 0
    reads = _watched(self)
    if reads is not None:
        fa = self._at
        reads.check(lambda c: (fa(c) != 0) == out)
    return out


_UNARY = {"__neg__", "__pos__", "__abs__", "__invert__"}
for _name, _fn in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("floordiv", operator.floordiv), ("mod", operator.mod),
                   ("pow", operator.pow), ("lshift", operator.lshift),
                   ("rshift", operator.rshift), ("and", operator.and_),
                   ("or", operator.or_), ("xor", operator.xor)):
    setattr(SymInt, f"__{_name}__", _arithmetic(f"__{_name}__", _fn))
    setattr(SymInt, f"__r{_name}__", _arithmetic(f"__r{_name}__", _fn, reflected=True))
for _name, _fn in (("neg", operator.neg), ("pos", operator.pos), ("abs", operator.abs),
                   ("invert", operator.invert)):
    setattr(SymInt, f"__{_name}__", _arithmetic(f"__{_name}__", _fn))
for _name, _fn in (("eq", operator.eq), ("ne", operator.ne), ("lt", operator.lt),
                   ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge)):
    setattr(SymInt, f"__{_name}__", _comparison(f"__{_name}__", _fn))
SymInt.__bool__ = _bool
for _name, _what in (("__int__", "made a plain int"), ("__index__", "used as an int by Python "
                                                                     "(an index, range(), NumPy)"),
                     ("__float__", "made a float"), ("__complex__", "made a complex"),
                     ("__divmod__", "in divmod"), ("__rdivmod__", "in divmod"),
                     ("__hash__", "hashed (a dict key, a set member)"),
                     ("__str__", "formatted as text"), ("__repr__", "formatted as text"),
                     ("__format__", "formatted as text"), ("__round__", "rounded"),
                     ("__trunc__", "made a plain int"), ("__floor__", "made a plain int"),
                     ("__ceil__", "made a plain int")):
    setattr(SymInt, _name, _refusing(_name, _what, getattr(int, _name, complex)))


def _number_op(fn, reflected=False):
    """int's true division, as a float or a complex gets it too (int's own method answers
    NotImplemented to `1.0 / B`, and float's knows no SymInt: a TypeError, not a float)."""
    def base(value, other):
        if not isinstance(other, numbers.Number) or _takes_sizes(other):
            return NotImplemented       # (`B / x`, `B / lr`: the other's __rtruediv__ decides)
        return fn(other, value) if reflected else fn(value, other)
    return base


SymInt.__truediv__ = _refusing("__truediv__", "divided as floats",
                               _number_op(operator.truediv))
SymInt.__rtruediv__ = _refusing("__rtruediv__", "divided as floats",
                                _number_op(operator.truediv, reflected=True))


def product(values):
    """The product of sizes, for the user's code that asked for it (Size.numel): a SymInt
    of the running trace where one of them is (its uses watched as the user's own `*`)."""
    n = 1
    for v in values:
        n *= plain(v)
    sym = next((v for v in values if type(v) is SymInt), None)
    reads = _watched(sym, 3) if sym is not None else None
    if not reads:
        return n
    ats = [_at(v) for v in values]
    return _derived(n, lambda c: _product(f(c) for f in ats), reads)


def _product(xs):
    n = 1
    for x in xs:
        n *= x
    return n


def _reduce(self, *protocol):      # (a copy or a pickle of it is the plain int)
    reads = _watched(self)
    if reads is not None:
        reads.refuse("a size copied")
    return int, (self._value,)


SymInt.__reduce__ = SymInt.__reduce_ex__ = _reduce
