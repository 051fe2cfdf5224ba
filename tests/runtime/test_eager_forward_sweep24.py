"""Eager forward per-op paths (sweep 24 H6): F.linear's straight addmm, and log_softmax's
max over a short last axis folded column by column; each bitwise against the path it
skips, with the same graph."""
import itertools

import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F
from llgrad.ir.ops_reduce import _kept_max

_SPECIALS = [-0.0, 0.0, np.nan, -np.nan, -np.inf, np.inf, 1.0, -1.0]


def _bits(a):
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_kept_max_fold_same_bits_as_reduce(dtype, n):
    # every row of specials (NaNs of both signs first, last, signed zeros both ways); rows
    # of 8 (the reduce's own path) at random
    if n <= 4:
        rows = np.array(list(itertools.product(_SPECIALS, repeat=n)), dtype=dtype)
    else:
        pick = np.random.default_rng(n).integers(0, len(_SPECIALS), (4000, n))
        rows = np.array(_SPECIALS, dtype=dtype)[pick]
    for x in (rows, rows.reshape(len(rows) // 2, 2, n), np.asfortranarray(rows)):
        want = np.maximum.reduce(x, axis=x.ndim - 1, keepdims=True, initial=-np.inf)
        got = _kept_max(x, x.ndim - 1)
        assert got.shape == want.shape and got.dtype == want.dtype
        # the same values; a NaN's sign and which zero a row of both zeros keeps depend on
        # the host's vector loop in NumPy's reduce (AVX2 and AVX-512 differ), and neither
        # reaches softmax's or log_softmax's result: checked bit for bit below
        np.testing.assert_array_equal(got, want)
        assert not np.shares_memory(got, x)
        for fold in (lambda m: (x - m) - np.log(np.exp(x - m).sum(-1, keepdims=True)),
                     lambda m: np.exp(x - m) / np.exp(x - m).sum(-1, keepdims=True)):
            a, b = fold(got), fold(want)
            assert ((_bits(a) == _bits(b)) | (np.isnan(a) & np.isnan(b))).all()


def test_kept_max_other_axes_unchanged():
    x = np.random.default_rng(0).standard_normal((5, 3, 4)).astype(np.float32)
    for d in range(3):
        assert np.array_equal(_kept_max(x, d), np.max(x, axis=d, keepdims=True))
    e = np.zeros((4, 0), np.float32)
    assert np.array_equal(_kept_max(e, 1), np.full((4, 1), -np.inf, np.float32))


def test_log_softmax_short_rows_with_specials_match_torch():
    torch = pytest.importorskip("torch")
    rows = np.array(list(itertools.product(_SPECIALS, repeat=3)), dtype=np.float32)
    rows = np.concatenate([rows, np.random.default_rng(1).standard_normal((64, 3))
                           .astype(np.float32)])
    for fn in ("log_softmax", "softmax"):
        got = getattr(llgrad.tensor(rows), fn)(1).numpy()
        want = getattr(torch.tensor(rows), fn)(1).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, equal_nan=True)


def _graph(t):
    fn = t.grad_fn
    return (type(fn).__name__, tuple(
        (type(f).__name__ if f is not None else None, i) for f, i in fn.next_functions))


def _lin(dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((16, 5)).astype(dtype)
    w = rng.standard_normal((7, 5)).astype(dtype)
    b = rng.standard_normal(7).astype(dtype)
    return (llgrad.tensor(x, requires_grad=True), llgrad.tensor(w, requires_grad=True),
            llgrad.tensor(b, requires_grad=True))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_fast_path_same_bits_graph_and_grads_as_methods(dtype):
    x, w, b = _lin(dtype)
    fast = F.linear(x, w, b)
    x2, w2, b2 = _lin(dtype)
    slow = b2.addmm(x2, w2.t())
    assert np.array_equal(fast.detach().numpy(), slow.detach().numpy())
    assert _graph(fast) == _graph(slow) == ("AddmmBackward0", (
        ("AccumulateGrad", 0), ("AccumulateGrad", 0), ("TBackward0", 0)))
    assert fast.grad_fn.next_functions[2][0].next_functions[0][0].variable is w
    g = np.random.default_rng(2).standard_normal(fast.shape).astype(dtype)
    fast.backward(llgrad.tensor(g))
    slow.backward(llgrad.tensor(g))
    for a, c in ((x, x2), (w, w2), (b, b2)):
        assert np.array_equal(a.grad.numpy(), c.grad.numpy())
    # (the versions saved: writing w after the forward is still the in-place error)
    x3, w3, b3 = _lin(dtype)
    out = F.linear(x3, w3, b3)
    with llgrad.no_grad():
        w3.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_linear_takes_the_straight_path(monkeypatch):
    import llgrad.nn.functional_linear as fl
    seen = []

    def spy(op, inputs, attrs):
        seen.append(op.name)
        return call(op, inputs, attrs)
    call = fl.call
    monkeypatch.setattr(fl, "call", spy)
    x, w, b = _lin()
    F.linear(x, w, b)
    assert seen == ["t", "addmm"]
    seen.clear()
    F.linear(x.detach().reshape(2, 8, 5), w, b)   # (a stack of rows: flattened to addmm)
    assert seen == ["t", "addmm"]
    seen.clear()
    F.linear(x.int(), w.int(), b.int())         # (integers: by the methods)
    assert seen == []


def test_linear_3d_input_same_bits_and_graph_as_methods():
    x, w, b = _lin()
    x3 = x.reshape(4, 4, 5)
    fast = F.linear(x3, w, b)
    slow = b.addmm(x3.reshape(16, 5), w.t()).view(4, 4, 7)
    assert np.array_equal(fast.detach().numpy(), slow.detach().numpy())
    assert _graph(fast) == _graph(slow) == ("ViewBackward0", (("AddmmBackward0", 0),))


def test_linear_fast_path_matches_torch_and_keeps_errors():
    torch = pytest.importorskip("torch")
    x, w, b = _lin()
    tx, tw, tb = (torch.tensor(t.detach().numpy(), requires_grad=True) for t in (x, w, b))
    out, tout = F.linear(x, w, b), torch.nn.functional.linear(tx, tw, tb)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    assert type(out.grad_fn).__name__ == type(tout.grad_fn).__name__
    # shapes and dtypes the fast path does not take give the methods' errors
    for args in ((x, w[:, :4], b), (x, w, b[:3]), (x, w.double(), b)):
        targs = [torch.tensor(a.detach().numpy()) for a in args]
        with pytest.raises(RuntimeError) as ours:
            F.linear(*args)
        with pytest.raises(RuntimeError) as theirs:
            torch.nn.functional.linear(*targs)
        assert str(ours.value).split(" (")[0] == str(theirs.value).split(" (")[0]


def test_linear_subclass_methods_still_called():
    seen = []

    class Traced(llgrad.Tensor):
        def t(self):
            seen.append("t")
            return super().t()

    x, w, b = _lin()
    tw = w.detach().as_subclass(Traced).requires_grad_()
    F.linear(x, tw, b)
    assert seen == ["t"]


def test_linear_under_autocast_and_no_grad():
    x, w, b = _lin()
    with llgrad.autocast("cpu", dtype=llgrad.bfloat16):
        out = F.linear(x, w, b)
    assert out.dtype == llgrad.bfloat16 and type(out.grad_fn).__name__ == "AddmmBackward0"
    with llgrad.no_grad():
        out = F.linear(x, w, b)
    assert out.grad_fn is None and not out.requires_grad
    assert np.array_equal(out.numpy(), b.detach().addmm(x.detach(), w.detach().t()).numpy())
