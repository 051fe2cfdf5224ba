"""Every sample program of the op table, compiled to native code: llgrad.compile(fn,
backend="llvm") against backend="interpret", values and gradients.

The programs are tests/runtime/test_optable.py's (SAMPLES, and EXEMPT's programs of the
non-differentiable ops), with the input layouts of tests/tracer/test_trace_optable.py
(contiguous; and, where a program has a float input of ndim >= 2, those inputs transposed,
stepped from an offset, or broadcast through a stride-0 dim) and their float inputs in
float64 and in float32. Compiling costs ~40 ms per graph, so the programs of BATCH_OPS ops
are compiled together: one function runs a batch of programs on the concatenation of their
inputs and returns all their outputs.

For each batch, layout and dtype, both backends are called twice (the first call traces,
the second runs the backend) from the same generator state on fresh inputs, and backward
runs from every differentiable output with the same random cotangents. The outputs, the
generator state and the gradients of every input must agree: exactly for integer and bool
values, to a tight tolerance for floats (native code sums in other orders and has its own
exp/log/sin/... polynomials, a few ulps from NumPy's).

The llvm run must really be native: every forward and backward graph it ran has a Kernel
in `entry.kernels` (a graph the lowering cannot compile holds an 'interpreted: ...' note
instead). So removing a lowering fails the batches whose programs use the op. The only
sanctioned fallbacks: INTERPRETED's programs (those of NOT_LOWERED's ops), and dtypes native
code does not handle (float16, test_float16_runs_in_the_interpreter).

Run by default: float32 contiguous. Marked slow (the suite's time): float64 "mixed" (each
program in one of the three non-contiguous layouts, in turn, so every layout meets every
kind of op), float64 contiguous, and every non-contiguous layout in full, in both dtypes.
"""
import importlib.util
import os
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.codegen import lower as _lower  # noqa: F401  (fills the lowering table)
from llgrad.codegen.kernel import Kernel
from llgrad.codegen.lowerings.table import LOWERINGS
from llgrad.ir import OPS
from llgrad.runtime.creation import default_generator

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "_trace_optable_for_llvm", os.path.join(_HERE, os.pardir, "tracer", "test_trace_optable.py"))
tracing = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tracing)
K = tracing.optable.K

BATCH_OPS = 8                      # ops whose programs are compiled as one function
TOL = {"float64": dict(rtol=1e-9, atol=1e-11), "float32": dict(rtol=2e-5, atol=2e-5)}
NONCONTIGUOUS = ("transposed", "stepped", "broadcast")

# Programs that cannot run compiled on either backend (tracing is shared), with the reason.
BROKEN = {}      # (x[mask] was here: its traced type now holds the mask's count)

# Programs one of whose graphs runs in the interpreter under backend="llvm": the op the note
# names, and why. Each runs in a batch of its own and must fall back exactly there.
INTERPRETED = {}    # (index_put-setitem_mask was here: g[mask] is lowered with its count)

# Ops with no native lowering, with the reason: every program of theirs runs in a batch of
# its own and falls back to the interpreter exactly there (INTERPRETED: the ops its notes
# may name). None today: the LAPACK ops call their NumPy implementation from native code
# (codegen/lowerings/host_call.py), and those run in batches as every other op.
NOT_LOWERED = {}
INTERPRETED.update({f"{p.op}-{p.id}": (tuple(NOT_LOWERED), NOT_LOWERED[p.op])
                    for p in tracing.PROGRAMS if p.op in NOT_LOWERED})


def _name(prog):
    return f"{prog.op}-{prog.id}"


def _batches():
    by_op, alone = {}, []
    for prog in tracing.PROGRAMS:
        if _name(prog) in INTERPRETED:
            alone.append([prog])
        elif _name(prog) not in BROKEN:
            by_op.setdefault(prog.op, []).append(prog)
    ops = list(by_op)
    return [[p for op in ops[i:i + BATCH_OPS] for p in by_op[op]]
            for i in range(0, len(ops), BATCH_OPS)] + alone


