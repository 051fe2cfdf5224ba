"""F.scaled_dot_product_attention and nn.MultiheadAttention against PyTorch: outputs,
attention weights and every gradient for each kind of mask (none, bool, float, causal, key
padding, 2-D and 3-D), batch_first, kdim/vdim, bias, add_bias_kv, add_zero_attn, unbatched
inputs, train and eval; fully masked rows; error messages; float64 gradcheck; dropout from
llgrad's generator; a compiled training step equal to eager."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F
from seq_oracle import (close, compiled_matches_eager, grads_close, ll, load_torch, same_error,
                        torch_or_skip)


# ---- scaled_dot_product_attention ----------------------------------------------------------------
def _sdpa_both(torch, qs, ks, vs=None, mask=None, **kw):
    q = torch.randn(*qs, requires_grad=True)
    k = torch.randn(*ks, requires_grad=True)
    v = torch.randn(*(vs or ks), requires_grad=True)
    lq, lk, lv = ll(q, True), ll(k, True), ll(v, True)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)
    lout = F.scaled_dot_product_attention(lq, lk, lv, attn_mask=None if mask is None else ll(mask),
                                          **kw)
    close(lout, out, "output")
    g = torch.randn(out.shape)
    out.backward(g)
    lout.backward(ll(g))
    for a, b, name in ((lq, q, "q"), (lk, k, "k"), (lv, v, "v")):
        close(a.grad, b.grad, f"grad of {name}")
    return lout


def _mask(torch, kind, shape):
    torch.manual_seed(3)
    if kind == "bool":
        return torch.rand(shape) > 0.4
    m = torch.randn(shape)
    m[..., 0, 1] = float("-inf")
    return m


@pytest.mark.parametrize("qs,ks", [((2, 3, 4, 8), (2, 3, 5, 8)), ((3, 4, 8), (3, 5, 8)),
                                   ((4, 8), (5, 8)), ((1, 2, 4, 8), (2, 1, 5, 8))])
@pytest.mark.parametrize("mask", [None, "bool", "float", "bool-batch", "causal"])
def test_sdpa_matches_torch(qs, ks, mask):
    torch = torch_or_skip()
    torch.manual_seed(0)
    kw, m = {}, None
    if mask == "causal":
        kw["is_causal"] = True
    elif mask == "bool-batch":
        m = torch.rand(qs[0], 1, 1, ks[-2]) > 0.3 if len(qs) == 4 else None
    elif mask:
        m = _mask(torch, mask, (qs[-2], ks[-2]))
    _sdpa_both(torch, qs, ks, (ks[:-1] + (6,)), mask=m, **kw)


def test_sdpa_scale_causal_rectangular_and_float64():
    torch = torch_or_skip()
    _sdpa_both(torch, (2, 3, 4, 8), (2, 3, 5, 8), scale=0.3)
    _sdpa_both(torch, (2, 3, 3, 8), (2, 3, 5, 8), is_causal=True)
    _sdpa_both(torch, (2, 5, 8), (2, 3, 8), is_causal=True)
    q = torch.randn(2, 4, 8, dtype=torch.float64)
    out = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    close(F.scaled_dot_product_attention(ll(q), ll(q), ll(q), is_causal=True), out)


def test_sdpa_fully_masked_rows_give_zeros_as_torch():
    torch = torch_or_skip()
    m = torch.rand(4, 5) > 0.5
    m[1] = False
    lout = _sdpa_both(torch, (2, 4, 8), (2, 5, 8), mask=m)
    assert not np.isnan(lout.detach().numpy()).any()
    assert (lout.detach().numpy()[:, 1] == 0).all()
    mf = torch.zeros(4, 5)
    mf[2] = float("-inf")
    _sdpa_both(torch, (2, 4, 8), (2, 5, 8), mask=mf)


def test_sdpa_dropout_uses_llgrads_generator():
    q = llgrad.randn(2, 2, 6, 8)
    llgrad.manual_seed(0)
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    llgrad.manual_seed(0)
    b = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    c = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    plain = F.scaled_dot_product_attention(q, q, q)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.allclose(a.numpy(), c.numpy()) and not np.allclose(a.numpy(), plain.numpy())
    # compiled: the same draws from the same seed
    f = llgrad.compile(lambda q: F.scaled_dot_product_attention(q, q, q, dropout_p=0.5))
    f(q)
    llgrad.manual_seed(0)
    np.testing.assert_allclose(f(q).numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
    assert F.scaled_dot_product_attention(q, q, q, dropout_p=1.0).abs().sum().item() == 0


def test_sdpa_errors_match_torch():
    torch = torch_or_skip()

    def both(make):
        same_error(lambda: torch.nn.functional.scaled_dot_product_attention(*make(torch)[0],
                                                                             **make(torch)[1]),
                   lambda: F.scaled_dot_product_attention(*make(llgrad)[0], **make(llgrad)[1]))
    both(lambda T: ((T.randn(8), T.randn(8), T.randn(8)), {}))
    both(lambda T: ((T.randn(2, 4, 8), T.randn(2, 5, 8).double(), T.randn(2, 5, 8)), {}))
    both(lambda T: ((T.randn(2, 4, 8), T.randn(2, 5, 8), T.randn(2, 5, 8)),
                    {"attn_mask": T.zeros(4, 5, dtype=T.int64)}))
    both(lambda T: ((T.randn(3, 4, 8), T.randn(3, 4, 8), T.randn(3, 4, 8)),
                    {"attn_mask": T.ones(4, 4, dtype=T.bool), "is_causal": True}))
    both(lambda T: ((T.randn(2, 4, 8), T.randn(2, 5, 8), T.randn(2, 5, 8)),
                    {"dropout_p": 1.5}))


def test_sdpa_gradcheck():
    q, k, v = (llgrad.randn(1, 2, 3, 4, dtype=llgrad.float64, requires_grad=True)
               for _ in range(3))
    m = llgrad.tensor([[True, False, True], [False, False, False], [True, True, True]])
    assert llgrad.autograd.gradcheck(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=m), (q, k, v))
    assert llgrad.autograd.gradcheck(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.7),
        (q, k, v))


# ---- MultiheadAttention --------------------------------------------------------------------------
E, H, L, S, B = 8, 2, 4, 5, 3


def _mha_case(torch, kw, batch_first, kpm, am, need_weights, average, self_attn,
              unbatched=False, train=True):
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(E, H, batch_first=batch_first, **kw)
    lm = load_torch(nn.MultiheadAttention(E, H, batch_first=batch_first, **kw), tm)
    assert repr(lm) == repr(tm)
    if not train:
        tm.eval()
        lm.eval()

    def mk(n, d):
        shape = (n, d) if unbatched else ((B, n, d) if batch_first else (n, B, d))
        return torch.randn(*shape, requires_grad=True)
    q = mk(L, E)
    k, v = (q, q) if self_attn else (mk(S, kw.get("kdim", E)), mk(S, kw.get("vdim", E)))
    src = L if self_attn else S
    lq = ll(q, True)
    lk, lv = (lq, lq) if self_attn else (ll(k, True), ll(v, True))
    batch = () if unbatched else (B,)
    kp = {"bool": lambda: torch.rand(*batch, src) > 0.6,
          "float": lambda: torch.randn(*batch, src), None: lambda: None}[kpm]()
    a = {"bool2": lambda: torch.rand(L, src) > 0.7, "float2": lambda: torch.randn(L, src),
         "bool3": lambda: torch.rand((1 if unbatched else B) * H, L, src) > 0.7,
         None: lambda: None}[am]()
    args = dict(need_weights=need_weights, average_attn_weights=average)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # mismatched mask types: deprecated, both warn
        to, tw = tm(q, k, v, key_padding_mask=kp, attn_mask=a, **args)
        lo, lw = lm(lq, lk, lv, key_padding_mask=None if kp is None else ll(kp),
                    attn_mask=None if a is None else ll(a), **args)
    close(lo, to, "output")
    if need_weights:
        close(lw, tw, "weights")
    else:
        assert lw is None and tw is None
    if not train or torch.isnan(to).any():          # (a fully masked row: NaN in both)
        return
    g = torch.randn(to.shape)
    to.backward(g)
    lo.backward(ll(g))
    for x, y, name in ((lq, q, "query"), (lk, k, "key"), (lv, v, "value")):
        close(x.grad, y.grad, f"grad of {name}")
    grads_close(lm, tm)


MHA_KW = [{}, {"bias": False}, {"kdim": 6, "vdim": 7}, {"add_bias_kv": True},
          {"add_zero_attn": True}]


@pytest.mark.parametrize("kw", MHA_KW, ids=["default", "no_bias", "kdim_vdim", "bias_kv",
                                             "zero_attn"])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
def test_mha_matches_torch(kw, batch_first, need_weights, average):
    torch = torch_or_skip()
    for kpm, am in [(None, None), ("bool", None), ("float", "float2"), ("bool", "bool2"),
                    (None, "bool3")]:
        for self_attn in ([False] if "kdim" in kw else [True, False]):
            _mha_case(torch, kw, batch_first, kpm, am, need_weights, average, self_attn)


@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_unbatched_eval_and_no_grad(need_weights):
    torch = torch_or_skip()
    _mha_case(torch, {}, False, "bool", "bool3", need_weights, True, False, unbatched=True)
    _mha_case(torch, {}, True, "bool", None, need_weights, True, True, train=False)
    with torch.no_grad(), llgrad.no_grad():        # torch's inference fast path: same numbers
        _mha_case(torch, {}, True, "bool", None, need_weights, True, True, train=False)
        _mha_case(torch, {}, True, None, "bool2", need_weights, False, True, train=False)


def test_mha_is_causal_hint():
    torch = torch_or_skip()
    tm = torch.nn.MultiheadAttention(E, H, batch_first=True)
    lm = load_torch(nn.MultiheadAttention(E, H, batch_first=True), tm)
    x = torch.randn(B, L, E)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(L)
    for need in (False, True):
        out = tm(x, x, x, attn_mask=mask, is_causal=True, need_weights=need)[0]
        close(lm(ll(x), ll(x), ll(x), attn_mask=ll(mask), is_causal=True, need_weights=need)[0],
              out)
    same_error(lambda: tm(x, x, x, is_causal=True), lambda: lm(ll(x), ll(x), ll(x),
                                                                 is_causal=True))


def test_mha_parameters_and_initialisation():
    torch = torch_or_skip()
    for kw in MHA_KW:
        tm, lm = torch.nn.MultiheadAttention(E, H, **kw), nn.MultiheadAttention(E, H, **kw)
        assert [(n, tuple(p.shape)) for n, p in lm.named_parameters()] == \
            [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
        assert list(lm.state_dict()) == list(tm.state_dict())
        assert type(lm.out_proj).__name__ == type(tm.out_proj).__name__
        if lm.in_proj_bias is not None:
            assert lm.in_proj_bias.abs().sum().item() == 0 and lm.out_proj.bias.abs().sum() == 0
        if lm.in_proj_weight is not None:     # xavier_uniform_ over (3E, E)
            bound = np.sqrt(6 / (4 * E))
            w = lm.in_proj_weight.detach().numpy()
            assert np.abs(w).max() <= bound and w.std() > bound / 3


def test_mha_errors_match_torch():
    torch = torch_or_skip()
    pairs = [
        (lambda T, m: m(T.randn(4, 3, 8), T.randn(5, 8), T.randn(5, 8))),
        (lambda T, m: m(T.randn(4, 3, 8), T.randn(5, 3, 8), T.randn(5, 3, 8),
                        key_padding_mask=T.zeros(3, 5, 1, dtype=T.bool))),
        (lambda T, m: m(T.randn(4, 3, 8), T.randn(5, 3, 8), T.randn(5, 3, 8),
                        key_padding_mask=T.zeros(3, 4, dtype=T.bool))),
        (lambda T, m: m(T.randn(4, 3, 8), T.randn(5, 3, 8), T.randn(5, 3, 8),
                        attn_mask=T.zeros(4, 4, dtype=T.bool))),
        (lambda T, m: m(T.randn(4, 3, 8), T.randn(5, 3, 8), T.randn(5, 3, 8),
                        attn_mask=T.zeros(5, 4, 5, dtype=T.bool))),
        (lambda T, m: m(T.randn(4, 3, 8), T.randn(5, 3, 8), T.randn(5, 3, 8),
                        attn_mask=T.zeros(4, 5, dtype=T.int64))),
        (lambda T, m: m(T.randn(4, 3, 6), T.randn(5, 3, 6), T.randn(5, 3, 6))),
        (lambda T, m: m(T.randn(4, 3, 8), T.randn(5, 3, 8), T.randn(6, 3, 8))),
        (lambda T, m: m(T.randn(3, 4, 3, 8), T.randn(5, 3, 8), T.randn(5, 3, 8))),
        (lambda T, m: m(T.randn(4, 8), T.randn(5, 8), T.randn(5, 8),
                        attn_mask=T.zeros(2, 3, 5, dtype=T.bool))),
    ]
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(8, 2)
    lm = load_torch(nn.MultiheadAttention(8, 2), tm)
    for f in pairs:
        same_error(lambda: f(torch, tm), lambda: f(llgrad, lm))
    same_error(lambda: torch.nn.MultiheadAttention(8, 3), lambda: nn.MultiheadAttention(8, 3))
    same_error(lambda: torch.nn.MultiheadAttention(0, 3), lambda: nn.MultiheadAttention(0, 3))


def test_mha_gradcheck():
    llgrad.manual_seed(0)
    m = nn.MultiheadAttention(4, 2, kdim=3, vdim=5, dtype=llgrad.float64)
    q = llgrad.randn(2, 1, 4, dtype=llgrad.float64, requires_grad=True)
    k = llgrad.randn(3, 1, 3, dtype=llgrad.float64, requires_grad=True)
    v = llgrad.randn(3, 1, 5, dtype=llgrad.float64, requires_grad=True)
    pad = llgrad.tensor([[False, False, True]])
    assert llgrad.autograd.gradcheck(
        lambda q, k, v, *ps: m(q, k, v, key_padding_mask=pad), (q, k, v) + tuple(m.parameters()))


@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_compiled_training_step_matches_eager(need_weights):
    llgrad.manual_seed(0)
    pad = llgrad.tensor([[False] * 5, [False] * 4 + [True], [False] * 3 + [True] * 2])
    mask = nn.Transformer.generate_square_subsequent_mask(5)

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x):
            return self.attn(x, x, x, key_padding_mask=pad, attn_mask=mask,
                             need_weights=need_weights)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # mismatched mask types: deprecated
        compiled_matches_eager(SelfAttention, (llgrad.randn(3, 5, 8),))


def test_sdpa_compiled_training_step_matches_eager():
    llgrad.manual_seed(0)

    class Heads(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(8, 24)

        def forward(self, x):
            q, k, v = self.qkv(x).reshape(3, 5, 2, 12).transpose(1, 2).chunk(3, -1)
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    compiled_matches_eager(Heads, (llgrad.randn(3, 5, 8),))


def test_sdpa_bfloat16_is_the_float32_result_rounded_once():
    """As PyTorch's CPU kernels: half and bfloat16 attention computed in float32, the output
    rounded once (bfloat16 rounded its scores, weights and products before)."""
    rs = np.random.RandomState(3)
    q, k, v = (llgrad.tensor(rs.randn(2, 5, 4).astype(np.float32)).bfloat16() for _ in range(3))
    got = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    assert got.dtype == llgrad.bfloat16
    np.testing.assert_array_equal(got.float().numpy(), want.bfloat16().float().numpy())
