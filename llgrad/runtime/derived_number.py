"""A number the user's Python computes from a stand-in (a SymbolicScalar: symbolic_scalar.py)
where no graph op gives Python's result to the bit: `round(acc.item(), 4)` (Python rounds
the double's exact decimal value to 4 digits, then reads the decimal back as a double).

It is not traced: it holds the stand-in's graph value (`tensor`) and the Python function of
that number that gives it (`post`), so it can go only where a compiled call computes it
again from the stand-in's number as eager computes it: into the result (a ReturnedScalar
with that post, compile/symbolic_args.py), into a slot of the state or a list appended to
(compile/attr_writes.py writes post(number)), or into text the run writes (a piece rendered
from the number). Any other use (arithmetic, a comparison, float(), a tensor op, pickling)
reads the stand-in's number: the trace ends (ScalarEscape) and the number is guarded by
value, as before. Outside a trace (one leaked into Python state) it acts as its number."""
from . import rendered_text, trace_state
from .symbolic_scalar import SymbolicScalar


class DerivedNumber:
    """post(number of `base`, a SymbolicScalar): `value` this call's number."""
    __slots__ = ("base", "post", "value")

    def __init__(self, base, post):
        self.base, self.post = base, post
        self.value = post(base.value)

    @property
    def __class__(self):
        return type(self.value)         # (isinstance(v, float) holds, as eagerly)

    @property
    def tensor(self):
        """The graph value the number is computed from (the stand-in's)."""
        return self.base.tensor

    def read(self, how):
        """Its number for a use that steers Python (an escape while tracing)."""
        return self.post(self.base._escape(how))

    def __format__(self, spec):
        return self._rendered(spec, "formatted", True)

    def __str__(self):
        return self._rendered("", "str()")

    def __repr__(self):
        return self._rendered("", "repr()")

    def _rendered(self, spec, how, formatted=False):
        """format(number, spec) for output (`print(round(loss.item(), 4))`): a piece each
        compiled call formats from its own number, as SymbolicScalar._rendered; else the
        number read. (str() and repr() of a float or an int are its format with no spec.)"""
        rendering = rendered_text.active()
        if rendering is None or not rendered_text.value_free(spec):
            return format(self.read(how), spec)
        post, kind, base = self.post, type(self.base.value), self.base
        text = format(self.value, spec)
        return rendering.add(base.tensor, lambda a: format(post(kind(a.item())), spec), text,
                             lambda at: trace_state.state.tracer.guard(base.tensor, base.value),
                             formatted)

    def __getattr__(self, name):
        if name.startswith("__") or name in DerivedNumber.__slots__:
            raise AttributeError(name)
        return getattr(self.read(f".{name}"), name)


def _reading(name):
    def method(self, *args):
        return getattr(self.read(name), name)(*args)
    method.__name__ = name
    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
              "__rmod__", "__pow__", "__rpow__", "__divmod__", "__rdivmod__", "__neg__",
              "__pos__", "__abs__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
              "__float__", "__int__", "__index__", "__bool__", "__complex__", "__hash__",
              "__round__", "__trunc__", "__floor__", "__ceil__", "__reduce_ex__"):
    setattr(DerivedNumber, _name, _reading(_name))


def is_stand_in(x):
    """Whether x is a stand-in of a traced number or a DerivedNumber of one."""
    return type(x) is SymbolicScalar or type(x) is DerivedNumber


def number_reader(x):
    """How a compiled call makes the Python number x stands for from its graph value's
    number (the value's own type for a stand-in, post for a DerivedNumber); None for a
    tensor or a constant."""
    if type(x) is SymbolicScalar:
        return type(x.value)
    return x.post if type(x) is DerivedNumber else None
