"""Special values through every op of the op table (issue 23): NaN, +-inf, +-0, float32 and
float64 subnormals and values near the dtype's max, as inputs of every op's sample programs,
compared eager vs the IR interpreter vs native code (llvm), values and gradients; and, for the
elementwise ops, eager vs PyTorch when it is installed.

The programs are the op table's (tests/runtime/test_optable.py: SAMPLES, and EXEMPT's programs
of the non-differentiable ops), in tests/codegen/test_llvm_optable.py's batches (one compiled
function per BATCH_OPS ops, contiguous inputs): the graphs are the ones that file compiles for
float64 and float32, so a whole-suite run finds their kernels in the session's kernel cache.
Every float input that requires grad is filled, element by element, from specials() (a
different interleaving per input, so binary ops meet pairs of special values), in ROTATIONS
shifts; the constants (K(...)), index and mask inputs keep their sample values.

Agreement means: the same NaNs, the same infinities (with their signs), the same sign of zero
where both sides are zero, finite values within a tolerance (tight for the values of
elementwise ops; the accumulation-order tolerance of test_llvm_optable for the rest, whose
sums run in other orders). Where a difference is accepted it is named here with its reason:
ORDER_DEPENDENT (ops whose result depends on the order of accumulation once an intermediate
overflows or underflows: they get values that cannot), FLOAT32_SUMS (native code sums float32
in float64), DOMAINS (ops that refuse values outside their domain, as PyTorch does) and,
against PyTorch, TORCH_TOLERANCES.
"""
import importlib.util
import math
import os
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.ir import OPS

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")   # inf - inf, 0 * inf, ...

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "_llvm_optable_for_special_values",
    os.path.join(_HERE, os.pardir, "codegen", "test_llvm_optable.py"))
llvm_optable = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(llvm_optable)
optable = llvm_optable.tracing.optable
K = optable.K
BATCHES = llvm_optable.BATCHES
DTYPES = ("float64", "float32")


# ---- the special values ---------------------------------------------------------------------

def specials(dtype):
    """NaN, +-inf, +-0, subnormals (the smallest, and two of the upper range), values near
    the max, and a few ordinary values (so that reductions and normalisations see a mix)."""
    fi = np.finfo(dtype)
    return np.array([math.nan, math.inf, -math.inf, 0.0, -0.0, fi.smallest_subnormal,
                     -fi.tiny / 4, fi.max, -fi.max / 3, 1.25, -0.75, 0.5, fi.tiny / 2, -2.0],
                    dtype=dtype)


def ordered(dtype):
    """specials() without the values whose products and sums over- or underflow part way: no
    subnormals, and large values (sqrt(max) / 4: a product of two stays finite) in place of
    the huge ones (max / 64 times -max / 192 overflowed float32 in eager's dot products and
    not in native code's float64 sums, on hosts whose kernel took that path: nan against
    inf)."""
    fi = np.finfo(dtype)
    big = math.sqrt(float(fi.max)) / 4
    return np.array([math.nan, math.inf, -math.inf, 0.0, -0.0, 0.375, -1.5, big,
                     -big / 3, 1.25, -0.75, 0.5, 3.0, -2.0], dtype=dtype)


def unit(dtype):
    """[0, 1] with its edges: -0, 0, 1, the smallest subnormal and normal, 1 - eps."""
    fi = np.finfo(dtype)
    return np.array([0.0, -0.0, 1.0, fi.smallest_subnormal, 1 - fi.epsneg, 0.5, fi.tiny,
                     0.25], dtype=dtype)


ROTATIONS = (0, 5, 10)

# Ops whose result depends on the order in which elements are combined once an intermediate
# over- or underflows (a prod of a subnormal and huge values was 0 eager and 3e-16 native; a
# dot product of huge terms -inf eager and nan native): NumPy multiplies in its order, native
# code in its own (prod's products are reassociable, so LLVM may vectorise them; matrix
# products run in blocks), PyTorch in yet another. They get ordered() values: every special
# value but those, so what is compared does not depend on the order.
ORDER_DEPENDENT = {"prod", "mm", "addmm", "bmm", "baddbmm", "matmul", "dot", "mv", "squeeze_"}

