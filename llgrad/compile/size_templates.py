"""New batch sizes without a trace each: an entry fitted from two traces, made again per size.

torch.compile's automatic dynamic, the llgrad way. A function traced at two sizes a and b of
one symbol s (the inputs' dimensions that differ between the calls: the batch, say) gives
two entries. If they are the same entry but for integers, and every integer that differs is
k * s**e at both (the same k and e: a shape (s, 128), a stride 128 * s, a view's size
4 * s), the pair is a Template: a call at any size c >= 2 whose guard key fits it gets the
entry remade with each such integer k * c**e, no trace (`instantiate`).

Why that is sound: the user's Python ran the same at a and b, and runs the same at c, if
every size it read was the same (size_reads.py hands out the sizes that differed from the
first trace as SymInts, whose comparisons are re-checked at c: `checks`, and refuses the
template on any other use); llgrad's own decisions made on sizes show in the graphs, and
the remade graphs are verified (ir/verify.py infers every node's type again from its
operands: a size the template kept that the op now computes otherwise, as a slice clamped
at c, fails it, and the call traces). Everything else in the entries (positions, guard
values, the objects it reads and writes) must be equal, or there is no template."""
import numpy as np

from ..ir.graph import Graph, Guard, Node, StackType, TensorType, Value
from ..ir.optable import CONTROL
from ..ir.partition import SavedValue
from ..ir.verify import VerifyError, verify
from ..runtime.sym_int import SymInt, affine, at as _at, exact, kept_sign, rule as size_rule
from .attr_write_replay import Write
from .entry import Entry

# Entry slots remade for each entry (its build and runs), not fitted
# (and the key and the user's size reads, compared on their own)
_RUNTIME = frozenset({"timings", "kernels", "_forward_run", "_backward_run", "_runners",
                      "_node_layout", "_unflatten", "_build_job", "_interim_runs",
                      "_cache_hints", "_compiled_before", "llvm_builds", "guard_items",
                      "size_reads", "_guard_check"})
_IR_SLOTS = frozenset({"forward", "backward", "saved", "size_decisions"})
_MAX_POWER = 3          # (an attention's T x T scores: strides of s**2; s**3 for 3-D grids)
_FIXED = object()        # (_Copy's leaf of an int outside the graphs, no SymInt: unfitted)


class NoTemplate(Exception):
    """The two entries differ in more than sizes."""


class _Copy:
    """Copies an entry's plain data, giving `size` each integer that may be a size (in the
    graphs' types, attributes and constant operands, the key's tensor items) and `leaf`
    every other leaf (objects by identity, numbers, strings, arrays by value)."""

    def __init__(self, size, leaf):
        self.size, self.leaf, self.values = size, leaf, {}

    def data(self, x, sizes):
        t = type(x)
        if t is TensorType:     # (the commonest leaf: its sizes without a call each)
            self.leaf((TensorType, x.dtype, len(x.shape)))
            size = self.size
            return TensorType(x.dtype, tuple([size(d) for d in x.shape]),
                              tuple([size(d) for d in x.strides]), size(x.offset))
        if t is int or t is SymInt:     # (outside the graphs, only a SymInt may differ: fit)
            x = self.size(x.plain() if t is SymInt else x)
            if not sizes:
                self.leaf(int if t is SymInt else _FIXED)
            return x
        if t in (float, complex):
            self.leaf((t, repr(x)))     # (nan == nan, -0.0 != 0.0)
            return x
        if x is None or t in (str, bool, type(Ellipsis)):
            self.leaf(x)
            return x
        if t in (tuple, list):
            self.leaf((t, len(x)))
            out = [self.data(y, sizes) for y in x]
            return out if t is list else tuple(out)
        if t is dict:
            self.leaf((dict, len(x)))
            return {self.data(k, False): self.data(v, sizes) for k, v in x.items()}
        if t in (set, frozenset):
            self.leaf((t, len(x), frozenset(map(_token, x))))
            return t(x)
        if t is Value:
            return self.value(x)
        if t is StackType:
            return StackType(self.data(x.elem, True))
        if t is SavedValue:
            self.leaf((SavedValue, x.name, x.loc, x.input_index))
            return SavedValue(x.name, self.data(x.type, True), x.loc, x.input_index)
        if t is Graph:
            return self.graph(x)
        if t is Guard:      # (a value decision: its expected value must be the same)
            return Guard(self.value(x.value), self.data(x.expected, False), self.data(x.loc, False))
        if t is np.ndarray:
            self.leaf((np.ndarray, x.dtype.str, x.shape, x.tobytes()))
            return x
        if t is Write:      # (a tensor put into an object: each trace makes its own)
            return Write(*(self.data(getattr(x, f), False) for f in Write.__slots__))
        self.leaf(_token(x))
        return x

    def value(self, v):
        got = self.values.get(id(v))
        if got is None:
            raise NoTemplate("a value used before its definition")
        self.leaf(("value", got[1]))
        return got[0]

    def define(self, v, node=None):
        new = Value(self.data(v.type, True), node, v.index, v.name)
        self.leaf(("define", v.name, v.index))
        self.values[id(v)] = (new, len(self.values))
        return new

    def graph(self, g):
        if any(n.op in CONTROL for n in g.nodes):
            raise NoTemplate("a control-flow region")
        self.leaf((Graph, g.name, len(g.inputs), len(g.nodes)))
        inputs = [self.define(v) for v in g.inputs]
        nodes = []
        for n in g.nodes:
            self.leaf((Node, n.op, n.loc, len(n.inputs), len(n.outputs)))
            ins = [self.value(x) if type(x) is Value else self.data(x, True) for x in n.inputs]
            attrs = self.data(n.attrs, True)
            view_of = None if n.view_of is None else self.value(n.view_of)
            node = Node(n.op, ins, attrs, None, n.loc, view_of)
            node.outputs = [self.define(v, node) for v in n.outputs]
            nodes.append(node)
        outputs = [self.value(v) for v in g.outputs]
        mutated = {self.data(k, False): self.value(v) for k, v in g.mutated.items()}
        guards = [self.data(x, False) for x in g.guards]
        return Graph(g.name, inputs, nodes, outputs, mutated, guards)


