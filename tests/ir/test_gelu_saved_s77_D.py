"""Exact GELU's result is saved for the backward, not recomputed there (its OpDef says
recompute=False: ir/partition.py). GELU's VJP evaluates erf itself; a recomputed result (the
input of the next product, whose weight gradient reads it) was a second erf pass in the
backward, in a kernel the product kept apart from the derivative's. Gradients checked
against torch and eager mode, compiled native code against the interpreter."""
import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F


def _mlp(lib, approximate="none"):
    def loss(x, w1, w2):
        h = lib.nn.functional.gelu(x @ w1.t(), approximate=approximate)
        return (h @ w2.t()).pow(2).mean()
    return loss


def _arrays(dtype):
    r = np.random.default_rng(7)
    return [r.standard_normal(s).astype(dtype) for s in ((16, 8), (32, 8), (4, 32))]


def _grads(lib, fn, arrays):
    ts = [lib.tensor(a.copy(), requires_grad=True) for a in arrays]
    loss = fn(*ts)
    loss.backward()
    return loss.item(), [t.grad.numpy() for t in ts]


def _ops(graph):
    return [n.op for n in graph.nodes]


def test_backward_evaluates_no_gelu_again():
    cf = llgrad.compile(_mlp(llgrad), backend="interpret")
    for _ in range(2):
        _grads(llgrad, cf, _arrays("float64"))
    (entry,) = cf.entries
    ops = _ops(entry.backward)
    assert "gelu" not in ops                    # (before: the result recomputed from x)
    assert "erf" not in ops                     # the derivative's: saved from the forward
                                                # (ir/forward_shared.py)
    assert "gelu" in _ops(entry.forward)


def test_tanh_gelu_too_and_saved_bytes():
    cf = llgrad.compile(_mlp(llgrad, "tanh"), backend="interpret")
    for _ in range(2):
        _grads(llgrad, cf, _arrays("float64"))
    (entry,) = cf.entries
    assert "gelu" not in _ops(entry.backward)
    # GELU's input (its VJP's), its result (the second product's) and its tanh (the VJP's
    # cdf, ir/forward_shared.py) are saved
    saved = [s.type.shape for s in entry.saved if s.input_index is None]
    assert saved.count((16, 32)) == 3


def _compiled_eager_interpreted(dtype):
    arrays = _arrays(dtype)
    eager_loss, eager = _grads(llgrad, _mlp(llgrad), arrays)
    cf = llgrad.compile(_mlp(llgrad))
    for _ in range(2):
        _grads(llgrad, cf, arrays)
    cf.wait()               # (LLGRAD_COMPILE=background: the kernels are built by now)
    loss, got = _grads(llgrad, cf, arrays)
    interp = llgrad.compile(_mlp(llgrad), backend="interpret")
    for _ in range(2):
        i_loss, i_got = _grads(llgrad, interp, arrays)
    assert cf.n_traces == 1 and interp.n_traces == 1
    tol = 2e-5 if dtype == "float32" else 1e-12
    for g, e, i in zip(got, eager, i_got):
        scale = np.abs(e).max()
        np.testing.assert_allclose(g, e, rtol=0, atol=tol * scale)
        np.testing.assert_allclose(i, e, rtol=0, atol=tol * scale)
    for v in (loss, i_loss):
        np.testing.assert_allclose(v, eager_loss, rtol=tol)
    return arrays, eager_loss, eager, tol


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_matches_eager_and_interpreter(dtype):
    _compiled_eager_interpreted(dtype)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_matches_torch(dtype):
    torch = pytest.importorskip("torch")
    arrays, eager_loss, eager, tol = _compiled_eager_interpreted(dtype)
    want_loss, want = _grads(torch, _mlp(torch), arrays)
    np.testing.assert_allclose(eager_loss, want_loss, rtol=tol)
    for e, w in zip(eager, want):
        np.testing.assert_allclose(e, w, rtol=0, atol=tol * np.abs(w).max())


def test_float64_gradcheck():
    r = np.random.default_rng(3)
    x = llgrad.tensor(r.standard_normal((3, 4)), requires_grad=True)
    w = llgrad.tensor(r.standard_normal((5, 4)), requires_grad=True)
    cf = llgrad.compile(lambda x, w: F.gelu(x @ w.t()).sin().sum(), backend="interpret")
    assert llgrad.autograd.gradcheck(cf, (x, w))
