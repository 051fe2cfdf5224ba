"""masked_scatter inside llgrad.compile (LLaVA-style image features written into the text
embeddings at the image-token positions): traced as a gather at the mask's running count
and a where, not a fallback to eager; values and both gradients equal PyTorch's, also
with a broadcast mask, the in-place form and a mask of all True; a later call whose mask
holds more True than the source has elements raises PyTorch's error (a guard)."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _step(lib, x, m, s):
    y = x.masked_scatter(m, s)
    z = x.detach().clone().masked_scatter_(m, s.detach() * 2)
    (y * lib.arange(y.numel()).reshape(y.shape)).sum().backward()
    return y.detach(), z


@pytest.mark.parametrize("shape, mshape, n", [((3, 4), (3, 4), 12), ((3, 4), (4,), 20),
                                              ((2, 3, 4), (2, 3, 1), 30)])
def test_masked_scatter_compiles_and_equals_torch(shape, mshape, n):
    rng = np.random.default_rng(n)
    cf = llgrad.compile(lambda x, m, s: _step(llgrad, x, m, s))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for it in range(3):
            x = rng.standard_normal(shape).astype(np.float32)
            m = rng.random(mshape) < 0.5
            m[...] |= it == 2
            s = rng.standard_normal(n).astype(np.float32)
            tx, ts = torch.tensor(x, requires_grad=True), torch.tensor(s, requires_grad=True)
            lx, ls = llgrad.tensor(x, requires_grad=True), llgrad.tensor(s, requires_grad=True)
            want = _step(torch, tx, torch.tensor(m), ts) + (tx.grad, ts.grad)
            got = cf(lx, llgrad.tensor(m), ls) + (lx.grad, ls.grad)
            for a, b in zip(want, got):
                np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6)
    assert len(cf.entries) == 1 and not cf.graph_breaks


def test_a_mask_with_too_many_true_raises_at_a_later_call():
    cf = llgrad.compile(lambda x, m, s: x.masked_scatter(m, s))
    x, s = llgrad.zeros(4), llgrad.tensor([1.0, 2.0])
    np.testing.assert_array_equal(cf(x, llgrad.tensor([True, False, False, False]), s).numpy(),
                                  [1, 0, 0, 0])
    np.testing.assert_array_equal(cf(x, llgrad.tensor([False, True, False, True]), s).numpy(),
                                  [0, 1, 0, 2])
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones"):
        cf(x, llgrad.tensor([True, True, True, False]), s)
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones"):
        torch.zeros(4).masked_scatter(torch.tensor([True, True, True, False]), torch.ones(2))