# Native code sums float32 in float64 (llgrad/codegen/lowerings/ops_reduce.py: more accurate,
# and within float32 rounding of NumPy's pairwise sums), so where a float32 partial sum
# overflows, eager (as PyTorch) gives inf or nan and native code a finite value. The
# normalisations' backward averages the incoming gradient times the weight over a channel or
# group (batch_norm with a weight of -1.1e38: the mean is -inf eager, and the input's gradient
# 0 * inf = nan; finite native, gradient -0; group_norm likewise): in float32 they get
# ordered() values (no two of which overflow float32 when added).
FLOAT32_SUMS = {"batch_norm", "batch_norm_with_stats", "batch_norm_backward", "group_norm",
                "layer_norm"}

# Ops that refuse values outside a domain (eager raises, as PyTorch does; compiled code checks
# the traced example only): {op: (input positions, values)}.
def finite(dtype):
    """Finite values of both signs, zeros among them (LAPACK's SVD and eigh refuse non-finite
    matrices, as PyTorch's do: an error, not values)."""
    return np.array([0.375, -1.5, 0.0, 1.25, -0.75, 0.5, -0.0, 3.0, -2.0], dtype=dtype)


# (linalg_cholesky_ex and linalg_solve_ex: what a factorisation makes of a NaN, an inf or a
# matrix singular to working precision is the algorithm's: MKL's blocked LAPACK, NumPy's and
# the native loop each give another (cholesky's info: a compiled call whose info differs from
# the trace's runs again eagerly, with eager's); their native loops meet finite matrices here)
DOMAINS = {"binary_cross_entropy": ((0, 1), unit),    # input and target in [0, 1]
           "linalg_svd": ((0,), finite), "linalg_eigh": ((0,), finite),
           "linalg_cholesky_ex": ((0,), finite), "linalg_solve_ex": ((0, 1), finite),
           # (a NaN std or probability raises, as PyTorch's: the samples take std's abs
           # and p's sigmoid of these)
           "normal_tensor": ((0, 1), finite), "bernoulli": ((0,), finite),
           # (a NaN rate raises, as PyTorch's; the rejection samplers meet finite parameters)
           "rng_poisson": ((0,), finite), "rng_binomial": ((0,), finite),
           "rng_standard_gamma": ((0,), finite), "rng_dirichlet": ((0,), finite)}

# Ops of the table that read no float input: nothing to feed.
NO_FLOAT_INPUT = {"full": "creation from a value", "arange": "creation from numbers",
                  "rng_normal": "a random draw",
                  "rng_uniform": "a random draw", "rng_integers": "a random draw",
                  "rng_randperm": "a random draw",
                  "lu_pivots_to_permutation": "LU's integer pivots",
                  "div_int": "integer division: integer operands only"}


def _values(prog, k, dtype):
    dom = DOMAINS.get(prog.op)
    if dom and k in dom[0]:
        return dom[1](dtype)
    if prog.op in ORDER_DEPENDENT or dtype == "float32" and prog.op in FLOAT32_SUMS:
        return ordered(dtype)
    return specials(dtype)


def special_inputs(prog, dtype, rot):
    """prog's inputs with each float input that requires grad (a raw float array of the
    sample) filled from its values, the k-th input at stride 2k+1 from offset rot + 5k."""
    out = []
    for k, a in enumerate(prog.inputs):
        if isinstance(a, np.generic):
            a = np.asarray(a)
        if isinstance(a, K):
            out.append(llgrad.tensor(np.array(a.arr)))
        elif isinstance(a, np.ndarray) and a.dtype.kind == "f":
            vals = _values(prog, k, dtype)
            idx = (np.arange(a.size) * (2 * k + 1) + rot + 5 * k) % len(vals)
            out.append(llgrad.tensor(vals[idx].reshape(a.shape)).requires_grad_())
        elif isinstance(a, np.ndarray):
            out.append(llgrad.tensor(np.array(a)))
        else:
            out.append(a)
    return out


# ---- running ----------------------------------------------------------------------------------

