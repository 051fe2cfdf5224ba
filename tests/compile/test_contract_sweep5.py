"""Differential probes of the compile contract, fifth round: the same program run eagerly
and under llgrad.compile (and, where it is the oracle, with torch) for several calls, with
state changed between calls; every observation must match eager's (or the call runs
eagerly with a warning naming why). Each test failed before its fix."""
import os
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _seen(v):
    """An observation that later writes cannot change (torch's tensors too)."""
    if isinstance(v, (llgrad.Tensor, torch.Tensor)):
        return ("tensor", v.detach().numpy().copy(), str(v.dtype).split(".")[-1],
                v.requires_grad)
    if isinstance(v, BaseException):
        return ("raised", type(v).__name__, str(v).splitlines()[0])
    if isinstance(v, (list, tuple)):
        return [_seen(x) for x in v]
    return v


def _runs(scenario, with_torch=True, **compile_kw):
    """scenario(lib, wrap, seen) run with torch (the oracle), llgrad eagerly and llgrad
    compiled (after manual_seed(0) each); every run's observations must equal the first's.
    Returns the compiled run's warnings that are compile's own. The backend is the
    interpreter unless given (what these probe is decided before any kernel runs)."""
    compile_kw.setdefault("backend", "interpret")
    runs = [(llgrad, lambda f: f), (llgrad, lambda f: llgrad.compile(f, **compile_kw))]
    if with_torch:
        runs.insert(0, (torch, lambda f: f))
    logs, own = [], []
    for lib, wrap in runs:
        lib.manual_seed(0)
        log = []
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            scenario(lib, wrap, lambda *vs: log.extend(_seen(v) for v in vs))
        own = [str(x.message) for x in w if str(x.message).startswith("llgrad.compile(")]
        logs.append(log)
    for log in logs[1:]:
        assert len(log) == len(logs[0])
        for k, (a, b) in enumerate(zip(logs[0], log)):
            _same(a, b, f"observation {k}")
    return own


def _same(a, b, where):
    if isinstance(a, tuple) and a and a[0] == "tensor":
        assert isinstance(b, tuple) and b[0] == "tensor", f"{where}: {a!r} vs {b!r}"
        np.testing.assert_allclose(b[1], a[1], rtol=1e-5, atol=1e-6, err_msg=where)
        assert a[2:] == b[2:], f"{where}: dtype/requires_grad {a[2:]} vs {b[2:]}"
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: {a!r} vs {b!r}"
        for k, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{k}]")
    else:
        assert a == b, f"{where}: eager {a!r}, compiled {b!r}"


# ---- requires_grad switched on an input inside the function ----------------------------------
def test_requires_grad_switched_on_inside_makes_a_result_that_backpropagates():
    """`x.requires_grad_()` on an input, then a result made of x returned: every compiled call
    returns a result that requires grad and whose backward reaches x.grad (compiled calls
    returned a result without grad, so backward raised)."""
    def scenario(lib, wrap, seen):
        def f(x):
            x.requires_grad_()
            return (x * x).sum()
        g = wrap(f)
        for k in range(3):
            x = lib.ones(3) * k
            y = g(x)
            seen(y, x.requires_grad, x.is_leaf)
            y.backward()
            seen(x.grad)
    assert not _runs(scenario)


def test_requires_grad_switched_off_inside_is_replayed():
    """`w.requires_grad_(False)` on an input that required grad, before or after w is used:
    the traced call does not raise, w no longer requires grad after each call and gets no
    .grad (PyTorch's AccumulateGrad accumulates nothing into a leaf that stopped requiring
    grad; llgrad's eager did)."""
    def scenario(lib, wrap, seen):
        def before(x, w):
            w.requires_grad_(False)
            return (x * w).sum()

        def after(x, w):
            y = (x * w).sum()
            w.requires_grad_(False)
            return y
        for f in (before, after):
            g = wrap(f)
            for k in range(3):
                w = lib.ones(2, requires_grad=True)
                x = lib.tensor([1., float(k)], requires_grad=True)
                y = g(x, w)
                y.backward()
                seen(y, w.requires_grad, x.grad, w.grad)
    assert not _runs(scenario)


