"""A compiled nn.LSTM saves its cells' activated gates, so the backward evaluates one tanh
per element per step (of the cell state, as PyTorch's) instead of five sigmoid/tanh
(ir/forward_shared.py: expand_shared): the backward's fused_lstm_cell_backward is written as
its primitives before the cut, its sigmoids and tanh of the gates move into the forward
(which computes them anyway) and the backward reads their results, in no more saved bytes
than the pre-activation gates. Loss and gradients against torch, eager and the IR
interpreter, and bit for bit against the same step with the activations recomputed."""
import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from llgrad.ir.decompose import expand_composites
from llgrad.ir.optable import OPS

DEAR = ("sigmoid", "tanh", "exp", "erf", "log")
STEPS = 3


def _model():
    llgrad.manual_seed(0)
    return nn.LSTM(8, 16, batch_first=True), llgrad.tensor(
        np.random.default_rng(0).standard_normal((4, STEPS, 8)).astype(np.float32))


def _loss(m, x):
    y = m(x)[0]
    return (y * y).sum()


def _compiled(lm, x, backend=None):
    fn = llgrad.compile(lambda x: _loss(lm, x), **({"backend": backend} if backend else {}))
    fn(x)
    fn.wait()                       # (LLGRAD_COMPILE=background: native from here on)
    loss = fn(x)
    return fn, loss, llgrad.autograd.grad(loss, list(lm.parameters()))


def _dear_in_backward(fn):
    """Transcendental primitives the backward evaluates, its composites written out."""
    (entry,) = fn.entries
    return sum(n.op in DEAR for n in expand_composites(entry.backward).nodes)


def _saved_bytes(fn):
    return sum(s.nbytes for s in fn.entries[0].saved)


def test_backward_reads_the_saved_activations():
    lm, x = _model()
    fn, loss, grads = _compiled(lm, x)
    egrads = llgrad.autograd.grad(_loss(lm, x), list(lm.parameters()))
    _, iloss, igrads = _compiled(lm, x, backend="interpret")
    assert fn.n_traces == 1
    np.testing.assert_allclose(loss.item(), iloss.item(), rtol=1e-6)
    for g, e, i in zip(grads, egrads, igrads):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(g.numpy(), i.numpy(), rtol=1e-5, atol=1e-6)
    # one tanh of the cell state per step, as PyTorch's backward
    assert _dear_in_backward(fn) == STEPS


@pytest.mark.slow
def test_against_torch():
    torch = pytest.importorskip("torch")
    lm, x = _model()
    torch.manual_seed(0)
    tm = torch.nn.LSTM(8, 16, batch_first=True)
    tm.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy())
                        for k, v in lm.state_dict().items()})
    tl = _loss(tm, torch.from_numpy(x.numpy()))
    tgrads = torch.autograd.grad(tl, list(tm.parameters()))
    _, loss, grads = _compiled(lm, x)
    np.testing.assert_allclose(loss.item(), tl.item(), rtol=1e-5)
    for g, t in zip(grads, tgrads):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-4, atol=1e-5)


def test_no_more_saved_bytes_than_recomputing(monkeypatch):
    """The same model with the cells' activations recomputed (recompute=True, the
    pre-activation gates saved): five transcendentals per element per step in the backward,
    and no fewer saved bytes."""
    lm, x = _model()
    fn, loss, grads = _compiled(lm, x, backend="interpret")
    monkeypatch.setattr(OPS["fused_lstm_cell"], "recompute", True)
    old, old_loss, old_grads = _compiled(lm, x, backend="interpret")
    assert _dear_in_backward(old) == 5 * STEPS
    assert _dear_in_backward(fn) < _dear_in_backward(old)
    assert _saved_bytes(fn) <= _saved_bytes(old)
    # the same formulas on the same values: bit for bit
    assert loss.item() == old_loss.item()
    for a, b in zip(grads, old_grads):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
