"""Random programs over the op table, for differential fuzzing (tests/fuzz/test_fuzz.py).

`programs()` is a hypothesis strategy drawing a Program: a small straight-line function of
tensors made of random steps over the ops of llgrad.ir.OPS, with random shapes (0- and 1-size
dims included), broadcasting, inputs laid out transposed / stepped / offset / expanded,
views mutated in place, and intermediates reused. A Program's repr is its Python source, so
a failing case shrinks to a minimal program printed as Python (`Listing('''...''')`, ready to
paste into a regression test); `Program.load()` execs that very source, so what is printed
is exactly what runs:

    def f(x0, x1):
        v0 = x0.exp()
        v1 = v0.clone()
        v1[1:].mul_(x1)
        return v1.sum(0), v0

    def make_inputs():
        return [make_input((3, 4), 'float64', 'transposed', seed=1, requires_grad=True),
                make_input((4,), 'float64', seed=2)]

Recipes (the `r_*` functions) each emit one step; RECIPES says which ops of the table each
can produce, and `covered_ops()` lets the tests check the table is covered. Unary and
binary elementwise ops of the table that no recipe names join the unary / binary recipes
automatically (their domain found by probing their NumPy implementation), so a new op of
that kind is fuzzed without touching this file.

Domains are controlled where an op has poles or overflows: log/sqrt/rsqrt/reciprocal and
divisors read `(v * v + 0.5)`, exp/expm1 read `v.tanh()`, pow reads a positive base for
non-integer exponents. Value-discontinuous ops (comparisons, floor, argmax, ...) read only
values every backend computes bit for bit (see ex()). `smooth=True` draws only ops that are
differentiable everywhere (no kinks, ties, jumps or casts to float32) in float64: the
programs gradcheck runs on. KNOWN_BUGS lists the bugs the generator steers around.
"""
import functools
import glob
import math
import os
import re

import numpy as np
from hypothesis import strategies as st

import llgrad
import llgrad.nn.functional as F
from llgrad.ir import OPS
from llgrad.ir.geometry import geometry_overlaps, geometry_span

from differential import LAYOUTS, load

FLOATS = ("float32", "float64")

# Known bugs outside the fuzzer's reach to fix (each has a strict xfail regression test in
# tests/fuzz/test_fuzz_regressions.py): the generator does not draw the programs that hit
# them, so that the fuzz tests keep finding new bugs. Remove an entry when its test XPASSes.
KNOWN_BUGS = {
    "grad_into_input": "an input that does not require grad, written in place with a value "
                       "that does: eager gives it history, llgrad.compile refuses it with a "
                       "TraceError (unsupported, llgrad/compile/compiled_function.py _check_mutated)",
}


# ---- shapes ---------------------------------------------------------------------------------

def numel(shape):
    return math.prod(shape)