def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def run(fn, inputs, lib=llgrad):
    """(outputs, gradients of the float leaves) of fn(*inputs) and a backward from every
    output that requires grad, with fixed cotangents."""
    if lib is llgrad:           # (PyTorch runs no random op here: its seeding is slow)
        lib.manual_seed(1234)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = _flat(fn(*inputs))
        values = [np.array(o.detach().numpy(), copy=True) for o in outs]
        diff = [o for o in outs if o.requires_grad]
        if diff:
            rng = np.random.default_rng(99)
            lib.autograd.backward(diff, [lib.tensor(rng.uniform(0.5, 1.5, tuple(o.shape)))
                                         .to(o.dtype) for o in diff])
    leaves = [t for t in inputs if isinstance(t, lib.Tensor) and t.requires_grad]
    return values, [None if t.grad is None else np.array(t.grad.numpy(), copy=True)
                    for t in leaves]


def _batch_fn(batch):
    sizes = [len(p.inputs) for p in batch]
    # (the programs' functions, not the programs: a large example array in one, which the
    # function never reads, would be guarded by its contents after the first trace, and the
    # second call would trace again: compile/numpy_reads.py)
    fns = [p.fn for p in batch]

    def fn(*xs):
        outs, k = [], 0
        for f, n in zip(fns, sizes):
            outs += _flat(f(llgrad, *xs[k:k + n]))
            k += n
        return tuple(outs)
    return fn


