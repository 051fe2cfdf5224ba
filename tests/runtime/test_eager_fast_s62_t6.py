"""The eager backward's NumPy VJPs of bmm, squeeze, unsqueeze, transpose, cat and embedding
(llgrad/runtime/fast_vjp_views.py) and the fused RNN cells' row kernels at small batches
(compile/eager_native.MIN_ROW_ELEMENTS): each fast path is checked to run, to give the
rule's gradients bit for bit (the same graph with the fast VJP removed), torch's gradients,
and to step aside where its rule must run (create_graph: gradgradcheck)."""
import numpy as np
import pytest

import llgrad
from llgrad.ir import OPS
from llgrad.runtime import node as node_mod

torch = pytest.importorskip("torch")

FAST_OPS = ("bmm", "squeeze", "unsqueeze", "transpose", "cat", "embedding")
FAST = {name: node_mod.fast_vjps[OPS[name]] for name in FAST_OPS}


def _grads(fn, arrays, lib, requires):
    ts = [lib.tensor(a, requires_grad=r) for a, r in zip(arrays, requires)]
    out = fn(lib, *ts)
    seed = np.random.default_rng(7).standard_normal(tuple(out.shape)).astype(arrays[0].dtype)
    out.backward(lib.tensor(seed))
    return [None if t.grad is None else t.grad.numpy().copy() for t in ts], \
        [None if t.grad is None else tuple(t.grad.stride()) for t in ts]


def _check(fn, arrays, requires, expect_fast, monkeypatch):
    """llgrad's gradients with the fast VJPs (counted: each of expect_fast must run) equal
    the rules' exactly, strides included, and torch's to rounding."""
    calls = {}
    for name, fast in FAST.items():
        def counted(node, g, fast=fast, name=name):
            res = fast(node, g)
            calls[name] = calls.get(name, 0) + (res is not None)
            return res
        monkeypatch.setitem(node_mod.fast_vjps, OPS[name], counted)
    got, got_strides = _grads(fn, arrays, llgrad, requires)
    for name in expect_fast:
        assert calls.get(name), f"{name}'s fast VJP did not run"
    for name in FAST_OPS:
        monkeypatch.delitem(node_mod.fast_vjps, OPS[name], raising=False)
    want, want_strides = _grads(fn, arrays, llgrad, requires)
    ref, _ = _grads(fn, arrays, torch, requires)
    for g, w, r in zip(got, want, ref):
        assert (g is None) == (w is None) == (r is None)
        if g is not None:
            assert np.array_equal(g, w)
            tol = 1e-5 if g.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(g, r, rtol=tol, atol=tol)
    assert got_strides == want_strides


def _rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed + len(shape)).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("requires", [(True, True), (True, False), (False, True)])
def test_bmm_backward(dtype, layout, requires, monkeypatch):
    a, b = _rand(4, 5, 3, dtype=dtype), _rand(4, 3, 6, dtype=dtype, seed=1)
    if layout == "transposed":      # (operands strided: the gradient's products read them so)
        a, b = np.ascontiguousarray(a.transpose(0, 2, 1)), np.ascontiguousarray(
            b.transpose(0, 2, 1))

        def fn(lib, x, y):
            return (lib.bmm(x.transpose(1, 2), y.transpose(1, 2)) * 1.5).transpose(0, 1)
    else:
        def fn(lib, x, y):
            return lib.bmm(x, y)
    _check(fn, [a, b], requires, ["bmm"] + (["transpose"] if layout != "contiguous" else []),
           monkeypatch)


def test_squeeze_unsqueeze_and_a_strided_gradient(monkeypatch):
    def fn(lib, x, h):
        w = lib.softmax(lib.bmm(x, h.unsqueeze(2)).squeeze(2), dim=1)
        return lib.bmm(w.unsqueeze(1), x).squeeze(1)
    _check(fn, [_rand(3, 7, 5), _rand(3, 5, seed=2)], (True, True),
           ["squeeze", "unsqueeze", "bmm"], monkeypatch)

    def strided(lib, x):        # (the gradient reaching squeeze is a transpose's: the rule)
        return x.unsqueeze(0).squeeze(0).t() * 2
    _check(strided, [_rand(4, 6)], (True,), [], monkeypatch)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_backward(dim, monkeypatch):
    def fn(lib, a, b, c):
        return lib.cat([a.t(), b, c[:, ::2]], dim).tanh()
    shapes = {0: ((4, 2), (3, 4), (5, 8)), 1: ((3, 4), (4, 2), (4, 6)),
              -1: ((3, 4), (4, 2), (4, 6))}
    sa, sb, sc = shapes[dim]
    _check(fn, [_rand(*sa), _rand(*sb, seed=3), _rand(*sc, seed=4)], (True, False, True),
           ["cat"], monkeypatch)


