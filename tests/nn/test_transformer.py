"""nn.TransformerEncoderLayer / DecoderLayer / Encoder / Decoder / Transformer against PyTorch:
outputs and every gradient in train (dropout 0) and eval, norm_first, activations, batch_first
and masks; parameter names, reprs and the construction warning; the nested-tensor zeros of an
encoder in inference; error messages; a compiled training step equal to eager."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from seq_oracle import (close, compiled_matches_eager, grads_close, ll, load_torch, same_error,
                        torch_or_skip)

E, H, L, S, B = 8, 2, 4, 5, 3


def _masks(torch, kind):
    pad = causal = None
    if kind in ("pad", "both"):
        pad = torch.zeros(B, L, dtype=torch.bool)
        pad[0, -1] = True
        pad[2, -2:] = True
    if kind in ("causal", "both"):
        causal = torch.nn.Transformer.generate_square_subsequent_mask(L)
        if pad is not None:          # the same type for both (PyTorch deprecates mixing)
            pad = torch.zeros(B, L).masked_fill(pad, float("-inf"))
    return pad, causal


def _seq(torch, batch_first, n):
    return torch.randn(*((B, n, E) if batch_first else (n, B, E)), requires_grad=True)


@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu"),
                                                    (True, "callable")])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("train", [True, False])
def test_layers_match_torch(norm_first, activation, batch_first, train):
    torch = torch_or_skip()
    act = activation if activation != "callable" else (lambda x: x.tanh())
    for masks in (None, "pad", "causal", "both"):
        torch.manual_seed(0)
        kw = dict(dim_feedforward=16, dropout=0.0, activation=act, batch_first=batch_first,
                  norm_first=norm_first)
        te, td = torch.nn.TransformerEncoderLayer(E, H, **kw), \
            torch.nn.TransformerDecoderLayer(E, H, **kw)
        le = load_torch(nn.TransformerEncoderLayer(E, H, **kw), te)
        ld = load_torch(nn.TransformerDecoderLayer(E, H, **kw), td)
        if not train:
            for m in (te, td, le, ld):
                m.eval()
        x, mem = _seq(torch, batch_first, L), _seq(torch, batch_first, S)
        lx, lmem = ll(x, True), ll(mem, True)
        pad, causal = _masks(torch, masks)
        lpad, lcausal = (None if t is None else ll(t) for t in (pad, causal))
        to = te(x, src_mask=causal, src_key_padding_mask=pad)
        lo = le(lx, src_mask=lcausal, src_key_padding_mask=lpad)
        td_out = td(x, mem, tgt_mask=causal, tgt_key_padding_mask=pad)
        ld_out = ld(lx, lmem, tgt_mask=lcausal, tgt_key_padding_mask=lpad)
        close(lo, to, f"encoder layer, masks {masks}")
        close(ld_out, td_out, f"decoder layer, masks {masks}")
        (to.sum() + (td_out * td_out).sum()).backward()
        (lo.sum() + (ld_out * ld_out).sum()).backward()
        close(lx.grad, x.grad, "grad of the input", rtol=1e-4, atol=3e-5)
        close(lmem.grad, mem.grad, "grad of memory", rtol=1e-4, atol=3e-5)
        grads_close(le, te, atol=3e-5)
        grads_close(ld, td, atol=3e-5)


@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_matches_torch(batch_first):
    torch = torch_or_skip()
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tt = torch.nn.Transformer(E, H, 2, 2, 16, dropout=0.0, batch_first=batch_first)
        lt = load_torch(nn.Transformer(E, H, 2, 2, 16, dropout=0.0, batch_first=batch_first), tt)
    assert repr(lt) == repr(tt)
    assert list(lt.state_dict()) == list(tt.state_dict())
    src, tgt = _seq(torch, batch_first, S), _seq(torch, batch_first, L)
    ls, lg = ll(src, True), ll(tgt, True)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(L)
    lmask = nn.Transformer.generate_square_subsequent_mask(L)
    close(lmask, mask, "square subsequent mask")
    pad = torch.zeros(B, S, dtype=torch.bool)
    pad[1, -2:] = True
    out = tt(src, tgt, tgt_mask=mask, src_key_padding_mask=pad, memory_key_padding_mask=pad)
    lout = lt(ls, lg, tgt_mask=lmask, src_key_padding_mask=ll(pad),
              memory_key_padding_mask=ll(pad))
    close(lout, out, "output")
    out.sum().backward()
    lout.sum().backward()
    close(ls.grad, src.grad, "grad of src")
    close(lg.grad, tgt.grad, "grad of tgt")
    grads_close(lt, tt)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
@pytest.mark.parametrize("batch_first", [False, True])
def test_encoder_inference_with_padding_matches_torch(batch_first):
    """PyTorch runs an eval encoder without autograd on nested tensors when it can: padded
    positions come out as zeros (then the final norm); left-aligned padding only."""
    torch = torch_or_skip()
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        layer = torch.nn.TransformerEncoderLayer(E, H, 16, batch_first=batch_first)
        te = torch.nn.TransformerEncoder(layer, 2, norm=torch.nn.LayerNorm(E)).eval()
        le = load_torch(nn.TransformerEncoder(
            nn.TransformerEncoderLayer(E, H, 16, batch_first=batch_first), 2,
            norm=nn.LayerNorm(E)), te).eval()
    x = torch.randn(*((B, S, E) if batch_first else (S, B, E)))
    pad = torch.zeros(B, S, dtype=torch.bool)
    pad[0, -2:] = True
    other = pad.clone()
    other[1, 0] = True                      # not left-aligned: the ordinary path
    with torch.no_grad(), llgrad.no_grad():
        for p in (pad, other, None):
            close(le(ll(x), src_key_padding_mask=None if p is None else ll(p)),
                  te(x, src_key_padding_mask=p), f"padding {p}")


def test_construction_warning_and_reprs():
    torch = torch_or_skip()
    for kw in ({}, {"batch_first": True, "norm_first": True}, {"batch_first": True}):
        with warnings.catch_warnings(record=True) as tw:
            warnings.simplefilter("always")
            tm = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, H, 16, **kw), 2)
        with warnings.catch_warnings(record=True) as lw:
            warnings.simplefilter("always")
            lm = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, 16, **kw), 2)
        assert [str(w.message) for w in lw] == [str(w.message) for w in tw]
        assert repr(lm) == repr(tm)
        assert lm.use_nested_tensor == tm.use_nested_tensor
    dec = (nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, 16), 2),
           torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(E, H, 16), 2))
    assert repr(dec[0]) == repr(dec[1])
    assert list(dec[0].state_dict()) == list(dec[1].state_dict())


def test_errors_match_torch():
    torch = torch_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tt = torch.nn.Transformer(E, H, 1, 1, 16)
        lt = load_torch(nn.Transformer(E, H, 1, 1, 16), tt)
    for make in (lambda T: (T.randn(S, B, E), T.randn(L, B + 1, E)),
                 lambda T: (T.randn(S, B, E), T.randn(L, B, E + 1))):
        same_error(lambda: tt(*make(torch)), lambda: lt(*make(llgrad)))
    same_error(lambda: torch.nn.TransformerEncoderLayer(E, H, activation="tanh"),
               lambda: nn.TransformerEncoderLayer(E, H, activation="tanh"))
    layers = {torch: torch.nn.TransformerEncoderLayer(E, H, 16),
              llgrad: nn.TransformerEncoderLayer(E, H, 16)}

    def int_padding(T):
        return layers[T](T.randn(S, B, E), src_key_padding_mask=T.zeros(B, S, dtype=T.int64))
    same_error(lambda: int_padding(torch), lambda: int_padding(llgrad))


def test_initialisation():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = nn.Transformer(16, 2, 1, 1, 32)
    for name, p in t.named_parameters():
        v = p.detach().numpy()
        if p.dim() > 1:          # xavier_uniform_
            bound = np.sqrt(6 / (v.shape[0] + v.shape[1]))
            assert np.abs(v).max() <= bound and v.std() > bound / 3, name


def test_gradcheck_encoder_layer():
    llgrad.manual_seed(0)
    layer = nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, activation="gelu",
                                       dtype=llgrad.float64)
    x = llgrad.randn(3, 1, 4, dtype=llgrad.float64, requires_grad=True)
    mask = nn.Transformer.generate_square_subsequent_mask(3, dtype=llgrad.float64)
    assert llgrad.autograd.gradcheck(lambda x, *ps: layer(x, src_mask=mask),
                                     (x,) + tuple(layer.parameters()))


def test_compiled_training_steps_match_eager():
    llgrad.manual_seed(0)
    x = llgrad.randn(3, 5, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled_matches_eager(lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(
            8, 2, 16, dropout=0.0, activation="gelu", batch_first=True), 2), (x,))
        compiled_matches_eager(lambda: nn.TransformerDecoderLayer(
            8, 2, 16, dropout=0.0, batch_first=True, norm_first=True), (x, x))
        compiled_matches_eager(lambda: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0,
                                                      batch_first=True), (x, x))


def test_compiled_step_with_dropout_draws_what_eager_draws():
    llgrad.manual_seed(0)
    import copy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m1 = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.2, batch_first=True)
    m2 = copy.deepcopy(m1)
    x = llgrad.randn(3, 5, 8)
    step = llgrad.compile(lambda m, x: m(x).square().mean())
    for _ in range(3):
        llgrad.manual_seed(7)
        a = m1(x).square().mean().item()
        llgrad.manual_seed(7)
        b = step(m2, x).item()
        assert abs(a - b) < 1e-6, (a, b)