# ---- a float's zero keeps its sign ---------------------------------------------------------------
Z = 0.0


def test_a_zeros_sign_is_part_of_the_guard():
    """0.0 == -0.0, yet 1 / (x * s) is inf for one and -inf for the other: an argument, a
    captured global, an attribute of an object and a number read out of a tensor (.item())
    that changes between 0.0 and -0.0 selects its own specialisation (compiled calls gave
    the sign of the traced one)."""
    def scenario(lib, wrap, seen):
        global Z

        class Box:
            s = 0.0
        box = Box()
        by_arg = wrap(lambda x, s: 1 / (x * s))
        by_global = wrap(lambda x: 1 / (x * Z))
        by_attr = wrap(lambda x, b: 1 / (x * b.s))
        by_item = wrap(lambda x, t: 1 / (x * t.item()))
        for z in [0.0, -0.0, 0.0, -0.0]:
            Z = box.s = z
            x = lib.ones(2)
            seen(by_arg(x, z), by_global(x), by_attr(x, box), by_item(x, lib.tensor(z)))
    with np.errstate(divide="ignore"):
        assert not _runs(scenario)


# ---- iterators -------------------------------------------------------------------------------
def test_an_iterator_the_function_takes_from_runs_eagerly():
    """next(it) inside: each call takes the next item, as eager does (compiled calls took
    none and multiplied by the traced item), with a warning naming the iterator."""
    def scenario(lib, wrap, seen):
        def f(it, x):
            return x * next(it)
        g = wrap(f)
        for it in (iter([lib.tensor(float(i)) for i in range(5)]), iter(range(5)),
                   (lib.tensor(float(i)) for i in range(5))):
            for k in range(3):
                seen(g(it, lib.ones(2)))
            seen(next(it))
    own = _runs(scenario)
    assert own and all("iterator, it (" in w for w in own), own


# ---- llgrad's global settings ------------------------------------------------------------------
def test_the_default_dtype_is_part_of_the_guard():
    """set_default_dtype between calls: what zeros(2) and a Python float make inside follows
    it (compiled calls kept the traced dtype)."""
    def scenario(lib, wrap, seen):
        g = wrap(lambda x: (lib.zeros(2) + x, lib.tensor([1.5]) * 2, x * 0.5))
        try:
            for k in range(4):
                lib.set_default_dtype(lib.float64 if k % 2 else lib.float32)
                seen(g(lib.ones(2, dtype=lib.float16)), g(lib.arange(2)))
        finally:
            lib.set_default_dtype(lib.float32)
    assert not _runs(scenario)


def test_global_settings_changed_inside_run_eagerly():
    """A function that changes a global setting and leaves it changed (grad mode, default
    dtype, print options, thread count) leaves it changed after every call, as eager does
    (compiled calls left it as it was), with a warning naming the setting."""
    def scenario(lib, wrap, seen):
        def no_grad_left_on(x):
            lib.set_grad_enabled(False)
            return x * 2

        def dtype_left(x):
            lib.set_default_dtype(lib.float64)
            return x + lib.ones(1)

        def precision_left(x):
            lib.set_printoptions(precision=2)
            return x * 2

        def threads_left(x):
            lib.set_num_threads(1)
            return x * 2
        fs = [wrap(f) for f in (no_grad_left_on, dtype_left, precision_left, threads_left)]
        threads = lib.get_num_threads()
        try:
            for k in range(3):
                lib.set_grad_enabled(True)
                lib.set_default_dtype(lib.float32)
                lib.set_printoptions(precision=4)
                lib.set_num_threads(2)
                for f in fs:
                    seen(f(lib.ones(2, requires_grad=True)))
                seen(lib.is_grad_enabled(), str(lib.get_default_dtype()).split(".")[-1],
                     repr(lib.ones(1) / 3), lib.get_num_threads())
        finally:
            lib.set_grad_enabled(True)
            lib.set_default_dtype(lib.float32)
            lib.set_printoptions(profile="default")
            lib.set_num_threads(threads)
    own = _runs(scenario)
    for what in ("grad mode", "default dtype", "print options", "thread count"):
        assert any(f"changes llgrad's {what}" in w for w in own), (what, own)


