"""Embedding's weight gradient with padding_idx (the padding row gets none) as torch's, eager
and compiled: where the lookups are at least the weight's rows, the row is zeroed after the
scatter, so the backward makes no masked copy of the gradient of every looked-up row
(MemN2N's story lookups spent a third of their backward on it,
bench/untuned_models_twelfth.py); where they are fewer (a language model's large vocabulary)
the looked-up rows are masked; and a non-finite gradient at a padding position still gives
the padding row zeros."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _backward(lib, w, idx, up, pad, freq):
    out = lib.nn.functional.embedding(idx, w, padding_idx=pad, scale_grad_by_freq=freq)
    (out * up).sum().backward()


def _grad(lib, weight, idx, up, pad, freq, compiled=False):
    """w.grad after a backward, eager or (compiled) of 3 calls: traced, then native."""
    w = lib.tensor(weight, requires_grad=True)
    args = (lib.tensor(idx), lib.tensor(up))
    if not compiled:
        _backward(lib, w, *args, pad, freq)
        return w.grad.numpy()
    fn = llgrad.compile(lambda w, i, u: _backward(lib, w, i, u, pad, freq))
    grads = []
    for _ in range(3):
        w.grad = None
        fn(w, *args)
        grads.append(w.grad.numpy())
    return grads


def _case(pad, freq, nonfinite, rows=6):
    rng = np.random.default_rng(abs(pad) + 7 * freq)
    weight = rng.standard_normal((rows, 4)).astype(np.float32)
    idx = rng.integers(0, rows, (3, 5))
    idx[0, :3] = pad % rows                   # (the padding index occurs, more than once)
    up = rng.standard_normal((3, 5, 4)).astype(np.float32)
    if nonfinite:
        up[0, 0, 1], up[0, 1, 2] = np.inf, np.nan   # (only at padding positions)
    return weight, idx, up


@pytest.mark.parametrize("rows", [6, 40])     # (40: fewer lookups than rows, masked)
@pytest.mark.parametrize("pad,freq,nonfinite", [(0, False, True), (2, True, True),
                                                 (5, True, False), (-1, False, False)])
def test_padding_row_gets_no_gradient_eager_and_compiled(pad, freq, nonfinite, rows):
    weight, idx, up = _case(pad, freq, nonfinite, rows)
    want = _grad(torch, weight, idx, up, pad, freq)
    eager = _grad(llgrad, weight, idx, up, pad, freq)
    got = _grad(llgrad, weight, idx, up, pad, freq, compiled=True)
    np.testing.assert_allclose(eager, want, rtol=1e-6, atol=1e-6)
    for g in got:
        np.testing.assert_allclose(g, eager, rtol=1e-6, atol=1e-6)
    assert not np.any(eager[pad % rows])


def test_backward_masks_no_looked_up_rows():
    emb = llgrad.nn.Embedding(50, 8, padding_idx=0)
    idx = llgrad.randint(0, 50, (4, 30))

    @llgrad.compile
    def step():
        emb.weight.grad = None
        loss = emb(idx).square().sum()
        loss.backward()
        return loss
    for _ in range(3):
        step()
    text = str(step.dump())
    assert "masked_fill" not in text, "the padding row is zeroed by masking every looked-up row"
    t_emb = torch.nn.Embedding(50, 8, padding_idx=0)
    t_emb.weight.data.copy_(torch.from_numpy(emb.weight.detach().numpy()))
    t_emb(torch.from_numpy(idx.numpy())).square().sum().backward()
    np.testing.assert_allclose(emb.weight.grad.numpy(), t_emb.weight.grad.numpy(), rtol=1e-6)
