"""nn.RNN, nn.LSTM, nn.GRU and their cells against PyTorch (torch's state_dict loaded into
llgrad): outputs, final states, the gradients of inputs, initial states and every parameter,
for the options that change the computation; names, shapes, initialisation, reprs and error
messages; float64 gradcheck; dropout between layers; a compiled training step equal to eager."""
import copy
import math
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from llgrad.compile import eager_native
from seq_oracle import (close, compiled_matches_eager, grads_close, ll, load_torch, same_error,
                        torch_or_skip)

MODES = {"RNN": ("RNN", {}), "RNN_RELU": ("RNN", {"nonlinearity": "relu"}), "LSTM": ("LSTM", {}),
         "GRU": ("GRU", {})}


def _pair(torch, mode, *args, **kwargs):
    cls, extra = MODES[mode]
    kwargs = {**extra, **kwargs}
    tm = getattr(torch.nn, cls)(*args, **kwargs)
    return tm, load_torch(getattr(nn, cls)(*args, **kwargs), tm)


def _states(mode, hx):
    return hx if mode == "LSTM" else (hx,)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("layers,bidirectional", [(1, False), (2, False), (1, True), (2, True)])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("initial", [False, True])
def test_recurrent_layers_match_torch(mode, layers, bidirectional, batch_first, initial):
    torch = torch_or_skip()
    torch.manual_seed(0)
    tm, lm = _pair(torch, mode, 3, 4, num_layers=layers, bidirectional=bidirectional,
                   batch_first=batch_first)
    x = torch.randn((2, 5, 3) if batch_first else (5, 2, 3), requires_grad=True)
    d = 2 if bidirectional else 1
    hx = None
    if initial:
        hx = torch.randn(layers * d, 2, 4, requires_grad=True)
        if mode == "LSTM":
            hx = (hx, torch.randn(layers * d, 2, 4, requires_grad=True))
    lx, lhx = _loss_both(tm, lm, mode, x, hx)
    close(lx.grad, x.grad, "input grad")
    if initial:
        for a, b in zip(_states(mode, lhx), _states(mode, hx)):
            close(a.grad, b.grad, "initial state grad")
    grads_close(lm, tm)


def _loss_both(tm, lm, mode, x, hx):
    """Forward both, compare output and final states; backward a loss of the output and of
    every final state (so the states' gradients are checked too)."""
    lx = ll(x, True)
    lhx = None if hx is None else (tuple(ll(h, True) for h in hx) if mode == "LSTM"
                                   else ll(hx, True))
    to, th = tm(x, hx)
    lo, lh = lm(lx, lhx)
    close(lo, to, "output")
    for a, b in zip(_states(mode, lh), _states(mode, th)):
        close(a, b, "final state")
    w = np.linspace(0.5, 1.5, to.numel()).reshape(tuple(to.shape)).astype(np.float32)
    import torch
    ((to * torch.from_numpy(w)).sum() + sum((h * h).sum() for h in _states(mode, th))).backward()
    ((lo * llgrad.from_numpy(w)).sum() + sum((h * h).sum() for h in _states(mode, lh))).backward()
    return lx, lhx


@pytest.mark.parametrize("mode,kwargs", [("LSTM", {"bias": False}), ("GRU", {"bias": False}),
                                         ("RNN_RELU", {"bias": False}),
                                         ("LSTM", {"proj_size": 2}),
                                         ("LSTM", {"proj_size": 2, "num_layers": 2,
                                                   "bidirectional": True, "bias": False})])
