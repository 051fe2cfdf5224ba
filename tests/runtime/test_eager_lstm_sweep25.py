"""Eager nn.LSTM's whole-layer op (ir/ops_rnn_layer.py) with its steps' cells called on one
row-kernel plan per layer (compile/eager_steps.py) and the gradients of its hidden outputs
(gates, cells) given to the backward as broadcast zeros when nothing reached them (then not
added): the forward bit for bit against the per-step path, against torch in float32 and
float64 at sizes that run the native kernels, float64 gradcheck with and without gradients
reaching gates and cells, compiled == eager, and the variants (time-major, batch_first,
bidirectional, two layers, strided initial states, proj_size, dropout in eval, GRU)."""
import functools

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from llgrad.compile import eager_native, eager_steps
from llgrad.ir import OPS

T, B, I, H = 6, 32, 16, 64          # (gates (32, 256): the cells run on their row kernels)


@pytest.fixture(autouse=True)
def _builds_before_the_call(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")       # (the kernels ready at the first call)


def _numpy(t):
    return t.detach().numpy()


def _torch_pair(torch, dtype, **kw):
    torch.manual_seed(0)
    tm = torch.nn.LSTM(I, H, **kw).to(dtype)
    lm = nn.LSTM(I, H, **kw).to(getattr(llgrad, str(dtype).split(".")[1]))
    lm.load_state_dict({k: llgrad.tensor(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})
    return tm, lm


def _run(lib, m, x0, h0, c0, batch_first):
    x = lib.tensor(x0, requires_grad=True)
    h, c = lib.tensor(h0, requires_grad=True), lib.tensor(c0, requires_grad=True)
    # strided initial states: views of (B, L*D, H) arrays
    out, (hn, cn) = m(x, (h.transpose(0, 1), c.transpose(0, 1)))
    loss = (out * out).sum() + (hn * hn).sum() + (cn * cn).sum() + cn.sum()
    loss.backward()
    return [out, hn, cn], [x.grad, h.grad, c.grad] + [p.grad for p in m.parameters()]


@pytest.mark.parametrize("dtype,tol", [("float32", 2e-5), ("float64", 1e-11)])
@pytest.mark.parametrize("kw", [{}, {"batch_first": True}, {"bidirectional": True},
                                {"num_layers": 2, "dropout": 0.4}, {"proj_size": 24}])
def test_lstm_matches_torch(dtype, tol, kw):
    torch = pytest.importorskip("torch")
    tm, lm = _torch_pair(torch, getattr(torch, dtype), **kw)
    tm.eval()
    lm.eval()                       # (dropout between layers: off in eval)
    rng = np.random.default_rng(1)
    d = (2 if kw.get("bidirectional") else 1) * kw.get("num_layers", 1)
    bf = kw.get("batch_first", False)
    x0 = rng.standard_normal((B, T, I) if bf else (T, B, I)).astype(dtype)
    h0 = rng.standard_normal((B, d, kw.get("proj_size") or H)).astype(dtype)
    c0 = rng.standard_normal((B, d, H)).astype(dtype)
    calls = eager_native.stats["calls"]
    lo, lg = _run(llgrad, lm, x0, h0, c0, bf)
    if not kw.get("proj_size"):         # (every step's cell, forward and backward, native)
        assert eager_native.stats["calls"] - calls >= 2 * T * d * eager_native.ENABLED
    to, tg = _run(torch, tm, x0, h0, c0, bf)
    for a, b in zip(lo + lg, to + tg):
        b = b.detach().numpy()
        np.testing.assert_allclose(_numpy(a), b, rtol=tol, atol=tol * max(1, np.abs(b).max()))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kw", [{}, {"bidirectional": True, "num_layers": 2}])
def test_layer_op_equals_per_step_path(monkeypatch, dtype, kw):
    """The forward bit for bit as the per-step ops (what compile traces) compute it, the
    gradients within rounding, time-major with strided initial states."""
    llgrad.manual_seed(3)
    m = nn.LSTM(I, H, **kw).to(getattr(llgrad, dtype))
    d = 4 if kw else 1
    rng = np.random.default_rng(2)
    x0 = rng.standard_normal((T, B, I)).astype(dtype)
    h0, c0 = (rng.standard_normal((B, d, H)).astype(dtype) for _ in range(2))
    runs = []
    for whole in (True, False):
        if not whole:
            monkeypatch.setattr(nn.LSTM, "_whole_layers", lambda self, x, lengths: False)
        runs.append(_run(llgrad, m, x0, h0, c0, False))
        m.zero_grad()
    for a, b in zip(runs[0][0], runs[1][0]):
        np.testing.assert_array_equal(_numpy(a), _numpy(b))
    tol = 1e-4 if dtype == "float32" else 1e-12
    for a, b in zip(runs[0][1], runs[1][1]):
        np.testing.assert_allclose(_numpy(a), _numpy(b), rtol=tol,
                                   atol=tol * max(1.0, np.abs(_numpy(b)).max()))


def _layer_args(seed, t=3, b=2, i=3, h=4, dtype=np.float64):
    rng = np.random.default_rng(seed)
    shapes = [(t, b, i), (4 * h, i), (4 * h, h), (4 * h,), (4 * h,), (b, h), (b, h)]
    return [llgrad.tensor(rng.standard_normal(s).astype(dtype) * 0.5, requires_grad=True)
            for s in shapes]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("hidden", ["", "gates", "cells", "gates cells"])
def test_layer_gradcheck(reverse, hidden):
    """float64 finite differences of the layer op, with gradients reaching its gates and / or
    cells or not (then the backward gets broadcast zeros for them)."""
    args = _layer_args(4)

    def f(*a):
        y, hy, cy, gates, cells = a[0]._op("lstm_layer", *a[1:], reverse=reverse)
        out = (y * y).sum() + (hy * cy).sum()
        if "gates" in hidden:
            out = out + gates.sin().sum()
        return out + (cells * cells).sum() if "cells" in hidden else out
    assert llgrad.autograd.gradcheck(f, tuple(args))
    if not hidden:          # (second order through broadcast zeros: the new path)
        assert llgrad.autograd.gradgradcheck(f, tuple(args))


def test_unreached_hidden_outputs_come_as_broadcast_zeros(monkeypatch):
    """nn.LSTM's backward: the gradients of gates and cells, which nothing reads, are
    stride-0 zeros (no 4*T*B*H array of zeros made and added each call), and gradients that
    do reach them are whole arrays."""
    seen = []
    impl = OPS["lstm_layer_backward"].impl

    @functools.wraps(impl)          # (the dispatcher reads the impl's attributes)
    def spy(*arrays, **kw):
        seen.append((arrays[3].strides, arrays[4].strides))
        return impl(*arrays, **kw)
    monkeypatch.setattr(OPS["lstm_layer_backward"], "impl", spy)
    m = nn.LSTM(I, H)
    x = llgrad.randn(T, B, I, requires_grad=True)
    m(x)[0].sum().backward()
    assert seen == [((0, 0, 0), (0, 0, 0))]
    seen.clear()
    args = _layer_args(5, dtype=np.float32)
    y, _, _, gates, cells = args[0]._op("lstm_layer", *args[1:], reverse=False)
    (y.sum() + (gates * cells.repeat(1, 1, 4)).sum()).backward()
    assert all(s != 0 for st in seen[0] for s in st)


def test_compiled_matches_eager():
    """A training step's loss and gradients compiled (per-step ops, native) as eager."""
    llgrad.manual_seed(6)
    m = nn.LSTM(I, H, batch_first=True)
    head = nn.Linear(H, 5)
    x = llgrad.randn(B, T, I)

    def loss(m, head, x):
        return (head(m(x)[0]) ** 2).mean()
    step = llgrad.compile(loss)
    grads = []
    for f in (loss, step):
        m.zero_grad()
        head.zero_grad()
        v = f(m, head, x)
        v.backward()
        grads.append([v] + [p.grad.clone() for p in list(m.parameters()) + list(head.parameters())])
    for a, b in zip(*grads):
        np.testing.assert_allclose(_numpy(b), _numpy(a), rtol=1e-4,
                                   atol=1e-6 * max(1.0, np.abs(_numpy(a)).max()))


def test_gru_unchanged_matches_torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tm = torch.nn.GRU(I, H, batch_first=True)
    lm = nn.GRU(I, H, batch_first=True)
    lm.load_state_dict({k: llgrad.tensor(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})
    x0 = np.random.default_rng(7).standard_normal((B, T, I)).astype(np.float32)
    outs = []
    for lib, m in ((llgrad, lm), (torch, tm)):
        x = lib.tensor(x0, requires_grad=True)
        y, hn = m(x)
        ((y * y).sum() + hn.sum()).backward()
        outs.append([y, hn, x.grad] + [p.grad for p in m.parameters()])
    for a, b in zip(*outs):
        b = b.detach().numpy()
        np.testing.assert_allclose(_numpy(a), b, rtol=2e-5, atol=2e-5 * max(1, np.abs(b).max()))


def test_steps_run_on_one_bound_kernel(monkeypatch):
    """Forward and backward each bind their cell's kernel once per layer (the steps after
    the first call it on addresses), and every step's cell still counts as a native call."""
    if not eager_native.ENABLED:
        pytest.skip("LLGRAD_EAGER_NATIVE=0")
    bound = []
    bind = eager_steps.Steps.bind

    def spy(self, name, arrays, outs):
        k = bind(self, name, arrays, outs)
        bound.append((name, k is not None))
        return k
    monkeypatch.setattr(eager_steps.Steps, "bind", spy)
    m = nn.LSTM(I, H)
    x = llgrad.randn(T, B, I, requires_grad=True)
    calls = eager_native.stats["calls"]
    m(x)[0].sum().backward()
    assert bound == [("fused_lstm_cell", True), ("fused_lstm_cell_backward", True)]
    assert eager_native.stats["calls"] - calls == 2 * T