def _token(x):
    """An object as a leaf: itself where it compares by value safely, else its identity."""
    if type(x) in (int, float, str, bool, bytes, type(None)):
        return (type(x), x)
    return ("object", id(x))


def _tensor_item(v):
    """Whether a guard item's value describes a tensor (guards.collect's 7-tuple) or a .grad
    (its 3-tuple): the only items whose integers (shape, strides) may be sizes."""
    return type(v) is tuple and len(v) in (3, 7) and type(v[0]) is str and \
        type(v[1]) is tuple and type(v[2]) is tuple


def _key_data(copy, items):
    out = []
    for name, v in items:
        copy.leaf(name)
        if _tensor_item(v):
            copy.leaf(v[:1] + v[3:])
            v = (v[0], copy.data(v[1], True), copy.data(v[2], True)) + v[3:]
        else:       # (guard values are the cache's keys: they compare by value)
            copy.leaf(("eq", v))
        out.append((name, v))
    return out


def _slots():
    return [s for s in Entry.__slots__ if s not in _RUNTIME] + ["size_decisions"]


def _walk(slots, items, size, leaf):
    """-> {slot: value} copied from `slots` (an Entry's or a copy's), key items first; sizes
    and leaves given in one order."""
    copy = _Copy(size, leaf)
    _key_data(copy, items)
    leaf("|")           # (the key's part ends here: size_of compares it alone)
    return {s: _eager_saved(copy, slots[s]) if s == "eager_saved" else
            copy.data(slots[s], s in _IR_SLOTS) for s in _slots()}


def _eager_saved(copy, saved):
    """entry.eager_saved (eager_graph.py) copied with the shape each output's `made` names
    (for eager's error text) as sizes, its positions and masks as leaves."""
    ins, outs, kinds = saved
    ins, kinds = copy.data(ins, False), copy.data(kinds, False)
    copy.leaf(("eager_saved", len(outs)))
    outs = {copy.data(k, False): (copy.data(mask, False), copy.data(made[:3], False) +
                                  (copy.data(tuple(made[3]), True),))
            for k, (mask, made) in outs.items()}
    return ins, outs, kinds


def _flat(slots, items):
    """-> (the sizes, the skeleton (every other leaf), (sizes, leaves) in the key's part,
    a copy of the slots, where in sizes the ints outside the graphs no SymInt are)."""
    sizes, skeleton, key_part, fixed = [], [], [], []

    def leaf(x):
        if x is _FIXED:
            x = fixed.append(len(sizes) - 1) or int
        elif x == "|" and not key_part:
            key_part.append((len(sizes), len(skeleton)))
        skeleton.append(x)

    copied = _walk(slots, items, lambda v: sizes.append(v) or v, leaf)
    return sizes, skeleton, key_part[0], copied, fixed


