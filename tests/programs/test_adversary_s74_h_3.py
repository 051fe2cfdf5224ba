"""Session 74 (h), sequence layers and lazy modules against torch: nn.Transformer (full
encoder-decoder, tgt_mask from generate_square_subsequent_mask, memory / src key padding
masks, custom encoder and decoder, a model made once and compiled), TransformerDecoderLayer
norm_first, the encoder's eval fast path under no_grad, MultiheadAttention with kdim / vdim,
a bidirectional two-layer nn.RNN(nonlinearity='relu'), LazyLinear / LazyConv2d /
LazyBatchNorm2d / LazyConvTranspose2d (and LazyLinear given its parameters by
load_state_dict): torch, llgrad eager and llgrad.compile (adversarial_harness_s69_a10.check).
The sweep is slow; the two regressions at the end (this session's fixes) run by default."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402
from adversary_s74_h_common import _fill, G, IMG, pg, TOL, X  # noqa: E402

SEQ = (((np.arange(60, dtype=np.float32).reshape(2, 5, 6) * 7) % 13) - 6) / 6
TGT = (((np.arange(48, dtype=np.float32).reshape(2, 4, 6) * 5) % 11) - 5) / 5
TR = dict(rtol=1e-4, atol=1e-4)
_BUILT = {}


def transformer_full(torch, src, tgt):
    nn = torch.nn
    m = _fill(torch, nn.Transformer(d_model=6, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
                                    dim_feedforward=8, dropout=0.0, batch_first=True))
    tm = nn.Transformer.generate_square_subsequent_mask(4)
    kpm = torch.tensor([[False, False, False, True, True], [False] * 5])
    y = m(src, tgt, tgt_mask=tm, memory_key_padding_mask=kpm, tgt_is_causal=True)
    return y, tm, pg(torch, y, m)


def decoder_layer_norm_first(torch, tgt, mem):
    nn = torch.nn
    m = _fill(torch, nn.TransformerDecoderLayer(6, 2, dim_feedforward=7, dropout=0.0, batch_first=True,
                                                norm_first=True, activation=torch.nn.functional.silu, bias=False))
    y = m(tgt, mem, tgt_mask=nn.Transformer.generate_square_subsequent_mask(4), tgt_is_causal=True,
          memory_mask=torch.zeros(4, 5).masked_fill(torch.tensor([[0, 0, 1, 0, 0]] * 4).bool(), float("-inf")))
    return y, pg(torch, y, m)


def rnn_relu(torch, x):
    nn = torch.nn
    m = _fill(torch, nn.RNN(6, 4, num_layers=2, nonlinearity="relu", batch_first=True, bidirectional=True))
    h0 = torch.linspace(-0.5, 0.5, 16).reshape(4, 2, 4)
    y, h = m(x, h0)
    return y, h, pg(torch, y, m)




def lazy_modules(torch, x):
    nn = torch.nn
    lin = nn.LazyLinear(3)
    conv = nn.LazyConv2d(2, 3, padding=1, stride=2)
    y1 = lin(x.flatten(1))
    y2 = conv(x)
    _fill(torch, lin), _fill(torch, conv)
    y1, y2 = lin(x.flatten(1)), conv(x)
    return (y1, y2, type(lin).__name__, type(conv).__name__, tuple(lin.weight.shape), tuple(conv.weight.shape),
            conv.in_channels, lin.in_features)


def encoder_eval_padding_nograd(torch, src):
    nn = torch.nn
    layer = nn.TransformerEncoderLayer(6, 2, dim_feedforward=8, dropout=0.0, batch_first=True)
    m = _fill(torch, nn.TransformerEncoder(layer, 2, enable_nested_tensor=True)).eval()
    kpm = torch.tensor([[False, False, False, True, True], [False, False, False, False, True]])
    with torch.no_grad():
        y = m(src, src_key_padding_mask=kpm)
    y2 = m(src, src_key_padding_mask=kpm)
    return y, y2


def mha_kdim_weights(torch, q, kv):
    nn = torch.nn
    m = _fill(torch, nn.MultiheadAttention(6, 2, kdim=4, vdim=3, batch_first=True))
    k, v = kv[..., :4], kv[..., 2:5]
    out, w = m(q, k, v, average_attn_weights=False, key_padding_mask=torch.tensor([[0, 0, 1, 0, 0], [0, 0, 0, 0, 1]]).bool())
    out2, w2 = m(q[0], k[0], v[0])
    return out, w, out2, w2, pg(torch, out, m)



def lazy_more(torch, x):
    nn = torch.nn
    lin = nn.LazyLinear(3, bias=False)
    before = (lin.has_uninitialized_params(), type(lin.weight).__name__, lin.in_features)
    seq = nn.Sequential(nn.LazyConv2d(4, 2), nn.ReLU(), nn.Flatten(), nn.LazyLinear(2))
    y = seq(x)
    bn = nn.LazyBatchNorm2d()
    z = bn(x)
    ct = nn.LazyConvTranspose2d(2, 3, stride=2)
    w = ct(x)
    return (before, lin(x[0, 0]).shape, type(lin).__name__, y.shape, type(seq[0]).__name__, type(seq[3]).__name__, seq[3].in_features,
            z, bn.num_features, tuple(bn.running_mean.shape), type(bn).__name__, w.shape, ct.in_channels,
            sorted(k for k in seq.state_dict()), lin.has_uninitialized_params())


def lazy_state_dict_load(torch, x):
    nn = torch.nn
    src = _fill(torch, nn.Linear(4, 3))
    lin = nn.LazyLinear(3)
    lin.load_state_dict(src.state_dict())
    return lin(x[0, 0]), type(lin).__name__, lin.in_features, tuple(lin.weight.shape)


def lazy_uninit_raises(torch, x):
    lin = torch.nn.LazyLinear(3)
    return lin.weight.shape



def rnncell_bad_nonlinearity_raises(torch, x):
    return torch.nn.RNNCell(6, 3, nonlinearity="sigmoid")(x[0])


def transformer_custom_parts(torch, s, t):
    nn = torch.nn
    enc = _fill(torch, nn.TransformerEncoder(nn.TransformerEncoderLayer(6, 2, 4, 0.0, batch_first=True), 1, norm=nn.LayerNorm(6)))
    dec = _fill(torch, nn.TransformerDecoder(nn.TransformerDecoderLayer(6, 2, 4, 0.0, batch_first=True, norm_first=True), 2))
    m = _fill(torch, nn.Transformer(6, 2, custom_encoder=enc, custom_decoder=dec, batch_first=True))
    y = m(s, t, tgt_mask=nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64).float(), src_is_causal=False)
    return y, type(m.encoder).__name__, len(m.decoder.layers), m.d_model, m.nhead, m.batch_first


def transformer_batch_mismatch_raises(torch, s, t):
    m = torch.nn.Transformer(6, 2, 1, 1, 8, 0.0, batch_first=True)
    return m(s, t[:1])


def built(torch, key, make):
    """one module per library, made once (a compiled call reuses it: no deepcopy inside)."""
    k = (torch.__name__, key)
    if k not in _BUILT:
        _BUILT[k] = _fill(torch, make(torch.nn))
    return _BUILT[k]


def transformer_prebuilt_eval(torch, src, tgt):
    m = built(torch, "tr_eval", lambda nn: nn.Transformer(6, 3, 1, 1, 4, 0.1, activation="gelu")).eval()
    y = m(src.transpose(0, 1), tgt.transpose(0, 1), tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(4))
    return y, pg(torch, y, m)




CASES = [
    (transformer_full, [G(SEQ), G(TGT)], dict(TR, compiled_warns="running eagerly")),
    (decoder_layer_norm_first, [G(TGT), G(SEQ)], dict(rtol=1e-4, atol=1e-5)),
    (rnn_relu, [G(SEQ)], TOL),
    (lazy_modules, [G(IMG)], dict(TOL, compiled_warns="running eagerly")),
    (encoder_eval_padding_nograd, [SEQ], dict(TR, compiled_warns="running eagerly")),
    (mha_kdim_weights, [G(SEQ), G(SEQ[::-1].copy())], dict(rtol=1e-4, atol=1e-5)),
    (lazy_more, [G(IMG)], dict(TOL, compiled_warns="")),
    (lazy_state_dict_load, [G(IMG)], dict(TOL, compiled_warns="")),
    (lazy_uninit_raises, [G(IMG)], TOL),
    (rnncell_bad_nonlinearity_raises, [G(X)], TOL),
    (transformer_custom_parts, [G(SEQ), G(TGT)], dict(rtol=1e-4, atol=2e-3, compiled_warns="")),
    (transformer_batch_mismatch_raises, [G(SEQ), G(TGT)], dict(TOL, compiled_warns="running eagerly")),
    (transformer_prebuilt_eval, [G(SEQ), G(TGT)], TR),
]


@pytest.mark.slow       # (a compile a case)
@pytest.mark.parametrize("fn,specs,kw", CASES, ids=[c[0].__name__ for c in CASES])
def test_sequence_lazy(fn, specs, kw):
    check(fn, *specs, **kw)



# ---- the regressions of this session's fixes (fast: not slow)

def test_lazy_linear_loaded_in_features():
    """LazyLinear given its parameters by load_state_dict: the first call sets in_features
    from the loaded weight (torch's initialize_parameters' in_features == 0 branch), and an
    input of another width raises torch's AssertionError in the pre-hook."""
    import torch
    import llgrad
    got = []
    for lib in (torch, llgrad):
        nn = lib.nn
        lin = nn.LazyLinear(3)
        lin.load_state_dict(_fill(lib, nn.Linear(4, 3)).state_dict())
        before = (type(lin).__name__, lin.in_features)
        y = lin(lib.ones(2, 4))
        bad = nn.LazyLinear(3, bias=False)
        bad.load_state_dict(nn.Linear(4, 3, bias=False).state_dict())
        with pytest.raises(AssertionError, match="in_features inferred from input: 5"):
            bad(lib.ones(2, 5))
        got.append((before, type(lin).__name__, lin.in_features, lin.extra_repr(), y.detach().numpy()))
    assert got[0][:4] == got[1][:4] == (("LazyLinear", 0), "Linear", 4, "in_features=4, out_features=3, bias=True")
    np.testing.assert_allclose(got[1][4], got[0][4], rtol=1e-6)


def test_compiled_catch_warnings_record_inside():
    """A warning the compiled function's own catch_warnings(record=True) block takes goes to
    that block's list, as eager's does (it was recorded for replay and given outside the
    block: len(w) 0 in every compiled call) and is not given again outside."""
    import warnings
    import llgrad

    def f(lp, t):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            loss = llgrad.nn.KLDivLoss()(lp, t)
        return loss * 2, len(w)

    lp = llgrad.tensor(np.log(np.full((2, 3), 1 / 3, np.float32)))
    t = llgrad.tensor(np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]], np.float32))
    want = f(lp, t)
    cf = llgrad.compile(f)
    for _ in range(3):
        with warnings.catch_warnings(record=True) as outer:
            warnings.simplefilter("always")
            got = cf(lp, t)
        assert got[1] == want[1] == 1
        assert not [m for m in outer if "batchmean" in str(m.message)]
        np.testing.assert_allclose(got[0].numpy(), want[0].numpy())
