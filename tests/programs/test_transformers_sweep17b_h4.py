"""Sweep 17b (H), part 4: a T5-style encoder-decoder: relative position buckets (log-spaced,
bidirectional and causal), an RMS norm without bias and LayerNorm(bias=False), teacher forcing
with a causal mask plus an extended padding mask of finfo.min, cross attention, greedy
decoding. Run with PyTorch, with llgrad eagerly and compiled (tutorial_harness.py)."""
import math  # noqa: F401

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def t5(torch, env):
    nn = torch.nn
    F = nn.functional
    V, D, H, NB, MAXD = 13, 16, 2, 8, 20

    def bucket(rel, bidirectional, nb=NB, maxd=MAXD):
        ret = 0
        n = -rel
        if bidirectional:
            nb //= 2
            ret += (n < 0).to(torch.long) * nb
            n = torch.abs(n)
        else:
            n = torch.max(n, torch.zeros_like(n))
        max_exact = nb // 2
        is_small = n < max_exact
        val_large = max_exact + (
            torch.log(n.float() / max_exact) / math.log(maxd / max_exact) * (nb - max_exact)
        ).to(torch.long)
        val_large = torch.min(val_large, torch.full_like(val_large, nb - 1))
        ret += torch.where(is_small, n, val_large)
        return ret

    class RMS(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(D))

        def forward(self, x):
            var = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
            return self.weight * (x * torch.rsqrt(var + 1e-6))

    class Attn(nn.Module):
        def __init__(self, rel, bidir):
            super().__init__()
            self.q = nn.Linear(D, D, bias=False)
            self.k = nn.Linear(D, D, bias=False)
            self.v = nn.Linear(D, D, bias=False)
            self.o = nn.Linear(D, D, bias=False)
            self.bidir = bidir
            self.rel = nn.Embedding(NB, H) if rel else None

        def bias(self, Tq, Tk):
            ctx = torch.arange(Tq, dtype=torch.long)[:, None]
            mem = torch.arange(Tk, dtype=torch.long)[None, :]
            b = bucket(mem - ctx, self.bidir)
            return self.rel(b).permute([2, 0, 1]).unsqueeze(0)

        def forward(self, x, kv, mask, pos_bias):
            Bn, Tq, _ = x.shape
            Tk = kv.shape[1]
            sh = lambda t, L: t.view(Bn, L, H, D // H).transpose(1, 2)
            q, k, v = sh(self.q(x), Tq), sh(self.k(kv), Tk), sh(self.v(kv), Tk)
            scores = torch.matmul(q, k.transpose(3, 2))
            if pos_bias is None:
                pos_bias = self.bias(Tq, Tk) if self.rel is not None else torch.zeros(1, H, Tq, Tk)
            scores = scores + pos_bias + mask
            w = F.softmax(scores.float(), dim=-1).type_as(scores)
            out = torch.matmul(w, v).transpose(1, 2).contiguous().view(Bn, Tq, D)
            return self.o(out), pos_bias

    class T5(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.enc_attn = Attn(True, True)
            self.enc_ln = RMS(); self.enc_ln2 = RMS(); self.enc_ff = nn.Sequential(
                nn.Linear(D, 32, bias=False), nn.ReLU(), nn.Linear(32, D, bias=False))
            self.enc_final = nn.LayerNorm(D, bias=False)
            self.dec_self = Attn(True, False)
            self.dec_cross = Attn(False, True)
            self.dec_ln = RMS(); self.dec_ln2 = RMS(); self.dec_ln3 = RMS()
            self.dec_ff = nn.Sequential(nn.Linear(D, 32, bias=False), nn.GELU(),
                                        nn.Linear(32, D, bias=False))
            self.dec_final = RMS()
            self.head = nn.Linear(D, V, bias=False)

        def forward(self, src, tgt_in, src_pad):
            Bn, S = src.shape
            T = tgt_in.shape[1]
            ext = (1.0 - (~src_pad)[:, None, None, :].float()) * torch.finfo(torch.float32).min
            x = self.emb(src)
            a, _ = self.enc_attn(self.enc_ln(x), self.enc_ln(x), ext, None)
            x = x + a
            x = x + self.enc_ff(self.enc_ln2(x))
            mem = self.enc_final(x)
            causal = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)[None, None]
            y = self.emb(tgt_in)
            a, _ = self.dec_self(self.dec_ln(y), self.dec_ln(y), causal, None)
            y = y + a
            a, _ = self.dec_cross(self.dec_ln2(y), mem, ext, None)
            y = y + a
            y = y + self.dec_ff(self.dec_ln3(y))
            y = self.dec_final(y) * (D ** -0.5)
            return self.head(y)

    rel = torch.arange(-12, 13)
    env.rec("bucket bi", bucket(rel, True))
    env.rec("bucket uni", bucket(rel, False))
    model = env.init(T5())
    src = env.randint(3, V, (3, 6))
    src_pad = torch.ones(3, 6, dtype=torch.bool)
    src_pad[1, 4:] = False
    src_pad[2, 5:] = False
    src = src.masked_fill(~src_pad, 0)
    tgt = env.randint(3, V, (3, 5))
    tgt[2, 3:] = 0
    dec_in = torch.cat([torch.full((3, 1), 1), tgt[:, :-1]], 1)
    labels = tgt.masked_fill(tgt == 0, -100)
    opt = torch.optim.Adafactor(model.parameters(), lr=1e-2)     # (T5's optimiser)

    def step(src, dec_in, src_pad, labels):
        opt.zero_grad()
        logits = model(src, dec_in, src_pad)
        loss = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1))
        loss.backward()
        opt.step()
        return loss
    step = env.step(step)
    for i in range(5):
        env.rec(f"loss{i}", step(src, dec_in, src_pad, labels).item())
    env.rec("rel emb", model.dec_self.rel.weight)
    env.rec("final ln w", model.enc_final.weight)
    env.rec("ln bias", model.enc_final.bias is None)
    model.eval()
    with torch.no_grad():
        out = torch.ones(3, 1, dtype=torch.long)
        for _ in range(5):
            nxt = model(src, out, src_pad)[:, -1].argmax(-1, keepdim=True)
            out = torch.cat([out, nxt], 1)
    env.rec("decoded", out)


@pytest.mark.slow
def test_t5_relative_buckets_teacher_forcing():
    run_tutorial(t5)