# ---- a trace given up leaves no trace of itself ------------------------------------------------
def test_a_warning_given_before_a_graph_break_is_given_once():
    """A warning (the user's, or the library's out= resize warning) given before the op that
    makes the call run eagerly: each call gives it once, as eager does, under every filter
    (the trace gave it, then the eager run gave it again)."""
    def scenario(lib, wrap, seen):
        def f(x, out):
            warnings.warn("before the break")
            lib.mul(x, 2, out=out)      # (resizing an out= tensor is no traceable op)
            return out
        for action in ("always", "default", "once", "module"):
            f.__globals__.pop("__warningregistry__", None)
            warnings.onceregistry.clear()
            g = wrap(f)
            with warnings.catch_warnings(record=True) as w:
                warnings.resetwarnings()
                warnings.simplefilter(action)
                for k in range(3):
                    seen(g(lib.ones(2) * k, lib.zeros(3)))
            seen(action, [str(m.message)[:20] for m in w
                          if not str(m.message).startswith("llgrad.compile(")])
    _runs(scenario)


def test_an_input_resized_in_place_runs_eagerly_as_eager_does():
    """x.resize_(4) on an input: the call runs eagerly, growing x as eager does (the eager
    run after the given-up trace raised, finding x's storage still referenced)."""
    def scenario(lib, wrap, seen):
        g = wrap(lambda x: x.resize_(4))
        for k in range(3):
            x = lib.ones(2) * k
            y = g(x)
            seen(y is x, list(x.shape), x[:2])
    _runs(scenario)


# ---- Python effects inside tensor-dependent control flow ---------------------------------------
def test_python_effects_in_a_tensor_while_body_happen_once_per_iteration():
    """A list appended to and a counter in a list bumped inside a while loop whose
    condition is a tensor: eager's effects, once per iteration (the loop body, traced once
    as a region, made them once per call)."""
    def scenario(lib, wrap, seen):
        log, count = [], [0]

        def f(x):
            y = x
            while y.sum() < 10:
                log.append("iteration")
                count[0] += 1
                y = y * 2
            return y
        g = wrap(f)
        for k in [1., 3., 20., 1.]:
            seen(g(lib.ones(2) * k), len(log), count[0])
    own = _runs(scenario)
    assert any("traced once, run by eager at each iteration" in w for w in own), own


def test_python_effects_in_a_nested_tensor_if_follow_the_branch_taken():
    """A tensor `if` inside the taken branch of another: only the inner branch eager takes
    bumps the counter (both inner branches were traced with their Python effects)."""
    def scenario(lib, wrap, seen):
        count = [0]

        def f(x):
            if x.sum() > 0:
                if x.max() > 5:
                    count[0] += 1
                    y = x * 2
                else:
                    count[0] += 10
                    y = x * 3
            else:
                y = x
            return y
        g = wrap(f)
        for k in [1., 6., -1., 1.]:
            seen(g(lib.ones(2) * k), count[0])
    _runs(scenario)


# ---- results' autograd flags -------------------------------------------------------------------
def test_results_of_unbind_and_split_refuse_in_place_writes_as_eager():
    """The views unbind / split / chunk return, returned by a compiled call: writing one in
    place raises eager's (and PyTorch's) error (compiled results took the write)."""
    def scenario(lib, wrap, seen):
        for f in (lambda x: x.unbind(0), lambda x: x.split(1), lambda x: x.chunk(2, 1)):
            g = wrap(f)
            for k in range(3):
                x = lib.arange(4., requires_grad=True).view(2, 2) * (k + 1)
                outs = g(x)
                seen(outs)
                try:
                    outs[1].mul_(2)
                    seen(outs[1])
                except RuntimeError as e:
                    seen(e)
    _runs(scenario)