def bcast(a, b):
    try:
        return tuple(np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        return None


def norm(d, nd):
    return d + max(nd, 1) if d < 0 else d


def reduced(shape, dims, keepdim):
    dims = {norm(d, len(shape)) for d in dims}
    return tuple(1 if i in dims else n for i, n in enumerate(shape) if keepdim or i not in dims)


def slice_len(n, start, stop, step):
    return len(range(n)[slice(start, stop, step)])


# ---- values and steps -----------------------------------------------------------------------

class Val:
    """A value of the program as the generator sees it (names are renamed when rendered)."""

    def __init__(self, name, shape, dtype, base=None, rg=False, frozen=False, overlap=False,
                 is_input=False, hi=None, exact=False):
        self.name, self.shape, self.dtype = name, tuple(shape), dtype
        self.exact = exact          # every backend computes it bit for bit (see ex())
        self.base = base            # the Val whose memory this one views (None: owns it)
        self.rg = rg                # requires grad (the generator's belief)
        self.frozen = frozen        # never written in place (multi-output view, detach, ...)
        self.overlap = overlap      # elements may share memory (expanded, as_strided)
        self.is_input = is_input
        self.hi = hi                # int64 values lie in [0, hi)
        self.spent = False          # no later step may read it (pick() skips it)

    def __str__(self):
        return self.name

    @property
    def root(self):
        v = self
        while v.base is not None:
            v = v.base
        return v

    @property
    def float(self):
        return self.dtype in FLOATS

    @property
    def writable(self):
        """In-place ops on it are legal: float, not overlapping, not a view of a leaf that
        requires grad (PyTorch raises), not an input that requires grad (compile refuses)."""
        v, root = self, self.root
        if not self.float or root.rg and root.is_input:
            return False
        while v is not None:
            if v.frozen or v.overlap:
                return False
            v = v.base
        return True


class Step:
    def __init__(self):
        self.lines, self.defs, self.uses, self.ops = [], [], set(), []
        self.writes = None      # the Val an in-place step writes to
        self.result = None      # the step's main value (defs[-1] unless set)


class Program:
    """The drawn program: inputs (make_input keyword arguments), steps, outputs."""

    def __init__(self, inputs, steps, outputs, smooth, flags):
        self.inputs, self.steps, self.outputs = inputs, steps, outputs
        self.smooth, self.flags = smooth, flags
        self.ops = sorted({op for s in steps for op in s.ops})
        self.source = self._render()

    def _render(self):
        names = {}
        for k, spec in enumerate(self.inputs):
            names[spec["name"]] = f"x{k}"
        n = 0
        for s in self.steps:
            for d in s.defs:
                if d.name not in names:
                    names[d.name] = f"v{n}"
                    n += 1
        ren = lambda text: re.sub(r"\b[xv]\d+\b", lambda m: names[m.group(0)], text)  # noqa
        lines = [f"def f({', '.join(names[s['name']] for s in self.inputs)}):"]
        for s in self.steps:
            lines += ["    " + ren(ln) for ln in s.lines]
        outs = [names[v.name] for v in self.outputs]
        lines.append(f"    return {outs[0]}" if len(outs) == 1 and self.flags.get("single")
                     else f"    return ({', '.join(outs)},)" if len(outs) == 1
                     else f"    return {', '.join(outs)}")
        lines += ["", "", "def make_inputs():", "    return ["]
        for spec in self.inputs:
            lines.append(f"        {_input_call(spec)},")
        lines.append("    ]")
        extra = self.flags.get("extra")
        if extra == "relayout":        # the same values in other layouts: a third call
            lines += ["", "", "def make_inputs_relaid():", "    return ["]
            for spec in self.inputs:
                lines.append(f"        {_input_call(dict(spec, layout=RELAYOUT[spec['layout']]))},")
            lines.append("    ]")
        elif extra == "no_grad":       # a third call under llgrad.no_grad()
            lines += ["", "", "NO_GRAD_CALL = True"]
        return "\n".join(lines) + "\n"

    def __repr__(self):
        # make_input is tests/fuzz/differential.py's; Listing(repr) runs it again
        return f"Listing(\'\'\'\n# ops: {', '.join(self.ops)}\n{self.source}\'\'\')"

    def load(self):
        return load(self.source)


RELAYOUT = {"contiguous": "stepped", "transposed": "contiguous", "stepped": "offset",
            "offset": "transposed", "expanded": "expanded"}


def _input_call(spec):
    args = [repr(spec["shape"]), repr(spec["dtype"])]
    if spec["layout"] != "contiguous":
        args.append(repr(spec["layout"]))
    args.append(f"seed={spec['seed']}")
    if spec["rg"]:
        args.append("requires_grad=True")
    if spec["layout"] == "expanded":
        args.append(f"expand={spec['expand']!r}")
    if (spec["low"], spec["high"]) != (-1.5, 1.5):
        args.append(f"low={spec['low']!r}, high={spec['high']!r}")
    return f"make_input({', '.join(args)})"


# ---- the generator ------------------------------------------------------------------------------

DIMS = (2, 3, 1, 4) * 4 + (0,)     # sizes of dims (shrinks towards 2); 0 one in 17
BIG_DIMS = (5, 9, 17, 33)
SCALARS = (2.0, 0.5, -1.5, 3, 1, -2, 0.0)


class GiveUp(Exception):
    """A recipe found nothing to apply to."""


class Gen:
    def __init__(self, draw, smooth):
        self.draw, self.smooth = draw, smooth
        self.pool, self.inputs, self.steps = [], [], []
        self.step = None
        self.n = 0

    # -- drawing --
    def int(self, lo, hi):
        return self.draw(st.integers(lo, hi))

    def choice(self, seq):
        """Uniform among seq (shrinks towards its first element)."""
        return self.draw(st.sampled_from(list(seq)))

    def chance(self, pct):
        """True with probability pct% (shrinks towards False: features off)."""
        return self.draw(st.sampled_from(range(100))) >= 100 - pct

    def dim(self):
        if self.smooth:         # no empty dims: a mean of nothing is nan, and so are
            return self.choice(DIMS[:-1])   # gradients through it (even masked by where)
        if self.chance(8):      # past a vector width: main loop + tail
            return self.choice(BIG_DIMS)
        return self.choice(DIMS)

    def shape(self, nd):
        return tuple(self.dim() for _ in range(nd))

    def scalar(self, nonzero=False):
        s = self.choice([s for s in SCALARS if s or not nonzero])
        return s

    def seed(self):
        return self.int(0, 1 << 16)

    # -- values --
    def pick(self, pred=lambda v: True):
        """A value of the pool satisfying pred (None if none does): half the time one of the
        two newest, so that steps chain into deep programs."""
        cands = [v for v in self.pool if not v.spent and pred(v)]
        if not cands:
            return None
        return self.choice(cands if len(cands) <= 2 or self.chance(50) else cands[-2:])

    def need(self, pred=lambda v: True):
        """pick(), or give the recipe up (GiveUp) when no value fits."""
        v = self.pick(pred)
        if v is None:
            raise GiveUp
        return v

    def new(self, shape, dtype, **kw):
        v = Val(f"v{self.n}", shape, dtype, **kw)
        self.n += 1
        self.pool.append(v)
        if self.step is not None:
            self.step.defs.append(v)
        return v

    def input(self, shape, dtype=None, rg=None, layout=None, low=-1.5, high=1.5):
        """A fresh input of the program."""
        dtype = dtype or self.dtype
        if rg is None:
            rg = dtype in FLOATS and self.chance(80)
        layout = layout or self.choice(LAYOUTS)
        spec = {"name": f"x{len(self.inputs)}", "shape": tuple(shape), "dtype": dtype,
                "layout": layout, "seed": self.seed(), "rg": rg, "expand": (),
                "low": low, "high": high}
        overlap = False
        if layout == "expanded":
            spec["expand"] = tuple(d for d in range(len(shape)) if self.chance(50))
            overlap = any(shape[d] > 1 for d in spec["expand"])
            if not spec["expand"]:
                spec["layout"] = "contiguous"
        self.inputs.append(spec)
        v = Val(spec["name"], shape, dtype, rg=rg, overlap=overlap, is_input=True, exact=True)
        self.pool.append(v)
        return v

    def const_input(self, shape, dtype=None, low=-1.5, high=1.5):
        return self.input(shape, dtype, rg=False, layout="contiguous", low=low, high=high)

    def emit(self, line, *uses):
        self.step.lines.append(line)
        self.step.uses.update(u for u in uses if isinstance(u, Val))

    def op(self, *names):
        self.step.ops.extend(names)

    # -- shapes of fresh operands --
    def variant(self, shape):
        """A shape broadcasting *into* shape: leading dims dropped, some dims set to 1."""
        shape = tuple(shape)[self.int(0, len(shape)):] if shape and self.chance(30) else shape
        return tuple(1 if self.chance(25) else n for n in shape)

    def extend(self, shape):
        """A shape broadcasting with shape to something bigger (its 1s filled, a new lead)."""
        out = tuple(self.choice((2, 3, 1)) if n == 1 else n for n in shape)
        return ((self.choice((2, 1)),) if self.chance(30) else ()) + out

    def operand(self, shape, domain="any", into=False, dtype=None, avoid=None, exact=False):
        """(expression, Val, shape) of a tensor operand broadcasting with shape: an existing
        value or a fresh input; into=True: broadcasting to exactly shape. avoid: a root
        whose aliases are not picked (an in-place op's operand must not partially overlap
        the tensor it writes: PyTorch raises)."""
        def fits(v):
            if not v.float or dtype and v.dtype != dtype or avoid is not None and \
                    v.root is avoid or exact and not v.exact:
                return False
            b = bcast(shape, v.shape)
            return b is not None and (not into or b == tuple(shape))
        k = self.int(0, 2)
        v = self.pick(fits) if k == 0 else None
        if v is None:
            s = self.variant(shape) if into or k == 1 else self.extend(shape)
            v = self.input(s, dtype or (self.dtype if self.chance(85) or self.smooth
                                        else self.other_dtype()))
        return dom(self, v, domain), v, bcast(shape, v.shape)

    def other_dtype(self):
        return "float32" if self.dtype == "float64" else "float64"

    def index_literal(self, shape, hi, neg=False, unique=False):
        """An int64 tensor literal with values in [0, hi) (or [-hi, hi) when neg); unique:
        no position twice (a non-accumulating put with repeated indices is undefined in
        PyTorch: the backends may legitimately differ)."""
        rng = np.random.default_rng(self.seed())
        if unique:
            arr = rng.permutation(max(hi, 1))[:numel(shape)].reshape(shape)
            if neg:
                arr = np.where(rng.random(arr.shape) < 0.5, arr - hi, arr)
        else:
            arr = rng.integers(-hi if neg else 0, max(hi, 1), shape)
        if numel(shape) == 0 or hi == 0:
            return f"llgrad.zeros({tuple(shape)!r}, dtype=llgrad.int64)"
        return f"llgrad.tensor({arr.tolist()!r})"

    def mask_literal(self, shape):
        arr = np.random.default_rng(self.seed()).random(shape) < 0.5
        if numel(shape) == 0:
            return f"llgrad.zeros({tuple(shape)!r}, dtype=llgrad.bool)", 0
        return f"llgrad.tensor({arr.tolist()!r})", int(arr.sum())


def dom(g, v, domain):
    """An expression of v mapped into domain ("any", "pos" (>= 0.5), "nonneg", "small"
    (in (-1, 1)), "unit" (in (0, 1)))."""
    n = v.name
    if domain == "any":
        return n
    if domain == "pos":
        return g.choice([f"({n} * {n} + 0.5)"] + ([] if g.smooth else [f"({n}.abs() + 0.5)"]))
    if domain == "nonneg":
        return g.choice([f"({n} * {n})"] + ([] if g.smooth else [f"{n}.abs()"]))
    if domain == "small":
        return g.choice([f"{n}.tanh()", f"({n}.sigmoid() * 2)"]
                        + ([] if g.smooth else [f"{n}.clamp(-2, 2)"]))
    if domain == "unit":
        return f"{n}.sigmoid()"
    raise ValueError(domain)


# Exactness. A value-discontinuous op (a comparison, floor/round/sign, argmax, max's indices)
# turns a last-bit difference into a different result, and the backends legitimately differ
# in the last bits of sums, transcendental functions and fused arithmetic (var of equal
# values is 0 in one and 1e-16 in another). So those ops only read *exact* values: inputs,
# and what ops that compute bit for bit alike everywhere (views, copies, casts, neg, abs,
# max/min, where, gathers, ...) make of exact values.
EXACT_UNARY = {"neg", "abs", "sign", "relu", "floor", "round", "isnan", "isfinite",
               "logical_not"}
DISCONTINUOUS = {"sign", "floor", "round", "isnan", "isfinite", "logical_not"}


def ex(*vals):
    return all(v.exact for v in vals if isinstance(v, Val))


def result_dtype(*vals):
    """PyTorch's promotion among float tensors: dimensioned tensors win over 0-d ones."""
    fl = [v for v in vals if isinstance(v, Val) and v.float]
    dims = [v for v in fl if v.shape] or fl
    return "float64" if any(v.dtype == "float64" for v in dims) else "float32"


def rg_of(*vals):
    return any(isinstance(v, Val) and v.rg and v.float for v in vals)


# ---- elementwise ops ----------------------------------------------------------------------------

# (domain, smooth, extra keyword-argument variants) of the unary ops the table has
UNARY = {
    "neg": ("any", True, ()), "exp": ("small", True, ()), "log": ("pos", True, ()),
    "log1p": ("nonneg", True, ()), "expm1": ("small", True, ()), "sqrt": ("pos", True, ()),
    "rsqrt": ("pos", True, ()), "reciprocal": ("pos", True, ()), "abs": ("any", False, ()),
    "sign": ("any", False, ()), "sin": ("any", True, ()), "cos": ("any", True, ()),
    "tanh": ("any", True, ()), "erf": ("any", True, ()), "sigmoid": ("any", True, ()),
    "relu": ("any", False, ()), "leaky_relu": ("any", False, ("0.2",)),
    "gelu": ("any", True, ("approximate='tanh'",)), "silu": ("any", True, ()),
    "softplus": ("any", True, ("beta=2.0", "beta=0.5, threshold=1.0")),
    "floor": ("any", False, ()), "round": ("any", False, ()),
    "isnan": ("any", False, ()), "isfinite": ("any", False, ()),
    "logical_not": ("any", False, ()),
}
# unary elementwise ops drawn by other recipes
UNARY_ELSEWHERE = {"clone", "to_dtype", "zero"}


def _probe_domain(op):
    """The domain of a unary op no table entry describes: the first of any/pos/nonneg on
    which its NumPy implementation is finite."""
    for name, xs in (("any", np.linspace(-2, 2, 17)), ("pos", np.linspace(0.5, 3, 11)),
                     ("nonneg", np.linspace(0, 3, 13)), ("small", np.linspace(-0.99, 0.99, 9))):
        try:
            with np.errstate(all="ignore"):
                r = np.asarray(op.impl(xs), dtype=np.float64)
        except Exception:   # noqa: BLE001 - a probe: any failure means "not this domain"
            continue
        if np.isfinite(r).all():
            return name
    return None


@functools.lru_cache(maxsize=None)
def _unary_table():
    table = {}
    for name, op in OPS.items():
        if op.kind != "elementwise" or op.args != ("self",) or name in UNARY_ELSEWHERE:
            continue
        if name in UNARY:
            table[name] = UNARY[name]
        else:
            d = _probe_domain(op)
            if d is not None:
                table[name] = (d, op.differentiable, ())
    return table


def _spellings(name, x, extra=""):
    """Ways to call a unary op: method, llgrad.name, F.name."""
    out = []
    if hasattr(llgrad.Tensor, name):
        out.append(f"{x}.{name}({extra})")
    sep = ", " if extra else ""
    if hasattr(llgrad, name):
        out.append(f"llgrad.{name}({x}{sep}{extra})")
    if hasattr(F, name):
        out.append(f"F.{name}({x}{sep}{extra})")
    return out


def _unary_result_dtype(op, dtype):
    with np.errstate(all="ignore"):
        return str(np.asarray(op.impl(np.full(2, 0.5, dtype))).dtype)


def r_unary(g):
    table = _unary_table()
    names = [n for n, (_, smooth, _) in table.items() if smooth or not g.smooth]
    name = g.choice(names)
    domain, _, extras = table[name]
    x = g.need(lambda v: v.float and (v.exact or name not in DISCONTINUOUS))
    extra = g.choice(("",) + extras)
    spell = _spellings(name, dom(g, x, domain), extra)
    if not spell:
        return False
    dt = _unary_result_dtype(OPS[name], x.dtype)
    v = g.new(x.shape, dt, rg=x.rg and OPS[name].differentiable and dt in FLOATS,
              exact=x.exact and name in EXACT_UNARY and domain == "any")
    g.emit(f"{v} = {g.choice(spell)}", x)
    g.op(name)


BINARY = {   # name: (spellings with {a} {b}, domain of b, smooth, result is bool)
    "add": (("{a} + {b}", "{a}.add({b})", "llgrad.add({a}, {b})", "{a}.add({b}, alpha=2.5)"),
            "any", True, False),
    "sub": (("{a} - {b}", "{a}.sub({b}, alpha=0.5)", "llgrad.sub({a}, {b})"), "any", True,
            False),
    "mul": (("{a} * {b}", "{a}.mul({b})", "llgrad.mul({a}, {b})"), "any", True, False),
    "div": (("{a} / {b}", "{a}.div({b})", "llgrad.div({a}, {b})"), "pos", True, False),
    "div_mode": (("{a}.div({b}, rounding_mode=None)", "llgrad.div({a}, {b}, rounding_mode=None)"),
                 "pos", True, False),
    "maximum": (("llgrad.maximum({a}, {b})", "{a}.maximum({b})", "llgrad.max({a}, {b})"),
                "any", False, False),
    "minimum": (("llgrad.minimum({a}, {b})", "{a}.minimum({b})"), "any", False, False),
    "eq": (("{a} == {b}",), "any", False, True), "ne": (("{a} != {b}",), "any", False, True),
    "lt": (("{a} < {b}",), "any", False, True), "le": (("{a} <= {b}",), "any", False, True),
    "gt": (("{a} > {b}",), "any", False, True), "ge": (("{a} >= {b}",), "any", False, True),
}
BINARY_ELSEWHERE = {"pow", "rsub", "logical_and", "logical_or", "logical_xor", "div_scalar"}


@functools.lru_cache(maxsize=None)
def _binary_table():
    table = dict(BINARY)
    for name, op in OPS.items():
        if op.kind == "elementwise" and op.args == ("self", "other") and \
                name not in table and name not in BINARY_ELSEWHERE:
            spell = ([f"llgrad.{name}({{a}}, {{b}})"] if hasattr(llgrad, name) else []) + \
                    ([f"{{a}}.{name}({{b}})"] if hasattr(llgrad.Tensor, name) else [])
            if spell:
                table[name] = (tuple(spell), "any", op.differentiable, not op.differentiable)
    return table


def r_binary(g):
    table = _binary_table()
    name = g.choice([n for n, t in table.items() if t[2] or not g.smooth])
    spell, bdom, _, is_bool = table[name]
    a = g.need(lambda v: v.float and (v.exact or not is_bool))
    form = g.int(0, 3)
    exact = name in ("maximum", "minimum") or is_bool
    if form <= 1:                       # tensor op tensor
        bexpr, b, shape = g.operand(a.shape, bdom, exact=is_bool)
        exact = exact and ex(a, b)
        text = g.choice(spell).format(a=a, b=bexpr)
        dt = "bool" if is_bool else result_dtype(a, b)
        uses, rg = (a, b), rg_of(a, b)
    elif form == 2 and name in ("add", "sub", "mul", "div", "eq", "lt", "gt"):  # tensor op 1.5
        s = g.scalar(nonzero=name == "div")
        text = g.choice(spell[:1]).format(a=a, b=repr(s))
        exact = exact and a.exact
        shape, dt, uses, rg = a.shape, "bool" if is_bool else a.dtype, (a,), a.rg
    elif name in ("add", "mul", "sub", "div"):          # 1.5 op tensor
        s = g.scalar()
        op = {"add": "+", "mul": "*", "sub": "-", "div": "/"}[name]
        name = {"sub": "rsub", "div": "reciprocal"}.get(name, name)
        text = f"{s!r} {op} {dom(g, a, 'pos') if op == '/' else a}"
        shape, dt, uses, rg = a.shape, a.dtype, (a,), a.rg
        exact = False
    else:
        return False
    v = g.new(shape, dt, rg=rg and not is_bool, exact=exact)
    g.emit(f"{v} = {text}", *uses)
    g.op(name)


def r_pow(g):
    a = g.need(lambda v: v.float)
    form = g.int(0, 4)
    if form == 0:
        text = g.choice([f"{a} ** 2", f"{a}.pow(3)", f"{a}.square()", f"{a} ** 0",
                         f"llgrad.pow({a}, 2)"])
        shape, uses, dt = a.shape, (a,), a.dtype
    elif form == 1:
        text = f"{dom(g, a, 'pos')} ** {g.choice([1.5, -0.5, 0.5, -2])}"
        shape, uses, dt = a.shape, (a,), a.dtype
    elif form == 2:
        text = f"{g.choice([2.0, 0.5])} ** {dom(g, a, 'small')}"
        shape, uses, dt = a.shape, (a,), a.dtype
    else:
        bexpr, b, shape = g.operand(a.shape, "small")
        text = g.choice(["{a} ** {b}", "{a}.pow({b})", "llgrad.pow({a}, {b})"]).format(
            a=dom(g, a, "pos"), b=bexpr)
        uses, dt = (a, b), result_dtype(a, b)
    v = g.new(shape, dt, rg=rg_of(*uses))
    g.emit(f"{v} = {text}", *uses)
    g.op("pow")


def r_clamp(g):
    if g.smooth:
        return False
    x = g.need(lambda v: v.float)
    form = g.int(0, 3)
    if form == 0:
        text = g.choice([f"{x}.clamp(-0.5, 0.5)", f"{x}.clamp(min=0.1)", f"{x}.clip(max=0.2)",
                         f"llgrad.clamp({x}, -1.0, 0.3)", f"{x}.clamp(0.5, -0.5)",
                         f"{x}.clamp_min(0.1)", f"{x}.clamp_max(-0.2)"])
        shape, uses = x.shape, (x,)
    else:
        lo, lv, s1 = g.operand(x.shape, dtype=x.dtype)
        hi, hv, s2 = g.operand(x.shape, dtype=x.dtype)
        if bcast(s1, s2) is None:
            return False
        text = [f"{x}.clamp({lo}, {hi})", f"{x}.clamp(min={lo})",
                f"llgrad.clamp({x}, max={hi})"][form - 1]
        uses = (x, lv, hv) if form == 1 else (x, lv) if form == 2 else (x, hv)
        shape = bcast(s1, s2) if form == 1 else s1 if form == 2 else s2
    v = g.new(shape, x.dtype, rg=rg_of(*uses), exact=ex(*uses))
    g.emit(f"{v} = {text}", *uses)
    g.op("clamp_min" if ".clamp_min(" in text else "clamp_max" if ".clamp_max(" in text
         else "clamp")


def _mask(g, shape, into=True):
    """(expression, uses, shape) of a bool mask broadcasting into shape."""
    k = g.int(0, 3)
    m = g.pick(lambda v: v.dtype == "bool" and bcast(shape, v.shape) == tuple(shape)) \
        if k == 0 else None
    if m is not None:
        return m.name, (m,), m.shape
    if k == 1:
        x = g.pick(lambda v: v.float and v.exact and bcast(shape, v.shape) == tuple(shape))
        if x is not None:
            return g.choice([f"({x} > 0.2)", f"({x} <= -0.3)", f"{x}.isfinite()"]), (x,), x.shape
    s = g.variant(shape)
    if g.chance(30):
        m = g.input(s, "bool", rg=False)
        return m.name, (m,), s
    return g.mask_literal(s)[0], (), s


def r_mask(g):
    """A bool value: comparisons and logical ops (no gradient)."""
    if g.smooth:
        return False
    x = g.need(lambda v: v.float and v.exact or v.dtype == "bool")
    if x.dtype == "bool":
        form = g.int(0, 3)
        if form == 0:
            v = g.new(x.shape, "bool", exact=True)
            g.emit(f"{v} = {g.choice([f'~{x}', f'{x}.logical_not()'])}", x)
            g.op("logical_not")
            return
        mexpr, uses, s = _mask(g, x.shape)
        name = ["logical_and", "logical_or", "logical_xor"][form - 1]
        sym = {"logical_and": "&", "logical_or": "|", "logical_xor": "^"}[name]
        v = g.new(bcast(x.shape, s), "bool", exact=True)
        g.emit(f"{v} = {g.choice([f'{x} {sym} {mexpr}', f'{x}.{name}({mexpr})'])}", x, *uses)
        g.op(name)
        return
    form = g.int(0, 2)
    if form == 0:
        v = g.new(x.shape, "bool", exact=True)
        g.emit(f"{v} = {x} > {g.choice([0.0, 0.3, -0.5])}", x)
        g.op("gt")
    elif form == 1:
        bexpr, b, shape = g.operand(x.shape, exact=True)
        op, name = g.choice([("<", "lt"), (">=", "ge"), ("==", "eq"), ("!=", "ne")])
        v = g.new(shape, "bool", exact=True)
        g.emit(f"{v} = {x} {op} {bexpr}", x, b)
        g.op(name)
    else:   # to float: a mask that multiplies (a cast of bool, no gradient)
        m = g.pick(lambda v: v.dtype == "bool")
        if m is None:
            return False
        v = g.new(m.shape, x.dtype, exact=True)
        g.emit(f"{v} = {m}.to({x}.dtype)", m, x)
        g.op("to_dtype")


def r_where(g):
    x = g.need(lambda v: v.float)
    mexpr, muses, ms = _mask(g, x.shape, into=False)
    if g.chance(30):
        y, ys, yuses = repr(g.scalar()), x.shape, ()
    else:
        y, yv, ys = g.operand(x.shape, dtype=None)
        yuses = (yv,)
    shape = bcast(bcast(x.shape, ys), ms)
    if shape is None:
        return False
    v = g.new(shape, result_dtype(x, *yuses), rg=rg_of(x, *yuses), exact=ex(x, *yuses))
    a, b = (x, y) if g.chance(50) else (y, x)
    spell = [f"llgrad.where({mexpr}, {a}, {b})"]
    if bcast(x.shape, ys) == x.shape and bcast(x.shape, ms) == x.shape:
        spell.append(f"{x}.where({mexpr}, {y})")
    g.emit(f"{v} = {g.choice(spell)}", x, *muses, *yuses)
    g.op("where")


def r_addc(g):
    """addcmul / addcdiv / lerp: three operands broadcast together (lerp's weight a tensor
    or a number). Operands share x's dtype (PyTorch's lerp requires it)."""
    x = g.need(lambda v: v.float)
    name = g.choice(["addcmul", "addcdiv", "lerp"])
    a, av, ashape = g.operand(x.shape, dtype=x.dtype)
    if name == "lerp" and g.chance(40):                 # a number weight (a Scalar)
        w = repr(g.choice([0.25, 0.75, -0.5, 1.0]))
        shape, uses = ashape, (x, av)
        text = g.choice([f"{x}.lerp({a}, {w})", f"llgrad.lerp({x}, {a}, {w})"])
    else:
        b, bv, bshape = g.operand(x.shape, "pos" if name == "addcdiv" else "any",
                                  dtype=x.dtype)
        shape, uses = bcast(ashape, bshape), (x, av, bv)
        if shape is None:
            return False
        value = "" if name == "lerp" else g.choice(["", ", value=0.5", ", value=-2.0"])
        text = g.choice([f"{x}.{name}({a}, {b}{value})", f"llgrad.{name}({x}, {a}, {b}{value})"])
    v = g.new(shape, result_dtype(*uses), rg=rg_of(*uses), exact=False)
    g.emit(f"{v} = {text}", *uses)
    g.op(name)


def r_masked_fill(g):
    x = g.need(lambda v: v.float)
    mexpr, muses, _ = _mask(g, x.shape)
    if g.chance(60):
        val, vuses = repr(g.choice([0.0, -1.0, 2.5] + ([] if g.smooth else [-math.inf]))), ()
        val = "-inf" if val == "-inf" else val
    else:
        s = g.pick(lambda v: v.float and v.shape == () and v.dtype == x.dtype) or \
            g.input((), x.dtype)
        val, vuses = s.name, (s,)
    v = g.new(x.shape, x.dtype, rg=rg_of(x, *vuses), exact=ex(x, *vuses))
    g.emit(f"{v} = {x}.masked_fill({mexpr}, {val})", x, *muses, *vuses)
    g.op("masked_fill")


def r_copy(g):
    """Copies and casts: clone, contiguous, to(dtype)."""
    x = g.need(lambda v: v.float)
    form = g.int(0, 3)
    if form == 0:
        v = g.new(x.shape, x.dtype, rg=x.rg, exact=x.exact)
        g.emit(f"{v} = {g.choice([f'{x}.clone()', f'llgrad.clone({x})'])}", x)
        g.op("clone")
    elif form == 1:    # may alias x (contiguous x), so a view for the generator's purposes
        v = g.new(x.shape, x.dtype, rg=x.rg, base=x, exact=x.exact)
        g.emit(f"{v} = {x}.contiguous()", x)
        g.op("clone")
    else:
        if g.smooth:
            return False
        dt = g.choice(FLOATS)
        spell = {"float32": [f"{x}.float()", f"{x}.to(llgrad.float32)"],
                 "float64": [f"{x}.double()", f"{x}.to(dtype=llgrad.float64)"]}[dt]
        v = g.new(x.shape, dt, rg=x.rg, base=x if dt == x.dtype else None, exact=x.exact)
        g.emit(f"{v} = {g.choice(spell)}", x)
        g.op("to_dtype")


# ---- reductions ------------------------------------------------------------------------------

def _dims(g, shape, single=False, allow_none=True):
    """None (all dims), an int, or a tuple of dims of shape (negative ones too)."""
    nd = len(shape)
    if allow_none and g.chance(25):
        return None
    if nd == 0:                 # a 0-d tensor's one dim
        return g.choice((0, -1))
    if single or g.chance(50):
        d = g.int(0, nd - 1)
        return d - nd if g.chance(30) else d
    ds = sorted({g.int(0, nd - 1) for _ in range(g.int(1, nd))})
    return tuple(ds)


def _dims_list(dims, nd):
    if dims is None:
        return list(range(nd))
    return [dims] if isinstance(dims, int) else list(dims)


def extent(shape, d):
    """The size of dim d of shape (1 for a 0-d shape's one dim)."""
    return shape[norm(d, len(shape))] if shape else 1


def _nonempty(shape, dims):
    return all(extent(shape, d) > 0 for d in _dims_list(dims, len(shape)))


REDUCE = {  # name: smooth, needs a non-empty reduced extent, single dim only
    "sum": (True, False, False), "mean": (True, False, False), "prod": (True, False, True),
    "amax": (False, True, False), "amin": (False, True, False), "max": (False, True, True),
    "min": (False, True, True), "var": (True, False, False), "std": (False, False, False),
    "logsumexp": (True, False, False), "argmax": (False, True, True),
    "argmin": (False, True, True),
}


def r_reduce(g):
    name = g.choice([n for n, (smooth, _, _) in REDUCE.items() if smooth or not g.smooth])
    indices = name in ("max", "min", "argmax", "argmin")     # (max/min with a dim)
    x = g.need(lambda v: v.float and (v.exact or not indices))
    smooth_, nonempty, single = REDUCE[name]
    dims = _dims(g, x.shape, single=single, allow_none=name != "logsumexp")
    if nonempty and not _nonempty(x.shape, dims):
        return False
    keep = g.chance(30)
    nd = len(x.shape)
    shape = reduced(x.shape, _dims_list(dims, nd), keep and dims is not None)
    kw = ", keepdim=True" if keep and dims is not None else ""
    opname = name
    if name in ("max", "min"):
        if dims is None:
            text = g.choice([f"{x}.{name}()", f"llgrad.{name}({x})"])
        else:
            opname = f"{name}_dim"
            form = g.int(0, 2)
            if form == 2:     # both outputs
                vv = g.new(shape, x.dtype, rg=x.rg, exact=True)
                vi = g.new(shape, "int64", hi=extent(x.shape, dims), exact=True)
                g.emit(f"{vv}, {vi} = {x}.{name}({dims}{kw})", x)
                g.op(opname)
                return
            text = f"{x}.{name}({dims}{kw}).{['values', 'indices'][form]}"
            if form == 1:
                v = g.new(shape, "int64", hi=extent(x.shape, dims), exact=True)
                g.emit(f"{v} = {text}", x)
                g.op(opname)
                return
    elif name in ("argmax", "argmin"):
        text = f"{x}.{name}()" if dims is None else f"{x}.{name}({dims}{kw})"
        hi = numel(x.shape) if dims is None else extent(x.shape, dims)
        v = g.new(shape if dims is not None else (), "int64", hi=hi, exact=True)
        g.emit(f"{v} = {text}", x)
        g.op(name)
        return
    elif name in ("var", "std"):
        corr = g.choice(["", "unbiased=False", "correction=0", "correction=2"])
        count = numel(x.shape) if dims is None else \
            math.prod(extent(x.shape, d) for d in _dims_list(dims, nd))
        if g.smooth and count <= {"": 1, "correction=2": 2}.get(corr, 0):
            return False        # nan (0/0), and a nan gradient, even where it is masked
        args = ", ".join(a for a in ("" if dims is None else repr(dims), corr, kw[2:]) if a)
        text = f"{x}.{name}({args})"
    elif dims is None:
        text = g.choice([f"{x}.{name}()", f"llgrad.{name}({x})"] if name != "amax" and
                        name != "amin" else [f"{x}.{name}()"])
    else:
        text = g.choice([f"{x}.{name}({dims}{kw})", f"llgrad.{name}({x}, {dims}{kw})"])
    v = g.new(shape, x.dtype, rg=x.rg, exact=x.exact and name in ("amax", "amin", "max", "min"))
    g.emit(f"{v} = {text}", x)
    g.op(opname)


def r_bool_reduce(g):
    if g.smooth:
        return False
    m = g.pick(lambda v: v.dtype == "bool")
    if m is None:
        return False
    name = g.choice(["all", "any"])
    dims = _dims(g, m.shape, single=True)
    keep = dims is not None and g.chance(30)
    shape = reduced(m.shape, _dims_list(dims, len(m.shape)), keep)
    v = g.new(shape, "bool", exact=True)
    g.emit(f"{v} = {m}.{name}({'' if dims is None else dims}"
           f"{', keepdim=True' if keep else ''})", m)
    g.op(name)


def r_softmax(g):
    x = g.pick(lambda v: v.float and v.shape)
    if x is None:
        return False
    name = g.choice(["softmax", "log_softmax", "cumsum"])
    nd = len(x.shape)
    d = g.int(-nd, nd - 1)
    spell = {"softmax": [f"{x}.softmax({d})", f"F.softmax({x}, dim={d})",
                         f"llgrad.softmax({x}, {d})"],
             "log_softmax": [f"{x}.log_softmax({d})", f"F.log_softmax({x}, dim={d})"],
             "cumsum": [f"{x}.cumsum({d})", f"llgrad.cumsum({x}, dim={d})"]}[name]
    v = g.new(x.shape, x.dtype, rg=x.rg)
    g.emit(f"{v} = {g.choice(spell)}", x)
    g.op(name)


# ---- views -----------------------------------------------------------------------------------

def view_of(g, x, inplace=False):
    """(expression suffix, shape, op, overlap) of a random view of a value of shape
    x.shape, or None. inplace=True: only views PyTorch lets in-place ops write through."""
    shape = x.shape
    nd = len(shape)
    kinds = ["slice", "select", "transpose", "t", "unsqueeze", "squeeze", "diagonal",
             "permute", "alias", "narrow"]
    if not inplace:
        kinds += ["reshape", "flatten", "unflatten", "expand", "as_strided", "view", "mT"]
    kind = g.choice(kinds)
    if kind == "slice" and nd:
        d = g.int(0, nd - 1)
        n = shape[d]
        start = g.choice([None, 1, -2, 0])
        stop = g.choice([None, -1, 2, n + 1])
        step = g.choice([None, 2, 3])
        sl = ":".join("" if v is None else str(v) for v in (start, stop)) + \
            ("" if step is None else f":{step}")
        idx = ", ".join([":"] * d + [sl])
        out = shape[:d] + (slice_len(n, start, stop, step),) + shape[d + 1:]
        return f"[{idx}]", out, "slice", False
    if kind == "narrow" and nd:
        d = g.int(0, nd - 1)
        n = shape[d]
        s = g.int(0, n)
        ln = g.int(0, n - s)
        return f".narrow({d}, {s}, {ln})", shape[:d] + (ln,) + shape[d + 1:], "slice", False
    if kind == "select" and nd:
        d = g.int(0, nd - 1)
        n = shape[d]
        if n == 0:
            return None
        i = g.int(-n, n - 1)
        form = g.choice([f".select({d}, {i})", "[" + ", ".join([":"] * d + [str(i)]) + "]"])
        return form, shape[:d] + shape[d + 1:], "select", False
    if kind == "transpose" and nd >= 1:
        a, b = g.int(-nd, nd - 1), g.int(-nd, nd - 1)
        out = list(shape)
        out[a], out[b] = out[b], out[a]
        return f".transpose({a}, {b})", tuple(out), "transpose", False
    if kind == "t" and nd <= 2:
        return ".t()", shape[::-1], "t", False
    if kind == "mT" and nd >= 2:
        return ".mT", shape[:-2] + (shape[-1], shape[-2]), "transpose", False
    if kind == "permute" and nd >= 1:
        perm = list(range(nd))
        for i in range(nd - 1, 0, -1):
            j = g.int(0, i)
            perm[i], perm[j] = perm[j], perm[i]
        return f".permute{tuple(perm)!r}" if nd > 1 else f".permute({perm[0]})", \
            tuple(shape[p] for p in perm), "permute", False
    if kind == "unsqueeze":
        d = g.int(-nd - 1, nd)
        out = list(shape)
        out.insert(norm(d, nd + 1) if d < 0 else d, 1)
        return f".unsqueeze({d})", tuple(out), "unsqueeze", False
    if kind == "squeeze":
        form = g.int(0, 2)
        if form == 0 or not nd:
            return ".squeeze()", tuple(n for n in shape if n != 1), "squeeze", False
        if form == 1:
            d = g.int(0, nd - 1)
            return f".squeeze({d})", shape if shape[d] != 1 else shape[:d] + shape[d + 1:], \
                "squeeze", False
        ds = tuple(sorted({g.int(0, nd - 1) for _ in range(2)}))
        return f".squeeze({ds!r})", tuple(n for d, n in enumerate(shape)
                                         if not (d in ds and n == 1)), "squeeze", False
    if kind == "diagonal" and nd >= 2:
        off = g.int(-2, 2)
        d1, d2 = g.choice([(0, 1), (1, 0), (0, nd - 1), (-2, -1)])
        a, b = shape[norm(d1, nd)], shape[norm(d2, nd)]
        if norm(d1, nd) == norm(d2, nd):
            return None
        ln = max(0, min(a, b - off) if off >= 0 else min(a + off, b))
        rest = tuple(n for i, n in enumerate(shape) if i not in (norm(d1, nd), norm(d2, nd)))
        return f".diagonal({off}, {d1}, {d2})", rest + (ln,), "diagonal", False
    if kind == "alias":
        return "[...]", shape, "alias", False
    if kind == "reshape":
        n = numel(shape)
        form = g.int(0, 2)
        if form == 0:
            return (".reshape(-1)" if n else f".reshape({n})"), (n,), "view", False
        if form == 1 and nd >= 2:
            return f".reshape({shape[0]}, {numel(shape[1:])})", (shape[0], numel(shape[1:])), \
                "view", False
        out = (1,) + shape + (1,)
        return f".reshape{out!r}", out, "view", False
    if kind == "view":
        out = (numel(shape),) if nd != 1 else (1, shape[0])
        return f".contiguous().view{out!r}" if len(out) > 1 else \
            f".contiguous().view({out[0]})", out, "view", False
    if kind == "flatten":
        if nd >= 2 and g.chance(50):
            return ".flatten(1)", (shape[0], numel(shape[1:])), "view", False
        return ".flatten()", (numel(shape),) if nd else (1,), "view", False
    if kind == "unflatten" and nd:
        d = g.int(0, nd - 1)
        n = shape[d]
        divs = [k for k in range(1, n + 1) if n % k == 0] or [1]
        a = g.choice(divs)
        sizes = (a, n // a) if n else (0, 2)
        return f".unflatten({d}, {sizes!r})", shape[:d] + sizes + shape[d + 1:], "view", False
    if kind == "expand":
        out = tuple(g.choice((2, 3)) if n == 1 and g.chance(70) else n for n in shape)
        lead = (g.choice((2, 1)),) if g.chance(30) else ()
        full = lead + out
        spelled = tuple(-1 if i >= len(lead) and full[i] == shape[i - len(lead)] and
                        g.chance(30) else n for i, n in enumerate(full))
        exp = f".expand({spelled[0]})" if len(spelled) == 1 else \
            ".expand(())" if not spelled else f".expand{spelled!r}"
        text = g.choice([exp, f".broadcast_to({full!r})"]) \
            if hasattr(llgrad.Tensor, "broadcast_to") else exp
        overlap = any(n > 1 and (i < len(lead) or shape[i - len(lead)] == 1)
                      for i, n in enumerate(full))
        return text, full, "expand", overlap
    if kind == "as_strided":
        n = numel(shape)
        if n == 0:
            return None
        size = tuple(g.int(1, 3) for _ in range(g.int(1, 2)))
        stride = tuple(g.int(0, 2) for _ in size)
        if geometry_span(size, stride, 0) > n:
            return None
        off = g.int(0, n - geometry_span(size, stride, 0))
        return (f".reshape(-1).clone().as_strided({size!r}, {stride!r}, {off})", size,
                "as_strided", geometry_overlaps(size, stride))
    return None


def r_view(g):
    x = g.need()
    got = view_of(g, x)
    if got is None:
        return False
    text, shape, op, overlap = got
    v = g.new(shape, x.dtype, base=x, rg=x.rg, overlap=overlap, hi=x.hi, exact=x.exact)
    g.emit(f"{v} = {x}{text}", x)
    g.op(op)


def r_multi_view(g):
    """unbind / split / chunk: several views, each frozen (PyTorch forbids in-place ops on
    the outputs of a function that returns multiple views)."""
    x = g.need(lambda v: v.shape)
    nd = len(x.shape)
    d = g.int(0, nd - 1)
    n = x.shape[d]
    form = g.int(0, 2)
    if form == 0:
        if n == 0 or n > 4:
            return False
        pieces = [x.shape[:d] + x.shape[d + 1:]] * n
        text, op = g.choice([f"{x}.unbind({d})", f"llgrad.unbind({x}, {d})"]), "unbind"
    elif form == 1:
        k = g.int(1, 3)
        sizes = [min(k, n - i) for i in range(0, n, k)] or [0]
        text, op = f"{x}.split({k}, {d})", "split"
        pieces = [x.shape[:d] + (s,) + x.shape[d + 1:] for s in sizes]
    else:
        a = g.int(0, n)
        sizes = [a, n - a]
        text, op = f"{x}.split({sizes!r}, {d})", "split"
        pieces = [x.shape[:d] + (s,) + x.shape[d + 1:] for s in sizes]
    if len(pieces) > 4:
        k = g.int(0, len(pieces) - 1)
        v = g.new(pieces[k], x.dtype, base=x, rg=x.rg, frozen=True, exact=x.exact)
        g.emit(f"{v} = {text}[{k}]", x)
    else:
        vs = [g.new(p, x.dtype, base=x, rg=x.rg, frozen=True, exact=x.exact) for p in pieces]
        g.emit(f"{', '.join(map(str, vs))}{',' if len(vs) == 1 else ''} = {text}", x)
    g.op(op)


def r_detach(g):
    if g.smooth:
        return False
    x = g.need(lambda v: v.float)
    v = g.new(x.shape, x.dtype, base=x, exact=x.exact)
    g.emit(f"{v} = {x}.detach()", x)
    g.op("alias")


# ---- data movement ---------------------------------------------------------------------------

def r_cat(g):
    x = g.need(lambda v: v.float and v.shape)
    stack = g.chance(30)
    nd = len(x.shape)
    d = g.int(0, nd) if stack else g.int(0, nd - 1)
    parts = [x]
    for _ in range(g.int(0, 2)):
        if stack:
            want = lambda v: v.float and v.shape == x.shape and v.dtype == x.dtype  # noqa
        else:
            want = lambda v: (v.float and v.dtype == x.dtype and len(v.shape) == nd and  # noqa
                              all(a == b for i, (a, b) in enumerate(zip(v.shape, x.shape))
                                  if i != d))
        p = g.pick(want) if g.chance(50) else None
        if p is None:
            s = list(x.shape)
            if not stack:
                s[d] = g.choice((1, 2, 0, 3))
            p = g.input(tuple(s), x.dtype)
        parts.append(p)
    if stack:
        shape = x.shape[:d] + (len(parts),) + x.shape[d:]
        text = f"llgrad.stack([{', '.join(map(str, parts))}], {d})"
    else:
        shape = x.shape[:d] + (sum(p.shape[d] for p in parts),) + x.shape[d + 1:]
        text = g.choice([f"llgrad.cat([{', '.join(map(str, parts))}], {d})",
                         f"llgrad.cat(({', '.join(map(str, parts))},), dim={d - nd})"])
    v = g.new(shape, x.dtype, rg=rg_of(*parts), exact=ex(*parts))
    g.emit(f"{v} = {text}", *parts)
    g.op("stack" if stack else "cat")


def _index_val(g, shape, hi):
    """(expression, uses) of an int64 index of the given shape with values in [0, hi): an
    existing int value (argmax's) when one fits, else a literal."""
    iv = g.pick(lambda v: v.dtype == "int64" and v.shape == tuple(shape) and v.hi is not None
                and v.hi <= hi) if g.chance(40) else None
    if iv is not None:
        return iv.name, (iv,)
    if hi > 0 and g.chance(30):       # an index the kernels read at run time
        iv = g.input(shape, "int64", rg=False, low=0, high=hi)
        iv.hi = hi
        return iv.name, (iv,)
    return g.index_literal(shape, hi), ()


def r_gather(g):
    x = g.need(lambda v: v.float and v.shape)
    nd = len(x.shape)
    d = g.int(0, nd - 1)
    form = g.int(0, 2)
    if form == 0:    # gather: index no bigger than x off dim d
        ishape = tuple(g.int(0 if n == 0 else 1, n) if i != d else g.int(0, 3)
                       for i, n in enumerate(x.shape))
        if x.shape[d] == 0 and ishape[d]:
            return False
        idx, uses = _index_val(g, ishape, x.shape[d])
        v = g.new(ishape, x.dtype, rg=x.rg, exact=x.exact)
        g.emit(f"{v} = {g.choice([f'{x}.gather({d}, {idx})', f'llgrad.gather({x}, {d}, {idx})'])}",
               x, *uses)
        g.op("gather")
    elif form == 1:  # index_select
        k = g.int(0, 4) if x.shape[d] else 0
        idx, uses = _index_val(g, (k,), x.shape[d])
        v = g.new(x.shape[:d] + (k,) + x.shape[d + 1:], x.dtype, rg=x.rg, exact=x.exact)
        g.emit(f"{v} = {x}.index_select({d}, {idx})", x, *uses)
        g.op("index_select")
    else:            # advanced indexing
        kind = g.int(0, 2)
        if kind == 0:
            ishape = g.shape(g.int(0, 2)) if x.shape[0] else (0,)
            idx = g.index_literal(ishape, x.shape[0], neg=True)
            # a 0-d index is an int: x[i] is a view (select), as in PyTorch
            v = g.new(ishape + x.shape[1:], x.dtype, rg=x.rg, exact=x.exact,
                      base=x if ishape == () else None)
            g.emit(f"{v} = {x}[{idx}]", x)
        elif kind == 1 and nd >= 2:
            ishape = g.shape(1) if x.shape[1] else (0,)
            idx = g.index_literal(ishape, x.shape[1], neg=True)
            v = g.new(x.shape[:1] + ishape + x.shape[2:], x.dtype, rg=x.rg, exact=x.exact)
            g.emit(f"{v} = {x}[:, {idx}]", x)
        else:
            k = g.int(1, nd)
            mask, count = g.mask_literal(x.shape[:k])
            v = g.new((count,) + x.shape[k:], x.dtype, rg=x.rg, exact=x.exact)
            g.emit(f"{v} = {x}[{mask}]", x)
        g.op("index")


def r_scatter(g):
    """Out-of-place scatter_add / index_add / index_put."""
    x = g.need(lambda v: v.float and v.shape)
    nd = len(x.shape)
    d = g.int(0, nd - 1)
    form = g.int(0, 2)
    if form == 0:
        sshape = tuple(g.int(0 if n == 0 else 1, n) if i != d else g.int(0, 3)
                       for i, n in enumerate(x.shape))
        if x.shape[d] == 0 and sshape[d]:
            return False
        idx, uses = _index_val(g, sshape, x.shape[d])
        src = g.pick(lambda v: v.float and v.dtype == x.dtype and v.shape == sshape) or \
            g.input(sshape, x.dtype)
        v = g.new(x.shape, x.dtype, rg=rg_of(x, src))
        g.emit(f"{v} = {x}.scatter_add({d}, {idx}, {src})", x, src, *uses)
        g.op("scatter_add")
    elif form == 1:
        k = g.int(0, 4) if x.shape[d] else 0
        idx, uses = _index_val(g, (k,), x.shape[d])
        sshape = x.shape[:d] + (k,) + x.shape[d + 1:]
        src = g.pick(lambda v: v.float and v.dtype == x.dtype and v.shape == sshape) or \
            g.input(sshape, x.dtype)
        alpha = g.choice(["", ", alpha=2.0"])
        v = g.new(x.shape, x.dtype, rg=rg_of(x, src))
        g.emit(f"{v} = {x}.index_add({d}, {idx}, {src}{alpha})", x, src, *uses)
        g.op("index_add")
    else:
        acc = g.choice(["", ", accumulate=True"])
        k = g.int(0, 4 if acc else min(4, x.shape[0])) if x.shape[0] else 0
        idx = g.index_literal((k,), x.shape[0], unique=not acc)
        vexpr, vv, vs = g.operand((k,) + x.shape[1:], into=True, dtype=x.dtype)
        v = g.new(x.shape, x.dtype, rg=rg_of(x, vv), exact=not acc and ex(x, vv))
        g.emit(f"{v} = {x}.index_put(({idx},), {vexpr}{acc})", x, vv)
        g.op("index_put")


# ---- matrix products -------------------------------------------------------------------------

def r_matmul(g):
    x = g.pick(lambda v: v.float and 1 <= len(v.shape) <= 3)
    if x is None:
        return False
    nd, s = len(x.shape), x.shape
    form = g.int(0, 3)

    def other(shape):
        want = tuple(shape)
        return g.pick(lambda v: v.float and v.dtype == x.dtype and v.shape == want) or \
            g.input(want, x.dtype)

    m = g.choice((2, 3, 1, 0))
    if nd == 1:
        if form == 0:
            y = other((s[0],))
            text, shape, op = g.choice([f"{x}.dot({y})", f"{x} @ {y}", f"llgrad.dot({x}, {y})"]), \
                (), "dot"
        else:
            y = other((s[0], m))
            text, shape, op = f"{x} @ {y}", (m,), "mm"
    elif nd == 2:
        if form == 0:
            y = other((s[1],))
            text, shape, op = g.choice([f"{x}.mv({y})", f"{x} @ {y}"]), (s[0],), "mv"
        elif form == 1:
            y = other((m, s[1]))
            text, shape, op = g.choice([f"{x} @ {y}.t()", f"F.linear({x}, {y})"]), \
                (s[0], m), "mm"
        elif form == 2:
            y, b = other((m, s[1])), other((m,))
            return _emit_mm(g, x, (y, b), f"F.linear({x}, {y}, {b})", (s[0], m), "addmm")
        else:
            y = other((s[1], m))
            text, shape, op = g.choice([f"{x}.mm({y})", f"{x} @ {y}", f"llgrad.mm({x}, {y})",
                                        f"{x}.matmul({y})"]), (s[0], m), "mm"
    else:
        if form <= 1:
            y = other((s[0], s[2], m))
            text, shape, op = g.choice([f"{x}.bmm({y})", f"llgrad.bmm({x}, {y})", f"{x} @ {y}"]), \
                (s[0], s[1], m), "bmm"
        elif form == 2:
            y = other((s[2], m))
            text, shape, op = f"{x} @ {y}", (s[0], s[1], m), "matmul"
        else:
            y = other((2, 1, s[2], m) if g.chance(50) else (s[2],))
            shape = np.matmul(np.zeros(s), np.zeros(y.shape)).shape
            text, op = f"llgrad.matmul({x}, {y})", "matmul"
    return _emit_mm(g, x, (y,), text, tuple(shape), op)


def _emit_mm(g, x, others, text, shape, op):
    v = g.new(shape, x.dtype, rg=rg_of(x, *others))
    g.emit(f"{v} = {text}", x, *others)
    g.op(op)


# ---- layers and losses -----------------------------------------------------------------------

def r_norm(g):
    x = g.need(lambda v: v.float and v.shape)
    nd = len(x.shape)
    if g.chance(50):     # layer_norm over the last k dims
        k = g.int(1, min(nd, 2))
        ns = x.shape[nd - k:]
        w = g.input(ns, x.dtype) if g.chance(60) else None
        b = g.input(ns, x.dtype) if g.chance(60) else None
        eps = g.choice(["", ", eps=1e-3"])
        text = f"F.layer_norm({x}, {ns!r}, {w}, {b}{eps})"
        v = g.new(x.shape, x.dtype, rg=rg_of(x, w, b))
        g.emit(f"{v} = {text}", x, w, b)
        g.op("layer_norm")
        return
    if nd not in (2, 3):
        return False
    c = x.shape[1]
    training = g.chance(60)
    per_channel = numel(x.shape) // c if c else 0
    if training and per_channel <= 1:
        return False
    w = g.input((c,), x.dtype) if g.chance(60) else None
    b = g.input((c,), x.dtype) if g.chance(60) else None
    if training and g.chance(50):
        rm, rv = "None", "None"
        uses = ()
    else:
        rmv = g.const_input((c,), x.dtype)
        rvv = g.const_input((c,), x.dtype, low=0.5, high=2.0)
        rm, rv, uses = rmv.name, rvv.name, (rmv, rvv)
        if training:        # updated in place from x's statistics, which autograd does not
            for u in uses:  # track (as in PyTorch): a later read is not smooth in x
                u.spent = True
    text = f"F.batch_norm({x}, {rm}, {rv}, {w}, {b}, training={training}" + \
        g.choice(["", ", momentum=0.3", ", eps=1e-3"]) + ")"
    v = g.new(x.shape, x.dtype, rg=rg_of(x, w, b))
    g.emit(f"{v} = {text}", x, w, b, *uses)
    # (training with running statistics: the op that also gives the batch's, for the update)
    g.op("batch_norm_with_stats" if training and uses else "batch_norm")


def r_embedding(g):
    w = g.pick(lambda v: v.float and len(v.shape) == 2 and v.shape[0] > 0)
    if w is None:
        w = g.input((g.choice((3, 1, 4)), g.choice((2, 3))))
    ishape = g.shape(g.int(0, 2))
    idx, uses = _index_val(g, ishape, w.shape[0])
    # padding_idx: that row gets no gradient by definition (not for gradcheck)
    pad = "" if g.smooth else g.choice(["", f", padding_idx={g.int(0, w.shape[0] - 1)}"])
    v = g.new(ishape + (w.shape[1],), w.dtype, rg=w.rg, exact=w.exact)
    g.emit(f"{v} = F.embedding({idx}, {w}{pad})", w, *uses)
    g.op("embedding")


def r_loss(g):
    x = g.need(lambda v: v.float and v.shape)
    form = g.int(0, 2)
    red = g.choice(["mean", "sum", "none"])
    if form == 0:
        yv = g.pick(lambda v: v.float and v.shape == x.shape and v is not x) or \
            g.input(x.shape)
        y = yv.name
        v = g.new(() if red != "none" else x.shape, result_dtype(x, yv), rg=rg_of(x, yv))
        g.emit(f"{v} = F.mse_loss({x}, {y}, reduction={red!r})", x, yv)
        g.op("mse_loss")
    elif form == 1:
        t = g.pick(lambda v: v.float and v.shape == x.shape and v.dtype == x.dtype)
        if t is None:
            t = g.input(x.shape, x.dtype, low=0.0, high=1.0)
            texpr = t.name
        else:
            texpr = dom(g, t, "unit")
        w = g.const_input(g.variant(x.shape), x.dtype, low=0.5, high=2.0) if g.chance(40) \
            else None
        pw = g.const_input(x.shape[-1:], x.dtype, low=0.5, high=2.0) if g.chance(40) else None
        v = g.new(() if red != "none" else x.shape, x.dtype, rg=rg_of(x, t))
        g.emit(f"{v} = F.binary_cross_entropy_with_logits({x}, {texpr}, {w}, "
               f"reduction={red!r}, pos_weight={pw})", x, t, w, pw)
        g.op("binary_cross_entropy_with_logits")
    else:
        nd = len(x.shape)
        if nd > 3 or x.shape[1 if nd > 1 else 0] == 0:
            return False
        c = x.shape[1] if nd > 1 else x.shape[0]
        tshape = (x.shape[0],) + x.shape[2:] if nd > 1 else ()
        tgt, uses = _index_val(g, tshape, c)
        w = g.const_input((c,), x.dtype, low=0.5, high=2.0) if g.chance(40) else None
        ce = g.chance(40)
        extra = g.choice(["", ", ignore_index=0"] + ([", label_smoothing=0.1"] if ce else []))
        fn = "F.cross_entropy" if ce else "F.nll_loss"
        v = g.new(() if red != "none" else tshape, x.dtype, rg=x.rg)
        g.emit(f"{v} = {fn}({x}, {tgt}, {w}, reduction={red!r}{extra})", x, w, *uses)
        g.op("nll_loss", *(["log_softmax"] if ce else []))


# ---- creation and random ---------------------------------------------------------------------

def r_create(g):
    x = g.need(lambda v: v.float)
    s, dt = x.shape, x.dtype
    # (form 5 reads x through detach, forms 6-10 draw by x's values, 11 is a range: not
    # smooth)
    form = g.int(0, 4 if g.smooth else 11)
    d = f"llgrad.{dt}"
    text, op = [
        (f"llgrad.zeros({s!r}, dtype={d})", "full"),
        (f"llgrad.full_like({x}, 0.5)", "full"),
        (f"{x}.new_ones({s!r})", "full"),
        (f"llgrad.randn({s!r}, dtype={d})", "rng_normal"),
        (f"llgrad.rand_like({x})", "rng_uniform"),
        (f"llgrad.ones({s!r}, dtype={d}) * {x}.detach()", "full"),
        (f"llgrad.nn.functional.rrelu({x}, training=True)", "rng_rrelu_noise"),
        (f"llgrad._standard_gamma({x}.detach().double().abs() + 0.5).to({d})",
         "rng_standard_gamma"),
        (f"llgrad._sample_dirichlet(({x}.detach().double().abs() + 0.5).reshape(1, -1))"
         f".reshape({s!r}).to({d})", "rng_dirichlet"),
        (f"llgrad.poisson({x}.detach().double().abs() * 4).to({d})", "rng_poisson"),
        (f"llgrad.binomial({x}.detach().double().abs() * 0 + 12, "
         f"{x}.detach().double().sigmoid()).to({d})", "rng_binomial"),
        (f"llgrad.arange(-3, 2 * {x}.numel() - 3, 2, dtype={d}).reshape({s!r})", "arange"),
    ][form]
    v = g.new(s, dt, exact=op in ("full", "arange") and x.exact)
    g.emit(f"{v} = {text}", x)
    g.op(op)


# ---- in place --------------------------------------------------------------------------------

INPLACE_UNARY = {  # in-place method: domain prefix (in place too) it needs
    "exp_": ".tanh_()", "sigmoid_": "", "tanh_": "", "neg_": "", "sin_": "", "cos_": "",
    "sqrt_": ".pow_(2).add_(0.5)", "log_": ".pow_(2).add_(0.5)", "expm1_": ".tanh_()",
    "reciprocal_": ".pow_(2).add_(0.5)", "rsqrt_": ".pow_(2).add_(0.5)", "erf_": "",
    "relu_": None, "abs_": None, "floor_": None, "sign_": None,
}


def r_inplace(g):
    """An in-place op on a value or on a view of it: a fresh copy (`v = x.clone()`), or
    a value other steps already read (then later readers must see the write, and a VJP
    that saved it raises the version error, eagerly and compiled alike)."""
    target = g.pick(lambda v: v.writable) if g.chance(35) else None
    if target is None:
        src = g.need(lambda v: v.float)
        form = g.int(0, 3)
        if form == 3 and not g.smooth:
            target = g.new(src.shape, src.dtype, exact=True)
            g.emit(f"{target} = llgrad.zeros_like({src})", src)
        else:
            target = g.new(src.shape, src.dtype, rg=src.rg, exact=src.exact)
            copy = [f"{src}.clone()", f"{src} * 1", f"{src} + 0", f"{src}.clone()"][form]
            g.emit(f"{target} = {copy}", src)
            g.op("clone")
    # a chain of 0-2 views
    expr, shape = target.name, target.shape
    for _ in range(g.int(0, 2)):
        got = view_of(g, Val("?", shape, target.dtype), inplace=True)
        if got is None:
            break
        text, shape, op, _ = got
        expr += text
        g.op(op)
    w = None
    if expr != target.name and g.chance(30):     # keep the view: a value of its own
        w = g.new(shape, target.dtype, base=target, rg=target.rg, exact=target.exact)
        g.emit(f"{w} = {expr}", target)
        expr = w.name
    kind = g.int(0, 6)
    uses = [target]
    exact = kind in (3, 4, 5)       # fills, copies and setitem write exact values
    if kind == 0:
        cands = [m for m, pre in INPLACE_UNARY.items() if (pre is not None or not g.smooth)
                 and (target.exact or m[:-1] not in DISCONTINUOUS)]
        m = g.choice(cands)
        pre = INPLACE_UNARY[m] or ""
        exact = m[:-1] in EXACT_UNARY
        line = f"{expr}{pre}.{m}()"
        g.op(m[:-1], *(["tanh"] if "tanh" in pre else ["pow", "add"] if pre else []))
    elif kind in (1, 2):
        m = g.choice(["add_", "sub_", "mul_", "div_"] + ([] if g.smooth else ["clamp_"]))
        if m == "clamp_":
            exact = True
            line = f"{expr}.clamp_({g.choice(['-0.5, 0.5', 'min=0.0', 'max=0.3'])})"
            g.op("clamp")
        elif kind == 1:
            s = g.scalar(nonzero=m == "div_")
            line = f"{expr}.{m}({s!r})"
            g.op(m[:-1])
        elif w is not None and g.chance(25) and m != "div_":   # the view with itself
            line = f"{expr}.{m}({expr})"
            g.op(m[:-1])
        else:
            bexpr, b, _ = g.operand(shape, "pos" if m == "div_" else "any", into=True,
                                      avoid=target.root)
            alpha = ", alpha=0.5" if m in ("add_", "sub_") and g.chance(30) else ""
            line = f"{expr}.{m}({bexpr}{alpha})"
            uses.append(b)
            g.op(m[:-1])
    elif kind == 3:
        if g.chance(40) and not g.smooth:
            line = f"{expr}.zero_()"
            g.op("zero")
        elif g.chance(50):
            line = f"{expr}.fill_({g.scalar()!r})"
            g.op("fill")
        else:
            s = g.pick(lambda v: v.float and v.shape == () and v.root is not target.root) \
                or g.input(())
            line = f"{expr}.fill_({s})"
            uses.append(s)
            g.op("fill")
    elif kind == 4:
        bexpr, b, _ = g.operand(shape, into=True, avoid=target.root)
        uses.append(b)
        if g.chance(50):
            line = f"{expr}.copy_({bexpr})"
            g.op("copy")
        else:
            mexpr, muses, _ = _mask(g, shape)
            uses += muses
            val = bexpr if b.shape == () else repr(g.scalar())
            line = f"{expr}.masked_fill_({mexpr}, {val})"
            g.op("masked_fill")
    elif kind == 5:          # setitem
        if not shape:
            return False
        d = g.int(0, len(shape) - 1)
        n = shape[d]
        form = g.int(0, 2)
        if form == 0:
            start = g.choice([1, 0, -2, None])
            idx = ", ".join([":"] * d + [f"{'' if start is None else start}::2"])
            sub = shape[:d] + (slice_len(n, start, None, 2),) + shape[d + 1:]
            g.op("copy")
        elif form == 1 and n:
            i = g.int(-n, n - 1)
            idx = ", ".join([":"] * d + [str(i)])
            sub = shape[:d] + shape[d + 1:]
            g.op("copy")
        else:
            k = g.int(0, min(3, shape[0]))
            idx = g.index_literal((k,), shape[0], neg=True, unique=True)
            sub = (k,) + shape[1:]
            g.op("index_put")
        if g.chance(40):
            val = repr(g.scalar())
        else:
            val, b, _ = g.operand(sub, into=True, avoid=target.root)
            uses.append(b)
        line = f"{expr}[{idx}] = {val}"
    else:                    # index_add_ / scatter_add_ / index_put_ (accumulating)
        if not shape:
            return False
        d = g.int(0, len(shape) - 1)
        n = shape[d]
        form = g.int(0, 2)
        if form == 0:
            k = g.int(0, 4) if n else 0
            idx, iu = _index_val(g, (k,), n)
            sshape = shape[:d] + (k,) + shape[d + 1:]
            src = g.pick(lambda v: v.float and v.dtype == target.dtype and v.shape == sshape
                         and v.root is not target.root) or g.input(sshape, target.dtype)
            line = f"{expr}.index_add_({d}, {idx}, {src})"
            uses += [src, *iu]
            g.op("index_add")
        elif form == 1:
            sshape = tuple(g.int(0 if m == 0 else 1, m) if i != d else g.int(0, 3)
                           for i, m in enumerate(shape))
            if n == 0 and sshape[d]:
                return False
            idx, iu = _index_val(g, sshape, n)
            src = g.input(sshape, target.dtype)
            line = f"{expr}.scatter_add_({d}, {idx}, {src})"
            uses += [src, *iu]
            g.op("scatter_add")
        else:
            k = g.int(0, 4) if shape[0] else 0
            idx = g.index_literal((k,), shape[0])
            vexpr, b, _ = g.operand((k,) + shape[1:], into=True, dtype=target.dtype,
                                  avoid=target.root)
            line = f"{expr}.index_put_(({idx},), {vexpr}, accumulate=True)"
            uses.append(b)
            g.op("index_put")
    if target.root.is_input and rg_of(*uses[1:]) and "grad_into_input" in KNOWN_BUGS:
        return False
    g.emit(line, *uses)
    g.step.writes = target
    g.step.result = w or target
    if not (exact and ex(*uses[1:])):       # the write reaches every alias of the root
        for v in g.pool:
            if v.root is target.root:
                v.exact = False
    rg = rg_of(*uses)
    target.rg = target.rg or rg
    if w is not None:
        w.rg = w.rg or rg
    target.root.rg = target.root.rg or (rg and not target.root.is_input)


# ---- the recipe table ------------------------------------------------------------------------

# recipe: (weight, ops of the table it can produce)
RECIPES = {
    r_unary: (6, set(_unary_table())),
    r_binary: (6, set(_binary_table()) | {"rsub", "reciprocal"}),
    r_pow: (1, {"pow"}),
    r_clamp: (1, {"clamp", "clamp_min", "clamp_max"}),
    r_mask: (2, {"gt", "lt", "ge", "eq", "ne", "logical_not", "logical_and", "logical_or",
                 "logical_xor", "isfinite", "to_dtype"}),
    r_where: (1, {"where"}),
    r_addc: (1, {"addcmul", "addcdiv", "lerp"}),
    r_masked_fill: (1, {"masked_fill"}),
    r_copy: (1, {"clone", "to_dtype"}),
    r_reduce: (4, {"sum", "mean", "prod", "amax", "amin", "max", "min", "max_dim", "min_dim",
                   "var", "std", "logsumexp", "argmax", "argmin"}),
    r_bool_reduce: (1, {"all", "any"}),
    r_softmax: (2, {"softmax", "log_softmax", "cumsum"}),
    r_view: (6, {"slice", "select", "transpose", "t", "unsqueeze", "squeeze", "diagonal",
                 "permute", "alias", "view", "_unsafe_view", "_reshape_alias", "expand",
                 "as_strided"}),
    r_multi_view: (1, {"unbind", "split"}),
    r_detach: (1, set()),
    r_cat: (2, {"cat", "stack"}),
    r_gather: (2, {"gather", "index_select", "index"}),
    r_scatter: (1, {"scatter_add", "index_add", "index_put"}),
    r_matmul: (2, {"mm", "bmm", "matmul", "dot", "mv", "addmm", "squeeze_"}),
    r_norm: (1, {"layer_norm", "batch_norm", "batch_norm_with_stats", "batch_norm_backward"}),
    r_embedding: (1, {"embedding"}),
    r_loss: (1, {"mse_loss", "binary_cross_entropy_with_logits", "nll_loss"}),
    r_create: (1, {"full", "arange", "rng_normal", "rng_uniform", "rng_rrelu_noise",
                   "rng_standard_gamma", "rng_dirichlet", "rng_poisson", "rng_binomial"}),
    r_inplace: (6, {"zero", "fill", "copy", "strided_scatter", "strided_gather",
                    "strided_put"}),
}

# recipes of further op families, one file each beside this one (recipes_*.py): each runs
# in this module's namespace (Gen, pick, the r_* helpers, ...) and adds to RECIPES
for _path in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                           "recipes_*.py"))):
    with open(_path) as _f:
        exec(compile(_f.read(), _path, "exec"), globals())  # noqa: S102 (the suite's own)
