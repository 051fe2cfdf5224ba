"""nn.RNN, nn.LSTM and nn.GRU on PackedSequence inputs against torch (when installed): the
packed output, h_n / c_n, and gradients of inputs, hx and parameters, over layers,
directions, hx given or not, proj_size and both packings; compiled equal to eager."""
import numpy as np
import pytest

import llgrad

RNG = np.random.default_rng(12)
LENS = [5, 2, 4, 1]
XS = [RNG.standard_normal((n, 3)) for n in LENS]


def _torch():
    return pytest.importorskip("torch")


def _run(lib, kind, kw, with_hx, sorted_input, source=None):
    m = getattr(lib.nn, kind)(3, 4, **kw).double()
    if source is not None:
        m.load_state_dict({k: lib.tensor(v.detach().numpy()) for k, v in source.items()})
    xs = sorted(XS, key=len, reverse=True) if sorted_input else XS
    seqs = [lib.tensor(x, requires_grad=True) for x in xs]
    packed = lib.nn.utils.rnn.pack_sequence(seqs, enforce_sorted=sorted_input)
    dirs = 2 if kw.get("bidirectional") else 1
    layers = kw.get("num_layers", 1)
    hsize = kw.get("proj_size") or 4
    hx = None
    if with_hx:
        h0 = lib.tensor(np.linspace(-1, 1, layers * dirs * len(xs) * hsize)
                        .reshape(layers * dirs, len(xs), hsize), requires_grad=True)
        c0 = lib.tensor(np.linspace(1, -1, layers * dirs * len(xs) * 4)
                        .reshape(layers * dirs, len(xs), 4), requires_grad=True)
        hx = (h0, c0) if kind == "LSTM" else h0
    out, state = m(packed, hx)
    h = state[0] if kind == "LSTM" else state
    loss = out.data.pow(2).sum() + h.pow(3).sum() + (state[1].sum() if kind == "LSTM" else 0)
    loss.backward()
    grads = [s.grad.numpy() for s in seqs] + [p.grad.numpy() for p in m.parameters()]
    if with_hx:
        grads += [t.grad.numpy() for t in (hx if kind == "LSTM" else (hx,))]
    return m, dict(data=out.data.detach().numpy(), sizes=out.batch_sizes.tolist(),
                   order=None if out.sorted_indices is None else out.sorted_indices.tolist(),
                   h=h.detach().numpy(), grads=grads)


@pytest.mark.parametrize("kind,kw", [
    ("RNN", dict()), ("RNN", dict(num_layers=2, bidirectional=True, nonlinearity="relu")),
    ("LSTM", dict()), ("LSTM", dict(num_layers=2, bidirectional=True)),
    ("LSTM", dict(proj_size=2)), ("GRU", dict(bidirectional=True)),
    ("GRU", dict(num_layers=2, batch_first=True))])
@pytest.mark.parametrize("with_hx", [False, True])
@pytest.mark.parametrize("sorted_input", [False, True])
def test_packed_matches_torch(kind, kw, with_hx, sorted_input):
    torch = _torch()
    tm, theirs = _run(torch, kind, kw, with_hx, sorted_input)
    _, ours = _run(llgrad, kind, kw, with_hx, sorted_input, tm.state_dict())
    assert ours["sizes"] == theirs["sizes"] and ours["order"] == theirs["order"]
    np.testing.assert_allclose(ours["data"], theirs["data"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours["h"], theirs["h"], rtol=1e-10, atol=1e-12)
    for a, b in zip(ours["grads"], theirs["grads"]):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)


def test_packed_hx_size_is_checked():
    m = llgrad.nn.GRU(3, 4)
    packed = llgrad.nn.utils.rnn.pack_sequence([llgrad.tensor(x) for x in XS],
                                               enforce_sorted=False)
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 4, 4\), got \[1, 3, 4\]"):
        m(packed.to(llgrad.float32), llgrad.zeros(1, 3, 4))


def test_compiled_packed_lstm_equals_eager():
    x = [llgrad.tensor(a.astype(np.float32)) for a in XS]

    def run(compiled):
        llgrad.manual_seed(2)
        m = llgrad.nn.LSTM(3, 4)
        opt = llgrad.optim.SGD(m.parameters(), lr=0.1)

        def step():
            opt.zero_grad()
            packed = llgrad.nn.utils.rnn.pack_sequence(x, enforce_sorted=False)
            out, (h, c) = m(packed)
            loss = out.data.pow(2).mean() + h.sum()
            loss.backward()
            opt.step()
            return loss.detach()
        fn = llgrad.compile(step) if compiled else step
        return [fn().item() for _ in range(4)], [p.detach().numpy().copy()
                                                 for p in m.parameters()]
    eager, compiled = run(False), run(True)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-5)
    for a, b in zip(compiled[1], eager[1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
