"""Run a Program (tests/fuzz/programs.py) eagerly and compiled, and compare everything
observable: outputs (dtype, shape, requires_grad, values), the gradients a backward of a
weighted sum of the outputs leaves in the inputs, the inputs after the call (in-place writes
to inputs), the generator state after the call; and gradcheck the eager program.

Each compiled backend is called twice on fresh inputs: the first call traces (an eager run
under the tracer), the second runs the compiled graphs; both are compared with eager.

Tolerances: float64 programs agree to ~1e-7 relative (the backends differ only in the
order of accumulation), programs with any float32 to ~1e-3; `scale` is the largest finite
magnitude of the reference, so absolute errors are judged against it; entries where eager
is not finite are not compared (see assert_close)."""
import linecache
import math
import textwrap

import numpy as np

import llgrad
import llgrad.nn.functional as F
from llgrad.ir.geometry import contiguous_strides
from llgrad.runtime.gradcheck import GradcheckError

BACKENDS = ("interpret", "python", "llvm")
SEED = 20240611
LAYOUTS = ("contiguous", "transposed", "stepped", "offset", "expanded")


# ---- inputs ---------------------------------------------------------------------------------

def make_input(shape, dtype, layout="contiguous", seed=0, requires_grad=False, expand=(),
               low=-1.5, high=1.5):
    """A fresh tensor of the given shape and dtype holding values drawn from `seed` (uniform
    in [low, high); int64: integers in [low, high); bool: fair coins), laid out in memory as
    `layout`:

    contiguous  a fresh C-contiguous array
    transposed  dims reversed in memory (a NumPy transposed copy, viewed back)
    stepped     every other element of a bigger array, from offset 1 on each axis; the gaps
                hold other values, so a program reading them is seen
    offset      a contiguous view at storage offset 3 of a bigger llgrad tensor
    expanded    the dims in `expand` have stride 0 (values drawn for size 1 there)
    """
    shape = tuple(shape)
    rng = np.random.default_rng(seed)
    small = tuple(1 if layout == "expanded" and d in expand else n for d, n in enumerate(shape))
    if dtype == "int64":           # indices in [low, high)
        vals = np.asarray(rng.integers(int(low), int(high), small), dtype=np.int64)
    elif dtype == "bool":
        vals = np.asarray(rng.random(small) < 0.5)
    else:
        vals = np.asarray(rng.uniform(low, high, small)).astype(dtype)
    if layout == "transposed":
        arr = np.array(vals.T, order="C").T     # (ascontiguousarray makes 0-d arrays 1-d)
    elif layout == "stepped":
        big = np.random.default_rng(seed + 1).uniform(-9.0, 9.0, tuple(2 * n + 1 for n in shape)
                                                      or (3,)).astype(dtype)   # gaps: junk
        arr = big[tuple(slice(1, 1 + 2 * n, 2) for n in shape)] if shape else \
            big[1:2].reshape(())
        arr[...] = vals
    elif layout == "offset":
        buf = np.random.default_rng(seed + 1).uniform(-9.0, 9.0, vals.size + 5).astype(dtype)
        buf[3:3 + vals.size] = vals.reshape(-1)
        t = llgrad.from_numpy(buf).as_strided(shape, contiguous_strides(shape), 3)
        return t.requires_grad_() if requires_grad else t
    elif layout == "expanded":
        buf = np.array(vals)
        arr = np.lib.stride_tricks.as_strided(
            buf, shape, tuple(0 if d in expand else s for d, s in enumerate(buf.strides)))
    else:
        arr = np.array(vals)
    t = llgrad.from_numpy(arr)
    return t.requires_grad_() if requires_grad else t


class Listing:
    """A program given as source (`def f(...)` and `def make_inputs()`), as a Program's repr
    prints it: what the regression tests run."""

    def __init__(self, source):
        self.source = textwrap.dedent(source).strip() + "\n"

    def __repr__(self):
        return self.source

    def load(self):
        return load(self.source)


def load(source, filename="<fuzz program>"):
    """(f, make_inputs) made by exec of source (kept in linecache for tracebacks)."""
    return load_all(source, filename)[:2]