def test_data_of_an_input_is_an_alias_with_its_own_version_counter():
    """`p.data` (and a view of it) returned, and a step writing through p.data: the result
    has no base and can be written in place (compiled results were views of p, whose
    in-place write raised), and p's version is eager's (compiled calls bumped it)."""
    def scenario(lib, wrap, seen):
        g = wrap(lambda x, p: (x * 2, p.data, p.data[0], p.detach(), p.detach()[1]))
        for k in range(3):
            p = lib.nn.Parameter(lib.ones(2) * k)
            outs = g(lib.ones(2), p)
            seen([o._base is p for o in outs], [o._base is None for o in outs])
            for o in outs[1:]:
                o.add_(1)
                seen(o, o._version, p._version)
        lin = lib.nn.Linear(2, 1)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor([[0.5, -0.25]]))
            lin.bias.fill_(0.125)

        def step(x):
            loss = lin(x).sum()
            loss.backward()
            for q in lin.parameters():
                q.data.add_(-0.1 * q.grad.data)
            return loss
        g = wrap(step)
        for k in range(3):
            seen(g(lib.ones(1, 2) * k), lin.weight._version, lin.bias._version)
    _runs(scenario)


# ---- reads no guard can follow -----------------------------------------------------------------
SCALE = 1.0


def test_reads_no_guard_can_follow_run_eagerly():
    """globals()["SCALE"] and os.environ read inside: each call sees the value of the time
    (compiled calls kept the traced one), with a warning naming the read."""
    def scenario(lib, wrap, seen):
        global SCALE
        by_globals = wrap(lambda x: x * globals()["SCALE"])
        by_environ = wrap(lambda x: x * float(os.environ.get("LLGRAD_SWEEP5_SCALE", "1")))
        try:
            for k in range(3):
                SCALE = k + 0.5
                os.environ["LLGRAD_SWEEP5_SCALE"] = str(k + 2)
                seen(by_globals(lib.ones(2)), by_environ(lib.ones(2)))
        finally:
            SCALE = 1.0
            os.environ.pop("LLGRAD_SWEEP5_SCALE", None)
    own = _runs(scenario)
    assert any("globals()" in w for w in own) and any("os.environ" in w for w in own), own


@pytest.mark.slow     # (an LLVM build)
def test_equal_results_computed_apart_are_not_one_buffer_natively():
    """x.new_zeros(2) and zeros_like(x) returned: the native kernel, which merges common
    subexpressions, gave both results one buffer, so writing one changed the other."""
    def scenario(lib, wrap, seen):
        g = wrap(lambda x: (x.new_zeros(2), lib.zeros_like(x), x * 2, (x * 2).t()))
        for k in range(3):
            outs = g(lib.ones(2, 2) * k)
            outs[0].add_(1)
            outs[2].add_(1)
            seen(outs)
    _runs(scenario, backend="llvm")


# ---- nested compiled functions -----------------------------------------------------------------
W = None


def test_what_an_inner_compiled_function_reads_is_guarded_by_the_outer():
    """A compiled function calling another (inlined into its trace): a global number and a
    global tensor the inner one reads, rebound between calls, are read afresh (the outer's
    guards did not follow the inner's reads: both were baked into its trace)."""
    def scenario(lib, wrap, seen):
        global SCALE, W
        inner = wrap(lambda x: x * SCALE * W)
        outer = wrap(lambda x: inner(x) + 1)
        try:
            for k in range(3):
                SCALE, W = k + 2.0, lib.ones(2) * (k + 1)
                seen(outer(lib.ones(2)))
        finally:
            SCALE, W = 1.0, None
    _runs(scenario)
