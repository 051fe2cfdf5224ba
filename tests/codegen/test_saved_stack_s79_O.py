"""Saved operands of a saved stack read through it (ir/saved_stacks.py): an unrolled nn.LSTM's
hidden states, saved for the weight gradient and stacked into the output the head reads, are
saved as the stack alone, so the forward writes each step's h into its block of the output
(codegen/schedule/concat.py) and has no stack copy. Loss and gradients against torch and
eager, for stacked, reversed and bidirectional layers."""
import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F
from llgrad.codegen.kernel import Kernel


@pytest.fixture
def one_thread():
    old = llgrad.get_num_threads()
    llgrad.set_num_threads(1)
    yield
    llgrad.set_num_threads(old)


def _case(torch, steps, **kw):
    torch.manual_seed(0)
    tm, th = torch.nn.LSTM(8, 16, batch_first=True, **kw), torch.nn.Linear(16 * (
        2 if kw.get("bidirectional") else 1), 5)
    lm, lh = nn.LSTM(8, 16, batch_first=True, **kw), nn.Linear(th.in_features, 5)
    lm.load_state_dict({k: llgrad.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    lh.load_state_dict({k: llgrad.tensor(v.detach().numpy()) for k, v in th.state_dict().items()})
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, steps, 8)).astype(np.float32)
    y = rng.integers(0, 5, 4 * steps).astype(np.int64)
    return (tm, th), (lm, lh), x, y


def _loss(F_, rnn, head, x, y):
    return F_.cross_entropy(head(rnn(x)[0]).reshape(-1, 5), y)


def _run(torch, steps, **kw):
    (tm, th), (lm, lh), x, y = _case(torch, steps, **kw)
    tl = _loss(torch.nn.functional, tm, th, torch.from_numpy(x), torch.from_numpy(y))
    tgrads = torch.autograd.grad(tl, list(tm.parameters()) + list(th.parameters()))
    params = list(lm.parameters()) + list(lh.parameters())
    lx, ly = llgrad.tensor(x), llgrad.tensor(y)

    def loss_fn(x, y):
        return _loss(F, lm, lh, x, y)
    fn = llgrad.compile(loss_fn)
    fn(lx, ly)
    fn.wait()                       # (LLGRAD_COMPILE=background: native from here on)
    loss = fn(lx, ly)
    grads = llgrad.autograd.grad(loss, params)
    eager = llgrad.autograd.grad(loss_fn(lx, ly), params)
    np.testing.assert_allclose(loss.item(), tl.item(), rtol=1e-5)
    for g, e, t in zip(grads, eager, tgrads):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-4, atol=1e-5)
    assert fn.n_traces == 1
    return fn, (lx, ly)


def _forward_ops(fn):
    """The root op of each group of the forward kernels' plans (built natively)."""
    kernels = [k for e in fn.entries for w, k in e.kernels.items() if "forward" in str(w)]
    assert kernels and all(isinstance(k, Kernel) for k in kernels), kernels
    return [grp.root.op for k in kernels for grp in k.plan.groups]


def _chain(m, h0, w):
    hs, h = [], h0
    for _ in range(3):
        h = (h @ w).tanh()
        hs.append(h)
    s = m.stack(hs)
    return (s * s).sum()


def test_saved_stack_operands_are_written_in_place(one_thread):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    h0, w = rng.standard_normal((4, 8)), rng.standard_normal((8, 8)) * 0.5
    th, tw = (torch.tensor(a, requires_grad=True) for a in (h0, w))
    _chain(torch, th, tw).backward()
    lh, lw = (llgrad.tensor(a, requires_grad=True) for a in (h0, w))
    fn = llgrad.compile(lambda h, w: _chain(llgrad, h, w))
    fn(lh, lw)
    fn.wait()
    loss = fn(lh, lw)
    loss.backward()
    np.testing.assert_allclose(loss.item(), _chain(torch, th, tw).item(), rtol=1e-12)
    np.testing.assert_allclose(lh.grad.numpy(), th.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(lw.grad.numpy(), tw.grad.numpy(), rtol=1e-10, atol=1e-12)
    ops = _forward_ops(fn)
    assert "tanh" in ops and "stack" not in ops, ops
    assert fn.n_traces == 1


@pytest.mark.slow
def test_lstm_output_written_in_place(one_thread):
    torch = pytest.importorskip("torch")
    fn, args = _run(torch, 6)
    # each step's h goes into its block of the output: no stack copy in the forward
    ops = _forward_ops(fn)
    assert "mm" in ops and "stack" not in ops, ops
    # the backward reads the hidden states as views of the saved output
    saved = fn.dump(*args).split("== saved values ==")[1].split("\n== ")[0]
    assert "[6,4,16]" in saved.replace(" ", "") or "6, 4, 16" in saved, saved


@pytest.mark.slow
@pytest.mark.parametrize("kw", [{"num_layers": 2}, {"bidirectional": True}])
def test_stacked_and_bidirectional_lstm_grads(one_thread, kw):
    torch = pytest.importorskip("torch")
    _run(torch, 5, **kw)