_WEIGHTED = [r for r, (w, _) in RECIPES.items() for _ in range(w)]

# ops of the table no recipe draws, with the reason
NOT_DRAWN = {
    "linalg_ldl_factor_ex": "PyTorch gives it no derivative (tests/runtime/samples_linalg_ldl.py "
                            "and tests/ir/specs_special_ldl.py sample it)",
    "linalg_ldl_solve": "PyTorch gives it no derivative (as linalg_ldl_factor_ex)",
    "div_scalar": "reached only through F.cross_entropy with class-probability targets and "
                  "reduction='mean' (no public spelling); its lowering is div's",
}


def covered_ops():
    out = set()
    for _, ops in RECIPES.values():
        out |= ops
    return out


# ---- the strategy ----------------------------------------------------------------------------

@st.composite
def programs(draw, smooth=False, max_steps=7):
    """A random Program. smooth=True: float64 programs whose every op is differentiable
    everywhere on the values drawn (for gradcheck)."""
    g = Gen(draw, smooth)
    g.dtype = "float64" if smooth else g.choice(("float64", "float32"))
    base = g.shape(g.choice((2, 1, 3, 0)))
    for k in range(g.int(1, 3)):
        shape = base if k == 0 else g.variant(base)
        g.input(shape, g.dtype if smooth or g.chance(90) else g.other_dtype(),
                rg=True if smooth and k == 0 else None)
    while True:        # a continuation draw per step: shrinking deletes steps
        for _attempt in range(8):
            g.step = Step()
            r = g.choice(_WEIGHTED)
            pool_before = list(g.pool)
            try:
                ok = r(g) is not False
            except GiveUp:
                ok = False
            if ok:
                g.steps.append(g.step)
                break
            g.pool = pool_before     # a recipe that gave up leaves nothing behind
            g.inputs = [s for s in g.inputs
                        if any(v.name == s["name"] for v in g.pool if v.is_input)]
        g.step = None
        # at least 3 steps (the DCE of _dce still shrinks a failure to what it needs)
        if len(g.steps) >= max_steps or len(g.steps) >= 3 and not g.chance(75):
            break
    # outputs: the last value, and others at random (a value twice, sometimes)
    last = g.pool[-1]
    if g.steps:
        last = g.steps[-1].result or (g.steps[-1].defs or [last])[-1]
    used = {u.name for st_ in g.steps for u in st_.uses}
    outs = [last] + [v for v in g.pool if v is not last and
                     g.chance(60 if v.name not in used and not v.is_input else 10)]
    if g.chance(10):
        outs.append(g.choice(outs))
    steps, inputs = _dce(g.steps, outs, g.inputs)
    extra = g.choice((None, None, "relayout", "no_grad"))
    flags = {"single": len(outs) == 1 and g.chance(50), "extra": extra}
    return Program(inputs, steps, outs, smooth, flags)


def _dce(steps, outs, inputs):
    """Drop the steps nothing live reads (a write is live when a later step or an output
    reads its memory, or when it writes an input); drop the inputs nothing reads."""
    live, roots = set(), set()

    def mark(v):
        live.add(v.name)
        roots.add(v.root.name)
        if v.base is not None:
            mark(v.base)

    for v in outs:
        mark(v)
    kept = []
    for s in reversed(steps):
        w = s.writes
        if any(d.name in live for d in s.defs) or w is not None and (
                w.root.name in roots or w.root.is_input):
            kept.append(s)
            for u in s.uses:
                mark(u)
    kept.reverse()
    return kept, [s for s in inputs if s["name"] in live]
