"""GELU's cdf (exact: erf(x / sqrt(2)); tanh: its tanh) is computed once per training step:
the VJP's copy of it moves into the forward, where the forward's lowering merges it with
GELU's decomposition, and the backward reads it saved (ir/forward_shared.py). Before, the
backward evaluated erf again over every element (half of a transformer block's GELU backward
kernel). Gradients checked against torch, eager mode, the interpreter and float64 gradcheck;
the graphs' ops say where the erf runs."""
import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F


def _loss(lib, approximate="none"):
    def loss(x, w1, b1, w2):
        h = lib.nn.functional.gelu(x @ w1.t() + b1, approximate=approximate)
        return (h @ w2.t()).pow(2).mean()
    return loss


def _arrays(dtype):
    r = np.random.default_rng(11)
    return [r.standard_normal(s).astype(dtype) for s in ((16, 8), (32, 8), (32,), (4, 32))]


def _grads(lib, fn, arrays):
    ts = [lib.tensor(a.copy(), requires_grad=True) for a in arrays]
    loss = fn(*ts)
    loss.backward()
    return loss.item(), [t.grad.numpy() for t in ts]


def _entry(approximate, backend="interpret", dtype="float64"):
    cf = llgrad.compile(_loss(llgrad, approximate), backend=backend)
    for _ in range(2):
        _grads(llgrad, cf, _arrays(dtype))
    (entry,) = cf.entries
    return cf, entry


def _ops(graph):
    return [n.op for n in graph.nodes]


def test_exact_gelu_backward_has_no_erf():
    _, entry = _entry("none")
    assert "erf" not in _ops(entry.backward)        # (before: the derivative's own erf)
    assert "exp" in _ops(entry.backward)            # (the pdf stays there)
    assert _ops(entry.forward).count("erf") == 1    # beside gelu: merged when lowered
    saved = [s.type.shape for s in entry.saved if s.input_index is None]
    assert saved.count((16, 32)) == 3               # GELU's input, result, and erf


def test_tanh_gelu_backward_has_no_tanh():
    _, entry = _entry("tanh")
    assert "tanh" not in _ops(entry.backward)
    assert "tanh" in _ops(entry.forward)


def test_erf_of_the_user_not_moved():
    # erf's own VJP reads exp only: nothing of the backward repeats the forward
    cf = llgrad.compile(lambda x: x.erf().sum(), backend="interpret")
    x = llgrad.tensor(np.linspace(-2, 2, 8), requires_grad=True)
    for _ in range(2):
        cf(x).backward()
    (entry,) = cf.entries
    assert _ops(entry.forward).count("erf") == 1
    assert "erf" not in _ops(entry.backward)
    np.testing.assert_allclose(x.grad.numpy(), 2 * 2 / np.sqrt(np.pi) *
                               np.exp(-np.linspace(-2, 2, 8) ** 2), rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_native_matches_eager_interpreter_and_torch(approximate, dtype):
    arrays = _arrays(dtype)
    eager_loss, eager = _grads(llgrad, _loss(llgrad, approximate), arrays)
    cf = llgrad.compile(_loss(llgrad, approximate))
    for _ in range(2):
        _grads(llgrad, cf, arrays)
    cf.wait()               # (LLGRAD_COMPILE=background: the kernels are built by now)
    loss, got = _grads(llgrad, cf, arrays)
    interp, _ = _entry(approximate, dtype=dtype)
    i_loss, i_got = _grads(llgrad, interp, arrays)
    assert cf.n_traces == 1 and interp.n_traces == 1
    tol = 2e-5 if dtype == "float32" else 1e-12
    for g, e, i in zip(got, eager, i_got):
        scale = np.abs(e).max()
        np.testing.assert_allclose(g, e, rtol=0, atol=tol * scale)
        np.testing.assert_allclose(i, e, rtol=0, atol=tol * scale)
    for v in (loss, i_loss):
        np.testing.assert_allclose(v, eager_loss, rtol=tol)
    torch = pytest.importorskip("torch")
    want_loss, want = _grads(torch, _loss(torch, approximate), arrays)
    np.testing.assert_allclose(loss, want_loss, rtol=tol)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=tol * np.abs(w).max())


@pytest.mark.parametrize("backend", ["interpret", pytest.param("llvm", marks=pytest.mark.slow)])
def test_float64_gradcheck(backend):
    r = np.random.default_rng(5)
    x = llgrad.tensor(r.standard_normal((3, 4)), requires_grad=True)
    w = llgrad.tensor(r.standard_normal((5, 4)), requires_grad=True)
    kw = {"backend": backend} if backend == "interpret" else {}
    cf = llgrad.compile(lambda x, w: F.gelu(x @ w.t()).sin().sum(), **kw)
    assert llgrad.autograd.gradcheck(cf, (x, w))
    if backend != "interpret":
        cf.wait()
        assert llgrad.autograd.gradcheck(cf, (x, w))
