"""Sweep 17b (H), part 2: a BERT-style encoder written by hand around nn.TransformerEncoder:
token, position and token-type embeddings, padding masks as bool src_key_padding_mask and as an
additive float mask, GELU, a decoder tied to the token embedding, masked-LM pre-training with
ignore_index, then a [CLS]-pooler classifier fine-tuned with two AdamW parameter groups,
label smoothing and clip_grad_norm_. Run with PyTorch, with llgrad eagerly and compiled
(tutorial_harness.py)."""
import math  # noqa: F401

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def bert(torch, env):
    nn = torch.nn
    F = nn.functional
    V, D, H, T, B = 20, 16, 2, 7, 4
    PAD, MASK, CLS = 0, 1, 2

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, D, padding_idx=PAD)
            self.pos = nn.Embedding(T, D)
            self.typ = nn.Embedding(2, D)
            self.ln = nn.LayerNorm(D, eps=1e-12)
            self.drop = nn.Dropout(0.0)
            layer = nn.TransformerEncoderLayer(D, H, 32, dropout=0.0, activation="gelu",
                                               batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.mlm_dense = nn.Linear(D, D)
            self.mlm_ln = nn.LayerNorm(D)
            self.decoder = nn.Linear(D, V, bias=False)
            self.decoder.weight = self.tok.weight
            self.mlm_bias = nn.Parameter(torch.zeros(V))
            self.pool = nn.Linear(D, D)
            self.cls = nn.Linear(D, 3)

        def encode(self, ids, types, pad_mask):
            pos = torch.arange(ids.size(1)).unsqueeze(0).expand_as(ids)
            x = self.tok(ids) + self.pos(pos) + self.typ(types)
            x = self.drop(self.ln(x))
            return self.enc(x, src_key_padding_mask=pad_mask)

        def mlm(self, h):
            h = self.mlm_ln(F.gelu(self.mlm_dense(h), approximate="tanh"))
            return self.decoder(h) + self.mlm_bias

        def classify(self, h):
            return self.cls(torch.tanh(self.pool(h[:, 0])))

    model = env.init(Bert())
    env.rec("tied", model.decoder.weight is model.tok.weight)
    env.rec("nparams", sum(p.numel() for p in model.parameters()))
    ids = env.randint(3, V, (B, T))
    ids[:, 0] = CLS
    lengths = [7, 5, 4, 6]
    for b, L in enumerate(lengths):
        ids[b, L:] = PAD
    types = torch.zeros_like(ids)
    types[:, 3:] = 1
    pad_mask = ids == PAD
    env.rec("pad_mask", pad_mask)
    sel = env.rand(B, T) < 0.3
    sel &= ~pad_mask
    sel[:, 0] = False
    sel[0, 2] = True
    labels = torch.where(sel, ids, torch.full_like(ids, -100))
    inp = ids.masked_fill(sel, MASK)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)

    def mlm_step(inp, types, pad_mask, labels):
        opt.zero_grad()
        h = model.encode(inp, types, pad_mask)
        logits = model.mlm(h)
        loss = F.cross_entropy(logits.view(-1, V), labels.view(-1), ignore_index=-100)
        loss.backward()
        opt.step()
        return loss
    step = env.step(mlm_step)
    model.train()
    for i in range(4):
        loss = step(inp, types, pad_mask, labels)
        env.rec(f"mlm loss {i}", loss.item())
    env.rec("tok grad", model.tok.weight.grad)
    env.rec("tok weight", model.tok.weight)
    # float additive mask instead of a bool one: same function
    add = torch.zeros(B, T).masked_fill(pad_mask, float("-inf"))
    model.eval()
    with torch.no_grad():
        hb = model.encode(inp, types, pad_mask)
        hf = model.encode(inp, types, add)
        env.rec("h bool", hb)
        env.rec("h float", hf)
        env.rec("h same", torch.allclose(hb, hf, atol=1e-6))
        pred = model.mlm(hb).argmax(-1)
        env.rec("pred", pred)
        env.rec("acc", (pred[sel] == ids[sel]).float().mean().item())
    # fine-tune the CLS head with a smaller lr on the encoder
    y = torch.tensor([0, 2, 1, 2])
    enc_params = [p for n, p in model.named_parameters() if not n.startswith(("cls", "pool"))]
    head = list(model.pool.parameters()) + list(model.cls.parameters())
    opt2 = torch.optim.AdamW([{"params": enc_params, "lr": 1e-3},
                              {"params": head, "lr": 1e-2}], weight_decay=0.0)

    def ft_step(ids, types, pad_mask, y):
        opt2.zero_grad(set_to_none=True)
        logits = model.classify(model.encode(ids, types, pad_mask))
        loss = F.cross_entropy(logits, y, label_smoothing=0.1)
        loss.backward()
        gn = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt2.step()
        return loss, gn, logits
    ft = env.step(ft_step)
    model.train()
    for i in range(4):
        loss, gn, logits = ft(ids, types, pad_mask, y)
        env.rec(f"ft loss {i}", loss)
        env.rec(f"ft gn {i}", gn)
        env.rec(f"ft acc {i}", (logits.argmax(1) == y).sum().item())
    env.rec("cls w", model.cls.weight)
    env.rec("enc w", model.enc.layers[1].linear2.weight)
    env.rec("state keys", list(model.state_dict().keys()))


@pytest.mark.slow
def test_bert_masked_lm_then_cls_finetune():
    run_tutorial(bert)
