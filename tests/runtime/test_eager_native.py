"""Eager ops on native kernels (compile/eager_native.py, codegen/eager_kernels.py): every op
the table marks `eager_native`, on inputs big enough to take the native path, against the
op's NumPy implementation (the reference the interpreter runs) and against torch when it is
installed; and the calls that must stay on NumPy (small, strided, float16) giving exactly the NumPy implementation's result."""
import os
import subprocess
import sys

import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_native
from llgrad.ir import OPS
from llgrad.runtime import dispatch, node as node_mod

NATIVE_OPS = sorted(name for name, op in OPS.items() if op.eager_native)
# attributes a call passes (the functional's defaults, and a non-default where the op has one)
ATTRS = {"gelu": [{"approximate": "none"}, {"approximate": "tanh"}],
         "leaky_relu": [{"negative_slope": 0.01}, {"negative_slope": 0.2}],
         "elu": [{"alpha": 1.0, "scale": 1.0, "input_scale": 1.0},
                 {"alpha": 0.5, "scale": 1.0507, "input_scale": 1.0}],
         "celu": [{"alpha": 1.0, "scale": 1.0, "input_scale": 1.0}],
         "softplus": [{"beta": 1.0, "threshold": 20.0}, {"beta": 2.0, "threshold": 5.0}],
         "leaky_relu_": [{"negative_slope": 0.01}, {"negative_slope": 0.2}],
         "elu_": [{"alpha": 1.0, "scale": 1.0, "input_scale": 1.0},
                  {"alpha": 0.5, "scale": 1.0507, "input_scale": 1.0}],
         "celu_": [{"alpha": 1.0, "scale": 1.0, "input_scale": 1.0}],
         "hardtanh": [{"min_val": 0.0, "max_val": 6.0}, {"min_val": -1.0, "max_val": 1.0}, {"min_val": -0.5, "max_val": 2.0}]}
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e30, -1e30, 0.5, -0.5, 1.0,
           -1.0, 2.0, -2.0, -3.0, 3.0, 20.0, -20.0, 88.0, -88.0, 0.9999, -0.9999, 4.0]
N = eager_native.MIN_ELEMENTS * 2 + 3         # (and an odd tail for the vector loop)


@pytest.fixture(autouse=True)
def _builds_before_the_call(monkeypatch):
    """These tests look at the native path on the first call: kernels build on the caller's
    thread (test_background_builds_never_block checks the default)."""
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")


def _input(dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(N) * 3
    x[:len(SPECIAL)] = SPECIAL
    x[len(SPECIAL):200] = rng.uniform(-1, 1, 200 - len(SPECIAL))
    with np.errstate(over="ignore"):            # (1e30 as float16: inf, as meant)
        return x.astype(dtype)


def _attrs_of(name):
    return ATTRS.get(name, [{}])


def _close(got, want, dtype, x):
    """Within 8 ulps of the larger of the result and the input (the NumPy method and the
    native one round at different steps, and where a result is far smaller than its input,
    GELU's 1 + erf(x) near -1 or lgamma at its roots, both carry an error of x's size),
    with the same NaNs and infinities."""
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    g, w, x = got[~nan], want[~nan], x[~nan]
    inf = np.isinf(w)
    assert np.array_equal(g[inf], w[inf])
    g, w, x = (a[~inf].astype(np.float64) for a in (g, w, x))
    eps = np.finfo(dtype).eps
    bound = 8 * eps * np.maximum(np.maximum(np.abs(w), np.abs(x)), np.finfo(dtype).tiny)
    bad = np.abs(g - w) > bound
    assert not bad.any(), (g[bad][:5], w[bad][:5])


def test_the_table_marks_the_slow_numpy_ops():
    assert {"erf", "gelu", "sigmoid", "silu", "softplus", "leaky_relu"} <= set(NATIVE_OPS)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NATIVE_OPS)
def test_native_eager_matches_the_numpy_implementation(name, dtype):
    op = OPS[name]
    x = _input(dtype)
    for attrs in _attrs_of(name):
        before = eager_native.stats["calls"]
        got = llgrad.tensor(x)._op(name, **attrs).numpy()
        assert eager_native.stats["calls"] == before + 1, "the native kernel did not run"
        with np.errstate(all="ignore"):
            want = np.asarray(op.impl(x, **attrs))
        _close(got, want, dtype, x)


