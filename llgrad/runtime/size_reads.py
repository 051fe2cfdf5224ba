"""The sizes the user's own code reads from tensors while compile traces it.

A trace serves other sizes (compile/size_templates.py) only if the user's Python runs the
same at them. What it reads of a tensor's sizes (`.shape`, `.size()`, `len()`, `.numel()`,
`.stride()`) is noted here, in order, on the top tracer; llgrad's own reads (its modules and
functions, whose decisions show in the graph) are not: the reader's module tells them apart.

In a trace at a second size (`expecting`: the first trace's reads and the symbol's two
values), a read that differs from the first's is handed out as a SymInt (sym_int.py), whose
uses are watched; `refused` says why the trace cannot stand for other sizes, if it cannot."""
import contextlib
import threading

from .size import Size
from .sym_int import SymInt, affine, at, rule, running_reads, users_code

_pending = threading.local()    # (the next trace's Expectation: `expecting`)
live = False        # SymInts handed out in the running trace: the dispatcher reads attrs plain


class SizeReads:
    """One trace's reads: `values` in order (SymInts where they differ from `expected`),
    `checks` (functions of the size: the comparisons the user's code made of SymInts) and
    `refused` (None, or why the trace stands for its own size only)."""
    __slots__ = ("values", "checks", "refused", "expected", "symbol", "symbolic", "decisions",
                 "affine_checks", "affine")

    def __init__(self):
        self.values, self.checks, self.refused, self.symbolic = [], [], None, False
        # (a derived size's affine fit, checked by a template with affine rules; affine: a
        # size read fitted k * s + m only, which makes a template need a third trace)
        self.affine_checks, self.affine = [], False
        self.decisions = []     # [(fn, its int arguments, what it gave)]: `decided`
        expectation, _pending.value = getattr(_pending, "value", None), None
        self.expected = self.symbol = None
        if expectation is not None:
            self.expected, self.symbol = expectation.entry.size_reads.values, expectation.symbol
            expectation.reads = self

    def refuse(self, why):
        if self.refused is None:
            self.refused = why

    def check(self, fn, affine=False):
        (self.affine_checks if affine else self.checks).append(fn)

    def note(self, value, symbolic=True):
        i = len(self.values)
        if self.expected is not None and i < len(self.expected) and value != self.expected[i]:
            value = self._differing(value, self.expected[i], symbolic)
        self.values.append(value)
        return value

    def _differing(self, value, first, symbolic):
        """value read where the first trace read `first`: SymInts where they differ."""
        many = isinstance(value, tuple)
        if not symbolic or many != isinstance(first, tuple) or \
                (many and len(value) != len(first)):
            self.refuse("a size read differs from the first trace's in kind (len())")
            return value
        a, b = self.symbol
        out = []
        for y, x in zip(value, first) if many else ((value, first),):
            try:
                r = rule(x, y, a, b)
            except ValueError as e:
                self.refuse(f"a size read: {e}")
                return value
            if r is None:
                out.append(y)
            else:
                global live
                self.symbolic = live = True
                self.affine = self.affine or affine(r)
                out.append(SymInt(y, lambda c, r=r: at(r, c), self))
        return (Size(out) if isinstance(value, Size) else tuple(out)) if many else out[0]


class Expectation:
    """A trace at a second size: the entry of the first (its size_reads), the symbol's two
    values (a, b), and the trace's own SizeReads once its tracer is made."""
    __slots__ = ("entry", "symbol", "reads")

    def __init__(self, entry, symbol):
        self.entry, self.symbol, self.reads = entry, symbol, None


@contextlib.contextmanager
def expecting(expectation):
    """The next trace on this thread meets an Expectation (None: reads plain sizes)."""
    global live
    _pending.value = expectation
    try:
        yield
    finally:
        _pending.value, live = None, False


def plain_attrs(attrs):
    """An op's attributes with each SymInt (in them or in a tuple or list of them) an int."""
    out = {}
    for k, v in attrs.items():
        if type(v) is SymInt:
            v = v.plain()
        elif type(v) in (tuple, list, Size) and any(type(x) is SymInt for x in v):
            v = type(v)([x.plain() if type(x) is SymInt else x for x in v])
        out[k] = v
    return out


def decided(fn, args, out):
    """llgrad's own code computed out = fn(*args) of sizes, in Python, in a way the graph
    does not show (a slice's bounds clamped to its dimension): a template re-checks it at
    each size (compile/size_templates.py)."""
    reads = running_reads()
    if reads is not None:
        reads.decisions.append((fn, args, out))


def noted(value, symbolic=True):
    """value (a shape, a stride tuple or a number), read by the caller's caller: noted in
    the running trace when that is not llgrad's own code (symbolic=False: len(), which
    Python makes a plain int)."""
    if not users_code(2):
        return value
    reads = running_reads()
    return value if reads is None else reads.note(value, symbolic)