def _symbol(items_a, items_b):
    """The one size the calls differ in, (a, b): the smallest differing dimension of the
    inputs (else stride); every other differing one must be a multiple k * a and k * b."""
    pairs = []
    for i in (1, 2):        # (no dimension differs: a stride, as seq[:, -1:]'s of a seq grown)
        pairs = pairs or [(x, y) for (_, u), (_, v) in zip(items_a, items_b)
                          if _tensor_item(u) and _tensor_item(v) and len(u[i]) == len(v[i])
                          for x, y in zip(u[i], v[i]) if x != y]
    if not pairs or len(items_a) != len(items_b):
        raise NoTemplate("no input dimension differs")
    if any(m != n or (u[3:] != v[3:] or len(u[1]) != len(v[1]) if _tensor_item(u) and
                      _tensor_item(v) else u != v)
           for (m, u), (n, v) in zip(items_a, items_b)):
        # (a .grad None at one call and a tensor at the other, ...: not the partner whose
        # trace at a second size would fit, and would spend the redo)
        raise NoTemplate("the calls differ in more than sizes")
    a, b = min(pairs)
    if a < 2 or b < 2 or any(x % a or y % b or x // a != y // b for x, y in pairs):
        raise NoTemplate("the inputs' sizes differ in more than one symbol")
    return a, b


def _rule(x, y, a, b):
    try:
        return size_rule(x, y, a, b, _MAX_POWER)
    except ValueError as e:
        raise NoTemplate(str(e)) from None


class Template:
    """An entry's slots as traced at size b (copied when fitted, before any build or run),
    the guard items of that call, a rule per size integer (None: a constant), the key's
    part of them, and `checks`: the comparisons the user's Python made of a size
    (size_reads.py), each a function of the size that must be True; `keys`: the guard keys
    it made entries for (a key whose entry then missed, on a value guard, traces instead).
    `confirmed`: False while a rule (or a size read) is affine: serving nothing till a third
    trace matches it (size_confirm.py, with `reads`: the reads at b, ints or SymInts)."""
    __slots__ = ("name", "backend", "slots", "items", "rules", "n_key", "key_skeleton",
                 "checks", "uses", "keys", "symbol", "confirmed", "reads")

    def __init__(self, entry, slots, rules, n_key, key_skeleton, checks, symbol):
        self.name, self.backend, self.items = entry.name, entry.backend, entry.guard_items
        self.slots, self.rules, self.n_key = slots, rules, n_key
        self.key_skeleton, self.checks, self.uses, self.keys = key_skeleton, checks, 0, set()
        self.symbol = symbol        # (its two sizes, a and b)
        reads = entry.size_reads
        self.confirmed = not reads.affine and not any(map(affine, rules))
        self.checks += () if self.confirmed else tuple(reads.affine_checks)
        self.reads = reads.values

    def text(self):
        """Its graphs in the IR's text form with the size as s0 (`f32[s0,128]{128,1}`), for
        dump: what every size it serves computes."""
        rules = iter(self.rules)

        def size(v):
            r = next(rules)
            return v if r is None else _Symbol(*r)
        slots = _walk(self.slots, self.items, size, lambda x: None)
        graphs = [str(slots[k]) for k in ("forward", "backward") if slots[k] is not None]
        return (f"\n== size template (made at sizes {self.symbol[0]} and {self.symbol[1]} of "
                f"s0; {len(self.checks)} check(s) of the user's code; served {self.uses} "
                f"size(s){'' if self.confirmed else '; unconfirmed'}) ==\n" +
                "\n".join(graphs) + "\n")


class _Symbol:
    """k * s0**e (+ m) (/ q) where a template's text has a size (`s0+1`, `(s0-2)/2`)."""
    __slots__ = ("k", "e", "m", "q")

    def __init__(self, k, e, m=0, q=1):
        self.k, self.e, self.m, self.q = k, e, m, q

    def __str__(self):
        text = ("" if self.k == 1 else f"{self.k}*") + "s0" + (
            "" if self.e == 1 else f"^{self.e}") + ("" if not self.m else f"{self.m:+d}")
        return text if self.q == 1 else (f"({text})" if self.m else text) + f"/{self.q}"

    __repr__ = __str__      # (attributes print their values' repr)


def _reads_fit(reads_a, reads_b, symbol):
    """The user's code read the same sizes in both traces, but where it was handed SymInts."""
    if reads_a.refused or reads_b.refused:
        raise NoTemplate(f"the user's code used a size: {reads_a.refused or reads_b.refused}")
    if reads_b.symbolic and reads_b.symbol != symbol:
        raise NoTemplate("the second trace's sizes were read against another entry")
    if len(reads_a.values) != len(reads_b.values):
        raise NoTemplate("the user's code read sizes a different number of times")
    for x, y in zip(reads_a.values, reads_b.values):
        for u, v in zip(x, y) if isinstance(y, tuple) else ((x, y),):
            if type(v) is not SymInt and u != v:
                raise NoTemplate(f"the user's code read a size that changed ({u}, {v})")


def fit(entry_a, entry_b):
    """-> the Template of two entries of one function (b just traced), or raise NoTemplate."""
    a, b = _symbol(entry_a.guard_items, entry_b.guard_items)
    _reads_fit(entry_a.size_reads, entry_b.size_reads, (a, b))
    sizes_a, skel_a, _, _, _ = _flat(_entry_slots(entry_a), entry_a.guard_items)
    sizes_b, skel_b, (n_key, n_skel), copied, fixed = _flat(_entry_slots(entry_b),
                                                            entry_b.guard_items)
    if len(sizes_a) != len(sizes_b) or skel_a != skel_b or any(
            sizes_a[i] != sizes_b[i] for i in fixed):   # (an int no SymInt: no size)
        at = next((i for i, (x, y) in enumerate(zip(skel_a, skel_b)) if x != y), None)
        raise NoTemplate("the traces differ in more than sizes" + (
            "" if at is None else f" ({str(skel_a[at])[:60]} against {str(skel_b[at])[:60]}, "
            f"after {str(skel_a[at - 1])[:60]})"))
    rules = [_rule(x, y, a, b) for x, y in zip(sizes_a, sizes_b)]
    return Template(entry_b, copied, rules, n_key, skel_b[:n_skel],
                    tuple(entry_b.size_reads.checks), (a, b))


def _entry_slots(entry):     # (its size decisions fitted as sizes: _IR_SLOTS)
    return {**{s: getattr(entry, s) for s in _slots()[:-1]},
            "size_decisions": entry.size_reads.decisions}


def size_of(template, items):
    """The size c >= 2 at which a call's guard items fit the template, or None."""
    sizes, skeleton = [], []
    _key_data(_Copy(lambda v: sizes.append(v) or v, skeleton.append), items)
    if len(sizes) != template.n_key or skeleton != template.key_skeleton:
        return None
    rules = template.rules[:len(sizes)]
    c = next(((v - _at(r, 0)) // r[0] for v, r in zip(sizes, rules)
              if r is not None and r[1] == 1 and len(r) < 4), None)
    if c is None or c < 2 or any(v != (v if r is None else _at(r, c))
                                 for v, r in zip(sizes, rules)):
        return None
    return c


def _holds(check, c):
    """A check of the user's arithmetic at c; False where it raises (`64 // (B - 8)` at 8:
    the call traces, and the user's code raises as eager's does)."""
    try:
        return check(c)
    except Exception:
        return False


def instantiate(template, items):
    """-> a new Entry: the template's made at the size of a call's guard items, or None (no
    fit, a comparison the user's Python made comes out otherwise, or a graph's types do not
    hold at that size)."""
    c = size_of(template, items)
    if c is None or not template.confirmed or not all(
            kept_sign(r, *template.symbol, c) and exact(r, c) for r in template.rules) or \
            not all(_holds(check, c) for check in template.checks):
        return None
    rules = iter(template.rules)

    def size(v):
        r = next(rules)
        return v if r is None else _at(r, c)

    slots = _walk(template.slots, template.items, size, lambda x: None)
    if any(fn(*args) != out for fn, args, out in slots.pop("size_decisions")):
        return None     # (a slice clamped otherwise at this size, ...)
    entry = Entry(template.name, template.backend, items)
    for s, v in slots.items():
        setattr(entry, s, v)
    entry.size_reads = None     # (made, not traced: no partner of a later fit)
    try:
        for g in (entry.forward, entry.backward):
            if g is not None:
                verify(g)
    except VerifyError:
        return None
    entry.size_sibling = _sibling(template, c)
    return entry


def _sibling(template, c):
    """-> which -> the template's forward or backward graph at one of the sizes it was
    traced at, other than c: the partner a first build at c derives code shared between
    sizes from (codegen/lower.py), so that the family's first build is its only one, not a
    build at c and another at the next size. Made on first use, once."""
    made = []

    def graph(which):
        if not made:
            other = template.symbol[1] if template.symbol[1] != c else template.symbol[0]
            rules = iter(template.rules)

            def size(v):
                r = next(rules)
                return v if r is None else _at(r, other)
            made.append(_walk(template.slots, template.items, size, lambda x: None))
        return made[0][which]
    return graph


def plain(entry):
    """Entry's slots with every SymInt (the second trace's sizes, passed on by the user's
    code) the int it is: its build and later fits read plain numbers."""
    slots = _walk(_entry_slots(entry), entry.guard_items, int, lambda x: None)
    entry.size_reads.decisions = slots.pop("size_decisions")
    for s, v in slots.items():
        setattr(entry, s, v)