@pytest.mark.parametrize("name", NATIVE_OPS)
def test_native_eager_matches_torch(name):
    torch = pytest.importorskip("torch")
    F, TF = llgrad.nn.functional, torch.nn.functional
    x = _input(np.float64, seed=1)[len(SPECIAL):]      # (torch's own edge cases differ)
    if name in ("lgamma", "digamma"):
        x = np.abs(x) + 0.1                             # (away from the poles)
    if name == "erfinv":
        x = np.tanh(x)
    for attrs in _attrs_of(name):
        if name in ("elu", "celu") and attrs.get("scale", 1.0) != 1.0:
            continue                                    # (selu's constants: F.selu)
        fn = getattr(F, name, None)
        tfn = getattr(TF, name, None) if fn is not None else None
        kw = {k: v for k, v in attrs.items() if k not in ("scale", "input_scale")}
        if name == "softplus":
            kw = {"beta": attrs["beta"], "threshold": attrs["threshold"]}
        if tfn is None:
            fn, tfn = (lambda t, _n=name: getattr(t, _n)()), (lambda t, _n=name: getattr(t, _n)())
        got = fn(llgrad.tensor(x), **kw).numpy()
        want = tfn(torch.tensor(x), **kw).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)


def test_gradients_through_native_ops_match_finite_differences():
    x = llgrad.tensor(_input(np.float64)[len(SPECIAL):len(SPECIAL) + 9], requires_grad=True)
    big = llgrad.cat([x, llgrad.zeros(eager_native.MIN_ELEMENTS)])
    for f in (llgrad.nn.functional.gelu, llgrad.sigmoid, llgrad.nn.functional.silu):
        assert llgrad.autograd.gradcheck(lambda t: f(llgrad.cat([t, big[9:]]))[:9], (x,))


def test_layout_is_kept_and_strided_inputs_stay_on_numpy():
    x = _input(np.float32)[:N - 3].reshape(-1, 64)
    f = np.asfortranarray(x)
    out = llgrad.tensor(f).sigmoid().numpy()
    assert out.flags.f_contiguous
    _close(out, np.asarray(OPS["sigmoid"].impl(f)), np.float32, f)
    before = eager_native.stats["calls"]
    strided = x[:, ::2]
    got = llgrad.tensor(x)[:, ::2].sigmoid().numpy()
    assert eager_native.stats["calls"] == before
    assert np.array_equal(got, OPS["sigmoid"].impl(strided), equal_nan=True)


@pytest.mark.parametrize("make", [
    lambda: llgrad.tensor(_input(np.float32)[:100]),                  # small
    lambda: llgrad.tensor(_input(np.float16)),                        # not float32/64
    lambda: llgrad.tensor(_input(np.float32)[:N - 2]).reshape(-1, 3)[:, 1]])  # strided
def test_calls_off_the_native_path_run_the_numpy_implementation(make):
    t = make()
    before = eager_native.stats["calls"]
    got = t.erf().numpy()
    assert eager_native.stats["calls"] == before
    with np.errstate(all="ignore"):
        want = OPS["erf"].impl(t.numpy())
    assert np.array_equal(got, want, equal_nan=True)


def test_switching_the_hook_off_gives_numpy_exactly():
    x = _input(np.float32)
    prev = dispatch.set_native_eager(None)
    try:
        got = llgrad.tensor(x).erf().numpy()
    finally:
        dispatch.set_native_eager(prev)
    with np.errstate(all="ignore"):
        assert np.array_equal(got, OPS["erf"].impl(x), equal_nan=True)


def test_reset_forgets_and_rebuilds_from_the_cache():
    x = llgrad.tensor(_input(np.float32))
    a = x.sigmoid().numpy()
    eager_native.reset()
    assert eager_native.stats == {"calls": 0, "built": 0, "vjp_calls": 0, "vjp_built": 0}
    b = x.sigmoid().numpy()
    assert eager_native.stats == {"calls": 1, "built": 1, "vjp_calls": 0, "vjp_built": 0}
    assert np.array_equal(a, b, equal_nan=True)


def test_background_builds_never_block(cold_kernels):
    """By default a kernel not built yet is built on a thread of its own: the calls until it
    is ready run NumPy's implementation (the same numbers as the native kernel's within
    ulps), then the kernel; its backward likewise."""
    x = llgrad.tensor(_input(np.float64), requires_grad=True)
    y = x.sigmoid()
    assert eager_native.stats["calls"] == 0, "the first call waited for its kernel"
    y.backward(llgrad.ones_like(y))
    assert eager_native.stats["vjp_calls"] == 0
    eager_native.wait()
    assert eager_native.stats["built"] == 1 and eager_native.stats["vjp_built"] == 1
    g_numpy = x.grad.numpy().copy()
    x.grad = None
    y2 = x.sigmoid()
    y2.backward(llgrad.ones_like(y2))
    assert eager_native.stats["calls"] == 1 and eager_native.stats["vjp_calls"] == 1
    _close(y2.detach().numpy(), y.detach().numpy(), np.float64, x.detach().numpy())
    _close(x.grad.numpy(), g_numpy, np.float64, x.detach().numpy())


