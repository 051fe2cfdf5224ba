"""Batch 26 (s75, u3), second file: differential attention (two softmax maps, a
reparametrised lambda, head RMSNorm, a soft-capped logit and a z-loss) and KV-cache
generation with a compiled decode step: a static cache written in place by index_copy_ at a
position (top-k sampling with temperature, checked against the full pass), the same given a
strided view of the sequence, and a cache grown by torch.cat (both served by affine size
templates, s75)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]     # (1-4 s a program: the slow set)


def differential_attention(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, D, T, H, cap = 16, 16, 8, 2, 15.0
    dh = D // H // 2

    class DiffAttn(nn.Module):
        def __init__(self, depth):
            super().__init__()
            self.lambda_init = 0.8 - 0.6 * math.exp(-0.3 * depth)
            self.q, self.k = nn.Linear(D, D, bias=False), nn.Linear(D, D, bias=False)
            self.v, self.o = nn.Linear(D, D, bias=False), nn.Linear(D, D, bias=False)
            self.lq1, self.lk1, self.lq2, self.lk2 = (nn.Parameter(torch.zeros(dh))
                                                      for _ in range(4))
            self.subln = nn.RMSNorm(2 * dh, eps=1e-5, elementwise_affine=False)

        def forward(self, x):
            b, t, _ = x.shape
            q = self.q(x).view(b, t, H, 2, dh).permute(0, 2, 3, 1, 4)     # b, H, 2, t, dh
            k = self.k(x).view(b, t, H, 2, dh).permute(0, 2, 3, 1, 4)
            v = self.v(x).view(b, t, H, 2 * dh).transpose(1, 2)            # b, H, t, 2dh
            s = q @ k.transpose(-1, -2) * dh ** -0.5
            causal = torch.ones(t, t, dtype=torch.bool).triu(1)
            a = s.masked_fill(causal, float("-inf")).softmax(dim=-1)
            lam = (torch.exp(torch.sum(self.lq1 * self.lk1)) - torch.exp(
                torch.sum(self.lq2 * self.lk2)) + self.lambda_init)
            attn = a[:, :, 0] - lam * a[:, :, 1]
            out = self.subln(attn @ v) * (1 - self.lambda_init)
            return self.o(out.transpose(1, 2).reshape(b, t, D)), lam

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.attn = nn.ModuleList([DiffAttn(1), DiffAttn(2)])
            self.norms = nn.ModuleList([nn.RMSNorm(D), nn.RMSNorm(D)])
            self.head = nn.Linear(D, V)

        def forward(self, ids):
            h, lams = self.emb(ids), []
            for n, at in zip(self.norms, self.attn):
                o, lam = at(n(h))
                h, lams = h + o, lams + [lam]
            logits = self.head(h)
            return cap * torch.tanh(logits / cap), torch.stack(lams)

    model = env.init(Model())
    with torch.no_grad():
        for at in model.attn:
            for p in (at.lq1, at.lk1, at.lq2, at.lk2):
                p.copy_(env.randn(dh, scale=0.1))
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3, betas=(0.9, 0.95))

    def train_step(ids):
        logits, lams = model(ids[:, :-1])
        ce = F.cross_entropy(logits.reshape(-1, V), ids[:, 1:].reshape(-1), label_smoothing=0.1)
        z = torch.logsumexp(logits, dim=-1).pow(2).mean()
        loss = ce + 1e-3 * z
        opt.zero_grad()
        loss.backward()
        opt.step()
        return ce.detach(), z.detach(), lams.detach()

    step = env.step(train_step)
    ids = env.randint(0, V, (3, T + 1))
    for it in range(4):
        ce, z, lams = step(ids)
        env.rec(f"log {it}", f"ce {ce.item():.4f} z {z.item():.3f} "
                             f"lambda {[round(x, 4) for x in lams.tolist()]}")
    env.rec("params", dict(model.named_parameters()))


def _kv_decoder(torch, env, V, D, H):
    nn, F = torch.nn, torch.nn.functional

    class Decoder(nn.Module):
        """One attention layer with tied embeddings; `step` decodes one token against a
        cache (k, v: b, H, t, hd)."""
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(16, D)
            self.qkv, self.proj = nn.Linear(D, 3 * D, bias=False), nn.Linear(D, D, bias=False)
            self.ln = nn.LayerNorm(D)

        def heads(self, x):
            b, t, _ = x.shape
            return [z.view(b, t, H, D // H).transpose(1, 2) for z in self.qkv(x).chunk(3, -1)]

        def logits(self, x, att):
            b, _, t, _ = att.shape
            h = x + self.proj(att.transpose(1, 2).reshape(b, t, D))
            return self.ln(h) @ self.tok.weight.T

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            q, k, v = self.heads(x)
            return self.logits(x, F.scaled_dot_product_attention(q, k, v, is_causal=True))

    return env.init(Decoder())


def _top_k_sample(torch, logits, k, temperature):
    logits = logits / temperature
    v, _ = torch.topk(logits, k)
    logits = logits.masked_fill(logits < v[:, [-1]], float("-inf"))
    return torch.multinomial(torch.softmax(logits, dim=-1), 1)


def static_kv_cache(torch, env, sliced=False):
    """Generation with a preallocated KV cache written in place at a position (the static
    cache compiled decoding uses), checked against the full forward pass. sliced: the step
    is given the last column of the growing sequence, seq[:, -1:] (a view whose stride
    grows with the sequence), instead of the sampled token."""
    V, D, H, B, L = 11, 16, 2, 2, 10
    model = _kv_decoder(torch, env, V, D, H)
    model.eval()
    k_cache, v_cache = torch.zeros(B, H, L, D // H), torch.zeros(B, H, L, D // H)

    @torch.no_grad()
    def decode(tok, pos):
        x = model.tok(tok) + model.pos(pos).unsqueeze(1)          # b, 1, D
        q, k, v = model.heads(x)
        k_cache.index_copy_(2, pos, k)
        v_cache.index_copy_(2, pos, v)
        mask = (torch.arange(L) <= pos).view(1, L)                  # (the filled slots)
        att = torch.nn.functional.scaled_dot_product_attention(q, k_cache, v_cache,
                                                               attn_mask=mask)
        return model.logits(x, att)[:, -1]

    step = env.step(decode)
    seq = tok = env.randint(0, V, (B, 1))
    torch.manual_seed(7)
    for t in range(L - 1):
        logits = step(seq[:, -1:] if sliced else tok, torch.tensor([t]))
        env.rec(f"greedy {t}", logits.argmax(dim=-1))
        tok = _top_k_sample(torch, logits, 4, 0.9)
        seq = torch.cat([seq, tok], dim=1)
    env.rec("sample", seq, cross=False)
    with torch.no_grad():
        env.rec("cache = full pass", (model(seq[:, :-1])[:, -1] - logits).abs().max() < 1e-5)
    env.rec("k cache", k_cache, cross=False)


def static_kv_cache_sliced(torch, env):
    static_kv_cache(torch, env, sliced=True)


def growing_kv_cache(torch, env):
    """The KV cache grown by torch.cat each token after a prefill of the prompt: its length
    is s0 + 1 of the cache's s0, which torch.compile's automatic dynamic serves with one
    graph after the second size. llgrad: the first call's cache (a view made under no_grad,
    its `_creation` guarded) traces on its own; the next two lengths fit s0 + 1, an affine
    template, which the third length's trace confirms (size_confirm.py): 4 traces, the
    recompile limit here (each length traced before, to the limit and then eagerly)."""
    nn, F = torch.nn, torch.nn.functional
    V, D, H, B = 11, 16, 2, 2
    model = _kv_decoder(torch, env, V, D, H)
    model.eval()

    @torch.no_grad()
    def decode(tok, pos, k_cache, v_cache):
        x = model.tok(tok) + model.pos(pos).unsqueeze(1)
        q, k, v = model.heads(x)
        k_cache, v_cache = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
        att = F.scaled_dot_product_attention(q, k_cache, v_cache)
        return model.logits(x, att)[:, -1], k_cache, v_cache

    step = env.step(decode, recompile_limit=4)
    seq = env.randint(0, V, (B, 2))
    with torch.no_grad():                               # (prefill: the prompt's cache)
        x = model.tok(seq) + model.pos(torch.arange(2))
        _, kc, vc = model.heads(x)
    for t in range(2, 8):
        tok = seq[:, -1:].contiguous()
        logits, kc, vc = step(tok, torch.tensor([t]), kc, vc)
        seq = torch.cat([seq, logits.argmax(dim=-1, keepdim=True)], dim=1)
        env.rec(f"logits {t}", logits)
    env.rec("greedy", seq)

PROGRAMS = {f.__name__: f for f in (differential_attention, static_kv_cache,
                                     static_kv_cache_sliced, growing_kv_cache)}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