def _owners(batch, dtype):
    """The program each output and each gradient of a batch's run belongs to."""
    outs, grads = [], []
    for p in batch:
        inputs = special_inputs(p, dtype, 0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            n = len(_flat(p.fn(llgrad, *inputs)))
        outs += [p] * n
        grads += [p] * sum(isinstance(t, llgrad.Tensor) and t.requires_grad for t in inputs)
    return outs, grads


# ---- comparing --------------------------------------------------------------------------------

def mismatches(got, want, rtol, atol, zero_signs=True):
    """A mask of the elements of got that disagree with want: NaN against not NaN, an
    infinity against anything else, zeros of opposite signs (where zero_signs), finite
    values out of tolerance. None when they agree."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind != "f":
        bad = got != want
    else:
        g, w = got.astype(np.float64), want.astype(np.float64)
        bad = np.isnan(g) != np.isnan(w)
        bad |= (np.isinf(g) | np.isinf(w)) & (g != w) & ~(np.isnan(g) | np.isnan(w))
        if zero_signs:
            bad |= (g == 0) & (w == 0) & (np.signbit(g) != np.signbit(w))
        fin = np.isfinite(g) & np.isfinite(w)
        with np.errstate(invalid="ignore", over="ignore"):
            bad |= fin & ~(np.abs(g - w) <= atol + rtol * np.abs(w))
    return bad if bad.any() else None


def _report(what, got, want, bad):
    return (f"{what}: {int(bad.sum())} of {bad.size} differ: got {got[bad][:6]!r}, "
            f"expected {want[bad][:6]!r}")


# values of elementwise ops: a few ulps (native polynomials), subnormals included, and the
# signs of zeros; anything that sums, normalises or solves: test_llvm_optable's tolerance
# (other orders of accumulation), and an exact zero may come out with either sign (reached
# by another order or formula: a * (b - c) against a * b - a * c, LAPACK's solve against a
# loop's), as it does between PyTorch's own CPU kernels
TIGHT = {"float64": dict(rtol=1e-9, atol=16 * 5e-324),
         "float32": dict(rtol=2e-5, atol=16 * 1.4e-45)}
LOOSE = {dt: dict(tol, zero_signs=False) for dt, tol in llvm_optable.TOL.items()}


class Pass:
    """One backend's runs of a batch, in a dtype, over ROTATIONS (a compiled backend's first
    call traces; the runs compared are the calls after it)."""

    def __init__(self, batch, dtype, backend):
        fn = _batch_fn(batch)
        inputs = lambda rot: [t for p in batch for t in special_inputs(p, dtype, rot)]  # noqa
        if backend != "eager":
            fn = llgrad.compile(fn, backend=backend)
            run(fn, inputs(ROTATIONS[0]))
        self.runs = [run(fn, inputs(rot)) for rot in ROTATIONS]
        if backend != "eager":
            assert fn.n_traces == 1, f"{backend}: traced {fn.n_traces} times"


def _params():
    """Every batch in both dtypes; float64 marked slow (the suite's time: float32 meets the
    same lowerings at their narrower edges)."""
    out = []
    for dt in DTYPES:
        for k, batch in enumerate(BATCHES):
            # (float64, and every second float32 batch: slow, for the suite's time)
            marks = (pytest.mark.slow,) if dt == "float64" or k % 2 else ()
            ops = sorted({p.op for p in batch})
            out.append(pytest.param(k, dt, marks=marks, id=f"{dt}-{ops[0]}..{ops[-1]}"))
    return out


@pytest.mark.parametrize("k,dtype", _params())
def test_special_values_eager_interpret_llvm(k, dtype):
    batch = BATCHES[k]
    out_owner, grad_owner = _owners(batch, dtype)
    want = Pass(batch, dtype, "eager")
    failures = []
    for backend in ("interpret", "llvm"):
        got = Pass(batch, dtype, backend)
        for rot, (gv, gg), (wv, wg) in zip(ROTATIONS, got.runs, want.runs):
            assert len(gv) == len(wv) and len(gg) == len(wg)
            for i, (a, b) in enumerate(zip(gv, wv)):
                p = out_owner[i]
                tol = TIGHT[dtype] if OPS[p.op].kind == "elementwise" else LOOSE[dtype]
                bad = mismatches(a, b, **tol)
                if bad is not None:
                    failures.append(_report(f"[{backend}] {p.op}-{p.id} rotation {rot} "
                                            f"output {i}", a, b, bad))
            for i, (a, b) in enumerate(zip(gg, wg)):
                p = grad_owner[i]
                what = f"[{backend}] {p.op}-{p.id} rotation {rot} gradient {i}"
                if (a is None) != (b is None):
                    failures.append(f"{what}: {a} vs eager's {b}")
                    continue
                bad = None if a is None else mismatches(a, b, **LOOSE[dtype])
                if bad is not None:
                    failures.append(_report(what, a, b, bad))
    assert not failures, "\n".join(failures[:20])


def test_every_op_with_float_inputs_gets_special_values():
    """Every op of the table is in a batch whose programs feed it special values (or reads no
    float input: NO_FLOAT_INPUT)."""
    fed = {p.op for b in BATCHES for p in b
           if any(isinstance(a, np.ndarray) and a.dtype.kind == "f" for a in p.inputs)}
    complex_only = {n for n, op in OPS.items() if op.complex == "only"}     # (eager only)
    assert set(OPS) - fed - set(NO_FLOAT_INPUT) - complex_only == set()
    assert set(NO_FLOAT_INPUT) | set(ORDER_DEPENDENT) | FLOAT32_SUMS <= set(OPS)
    assert set(DOMAINS) <= set(OPS)


# ---- eager against PyTorch: the elementwise ops ----------------------------------------------

class Tolerance:
    """A difference from PyTorch accepted for an op, with its reason: accept(kind, got, want,
    x, dtype) marks the accepted elements (kind "out" or "grad"; x: for a gradient, the
    input it is the gradient of)."""

    def __init__(self, reason, accept):
        self.reason, self.accept = reason, accept


def _ulps(got, want):
    g, w = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(invalid="ignore"):
        return np.abs(g - w) <= np.spacing(np.maximum(np.abs(got), np.abs(want)))


ZERO_TIES = Tolerance(
    "at a tie of +0 and -0 PyTorch's result depends on its loop (its vector loop gives the "
    "second operand, its scalar loop, for tails and small tensors, the first); llgrad gives "
    "the second, as NumPy",
    lambda kind, g, w, x, dt: (g == 0) & (w == 0))
NAN_GRADIENT = Tolerance(
    "at a NaN input PyTorch's vector and scalar backward kernels disagree (vector: nan for "
    "elu, celu and hardswish, 0 for hardtanh; scalar, for tails and small tensors: the "
    "incoming gradient); llgrad gives the vector kernel's",
    lambda kind, g, w, x, dt: np.isnan(x) if kind == "grad" else np.zeros(g.shape, bool))
GELU_TOP_FLOAT32 = Tolerance(
    "PyTorch's vectorised float32 gelu (approximate='none') overflows at the top of the range: "
    "inf at float32's max and nan at +inf, where its scalar loop, and float64, give max and "
    "inf; llgrad gives max and inf (test_gelu_at_infinity compares with the scalar loop)",
    lambda kind, g, w, x, dt: (dt == "float32") & (kind == "out") & (
        (g == np.finfo(np.float32).max) & (w == np.inf) | (g == np.inf) & np.isnan(w)))

GELU_FLOAT32 = Tolerance(
    GELU_TOP_FLOAT32.reason + "; and at the bottom, where x * cdf(x) is x times 0, PyTorch's "
    "float32 vector loop gives +0 on some hosts (AVX2) and llgrad -0, the sign of x * +0",
    lambda kind, g, w, x, dt: GELU_TOP_FLOAT32.accept(kind, g, w, x, dt) | (
        (dt == "float32") & (kind == "out") & (g == 0) & (w == 0)))

TRIGAMMA_POLES = Tolerance(
    "trigamma (polygamma(1, x), digamma's derivative) has poles at the non-positive integers: "
    "llgrad gives +inf there; PyTorch's kernel divides by sin(pi * x) of the rounded product "
    "pi * x, which is not 0, and gives a large finite number (nan where |x| is huge)",
    lambda kind, g, w, x, dt: np.isposinf(g) & (np.isnan(w) | (np.abs(w) > 1e12)))
HUGE_QUOTIENT_FMOD = Tolerance(
    "PyTorch's vectorised fmod (Sleef's) gives nan where x / y overflows (float64's max by a "
    "tiny y), where C's fmod, which llgrad computes, gives the exact remainder",
    lambda kind, g, w, x, dt: (kind == "out") & np.isnan(w) & np.isfinite(g))
FMA_UNDERFLOW = Tolerance(
    "add / sub with an alpha are one fused multiply-add in both; llgrad's float64 one "
    "(ir/fused_madd.py) is exact but where alpha * b underflows past the smallest subnormal: "
    "the sign of a zero result may differ there",
    lambda kind, g, w, x, dt: (g == 0) & (w == 0))
TORCH_TOLERANCES = {"fmod_float": HUGE_QUOTIENT_FMOD, "remainder_float": HUGE_QUOTIENT_FMOD,
                    "add": FMA_UNDERFLOW, "sub": FMA_UNDERFLOW, "maximum": ZERO_TIES, "minimum": ZERO_TIES,
                    "clamp": ZERO_TIES, "clamp_min": ZERO_TIES, "clamp_max": ZERO_TIES,
                    "elu": NAN_GRADIENT, "elu_": NAN_GRADIENT, "celu": NAN_GRADIENT,
                    "celu_": NAN_GRADIENT, "hardtanh": NAN_GRADIENT,
                    "hardswish": NAN_GRADIENT, "gelu": GELU_FLOAT32,
                    "digamma": TRIGAMMA_POLES, "polygamma": TRIGAMMA_POLES,
                    "polygamma_": TRIGAMMA_POLES}

# eager and PyTorch evaluate exp, tanh, ... with libraries of their own: values an ulp or two
# apart, subnormal ones to a few units of the smallest subnormal; gradients also where they
# cancel (gelu'(-0.75) = cdf + x * pdf ~ 0.0008 from terms ~ 0.2)
TORCH_TOL = {("out", "float64"): dict(rtol=1e-7, atol=16 * 5e-324),
             ("out", "float32"): dict(rtol=1e-5, atol=16 * 1.4e-45),
             ("grad", "float64"): dict(rtol=1e-7, atol=1e-14),
             ("grad", "float32"): dict(rtol=1e-5, atol=1e-6)}


def _torch_ops():
    """{op: its programs} of the elementwise ops (but the samples that are not comparable
    with PyTorch, e.g. random draws: their case.torch says why)."""
    out = {}
    for p in llvm_optable.tracing.PROGRAMS:
        case = next((c for c in optable.SAMPLES.get(p.op, ()) if c.id == p.id), None)
        if OPS[p.op].kind == "elementwise" and p.op not in NO_FLOAT_INPUT and \
                not (case is not None and case.torch):
            out.setdefault(p.op, []).append(p)
    return out


TORCH_OPS = _torch_ops()


@pytest.mark.torch
@pytest.mark.parametrize("op", sorted(TORCH_OPS))
def test_special_values_eager_matches_torch(op):
    torch = pytest.importorskip("torch")
    tol = TORCH_TOLERANCES.get(op)
    failures = []
    for prog, dtype, rot in ((p, d, r) for p in TORCH_OPS[op] for d in DTYPES
                             for r in ROTATIONS):
        lx = special_inputs(prog, dtype, rot)
        tx = [torch.from_numpy(np.array(t.detach().numpy())).requires_grad_(t.requires_grad)
              if isinstance(t, llgrad.Tensor) else t for t in lx]
        lv, lg = run(lambda *xs: prog.fn(llgrad, *xs), lx)
        tv, tg = run(lambda *xs: prog.fn(torch, *xs), tx, lib=torch)
        leaves = [t.detach().numpy() for t in lx if isinstance(t, llgrad.Tensor) and
                  t.requires_grad]
        assert len(lv) == len(tv) and len(lg) == len(tg)
        pairs = [("out", i, a, b, None) for i, (a, b) in enumerate(zip(lv, tv))]
        pairs += [("grad", i, a, b, x) for i, (a, b, x) in enumerate(zip(lg, tg, leaves))]
        for kind, i, a, b, x in pairs:
            what = f"{prog.op}-{prog.id} {dtype} rotation {rot}: {kind} {i}"
            if a is None or b is None:
                assert (a is None) == (b is None) or not np.any(a if b is None else b), what
                continue
            bad = mismatches(a, b, **TORCH_TOL[kind, dtype])
            if bad is not None and tol is not None:
                bad &= ~tol.accept(kind, a, b, x, dtype)
            if bad is not None and bad.any():
                failures.append(_report(what, a, b, bad))
    assert not failures, "\n".join(failures)


# ---- gelu at +-inf (issue 23) ----------------------------------------------------------------

@pytest.mark.torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_at_infinity(approximate, dtype):
    """gelu(+-inf) and its gradient there, eager, interpreted and native, as PyTorch's
    (element by element: its scalar loop; see GELU_TOP_FLOAT32 for its float32 vector one):
    gelu(inf) = inf, gelu(-inf) = nan (-inf * 0), both gradients nan."""
    torch = pytest.importorskip("torch")
    values = np.array([math.inf, -math.inf, 0.0, -0.0, 1.5, math.nan], dtype=dtype)
    want_v, want_g = [], []
    for v in values:
        t = torch.tensor(v, requires_grad=True)
        y = torch.nn.functional.gelu(t, approximate=approximate)
        y.backward(torch.tensor(1.5, dtype=t.dtype))
        want_v.append(y.item())
        want_g.append(t.grad.item())
    want_v, want_g = np.array(want_v, dtype), np.array(want_g, dtype)
    assert np.isposinf(want_v[0]) and np.isnan(want_v[1]) and np.isnan(want_g[:2]).all()

    def f(x):
        return llgrad.nn.functional.gelu(x, approximate=approximate)

    for backend in ("eager", "interpret", "llvm"):
        fn = f if backend == "eager" else llgrad.compile(f, backend=backend)
        for _ in range(1 if backend == "eager" else 2):
            x = llgrad.tensor(values).requires_grad_()
            y = fn(x)
            y.backward(llgrad.full(tuple(y.shape), 1.5, dtype=y.dtype))
        for what, got, want in (("value", y.detach().numpy(), want_v),
                                ("gradient", x.grad.numpy(), want_g)):
            bad = mismatches(got, want, **TORCH_TOL["out", dtype])
            assert bad is None, _report(f"[{backend}] gelu {what}", got, want, bad)