BATCHES = _batches()
_INDEX = {id(p): k for k, p in enumerate(tracing.PROGRAMS)}


# ---- inputs -------------------------------------------------------------------------------------

def _stepped(a):
    """test_trace_optable's stepped layout, in a's own dtype (the gaps hold other values)."""
    big = np.random.default_rng(a.size).uniform(-9.0, 9.0, tuple(2 * n + 1 for n in a.shape))
    view = big.astype(a.dtype)[tuple(slice(1, 1 + 2 * n, 2) for n in a.shape)]
    view[...] = a
    return view


def _layout_of(prog, layout):
    """The layout prog runs in for a pass ("mixed": one of NONCONTIGUOUS by turns), or
    None when the pass does not apply to it (test_trace_optable._applies)."""
    if layout == "mixed":
        k = _INDEX[id(prog)]
        turn = NONCONTIGUOUS[k % 3:] + NONCONTIGUOUS[:k % 3]
        return next((la for la in turn if tracing._applies(prog, la)), None)
    return layout if tracing._applies(prog, layout) else None


def _build(prog, layout, dtype):
    """Fresh inputs of prog in the layout (test_trace_optable.build), its float arrays
    (not K constants) as dtype leaves that require grad."""
    make = _stepped if layout == "stepped" else tracing.LAYOUTS[layout]
    out = []
    for a in prog.inputs:
        arr = a.arr if isinstance(a, K) else np.asarray(a) if isinstance(a, np.generic) else a
        if not isinstance(arr, np.ndarray):
            out.append(a)
            continue
        laid = make is not None and tracing._laid_out(a) is not None
        if isinstance(a, K) or arr.dtype.kind != "f":
            arr = np.array(arr)
            out.append(llgrad.from_numpy(make(arr)) if laid else llgrad.tensor(arr))
            continue
        arr = np.array(arr, dtype=dtype)
        out.append(llgrad.from_numpy(make(arr) if laid else arr).requires_grad_())
    return out


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


# ---- one run ------------------------------------------------------------------------------------

class Run:
    """One backend's second call of a batch (in a pass's layout and dtype), and its backward."""

    def __init__(self, batch, layout, dtype, backend):
        progs = [(p, la) for p in batch for la in [_layout_of(p, layout)] if la is not None]
        sizes = [len(p.inputs) for p, _ in progs]

        def fn(*xs):
            outs, k = [], 0
            for (p, _), n in zip(progs, sizes):
                outs += _flat(p.fn(llgrad, *xs[k:k + n]))
                k += n
            return tuple(outs)

        self.cf = llgrad.compile(fn, backend=backend)
        for _ in range(2):                       # trace, then run the backend
            inputs = [t for p, la in progs for t in _build(p, la, dtype)]
            llgrad.manual_seed(1234)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                outs = self.cf(*inputs)
                self.cf.wait()          # (background builds: the backend runs next call)
        self.state = default_generator.state.copy()
        self.values = [o.detach().numpy().copy() for o in outs]
        diff = [o for o in outs if o.requires_grad]
        if diff:
            rng = np.random.default_rng(99)
            cts = [llgrad.tensor(rng.standard_normal(tuple(o.shape))).to(o.dtype) for o in diff]
            llgrad.autograd.backward(diff, cts)
        leaves = [t for t in inputs if isinstance(t, llgrad.Tensor) and t.requires_grad]
        self.grads = [None if t.grad is None else t.grad.numpy().copy() for t in leaves]
        self.ran_backward = bool(diff)

    def interpreted(self):
        """The notes of the graphs that ran in the interpreter; asserts every other graph
        that ran has a native Kernel."""
        notes = []
        (entry,) = self.cf.entries
        kernels = getattr(entry, "kernels", {})
        ran = ["forward"] + (["backward"] if entry.backward is not None and self.ran_backward
                             else [])
        for which in ran:
            k = kernels.get(which)
            if isinstance(k, str):
                notes.append(k)
            else:
                assert isinstance(k, Kernel), (which, k)
        return notes