# ---- the backward: the VJP rule as one native loop ---------------------------------------

def _grads(name, x, attrs, g, native):
    prev = node_mod.set_native_vjp(eager_native.native_vjp if native else None)
    try:
        t = llgrad.tensor(x, requires_grad=True)
        t._op(name, **attrs).backward(llgrad.tensor(g))
        return t.grad.numpy()
    finally:
        node_mod.set_native_vjp(prev)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", [n for n in NATIVE_OPS if OPS[n].vjp is not None])
def test_native_backward_matches_the_rule(name, dtype):
    x = _input(dtype)
    x[:len(SPECIAL)] = np.nan_to_num(x[:len(SPECIAL)], posinf=3.0, neginf=-3.0)
    if name in ("lgamma", "digamma"):
        x = np.abs(x) + np.asarray(0.25, dtype)     # (the poles' gradients are NaN either way)
    if name == "erfinv":
        x = np.tanh(x).astype(dtype)
    g = np.random.default_rng(5).standard_normal(N).astype(dtype)
    for attrs in _attrs_of(name):
        before = eager_native.stats["vjp_calls"]
        got = _grads(name, x, attrs, g, True)
        if eager_native.stats["vjp_calls"] == before:
            continue                    # (a rule that does not trace to one loop: as written)
        with np.errstate(all="ignore"):
            want = _grads(name, x, attrs, g, False)
        _close(got, want, dtype, np.maximum(np.abs(x), np.abs(g)) * 4)


def test_the_common_activations_backward_natively():
    x = _input(np.float32)
    for name in ("gelu", "silu", "sigmoid", "softplus", "erf", "elu", "hardtanh", "relu"):
        before = eager_native.stats["vjp_calls"]
        _grads(name, x, _attrs_of(name)[0], np.ones(N, np.float32), True)
        assert eager_native.stats["vjp_calls"] == before + 1, name


def test_double_backward_and_tracing_run_the_rule():
    x = llgrad.tensor(_input(np.float64)[len(SPECIAL):], requires_grad=True)
    before = eager_native.stats["vjp_calls"]
    (gx,) = llgrad.autograd.grad(llgrad.nn.functional.gelu(x).sum(), x, create_graph=True)
    assert eager_native.stats["vjp_calls"] == before      # (create_graph: the rule's graph)
    (ggx,) = llgrad.autograd.grad(gx.sum(), x)             # (its erf's backward: native)
    torch = pytest.importorskip("torch")
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    (tg,) = torch.autograd.grad(torch.nn.functional.gelu(tx).sum(), tx, create_graph=True)
    (tgg,) = torch.autograd.grad(tg.sum(), tx)
    np.testing.assert_allclose(gx.detach().numpy(), tg.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ggx.numpy(), tgg.numpy(), rtol=1e-10, atol=1e-12)


def test_compiled_backward_is_traced_from_the_rule():
    w = llgrad.tensor(_input(np.float32)[len(SPECIAL):], requires_grad=True)
    f = llgrad.compile(lambda t: llgrad.nn.functional.silu(t * 2).sum())
    grads = []
    for _ in range(3):
        w.grad = None
        f(w).backward()
        grads.append(w.grad.numpy().copy())
    w.grad = None
    llgrad.nn.functional.silu(w * 2).sum().backward()
    for g in grads:
        np.testing.assert_allclose(g, w.grad.numpy(), rtol=2e-6, atol=2e-6)


def test_a_saved_tensor_changed_in_place_still_raises():
    x = llgrad.tensor(_input(np.float32)[len(SPECIAL):], requires_grad=True)
    y = x * 1
    z = llgrad.nn.functional.gelu(y)
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