def test_cat_of_mixed_dtypes_promotes_then_casts_back(monkeypatch):
    def fn(lib, a, b):
        return lib.cat([a, b.to(lib.float64)], 1)
    _check(fn, [_rand(3, 2), _rand(3, 4, seed=5)], (True, True), ["cat"], monkeypatch)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_embedding_backward_with_repeats(dtype, monkeypatch):
    idx = np.array([[1, 3, 1], [0, 3, 3]])

    def fn(lib, w):
        return lib.nn.functional.embedding(lib.tensor(idx), w[:, ::2]) * 3
    _check(fn, [_rand(5, 8, dtype=dtype)], (True,), ["embedding"], monkeypatch)


def test_embedding_with_padding_idx_runs_the_rule(monkeypatch):
    def fn(lib, w):
        return lib.nn.functional.embedding(lib.tensor([[0, 2, 2, 1]]), w, padding_idx=2)
    _check(fn, [_rand(4, 3)], (True,), [], monkeypatch)


def test_transpose_with_negative_dims(monkeypatch):
    def fn(lib, x):
        return x.transpose(-1, 0).exp()
    _check(fn, [_rand(2, 3, 4)], (True,), ["transpose"], monkeypatch)


def test_double_backward_runs_the_rules():
    """create_graph=True: the rules (the fast VJPs build no graph) give second derivatives."""
    def fn(a, b, w, h):
        x = llgrad.cat([a, b], 1).unsqueeze(0)
        e = llgrad.nn.functional.embedding(llgrad.tensor([1, 0, 1]), w)
        return (llgrad.bmm(x, h).squeeze(0).transpose(0, 1) * e.sum()).tanh()
    args = [llgrad.tensor(_rand(3, 2, dtype=np.float64), requires_grad=True),
            llgrad.tensor(_rand(3, 1, dtype=np.float64, seed=1), requires_grad=True),
            llgrad.tensor(_rand(2, 2, dtype=np.float64, seed=2), requires_grad=True),
            llgrad.tensor(_rand(1, 3, 2, dtype=np.float64, seed=3), requires_grad=True)]
    assert llgrad.autograd.gradcheck(fn, args)
    assert llgrad.autograd.gradgradcheck(fn, args)


def _cell_grads(lib, mode, x, h):
    """The gradients of the inputs and parameters through the cell run over x's steps, and
    how many eager kernels ran."""
    from llgrad.compile import eager_native
    lib.manual_seed(0)
    m = getattr(lib.nn, mode)(10, 24)
    xt, ht = lib.tensor(x, requires_grad=True), lib.tensor(h, requires_grad=True)
    before = eager_native.stats["calls"]
    if mode == "GRU":
        y = m(xt.transpose(0, 1), ht.unsqueeze(0))[0]
    else:
        y, state = xt[:, 0], (ht, ht * 0.5) if mode == "LSTMCell" else ht
        for t in range(x.shape[1]):
            state = m(xt[:, t], state)
            y = state[0] if mode == "LSTMCell" else state
    y.pow(2).sum().backward()
    grads = [t.grad.numpy() for t in (xt, ht)] + [p.grad.numpy() for p in m.parameters()]
    return grads, eager_native.stats["calls"] - before


@pytest.mark.parametrize("mode", ["GRUCell", "LSTMCell", "GRU"])
def test_small_batch_cells_run_natively_and_match_torch(mode):
    """Batch 16, H 24: the cells' widest operand has 1,152-1,536 elements, under the
    elementwise kernels' MIN_ELEMENTS, at or above MIN_ROW_ELEMENTS: the row kernel runs,
    and the gradients are torch's."""
    from llgrad.compile import eager_builds, eager_native
    if not eager_native.ENABLED:
        pytest.skip("LLGRAD_EAGER_NATIVE=0")
    x, h = _rand(16, 5, 10), _rand(16, 24, seed=1)
    _cell_grads(llgrad, mode, x, h)
    eager_builds.wait()     # (LLGRAD_COMPILE=background: the kernels are built before the run)
    got, ran = _cell_grads(llgrad, mode, x, h)
    assert ran, "no cell ran on its row kernel"
    want, _ = _cell_grads(torch, mode, x, h)
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=2e-5, atol=2e-5)