def _check(got, want, what):
    if want is None:
        assert got is None, what
        return
    assert got.dtype == want.dtype and got.shape == want.shape, \
        (what, got.dtype, want.dtype, got.shape, want.shape)
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, equal_nan=True, err_msg=what, **TOL[got.dtype.name])
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def _params():
    passes = [("float32", "contiguous", ()), ("float64", "mixed", (pytest.mark.slow,)),
              ("float64", "contiguous", (pytest.mark.slow,))]
    passes += [(dt, la, (pytest.mark.slow,)) for dt in ("float64", "float32")
               for la in NONCONTIGUOUS]
    out = []
    for dtype, layout, marks in passes:
        for k, batch in enumerate(BATCHES):
            if any(_layout_of(p, layout) for p in batch):
                ops = sorted({p.op for p in batch})
                out.append(pytest.param(k, layout, dtype, marks=marks,
                                        id=f"{dtype}-{layout}-{ops[0]}..{ops[-1]}"))
    return out


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("k,layout,dtype", _params())
def test_llvm_matches_interpreter(k, layout, dtype):
    batch = BATCHES[k]
    want = Run(batch, layout, dtype, "interpret")
    got = Run(batch, layout, dtype, "llvm")
    assert len(got.values) == len(want.values)
    for i, (a, b) in enumerate(zip(got.values, want.values)):
        _check(a, b, f"output {i}")
    np.testing.assert_array_equal(got.state, want.state, err_msg="generator state")
    assert len(got.grads) == len(want.grads)
    for i, (a, b) in enumerate(zip(got.grads, want.grads)):
        _check(a, b, f"gradient of input {i}")
    notes = got.interpreted()
    if len(batch) == 1 and _name(batch[0]) in INTERPRETED:
        ops = INTERPRETED[_name(batch[0])][0]
        ops = ops if isinstance(ops, tuple) else (ops,)
        assert notes and all(any(n.startswith(f"interpreted: {op} ") for op in ops)
                             for n in notes), notes
    else:
        assert not notes, notes


def test_every_op_is_lowered():
    """Every op has a lowering or a decomposition into ops that have one, and the batches
    run samples of every op."""
    # (complex-valued ops: native code calls them back as complex_region nodes)
    complex_only = {n for n, op in OPS.items() if op.complex == "only"}
    assert sorted(n for n in set(OPS) - set(LOWERINGS) - set(NOT_LOWERED) - complex_only
                  if OPS[n].decompose is None) == []
    names = {_name(p) for p in tracing.PROGRAMS}
    assert set(BROKEN) <= names and set(INTERPRETED) <= names
    assert {p.op for b in BATCHES for p in b} == set(OPS) - complex_only


def test_float16_runs_in_the_interpreter():
    """The one sanctioned fallback: dtypes native code does not handle (float16) run in
    the interpreter, with a note saying why, and give the interpreter's results."""
    def f(x, w):
        return (x * w).sin().sum(0)

    runs = []
    for backend in ("interpret", "llvm"):
        cf = llgrad.compile(f, backend=backend)
        for _ in range(2):
            x = llgrad.tensor(np.linspace(-2, 2, 12).reshape(3, 4), dtype=llgrad.float16,
                              requires_grad=True)
            w = llgrad.tensor(np.arange(4.0), dtype=llgrad.float16)
            out = cf(x, w)
        out.backward(llgrad.ones(4, dtype=llgrad.float16))
        runs.append((cf, out.detach().numpy(), x.grad.numpy()))
    (_, v0, g0), (cf, v1, g1) = runs
    np.testing.assert_array_equal(v0, v1)
    np.testing.assert_array_equal(g0, g1)
    notes = cf.entries[0].kernels
    assert all(isinstance(n, str) and "float16" in n for n in notes.values()), notes