_FORK_SCRIPT = r"""
import os, sys, threading
import numpy as np
import llgrad
from llgrad.codegen.native import disk_only
from llgrad.compile import eager_native
os.environ["LLGRAD_COMPILE"] = "background"
inside, release = threading.Event(), threading.Event()
real = eager_native._kernel
def held(*a, **k):
    if not disk_only.probing():         # (the caller's look into the caches passes)
        inside.set(); release.wait(30)
    return real(*a, **k)
eager_native._kernel = held
x = llgrad.tensor(np.linspace(-3, 3, 3 * eager_native.MIN_ELEMENTS))
want = 1 / (1 + np.exp(-x.numpy()))
assert np.allclose(x.sigmoid().numpy(), want)     # NumPy's: the build is held
assert inside.wait(30)
pid = os.fork()
if pid == 0:                     # the child: its own builder, the held build started again
    eager_native._kernel = real
    ok = np.allclose(x.sigmoid().numpy(), want)
    eager_native.wait()
    ok = ok and np.allclose(x.sigmoid().numpy(), want) and eager_native.stats["calls"] == 1
    os._exit(0 if ok else 3)
release.set()
_, status = os.waitpid(pid, 0)
eager_native.wait()
assert np.allclose(x.sigmoid().numpy(), want) and eager_native.stats["calls"] == 1
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_fork_while_a_kernel_builds_gives_the_child_its_own_build(tmp_path):
    out = subprocess.run([sys.executable, "-c", _FORK_SCRIPT], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, LLGRAD_CACHE_DIR=str(tmp_path)))
    assert out.returncode == 0, out.stderr[-3000:]


def test_a_kernel_llvm_refuses_warns_once_and_numpy_serves(monkeypatch):
    from llgrad.codegen import eager_cache, eager_kernels

    def refuse(*args, **kwargs):
        raise RuntimeError("LLVM said no")
    monkeypatch.setattr(eager_cache, "cached", lambda key: None)   # (not on disk either)
    monkeypatch.setattr(eager_kernels, "build", refuse)
    eager_native.reset()
    x = llgrad.tensor(_input(np.float64))
    with pytest.warns(RuntimeWarning, match="sigmoid on float64 runs on NumPy.*LLVM said no"):
        y = x.sigmoid()
    with np.errstate(all="ignore"):
        want = OPS["sigmoid"].impl(x.numpy())
    assert np.array_equal(y.numpy(), want, equal_nan=True)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # (the refusal is remembered: no second try)
        assert np.array_equal(x.sigmoid().numpy(), want, equal_nan=True)
    assert eager_native.stats["calls"] == 0 and eager_native.stats["built"] == 0
    eager_native.reset()


_WARM_SCRIPT = r"""
import sys
import numpy as np
import llgrad
import llgrad.nn as nn
from llgrad.compile import eager_native
x = llgrad.tensor(np.linspace(-3, 3, 3 * eager_native.MIN_ELEMENTS).astype(np.float32))
y = x.sigmoid()
lstm = nn.LSTM(8, 64)
out, _ = lstm(llgrad.randn(5, 80, 8))
eager_native.wait()
print(eager_native.stats["calls"], eager_native.stats["built"],
      "llgrad.codegen.build" in sys.modules, "llgrad.codegen.eager_kernels" in sys.modules)
"""


def test_a_warm_process_runs_eager_kernels_without_the_code_generator(tmp_path):
    """The second process finds the kernels in the disk cache by what it asks for: no
    lowering is imported (Python compiling them from source took 0.25 s of a first GELU),
    and the kernels run from the first call."""
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(tmp_path), LLGRAD_COMPILE="sync")
    runs = [subprocess.run([sys.executable, "-c", _WARM_SCRIPT], capture_output=True,
                           text=True, timeout=300, env=env) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-3000:]
    cold, warm = (r.stdout.split() for r in runs)
    assert cold[3] == "True"                    # (the first process built them)
    assert warm[2:] == ["False", "False"], warm
    assert int(warm[0]) == int(cold[0]) >= 6 and int(warm[1]) == int(cold[1]) == 2


_LOWERABLE_SCRIPT = r"""
import sys
import llgrad
from llgrad.ir import OPS
from llgrad.codegen import eager_kernels, eager_row_kernels
ATTRS = %r
WIDTHS = {"fused_lstm_cell": (4, 1), "fused_lstm_cell_backward": (1, 1, 4, 1, 1),
          "fused_gru_cell": (3, 3, 1), "fused_gru_cell_backward": (1, 3, 3, 1)}
bad = []
for name, op in sorted(OPS.items()):
    for dt in ("float32", "float64"):
        for a in (ATTRS.get(name, [{}]) if op.eager_native else []):
            g = eager_kernels.graph_of(name, dt, (), a)
            if g is None or eager_kernels.lowerable(g, dt) is None:
                bad.append((name, dt, a))
        if op.eager_rows:
            g = eager_row_kernels.graph_of(name, dt, WIDTHS[name], {})
            if g is None or eager_row_kernels.plan_of(g, dt) is None:
                bad.append((name, dt))
print(bad, "llgrad.codegen.build" in sys.modules)
"""


def test_eager_kernels_need_only_the_elementwise_lowerings():
    """eager_kernels imports the elementwise lowerings alone (a third of codegen.build's
    import time, which a cold eager process pays on its builder thread, beside the user's
    work): in a fresh process every eager_native and eager_rows op still lowers."""
    out = subprocess.run([sys.executable, "-c", _LOWERABLE_SCRIPT % (ATTRS,)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split("\n")[0] == "[] False", out.stdout