@pytest.mark.parametrize("initial", [False, True])
def test_bias_free_and_projected_layers(mode, kwargs, initial):
    torch = torch_or_skip()
    torch.manual_seed(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # torch: projections are not supported by oneDNN
        tm, lm = _pair(torch, mode, 3, 4, **kwargs)
        n = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
        hx = None
        if initial:
            hx = torch.randn(n, 2, kwargs.get("proj_size", 4), requires_grad=True)
            if mode == "LSTM":
                hx = (hx, torch.randn(n, 2, 4, requires_grad=True))
        x = torch.randn(5, 2, 3, requires_grad=True)
        lx, _ = _loss_both(tm, lm, mode, x, hx)
    close(lx.grad, x.grad, "input grad")
    grads_close(lm, tm)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("initial", [False, True])
def test_unbatched_input(mode, batch_first, initial):
    torch = torch_or_skip()
    tm, lm = _pair(torch, mode, 3, 4, num_layers=2, batch_first=batch_first)
    x = torch.randn(5, 3, requires_grad=True)
    hx = None
    if initial:
        hx = torch.randn(2, 4, requires_grad=True)
        hx = (hx, torch.randn(2, 4, requires_grad=True)) if mode == "LSTM" else hx
    lx, _ = _loss_both(tm, lm, mode, x, hx)
    close(lx.grad, x.grad, "input grad")
    grads_close(lm, tm)


@pytest.mark.parametrize("cell,kwargs", [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}),
                                         ("RNNCell", {"bias": False}), ("LSTMCell", {}),
                                         ("LSTMCell", {"bias": False}), ("GRUCell", {}),
                                         ("GRUCell", {"bias": False})])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("initial", [False, True])
def test_cells_match_torch(cell, kwargs, batched, initial):
    torch = torch_or_skip()
    tm = getattr(torch.nn, cell)(3, 4, **kwargs)
    lm = load_torch(getattr(nn, cell)(3, 4, **kwargs), tm)
    assert repr(lm) == repr(tm)
    x = torch.randn(*((2, 3) if batched else (3,)), requires_grad=True)
    hs = (2, 4) if batched else (4,)
    hx = None
    if initial:
        hx = (torch.randn(hs, requires_grad=True), torch.randn(hs, requires_grad=True)) \
            if cell == "LSTMCell" else torch.randn(hs, requires_grad=True)
    lx = ll(x, True)
    lhx = None if hx is None else (tuple(ll(h, True) for h in hx) if cell == "LSTMCell"
                                   else ll(hx, True))
    to, lo = tm(x, hx), lm(lx, lhx)
    touts = to if cell == "LSTMCell" else (to,)
    louts = lo if cell == "LSTMCell" else (lo,)
    for a, b in zip(louts, touts):
        close(a, b, "output")
    sum((t * t).sum() for t in touts).backward()
    sum((t * t).sum() for t in louts).backward()
    close(lx.grad, x.grad, "input grad")
    if initial:
        for a, b in zip(lhx if cell == "LSTMCell" else (lhx,), hx if cell == "LSTMCell" else (hx,)):
            close(a.grad, b.grad, "state grad")
    grads_close(lm, tm)


def test_names_shapes_reprs_and_initialisation():
    torch = torch_or_skip()
    cases = [("LSTM", (4, 6), dict(num_layers=2, bidirectional=True, proj_size=3)),
             ("GRU", (4, 6), dict(num_layers=2, bias=False, dropout=0.2, batch_first=True)),
             ("RNN", (4, 6, 3, "relu"), {}), ("RNN", (4, 6), dict(nonlinearity="relu"))]
    for cls, args, kwargs in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tm, lm = getattr(torch.nn, cls)(*args, **kwargs), getattr(nn, cls)(*args, **kwargs)
        assert repr(lm) == repr(tm)
        assert [(n, tuple(p.shape)) for n, p in lm.named_parameters()] == \
            [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
        assert list(lm.state_dict()) == list(tm.state_dict())
        assert lm._flat_weights_names == tm._flat_weights_names
        assert [[tuple(w.shape) for w in ws] for ws in lm.all_weights] == \
            [[tuple(w.shape) for w in ws] for ws in tm.all_weights]
        bound = 1 / math.sqrt(6)
        values = np.concatenate([p.detach().numpy().ravel() for p in lm.parameters()])
        assert values.min() >= -bound and values.max() <= bound and values.std() > bound / 3
        # llgrad's state_dict loads into torch as well
        tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in lm.state_dict().items()})
    lm.flatten_parameters()     # a no-op, as in PyTorch on the CPU