def load_all(source, filename="<fuzz program>"):
    """(f, make_inputs, the third call: None, "no_grad" or make_inputs_relaid)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {"llgrad": llgrad, "F": F, "make_input": make_input, "inf": math.inf}
    exec(compile(source, filename, "exec"), ns)
    third = "no_grad" if ns.get("NO_GRAD_CALL") else ns.get("make_inputs_relaid")
    return ns["f"], ns["make_inputs"], third


# ---- running and comparing ------------------------------------------------------------------

class Run:
    """What one call of a function (eager or compiled) showed."""

    def __init__(self):
        self.outs, self.grads, self.inputs_after = [], [], []
        self.rng_after = None
        self.error = None          # (stage, exception) when the call or its backward raised


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def cotangent(k, out):
    """The fixed weight of output k in the loss (shape- and position-determined)."""
    rng = np.random.default_rng(1000 + k)
    return llgrad.tensor(rng.uniform(0.5, 1.5, tuple(out.shape))).to(out.dtype)


def _arr(t):
    return np.array(t.detach().numpy(), copy=True)


def run(fn, make_inputs):
    r = Run()
    inputs = make_inputs()
    llgrad.manual_seed(SEED)
    try:
        outs = _flat(fn(*inputs))
    except Exception as e:      # noqa: BLE001 - compared with the other side
        r.error = ("forward", e)
        return r
    r.outs = [(str(o.dtype), tuple(o.shape), o.requires_grad, _arr(o)) for o in outs]
    r.rng_after = llgrad.rand(3).numpy().copy()
    diff = [(k, o) for k, o in enumerate(outs) if o.requires_grad]
    if diff:
        try:
            llgrad.autograd.backward([o for _, o in diff], [cotangent(k, o) for k, o in diff])
        except Exception as e:  # noqa: BLE001
            r.error = ("backward", e)
            return r
    r.grads = [None if x.grad is None else _arr(x.grad) for x in inputs
               if x.is_leaf and x.requires_grad]
    r.inputs_after = [_arr(x) for x in inputs]
    return r


def _is_version_error(e):
    return isinstance(e, RuntimeError) and "modified by an inplace operation" in str(e)


def _tolerance(prog):
    """(rtol, atol relative to the reference's magnitude): loose when float32 appears."""
    if "float32" in prog.source or ".float()" in prog.source:
        return 1e-3, 1e-4
    return 1e-7, 1e-9


def assert_close(got, want, what, rtol, atol):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != eager's {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != eager's {want.shape}"
    if want.dtype.kind not in "fc":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    ok = np.isfinite(want)
    finite = np.abs(want[ok])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    # where eager is inf or nan the program sits on a singularity (the gradient of std or
    # sqrt at 0, 0/0): rounding decides between nan and a huge finite value, so only the
    # finite entries are compared
    np.testing.assert_allclose(got[ok], want[ok], rtol=rtol, atol=atol * scale, err_msg=what)


def compare(got, want, what, prog):
    rtol, atol = _tolerance(prog)
    assert len(got.outs) == len(want.outs), what
    for k, (g, w) in enumerate(zip(got.outs, want.outs)):
        assert g[:3] == w[:3], f"{what}: output {k} (dtype, shape, requires_grad) {g[:3]} " \
                               f"!= eager's {w[:3]}"
        assert_close(g[3], w[3], f"{what}: output {k}", rtol, atol)
    np.testing.assert_array_equal(got.rng_after, want.rng_after,
                                  err_msg=f"{what}: generator state after the call")
    assert len(got.grads) == len(want.grads), what
    for i, (g, w) in enumerate(zip(got.grads, want.grads)):
        assert (g is None) == (w is None), f"{what}: grad of input {i}: {g} vs eager's {w}"
        if g is not None:
            assert_close(g, w, f"{what}: grad of input {i}", rtol, atol)
    for i, (g, w) in enumerate(zip(got.inputs_after, want.inputs_after)):
        assert_close(g, w, f"{what}: input {i} after the call", rtol, atol)


def check_program(prog, backends=BACKENDS):
    """Eager, then each backend (trace call and compiled call) on fresh inputs: the same
    outputs, gradients and input mutations; when eager's backward raises the in-place
    version error, every backend raises it too. A third call, when the program asks for
    one: the same values in other layouts (make_inputs_relaid: new strides, so guards must
    retrace, or reuse correctly), or under llgrad.no_grad() (forward-only graphs)."""
    fn, make_inputs, third = load_all(prog.source)
    want = _reference(run(fn, make_inputs))
    # (the relaid call against eager on the relaid inputs: whether contiguous() or reshape
    # copy or alias depends on the layout, and so may the results)
    want_rl = _reference(run(fn, third)) if callable(third) else None
    for b in backends:
        cf = llgrad.compile(fn, backend=b)
        for call in ("trace call", "compiled call"):
            got = run(cf, make_inputs)
            cf.wait()       # (background builds: native from the next call)
            what = f"[{b}] {call}"
            if want.error is not None:
                assert got.error is not None, \
                    f"{what}: eager's backward raised {want.error[1]!r}; this ran"
                assert _is_version_error(got.error[1]) or \
                    "modified" in str(got.error[1]), f"{what}: {got.error[1]!r}"
                continue
            _raise(got, what)
            compare(got, want, what, prog)
        if want.error is None:
            assert cf.n_traces == 1, f"[{b}] traced {cf.n_traces} times for one guard key"
        if third == "no_grad":
            with llgrad.no_grad():
                want_ng = run(fn, make_inputs)
                for call in ("no_grad trace call", "no_grad compiled call"):
                    got = run(cf, make_inputs)
                    cf.wait()       # (background builds: native from the next call)
                    what = f"[{b}] {call}"
                    if want_ng.error is not None:   # (an output viewing an input that
                        # requires grad, made under no_grad: it requires grad, with no edge)
                        assert got.error is not None and \
                            str(got.error[1]) == str(want_ng.error[1]), \
                            f"{what}: eager raised {want_ng.error[1]!r}; got {got.error!r}"
                        continue
                    _raise(got, what)
                    compare(got, want_ng, what, prog)
        elif want_rl is not None:
            for call in ("relaid trace call", "relaid compiled call"):
                got = run(cf, third)
                cf.wait()       # (background builds: native from the next call)
                what = f"[{b}] {call}"
                if want_rl.error is not None:
                    assert got.error is not None, \
                        f"{what}: eager's backward raised {want_rl.error[1]!r}; this ran"
                    continue
                _raise(got, what)
                compare(got, want_rl, what, prog)


def _reference(want):
    """An eager run may only fail with the in-place version error at backward (the
    generator makes no other failing program)."""
    if want.error is not None:
        stage, e = want.error
        if not (stage == "backward" and _is_version_error(e)):
            raise AssertionError(f"the generator made a program eager rejects ({stage}): "
                                 f"{type(e).__name__}: {e}") from e
    return want


def _raise(got, what):
    if got.error is not None:
        raise AssertionError(f"{what} raised ({got.error[0]}): "
                             f"{type(got.error[1]).__name__}: {got.error[1]}") from got.error[1]


def gradcheck_program(prog):
    """gradcheck of the eager program: the weighted sum of its outputs as a function of its
    inputs that require grad (as contiguous float64 copies; the constants are made afresh
    for each evaluation, so in-place writes to them do not accumulate). Outputs that are not
    finite at the inputs (var of one element, mean of none) are left out of the sum.
    False when nothing was checked: no output requires grad, or the backward raises the
    in-place version error (the differential test checks that case)."""
    fn, make_inputs = prog.load()
    base = make_inputs()
    diff = [i for i, x in enumerate(base) if x.requires_grad]
    if not diff:
        return False
    leaves = [base[i].detach().to(llgrad.float64).contiguous().clone().requires_grad_()
              for i in diff]

    def outputs(xs):
        args = make_inputs()
        for i, x in zip(diff, xs):
            args[i] = x
        llgrad.manual_seed(SEED)
        return _flat(fn(*args))

    keep = [k for k, o in enumerate(outputs(leaves))
            if o.requires_grad and np.isfinite(o.detach().numpy()).all()]
    if not keep:
        return False

    def loss(*xs):
        outs = outputs(xs)
        total = llgrad.zeros((), dtype=llgrad.float64)
        for k in keep:
            total = total + (outs[k] * cotangent(k, outs[k])).sum()
        return total

    value = loss(*leaves)
    try:
        llgrad.autograd.grad([value], leaves, allow_unused=True)
    except RuntimeError as e:
        if _is_version_error(e):
            return False
        raise
    scale = max(1.0, abs(value.item()))
    try:
        llgrad.autograd.gradcheck(loss, leaves, eps=1e-6, atol=1e-5 * scale, rtol=1e-3)
    except GradcheckError as e:
        raise AssertionError(f"eager gradients disagree with finite differences: {e}") from e
    return True
