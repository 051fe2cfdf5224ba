"""torch.nn.functional parity for calls with random draws or side effects (helper f8):
dropout inside scaled_dot_product_attention and gumbel_softmax(hard=True) under a seed,
embedding's in-place max_norm renormalisation, nn.MultiheadAttention with
need_weights=False. Against PyTorch (llgrad draws PyTorch's random stream), eager and
compiled (compiled must equal eager)."""
import numpy as np
import pytest

from parity_harness_s64_f8 import check, compiled_params, rnd

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

RANDOM_CASES = [
    ("sdpa_dropout", lambda L, q, k, v: L.nn.functional.scaled_dot_product_attention(
        q, k, v, dropout_p=0.4), [rnd(2, 2, 3, 4), rnd(2, 2, 5, 4, seed=1),
                                  rnd(2, 2, 5, 3, seed=2)]),
    ("sdpa_dropout_causal_gqa", lambda L, q, k, v: L.nn.functional.scaled_dot_product_attention(
        q, k, v, dropout_p=0.3, is_causal=True, enable_gqa=True, scale=0.7),
     [rnd(1, 4, 5, 3), rnd(1, 2, 3, 3, seed=1), rnd(1, 2, 3, 2, seed=2)]),
    ("gumbel_hard", lambda L, x: L.nn.functional.gumbel_softmax(x, tau=0.5, hard=True),
     [rnd(3, 5)]),
    ("gumbel_hard_dim0", lambda L, x: L.nn.functional.gumbel_softmax(x, hard=True, dim=0),
     [rnd(4, 2, 3)]),
    ("gumbel_soft", lambda L, x: L.nn.functional.gumbel_softmax(x, tau=2.0), [rnd(3, 4)]),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name,fn,specs", RANDOM_CASES, ids=[c[0] for c in RANDOM_CASES])
def test_seeded_random_eager_matches_torch(name, fn, specs, dtype):
    check(fn, specs, dtype, compiled=False, seed=7)


@pytest.mark.parametrize("name,fn,specs", compiled_params(
    RANDOM_CASES, ["sdpa_dropout_causal_gqa", "gumbel_hard"]))
def test_seeded_random_compiled_matches_eager(name, fn, specs):
    check(fn, specs, np.float32, torch_oracle=False, seed=7)


def _embedding_max_norm(L, dtype, compiled=False):
    w = L.tensor((rnd(6, 3) * 2).astype(dtype), requires_grad=True)
    idx = L.tensor(np.array([[0, 2, 2], [5, 0, 1]]))

    def f(w, idx):
        # the renormalisation rewrites w's rows in place, outside autograd
        return L.nn.functional.embedding(idx, w, max_norm=1.5, norm_type=1.0, padding_idx=1)

    if compiled:
        f = llgrad.compile(f)
    out = f(w, idx)
    (out * L.tensor(rnd(*out.shape, seed=1).astype(dtype))).sum().backward()
    return out.detach().numpy(), w.detach().numpy(), w.grad.numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_embedding_max_norm_renorms_the_weight_in_place(dtype):
    want = _embedding_max_norm(torch, dtype)
    got = _embedding_max_norm(llgrad, dtype)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_embedding_max_norm_compiled_equals_eager():
    want = _embedding_max_norm(llgrad, np.float32)
    for _ in range(2):
        got = _embedding_max_norm(llgrad, np.float32, compiled=True)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6)


def _mha(L, kw, call_kw, dtype, compiled=False):
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(6, 2, **kw).to(getattr(torch, np.dtype(dtype).name))
    m = tm if L is torch else llgrad.nn.MultiheadAttention(6, 2, **kw).to(
        getattr(llgrad, np.dtype(dtype).name))
    if L is llgrad:
        m.load_state_dict({k: llgrad.tensor(v.detach().numpy()) for k, v
                           in tm.state_dict().items()})
    bf = kw.get("batch_first", False)
    shp_q, shp_k = ((2, 3, 6), (2, 4, 6)) if bf else ((3, 2, 6), (4, 2, 6))
    q = L.tensor(rnd(*shp_q).astype(dtype), requires_grad=True)
    shp_k = shp_k[:-1] + (kw.get("kdim", 6),)
    k = L.tensor(rnd(*shp_k, seed=1).astype(dtype), requires_grad=True)
    kpm = L.tensor(np.array([[False, False, True, False], [False, True, False, False]]))

    def f(q, k):
        return m(q, k, k, key_padding_mask=kpm, need_weights=False, **call_kw)

    if compiled:
        f = llgrad.compile(f)
    for _ in range(2 if compiled else 1):
        for t in [q, k, *m.parameters()]:
            t.grad = None
        out, wts = f(q, k)
        assert wts is None
        (out * L.tensor(rnd(*out.shape, seed=2).astype(dtype))).sum().backward()
    grads = [p.grad.numpy() for p in m.parameters()]
    return [out.detach().numpy(), q.grad.numpy(), k.grad.numpy()] + grads


MHA_VARIANTS = [
    ({}, {}),
    ({"batch_first": True, "bias": False}, {}),
    ({"kdim": 5, "vdim": 5}, {}),
    ({"add_bias_kv": True, "add_zero_attn": True}, {}),
    ({"batch_first": True}, {"attn_mask": "causal"}),
]


def _resolve(kw, call_kw, L):
    kw = dict(kw)
    call_kw = dict(call_kw)
    if call_kw.get("attn_mask") == "causal":
        call_kw["attn_mask"] = L.tensor(np.triu(np.ones((3, 4), bool), 1))
    return kw, call_kw


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw,call_kw", MHA_VARIANTS)
def test_mha_need_weights_false_matches_torch(kw, call_kw, dtype):
    want = _mha(torch, *_resolve(kw, call_kw, torch), dtype)
    got = _mha(llgrad, *_resolve(kw, call_kw, llgrad), dtype)
    tol = dict(rtol=2e-4, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-11)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **tol)


@pytest.mark.parametrize("kw,call_kw", [pytest.param(*v, marks=() if i == 3 else pytest.mark.slow)
                                        for i, v in enumerate(MHA_VARIANTS)])
def test_mha_need_weights_false_compiled_equals_eager(kw, call_kw):
    want = _mha(llgrad, *_resolve(kw, call_kw, llgrad), np.float32)
    got = _mha(llgrad, *_resolve(kw, call_kw, llgrad), np.float32, compiled=True)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)