def test_float64_gradcheck():
    """Finite differences in float64 for the input, the initial states and every parameter."""
    llgrad.manual_seed(0)
    cases = [(nn.LSTM(2, 3, num_layers=2, proj_size=2, dtype=llgrad.float64), (2, 1, 2)),
             (nn.LSTM(2, 2, bidirectional=True, dtype=llgrad.float64), (2, 1, 2)),
             (nn.GRU(2, 3, batch_first=True, dtype=llgrad.float64), (2, 2, 3)),
             (nn.RNN(2, 3, nonlinearity="tanh", dtype=llgrad.float64), (2, 1, 3))]
    for m, (steps, batch, h) in cases:
        x = llgrad.randn(steps, batch, 2, dtype=llgrad.float64, requires_grad=True)
        n = m.num_layers * (2 if m.bidirectional else 1)
        if isinstance(m, nn.LSTM):
            h0 = llgrad.randn(n, batch, h, dtype=llgrad.float64, requires_grad=True)
            c0 = llgrad.randn(n, batch, m.hidden_size, dtype=llgrad.float64, requires_grad=True)
            states = (h0, c0)
        else:
            states = (llgrad.randn(n, batch, h, dtype=llgrad.float64, requires_grad=True),)
        if m.batch_first:
            x = llgrad.randn(batch, steps, 2, dtype=llgrad.float64, requires_grad=True)

        def f(x, *rest, m=m, k=len(states)):
            out, hn = m(x, rest[:k] if k == 2 else rest[0])   # the parameters: perturbed in place
            return out, hn[0] if isinstance(hn, tuple) else hn
        assert llgrad.autograd.gradcheck(f, (x,) + states + tuple(m.parameters()))
    for cell in (nn.LSTMCell(2, 3, dtype=llgrad.float64), nn.GRUCell(2, 3, dtype=llgrad.float64),
                 nn.RNNCell(2, 3, nonlinearity="relu", dtype=llgrad.float64)):
        x = llgrad.randn(2, 2, dtype=llgrad.float64, requires_grad=True)
        h = llgrad.randn(2, 3, dtype=llgrad.float64, requires_grad=True)

        def g(x, h, *params, cell=cell):
            return cell(x, (h, h * 0.5)) if isinstance(cell, nn.LSTMCell) else cell(x, h)
        assert llgrad.autograd.gradcheck(g, (x, h) + tuple(cell.parameters()))


def test_dropout_between_layers():
    torch = torch_or_skip()
    with pytest.warns(UserWarning, match="dropout option adds dropout after all but last"):
        nn.LSTM(3, 4, dropout=0.5)
    tm, lm = _pair(torch, "LSTM", 3, 4, num_layers=3, dropout=0.5)
    x = torch.randn(5, 2, 3)
    tm.eval()
    lm.eval()
    close(lm(ll(x))[0], tm(x)[0], "eval: no dropout")
    lm.train()
    with llgrad.no_grad():
        llgrad.manual_seed(0)
        a = lm(ll(x))[0].numpy()
        llgrad.manual_seed(0)
        b = lm(ll(x))[0].numpy()
        c = lm(ll(x))[0].numpy()
    np.testing.assert_array_equal(a, b)            # llgrad's generator: seeded, repeatable
    assert not np.allclose(a, c)                   # and dropout is on in training


