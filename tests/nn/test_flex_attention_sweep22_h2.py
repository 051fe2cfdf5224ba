"""torch.nn.attention.flex_attention: flex_attention with score_mods and block masks (the
FlexAttention docs' examples: relative position, ALiBi-style head bias, soft-capping,
causal / sliding-window / document masks combined by and_masks / or_masks, GQA, lse),
compared with PyTorch's forward on the CPU (which has no backward there); gradients
against float64 finite differences; compiled == eager."""
import importlib
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _lib_fa(lib):
    return importlib.import_module(lib.__name__ + ".nn.attention.flex_attention")


def _qkv(lib, B=2, Hq=4, Hkv=4, L=6, S=6, E=8, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    shapes = [(B, Hq, L, E), (B, Hkv, S, E), (B, Hkv, S, E)]
    return [lib.tensor(rng.standard_normal(s).astype(dtype)) for s in shapes]


def _case(lib, name):
    """(score_mod, block_mask args or None, extra kwargs, qkv kwargs) of a docs example."""
    fa = _lib_fa(lib)
    bias = lib.tensor(np.linspace(-1, 1, 4).astype(np.float32))
    doc = lib.tensor(np.array([0, 0, 0, 1, 1, 2]))

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def sliding(b, h, q_idx, kv_idx):
        return q_idx - kv_idx <= 2

    def document(b, h, q_idx, kv_idx):
        return doc[q_idx] == doc[kv_idx]

    def by_batch(b, h, q_idx, kv_idx):      # (batch 1 attends everywhere)
        return (b == 1) | (q_idx >= kv_idx)

    cases = {
        "plain": (None, None, {}, {}),
        "relative": (lambda s, b, h, q, kv: s + (q - kv), None, {}, {}),
        "alibi": (lambda s, b, h, q, kv: s + bias[h] * (kv - q), None, {}, {}),
        "softcap": (lambda s, b, h, q, kv: 2.0 * lib.tanh(s / 2.0), None, {}, {}),
        "causal": (None, (causal, None, None, 6, 6), {}, {}),
        "sliding_causal": (None, (fa.and_masks(causal, sliding), None, None, 6, 6), {}, {}),
        "document_or": (None, (fa.or_masks(document, causal), None, None, 6, 6), {}, {}),
        "fully_masked_rows": (None, (lambda b, h, q, kv: q > kv, None, None, 6, 6), {}, {}),
        "by_batch": (None, (by_batch, 2, None, 6, 6), {}, {}),
        "gqa_scale": (lambda s, b, h, q, kv: s * (h + 1), (causal, None, None, 6, 4),
                      dict(enable_gqa=True, scale=0.3), dict(Hkv=2, S=4)),
    }
    return cases[name]


CASES = ["plain", "relative", "alibi", "softcap", "causal", "sliding_causal", "document_or",
         "fully_masked_rows", "by_batch", "gqa_scale"]


def _run(lib, name, qkv=None, fn=None):
    fa = _lib_fa(lib)
    score_mod, bm, kw, shape = _case(lib, name)
    q, k, v = qkv if qkv is not None else _qkv(lib, **shape)
    block_mask = None if bm is None else fa.create_block_mask(*bm, device="cpu")
    return (fn or fa.flex_attention)(q, k, v, score_mod=score_mod, block_mask=block_mask,
                                     return_aux=fa.AuxRequest(lse=True), **kw)


@pytest.mark.parametrize("name", CASES)
def test_forward_and_lse_equal_torch(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (torch: "called without torch.compile()")
        ref, ref_aux = _run(torch, name)
    out, aux = _run(llgrad, name)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(aux.lse.numpy(), ref_aux.lse.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["alibi", "fully_masked_rows", "gqa_scale"])
def test_gradients_match_finite_differences(name):
    shape = _case(llgrad, name)[3]
    qkv = [t.double().requires_grad_() for t in _qkv(llgrad, B=1, L=6, **shape)]
    fa = _lib_fa(llgrad)
    score_mod, bm, kw, _ = _case(llgrad, name)
    block_mask = None if bm is None else fa.create_block_mask(*bm)

    def f(q, k, v):
        return fa.flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, **kw)

    assert llgrad.autograd.gradcheck(f, tuple(qkv))


@pytest.mark.parametrize("name", ["relative", "document_or", "fully_masked_rows"])
def test_compiled_equals_eager(name):
    qkv = [t.requires_grad_() for t in _qkv(llgrad)]
    fa = _lib_fa(llgrad)

    def f(q, k, v):
        out, aux = _run(llgrad, name, (q, k, v), fa.flex_attention)
        out.square().sum().backward()
        return out, aux.lse

    eager = f(*qkv)
    eager_grads = [t.grad.clone() for t in qkv]
    for t in qkv:
        t.grad = None
    cf = llgrad.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = cf(*qkv)
    assert cf.entries
    for a, b in zip(got + tuple(t.grad for t in qkv), eager + tuple(eager_grads)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_block_mask_and_errors_as_torch():
    ours, theirs = _lib_fa(llgrad), _lib_fa(torch)

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    for lib, fa in ((llgrad, ours), (torch, theirs)):
        bm = fa.create_block_mask(causal, None, None, 200, 300, device="cpu", BLOCK_SIZE=64)
        assert bm.shape == (1, 1, 200, 300) and bm.mask_mod is causal
    a = ours.create_block_mask(causal, None, None, 200, 300, BLOCK_SIZE=64)
    b = theirs.create_block_mask(causal, None, None, 200, 300, device="cpu", BLOCK_SIZE=64)
    np.testing.assert_array_equal(a.to_dense().numpy(), b.to_dense().numpy())
    assert a.sparsity() == pytest.approx(b.sparsity())
    np.testing.assert_array_equal(ours.create_mask(causal, 2, 1, 3, 4).numpy(),
                                  theirs.create_mask(causal, 2, 1, 3, 4, device="cpu").numpy())
    small = ours.create_block_mask(causal, None, None, 4, 4)
    q, k, v = _qkv(llgrad)
    with pytest.raises(ValueError, match="created for a smaller length"):
        ours.flex_attention(q, k, v, block_mask=small)
    with pytest.raises(ValueError, match="Try setting enable_gqa=True"):
        ours.flex_attention(q, k[:, :2], v[:, :2])
    with pytest.warns(FutureWarning, match="return_lse is deprecated"):
        out, lse = ours.flex_attention(q, k, v, return_lse=True)
    assert lse.shape == (2, 4, 6)
