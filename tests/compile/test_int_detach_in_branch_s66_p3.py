"""detach() of an integer tensor inside a tensor-dependent if (a decoder's teacher forcing:
`inp = tgt[:, t] if coin[t] < ratio else logits.argmax(-1).detach()`) stops no gradient,
as an integer tensor has none: the branch stays a traced cond. Before, any detach() there
left the if as Python (value guards) with a warning. A float detach() there still does."""
import warnings

import numpy as np
import pytest

import llgrad

V, H, T = 5, 4, 2


def _parts(lib):
    emb, cell, out = lib.nn.Embedding(V, H), lib.nn.Linear(H, H), lib.nn.Linear(H, V)
    rng = np.random.default_rng(0)
    for m in (emb, cell, out):
        for p in m.parameters():
            with lib.no_grad():
                p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
    return emb, cell, out


def _decoder(lib, emb, cell, out):
    """The decoding loss as a closure (compile converts the if of the function it is given,
    not of the helpers that function calls)."""
    F_ = lib.nn.functional

    def decode(tgt, coin):
        h = lib.zeros(tgt.shape[0], H)
        inp = lib.zeros(tgt.shape[0], dtype=lib.long)
        loss = 0.0
        for t in range(T):
            h = lib.tanh(cell(h) + emb(inp))
            logits = out(h)
            loss = loss + F_.cross_entropy(logits, tgt[:, t])
            if coin[t] < 0.5:
                inp = tgt[:, t]
            else:
                inp = logits.argmax(-1).detach()
        return loss / T
    return decode


def _inputs(lib, k):
    rng = np.random.default_rng(k)
    return (lib.tensor(rng.integers(0, V, (4, T))),
            lib.tensor(rng.random(T).astype(np.float32)))


def test_integer_detach_keeps_the_branch_compiled():
    torch = pytest.importorskip("torch")
    ours, theirs = _parts(llgrad), _parts(torch)
    cf, ref = llgrad.compile(_decoder(llgrad, *ours)), _decoder(torch, *theirs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in range(4):
            (tgt, coin), (tt, tc) = _inputs(llgrad, k), _inputs(torch, k)
            got, want = cf(tgt, coin), ref(tt, tc)
            got.backward()
            want.backward()
            np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    assert cf.n_traces == 1, cf.n_traces       # (one trace serves every coin: a cond)
    for m, n in zip(ours, theirs):
        for p, q in zip(m.parameters(), n.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_a_float_detach_in_a_branch_still_leaves_it_as_python():
    w = llgrad.randn(3, requires_grad=True)

    @llgrad.compile
    def f(x):
        y = x * w
        if y.sum() > 0:
            y = y + (y * 5).detach()
        return y.sum()

    with pytest.warns(UserWarning, match="detach"):
        f(llgrad.ones(3)).backward()
    np.testing.assert_allclose(w.grad.numpy(), np.ones(3))