def test_error_messages_match_torch():
    torch = torch_or_skip()
    cases = [
        ("LSTM", (3, 4), dict(batch_first=True, bidirectional=True, num_layers=2),
         lambda T: (T.randn(3, 6, 5),)),
        ("LSTM", (3, 4), {}, lambda T: (T.randn(3, 6, 3, 1),)),
        ("LSTM", (3, 4), {}, lambda T: (T.randn(5, 2, 3), (T.randn(1, 3, 4), T.randn(1, 2, 4)))),
        ("LSTM", (3, 4), {}, lambda T: (T.randn(5, 2, 3), (T.randn(1, 2, 4), T.randn(1, 3, 4)))),
        ("LSTM", (3, 4), {}, lambda T: (T.randn(5, 2, 3), (T.randn(1, 2, 4), T.randn(2, 4)))),
        ("LSTM", (3, 4), {}, lambda T: (T.randn(5, 3), (T.randn(1, 2, 4), T.randn(1, 2, 4)))),
        ("LSTM", (3, 4), {}, lambda T: (T.randn(5, 2, 3).double(),)),
        ("GRU", (3, 4), {}, lambda T: (T.randn(5, 2, 3), T.randn(2, 4))),
        ("GRU", (3, 4), {}, lambda T: (T.randn(5, 3), T.randn(1, 2, 4))),
        ("GRU", (3, 4), {}, lambda T: (T.randn(5, 2, 3), T.randn(1, 3, 4))),
        ("GRU", (3, 4), {}, lambda T: (T.randn(5),)),
        ("RNN", (3, 4), {}, lambda T: (T.randn(5),)),
        ("LSTMCell", (3, 4), {}, lambda T: (T.randn(2, 5),)),
        ("LSTMCell", (3, 4), {}, lambda T: (T.randn(2, 3), (T.randn(1, 4), T.randn(2, 4)))),
        ("LSTMCell", (3, 4), {}, lambda T: (T.randn(2, 3), (T.randn(2, 5), T.randn(2, 4)))),
        ("LSTMCell", (3, 4), {}, lambda T: (T.randn(2, 3), (T.randn(2, 4), T.randn(2, 5)))),
        ("LSTMCell", (3, 4), {}, lambda T: (T.randn(2, 3, 1),)),
        ("GRUCell", (3, 4), {}, lambda T: (T.randn(2, 3), T.randn(4))),
        ("GRUCell", (3, 4), {}, lambda T: (T.randn(2, 3), T.randn(2, 1, 4))),
        ("RNNCell", (3, 4), {}, lambda T: (T.randn(2, 7),)),
    ]
    for cls, args, kwargs, inputs in cases:
        tm = getattr(torch.nn, cls)(*args, **kwargs)
        lm = getattr(nn, cls)(*args, **kwargs)
        same_error(lambda: tm(*inputs(torch)), lambda: lm(*inputs(llgrad)))
    for make in [lambda m: m.RNN(3, 4, 1, "sigmoid"), lambda m: m.GRU(3, 4, proj_size=2),
                 lambda m: m.LSTM(3, 4, proj_size=4), lambda m: m.LSTM(3, 4, dropout=1.5),
                 lambda m: m.LSTM(3, 0), lambda m: m.LSTM(3, 4, num_layers=0),
                 lambda m: m.LSTM(3, 4.0), lambda m: m.LSTM(3, 4, bias=1)]:
        same_error(lambda: make(torch.nn), lambda: make(nn))


@pytest.mark.parametrize("make,x", [
    (lambda: nn.LSTM(3, 4, num_layers=2, bidirectional=True), (4, 2, 3)),
    (lambda: nn.GRU(3, 4, batch_first=True), (2, 4, 3)),
    (lambda: nn.RNN(3, 4, nonlinearity="relu", num_layers=2), (4, 2, 3)),
    (lambda: nn.LSTMCell(3, 4), (2, 3)),
    (lambda: nn.GRUCell(3, 4), (2, 3)),
    (lambda: nn.RNNCell(3, 4), (3,)),
], ids=["lstm", "gru", "rnn", "lstm_cell", "gru_cell", "rnn_cell"])
def test_compiled_training_step_matches_eager(make, x):
    llgrad.manual_seed(0)
    compiled_matches_eager(make, (llgrad.randn(*x),))


def test_compiled_lstm_with_initial_states_and_dropout_matches_eager():
    llgrad.manual_seed(0)
    h0 = (llgrad.randn(2, 2, 4), llgrad.randn(2, 2, 4))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(3, 4, num_layers=2, dropout=0.3)

        def forward(self, x):
            return self.lstm(x, h0)[0]
    # the same seed for both runs: compiled dropout draws what eager draws
    m = Net()
    m2 = copy.deepcopy(m)
    x = llgrad.randn(4, 2, 3)
    step = llgrad.compile(lambda m, x: m(x).sum())
    for _ in range(3):
        llgrad.manual_seed(5)
        a = m(x).sum().item()
        llgrad.manual_seed(5)
        b = step(m2, x).item()
        assert abs(a - b) < 1e-5, (a, b)


def _node_names(out):
    seen, stack, names = set(), [out.grad_fn], []
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        names.append(type(n).__name__)
        stack.extend(fn for fn, _ in n.next_functions)
    return names


