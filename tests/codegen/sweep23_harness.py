"""Shared machinery of the test_dtypes_layouts_sweep23*.py files: inputs of every dtype in
every layout, built the same way in llgrad and in torch, and one check that runs a batch of
cases eagerly, under llgrad.compile and in torch and compares the three.

A case is fn(m, *xs) written against the API llgrad and torch share (m is the module). A
batch of cases runs as ONE compiled function (compiling costs ~40 ms a graph), called twice:
the first call traces, the second runs the native kernel, which must exist (a Kernel in
entry.kernels, not an "interpreted: ..." note), except for float16/bfloat16 operands, which
native code does not handle and which run in the interpreter by design."""
import warnings

import numpy as np

import llgrad
from llgrad.codegen.kernel import Kernel

DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
          "uint8", "bool")
FLOATS = ("float64", "float32", "float16", "bfloat16")
INTS = ("int64", "int32", "int16", "int8", "uint8")
NATIVE = ("float64", "float32", "int64", "int32", "int16", "int8", "uint8", "bool")
TOL = {"float64": (1e-9, 1e-11), "float32": (2e-5, 2e-5), "float16": (2e-3, 2e-3),
       "bfloat16": (1.6e-2, 1e-2)}
SHAPE = (3, 4)


def values(dtype, shape, seed=0, special=False):
    """Sample values of dtype (as float64/int64/bool NumPy arrays; bfloat16 is made by
    casting): floats around 0 (with nan/inf/-0.0 when special), ints across the range
    (its min and max when special)."""
    r = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype == "bool":
        return r.integers(0, 2, n).astype(bool).reshape(shape)
    if dtype in FLOATS:
        v = r.uniform(-3, 3, n).round(2)
        if special and n >= 6:
            v[:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30 if dtype == "float64" else 60000]
        return v.reshape(shape)
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -20), min(info.max, 20)
    v = r.integers(lo, hi + 1, n)
    if special and n >= 4:
        v[:4] = [info.min, info.max, info.min + 1, info.max - 1]
    return v.astype(np.int64).reshape(shape)


def _fill(dtype, shape):
    return np.full(shape, 7, dtype=np.int64) if dtype != "bool" else np.ones(shape, bool)


# layout -> (base array from the logical values a, view of the base tensor); the view's
# values are a's (expanded: a's first row, broadcast; 0-d: a's first element)
LAYOUTS = {
    "contiguous": (lambda a: a, lambda t: t),
    "transposed": (lambda a: np.ascontiguousarray(a.T), lambda t: t.t()),
    "stepped": (lambda a: _stepped(a), lambda t: t[1::2, ::2]),
    "expanded": (lambda a: a[:1], lambda t: t.expand(*SHAPE)),
    "zero_d": (lambda a: a.reshape(-1)[0], lambda t: t),
    "zero_size": (lambda a: a[:0], lambda t: t),
    "offset": (lambda a: np.concatenate([_fill(a.dtype.name, 5).astype(a.dtype),
                                         a.reshape(-1)]),
               lambda t: t[5:].view(*SHAPE)),
}


def _stepped(a):
    big = np.zeros((2 * a.shape[0] + 1, 2 * a.shape[1]), a.dtype) + (a.dtype != bool)
    big[1::2, ::2] = a
    return big


def make(m, dtype, layout, a):
    """The tensor of module m (llgrad or torch) holding a in dtype and layout."""
    base, view = LAYOUTS[layout]
    b = np.asarray(base(a))
    t = m.tensor(b.astype(np.float32) if dtype == "bfloat16" else b.astype(dtype))
    return view(t.to(getattr(m, dtype)))


def as_numpy(t):
    """A result as (dtype name, shape, NumPy values)."""
    if isinstance(t, (bool, int, float)):
        return (type(t).__name__, (), np.asarray(t))
    name = str(t.dtype).split(".")[-1]
    d = t.detach()
    arr = (d.float() if name == "bfloat16" else d).numpy()
    return name, tuple(t.shape), np.array(arr)


def close(got, want, what):
    """'' when got == want (dtype, shape, values), else the difference."""
    (gd, gs, gv), (wd, ws, wv) = got, want
    if gd != wd or gs != ws:
        return f"{what}: dtype/shape {gd}{list(gs)} != {wd}{list(ws)}"
    if gd in TOL:
        rtol, atol = TOL[gd]
        ok = np.allclose(gv, wv, rtol=rtol, atol=atol, equal_nan=True) and \
            np.array_equal(np.signbit(gv[gv == 0]), np.signbit(wv[gv == 0])) \
            if gv.shape == wv.shape else False
    else:
        ok = np.array_equal(gv, wv)
    return "" if ok else f"{what}: values\n{gv}\n!=\n{wv}"