@pytest.mark.parametrize("mode,kwargs", [("LSTM", {"num_layers": 2, "bidirectional": True}),
                                         ("LSTM", {"proj_size": 3}), ("GRU", {"num_layers": 2})])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_nodes_and_values_match_torch(mode, kwargs, dtype):
    """An LSTM layer and direction is one node, as torch's oneDNN layer
    (MkldnnRnnLayerBackward0, the same count in both graphs in float32); with projections
    (which torch runs step by step too) and in the GRU, the gates' elementwise work of a step
    is one node (PyTorch's fused cell), forward and backward; outputs and every gradient
    within the dtype's rounding of torch's."""
    torch = torch_or_skip()
    torch.manual_seed(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # torch: projections are not supported by oneDNN
        tm, lm = _pair(torch, mode, 5, 8, **kwargs)
        tm, lm = tm.to(getattr(torch, dtype)), lm.to(getattr(llgrad, dtype))
        x = torch.randn(6, 3, 5, dtype=getattr(torch, dtype), requires_grad=True)
        lx = ll(x, True)
        to, lo = tm(x)[0], lm(lx)[0]
    names = _node_names(lo)
    cell = "ThnnFusedLstmCellBackward0" if mode == "LSTM" else "ThnnFusedGruCellBackward0"
    layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    whole = mode == "LSTM" and not kwargs.get("proj_size")
    layer = "MkldnnRnnLayerBackward0"
    assert names.count(layer) == (layers if whole else 0)
    assert names.count(cell) == (0 if whole else 6 * layers)
    if whole:
        if dtype == "float32":      # (torch runs float64 step by step)
            assert _node_names(to).count(layer) == layers
        assert names[:2] == ["CatBackward0", layer] and "MmBackward0" not in names
    assert "SigmoidBackward0" not in names and "TanhBackward0" not in names
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    close(lo, to, "output", **tol)
    w = torch.linspace(-1, 1, to.numel(), dtype=to.dtype).reshape(to.shape)
    (to * w).sum().backward()
    (lo * ll(w)).sum().backward()
    close(lx.grad, x.grad, "input grad", **tol)
    grads_close(lm, tm, **tol)


def test_cells_under_vmap_match_per_sample():
    """The fused cells batch under llgrad.func.vmap (a rule of their own: rules_nn.py)."""
    llgrad.manual_seed(3)
    lstm, gru = nn.LSTMCell(3, 4, dtype=llgrad.float64), nn.GRUCell(3, 4, dtype=llgrad.float64)
    x = llgrad.randn(5, 2, 3, dtype=llgrad.float64)
    h, c = llgrad.randn(5, 2, 4, dtype=llgrad.float64), llgrad.randn(2, 4, dtype=llgrad.float64)

    def f(x, h):
        hy, cy = lstm(x, (h, c))
        return hy + cy + gru(x, h)
    got = llgrad.func.vmap(f)(x, h)
    want = llgrad.stack([f(x[k], h[k]) for k in range(5)])
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12,
                               atol=1e-14)


def test_lstm_layer_op_equals_the_per_step_path(monkeypatch):
    """nn.LSTM's one op per layer and direction (eagerly) against its per-step ops (what
    compile traces), at a size where the cells run on their native row kernels: the same
    outputs and states bit for bit, the gradients within float32 rounding."""
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")       # (the kernels ready at the first call)
    llgrad.manual_seed(1)
    m = nn.LSTM(24, 96, num_layers=2, bidirectional=True, batch_first=True)
    x0 = np.random.default_rng(4).standard_normal((48, 5, 24)).astype(np.float32)
    h0 = [llgrad.randn(4, 48, 96) for _ in range(2)]
    runs = []
    for whole in (True, False):
        if not whole:
            monkeypatch.setattr(nn.LSTM, "_whole_layers", lambda self, x, lengths: False)
        x = llgrad.tensor(x0, requires_grad=True)
        hs = [h.clone().requires_grad_() for h in h0]
        calls = eager_native.stats["calls"]
        out, (h, c) = m(x, tuple(hs))
        assert ("MkldnnRnnLayerBackward0" in _node_names(out)) == whole
        (out * out).sum().add(h.sum() + c.sum()).backward()
        if whole:       # (every step of each layer and direction, forward and backward)
            assert eager_native.stats["calls"] - calls == 40 * eager_native.ENABLED
        runs.append(([out, h, c], [x.grad] + [s.grad for s in hs] +
                     [p.grad for p in m.parameters()]))
        m.zero_grad()
    for a, b in zip(runs[0][0], runs[1][0]):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    for a, b in zip(runs[0][1], runs[1][1]):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4,
                                   atol=1e-5 * max(1.0, np.abs(b.numpy()).max()))