def torch_runs(torch, fn, args):
    """fn's torch results, or the exception torch raises."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(torch, *args)
        return [as_numpy(o) for o in (out if isinstance(out, tuple) else (out,))]
    except Exception as e:    # noqa: BLE001 (torch's verdict, compared with llgrad's)
        return e


# Graphs native code does not compile on purpose, by (op, the lowering's reason): integer
# and bool operands of ops whose lowerings are written for floats (their graphs run in the
# interpreter, with a warning). Any other "interpreted" note in a sweep is a failure, so a
# lowering that stops covering a dtype shows.
ALLOWED_FALLBACKS = {
    ("add", "alpha=2 on integer operands"), ("clamp", "bool operands"),
    ("maximum", "bool operands"), ("minimum", "bool operands"), ("sign", "bool operands"),
    ("floor", "integer operands"), ("pow", "integer pow"),
    ("constant_pad_nd", "no lowering for this op"), ("hardtanh", "no lowering for this op"),
    ("threshold", "no lowering for this op"), ("smooth_l1_loss", "no lowering for this op"),
    ("cumsum", "a 0-d operand"), ("cumprod", "a 0-d operand"), ("softmax", "a 0-d operand"),
    ("std", "a 0-d operand"), ("var", "a 0-d operand"),
    ("std", "a reduction over an empty dim"), ("var", "a reduction over an empty dim"),
    ("index_add", "bool result with alpha=1"), ("scatter_add", "bool result"),
    ("mse_loss", "a non-float operand"),
}


def _allowed(note):
    """Whether an 'interpreted: <op> (<loc>) is not lowered ...: <reason>' note is one of
    ALLOWED_FALLBACKS."""
    if ": interpreted: " not in note or " yet: " not in note:
        return False
    op = note.split(": interpreted: ", 1)[1].split(" ", 1)[0]
    return (op, note.rsplit(" yet: ", 1)[1]) in ALLOWED_FALLBACKS


def native_ran(cf):
    """The notes of graphs that ran in the interpreter ([] when all ran natively)."""
    notes = []
    for entry in cf.entries:
        for which, k in entry.kernels.items():
            if not isinstance(k, Kernel):
                notes.append(f"{which}: {k}")
    return notes


def run_batch(torch, cases, dtype_of_args, torch_differs=(), falls_back=lambda name: False):
    """cases: [(name, fn, args_spec)] with args_spec a list of (dtype, layout, values) or
    Python scalars. Each case runs in torch and eagerly in llgrad, and the cases eager
    accepts run as one compiled function. Returns the problems found: eager != torch
    (exception or not, dtype, shape, values; names whose op starts with one of
    torch_differs are exempt from the value check: known torch quirks), compiled != eager,
    and compiled code that ran in the interpreter on native dtypes (falls_back(name): the
    cases that do by design, an ALLOWED_FALLBACKS note, run in a batch of their own)."""
    problems, ok = [], []
    for name, fn, spec in cases:
        targs = [make(torch, *s) if isinstance(s, tuple) else s for s in spec]
        want = torch_runs(torch, fn, targs)
        largs = [make(llgrad, *s) if isinstance(s, tuple) else s for s in spec]
        got = torch_runs(llgrad, fn, largs)
        if isinstance(want, Exception) or isinstance(got, Exception):
            if isinstance(want, Exception) != isinstance(got, Exception):
                problems.append(f"{name}: torch {_short(want)} / eager {_short(got)}")
            if isinstance(got, Exception):
                continue
        elif not name.startswith(tuple(torch_differs)):
            problems += [d for g, w in zip(got, want) for d in [close(g, w, f"{name} eager~torch")]
                         if d]
        ok.append((name, fn, spec, got))
    # the cases expected to fall back run apart, so the others' batch is native code
    slow = [c for c in ok if falls_back(c[0])]
    fast = [c for c in ok if not falls_back(c[0])]
    return problems + compiled(fast, dtype_of_args) + compiled(slow, dtype_of_args, True)


def compiled(ok, dtype_of_args, fallback=False):
    """Runs ok's cases as one compiled function against eager's results (a float
    tolerance of native code's: its own exp/log/... and summation orders). A batch of
    fallback cases must fall back only with ALLOWED_FALLBACKS notes; another batch that fell
    back is split until the cases that did are alone, each named in a 'not native' problem
    (unless its dtypes are not native ones)."""
    if not ok:
        return []
    problems = []

    def batch(*xs):
        outs, k = [], 0
        for _, fn, spec, _ in ok:
            n = sum(1 for s in spec if isinstance(s, tuple))
            it = iter(xs[k:k + n])
            args = [next(it) if isinstance(s, tuple) else s for s in spec]
            o = fn(llgrad, *args)
            outs += list(o) if isinstance(o, tuple) else [o]
            k += n
        return tuple(outs)

    cf = llgrad.compile(batch)
    for _ in range(2):          # trace, then run the native kernel
        xs = [make(llgrad, *s) for _, _, spec, _ in ok for s in spec if isinstance(s, tuple)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = cf(*xs)
        cf.wait()
    notes = native_ran(cf)
    if notes and all(d in NATIVE for d in dtype_of_args):
        if not fallback and len(ok) > 1:
            h = len(ok) // 2
            return compiled(ok[:h], dtype_of_args) + compiled(ok[h:], dtype_of_args)
        if not fallback or not all(_allowed(n) for n in notes):
            problems.append(f"not native: {ok[0][0]}: {notes}")
    outs = list(outs)
    k = 0
    for name, _, _, want in ok:
        for w in want:
            d = close(as_numpy(outs[k]), w, f"{name} compiled~eager")
            if d:
                problems.append(d)
            k += 1
    return problems


def _short(x):
    return type(x).__name__ + (": " + str(x).splitlines()[0][:100] if isinstance(x, Exception)
                               else "")
