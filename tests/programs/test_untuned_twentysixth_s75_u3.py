"""Batch 26 (s75, u3): transformer-era tutorial programs with PyTorch, llgrad eagerly and
llgrad compiling the step (tutorial_harness.py): a Bradley-Terry reward model (a causal
TransformerEncoder over padded pairs, last-token pooling by gather, -logsigmoid of the
margin), speculative decoding (a target LM and a draft LM distilled from it by KL, then
draft-propose / target-verify sampling with the residual distribution), mixture-of-depths
(a router's top-k tokens through a block, scatter_add back, a BCE router loss), Medusa heads
on a frozen base (requires_grad_(False), heads decoding through the tied embedding), an nGPT
normalised transformer (hypersphere residual steps, weights renormalised after each step).
More in test_untuned_twentysixth_s75_u3_2.py."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]     # (1-4 s a program: the slow set)


def reward_model(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, D, L, B = 20, 16, 7, 4

    class RewardModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D, padding_idx=0)
            self.pos = nn.Parameter(torch.zeros(L, D))
            # (no biases: the key bias and a reward offset leave the pairwise loss as it is:
            # their gradients are rounding, which Adam would turn into steps of lr)
            layer = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, batch_first=True,
                                               norm_first=True, bias=False)
            self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
            self.head = nn.Linear(D, 1, bias=False)

        def forward(self, ids, lengths):
            t = ids.shape[1]
            pad = torch.arange(t) >= lengths[:, None]
            causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
            h = self.enc(self.emb(ids) + self.pos[:t], mask=causal, src_key_padding_mask=pad)
            last = h.gather(1, (lengths - 1).view(-1, 1, 1).expand(-1, 1, h.shape[-1]))
            return self.head(last.squeeze(1)).squeeze(-1)

    model = env.init(RewardModel())
    with torch.no_grad():
        model.pos.copy_(env.randn(L, D, scale=0.1))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)

    def batch():
        lengths = env.randint(2, L + 1, (2 * B,))
        ids = env.randint(1, V, (2 * B, L))
        return ids.masked_fill(torch.arange(L) >= lengths[:, None], 0), lengths

    def train_step(ids, lengths):
        model.train()
        rc, rr = model(ids, lengths).chunk(2)
        loss = -F.logsigmoid(rc - rr).mean()
        opt.zero_grad()
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
        return loss.detach(), (rc > rr).float().mean(), norm

    step = env.step(train_step)
    for it in range(3):
        loss, acc, norm = step(*batch())
        env.rec(f"log {it}", f"step {it} loss {loss.item():.4f} acc {acc.item():.2f} "
                             f"grad_norm {norm.item():.4f}")
    model.eval()
    with torch.no_grad():
        ids, lengths = batch()
        env.rec("eval rewards", model(ids, lengths))
    env.rec("emb pad row", model.emb.weight[0])
    env.rec("params", dict(model.named_parameters()))


def _tiny_lm(torch, V, d, layers, max_len=32):
    nn = torch.nn

    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, d)
            self.pos = nn.Embedding(max_len, d)
            self.blocks = nn.ModuleList(
                nn.TransformerEncoderLayer(d, 2, 2 * d, dropout=0.0, batch_first=True,
                                           activation="gelu", norm_first=True, bias=False)
                for _ in range(layers))
            self.ln = nn.LayerNorm(d)
            self.out = nn.Linear(d, V, bias=False)
            self.out.weight = self.tok.weight          # (tied input/output embeddings)

        def hidden(self, idx):
            t = idx.shape[-1]
            mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
            h = self.tok(idx) + self.pos(torch.arange(t))
            for blk in self.blocks:
                h = blk(h, src_mask=mask, is_causal=True)
            return self.ln(h)

        def forward(self, idx):
            return self.out(self.hidden(idx))

    return TinyLM()


def speculative_decoding(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, T, gamma, temp = 12, 10, 3, 0.8
    target, draft = env.init(_tiny_lm(torch, V, 16, 2)), env.init(_tiny_lm(torch, V, 8, 1))
    data = env.randint(0, V, (4, T))
    opt_t = torch.optim.Adam(target.parameters(), lr=1e-2)
    opt_d = torch.optim.Adam(draft.parameters(), lr=2e-2)

    def lm_step(x):
        logits = target(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), x[:, 1:].reshape(-1))
        opt_t.zero_grad()
        loss.backward()
        opt_t.step()
        return loss.detach()

    def distill_step(x):
        with torch.no_grad():
            p = F.softmax(target(x) / temp, dim=-1)
        logq = F.log_softmax(draft(x) / temp, dim=-1)
        loss = F.kl_div(logq.reshape(-1, V), p.reshape(-1, V), reduction="batchmean")
        opt_d.zero_grad()
        loss.backward()
        opt_d.step()
        return loss.detach()

    lm, dist = env.step(lm_step), env.step(distill_step)
    for it in range(3):
        env.rec(f"lm {it}", lm(data))
    for it in range(3):
        env.rec(f"kl {it}", dist(data))

    @torch.no_grad()
    def speculative(prefix, n_new):
        seq, accepted, proposed = prefix.clone(), 0, 0
        while seq.shape[1] < prefix.shape[1] + n_new:
            n, cur, qs = seq.shape[1], seq, []
            for _ in range(gamma):
                q = F.softmax(draft(cur)[:, -1] / temp, dim=-1)
                qs.append(q[0])
                cur = torch.cat([cur, torch.multinomial(q, 1)], dim=1)
            p_all = F.softmax(target(cur)[0, n - 1:] / temp, dim=-1)
            for i in range(gamma):
                tok, p, q = cur[0, n + i], p_all[i], qs[i]
                proposed += 1
                if torch.rand(()) < torch.clamp(p[tok] / q[tok], max=1.0):
                    accepted += 1
                    continue
                resid = torch.clamp(p - q, min=0.0)
                new = torch.multinomial(resid / resid.sum(), 1)
                seq = torch.cat([cur[:, :n + i], new.view(1, 1)], dim=1)
                break
            else:
                seq = torch.cat([cur, torch.multinomial(p_all[gamma], 1).view(1, 1)], dim=1)
        return seq, accepted, proposed

    target.eval()
    draft.eval()
    prompt = data[:1, :3]
    with torch.no_grad():
        env.rec("target next probs", F.softmax(target(prompt)[0, -1] / temp, dim=-1))
        env.rec("draft next probs", F.softmax(draft(prompt)[0, -1] / temp, dim=-1))
    torch.manual_seed(123)
    seq, acc, prop = speculative(prompt, 8)
    env.rec("sample", seq, cross=False)
    env.rec("acceptance", f"accepted {acc}/{prop}", cross=False)
    env.rec("draft params", dict(draft.named_parameters()))


def mixture_of_depths(torch, env):
    nn, F = torch.nn, torch.nn.functional
    B, T, D, V, cap = 2, 8, 16, 10, 4

    class MoDBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.router = nn.Linear(D, 1)
            self.block = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, batch_first=True,
                                                    norm_first=True, bias=False)

        def forward(self, x):
            d = x.shape[-1]
            w = self.router(x).squeeze(-1)                          # b, t
            topv, topi = torch.topk(w, cap, dim=1, sorted=False)
            topi, order = topi.sort(dim=1)                          # (keep causal order)
            topv = topv.gather(1, order)
            idx = topi.unsqueeze(-1).expand(-1, -1, d)
            sel = x.gather(1, idx)
            mask = torch.triu(torch.ones(cap, cap, dtype=torch.bool), diagonal=1)
            delta = (self.block(sel, src_mask=mask) - sel) * torch.sigmoid(topv).unsqueeze(-1)
            y = x.scatter_add(1, idx, delta)
            chosen = torch.zeros_like(w).scatter(1, topi, 1.0)
            aux = F.binary_cross_entropy_with_logits(w, chosen)
            return y, aux, topi

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.pos = nn.Parameter(torch.zeros(1, T, D))
            self.blocks = nn.ModuleList([MoDBlock(), MoDBlock()])
            self.head = nn.Linear(D, V)

        def forward(self, ids):
            h, aux, routes = self.emb(ids) + self.pos[:, :ids.shape[1]], 0.0, []
            for blk in self.blocks:
                h, a, r = blk(h)
                aux, routes = aux + a, routes + [r]
            return self.head(h), aux, torch.stack(routes)

    model = env.init(Model())
    with torch.no_grad():
        model.pos.copy_(env.randn(1, T, D, scale=0.5))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(ids):
        logits, aux, routes = model(ids[:, :-1])
        lm = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:])
        loss = lm + 0.1 * aux
        opt.zero_grad()
        loss.backward()
        opt.step()
        return lm.detach(), aux.detach(), routes

    step = env.step(train_step)
    ids = env.randint(0, V, (B, T + 1))
    for it in range(3):
        lm, aux, routes = step(ids)
        env.rec(f"lm {it}", lm)
        env.rec(f"aux {it}", aux)
        env.rec(f"routes {it}", routes)
    env.rec("params", dict(model.named_parameters()))


def medusa_heads(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, T, K, D = 14, 10, 3, 16
    base = env.init(_tiny_lm(torch, V, D, 1))
    base.requires_grad_(False)
    base.eval()

    class MedusaHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(D, D)

        def forward(self, h):
            return h + F.silu(self.fc(h))

    heads = env.init(nn.ModuleList(MedusaHead() for _ in range(K)))
    opt = torch.optim.AdamW(heads.parameters(), lr=1e-2, weight_decay=0.0)

    def train_step(ids):
        with torch.no_grad():
            h = base.hidden(ids)
        loss, per, top3 = 0.0, [], []
        for k, head in enumerate(heads):
            logits = base.out(head(h))[:, :T - (k + 2)]     # (head k predicts t + k + 2)
            tgt = ids[:, k + 2:]
            lk = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))
            loss = loss + 0.8 ** k * lk
            per.append(lk.detach())
            hit = (logits.topk(3, dim=-1).indices == tgt.unsqueeze(-1)).any(dim=-1)
            top3.append(hit.float().mean())
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), torch.stack(per), torch.stack(top3)

    step = env.step(train_step)
    ids = env.randint(0, V, (3, T))
    for it in range(3):
        loss, per, top3 = step(ids)
        env.rec(f"loss {it}", loss)
        env.rec(f"per head {it}", per)
        env.rec(f"top3 {it}", top3)
    env.rec("base untouched", all(p.grad is None and not p.requires_grad
                                  for p in base.parameters()))
    env.rec("base tok", base.tok.weight)
    env.rec("heads", dict(heads.named_parameters()))


def ngpt(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, D, T, H = 12, 16, 8, 2
    hd = D // H

    def norm(x):
        return F.normalize(x, dim=-1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(D, 3 * D, bias=False)
            self.proj = nn.Linear(D, D, bias=False)
            self.up = nn.Linear(D, 4 * D, bias=False)
            self.down = nn.Linear(2 * D, D, bias=False)
            self.sqk = nn.Parameter(torch.ones(H, hd))
            self.suv = nn.Parameter(torch.ones(4 * D))
            self.alpha_a = nn.Parameter(torch.full((D,), 0.05))
            self.alpha_m = nn.Parameter(torch.full((D,), 0.05))

        def forward(self, h):
            b, t, _ = h.shape
            q, k, v = self.qkv(h).view(b, t, 3, H, hd).unbind(dim=2)
            q, k = norm(q) * self.sqk, norm(k) * self.sqk
            q, k, v = (z.transpose(1, 2) for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=hd ** 0.5)
            a = self.proj(a.transpose(1, 2).reshape(b, t, D))
            h = norm(h + self.alpha_a * (norm(a) - h))
            u, g = (self.up(h) * self.suv).chunk(2, dim=-1)
            m = self.down(u * F.silu(g * D ** 0.5))
            return norm(h + self.alpha_m * (norm(m) - h))

    class NGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.head = nn.Linear(D, V, bias=False)
            self.sz = nn.Parameter(torch.ones(V))

        def forward(self, ids):
            h = norm(self.emb(ids))
            for blk in self.blocks:
                h = blk(h)
            return self.head(h) * self.sz

        @torch.no_grad()
        def normalize_weights(self):
            self.emb.weight.copy_(norm(self.emb.weight))
            self.head.weight.copy_(norm(self.head.weight))
            for blk in self.blocks:
                for lin in (blk.qkv, blk.up):
                    lin.weight.copy_(norm(lin.weight))      # (rows: the input dim D)
                for lin in (blk.proj, blk.down):
                    lin.weight.copy_(F.normalize(lin.weight, dim=0))

    model = env.init(NGPT())
    model.normalize_weights()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=0.0)

    def train_step(ids):
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        model.normalize_weights()
        return loss.detach()

    step = env.step(train_step)
    ids = env.randint(0, V, (3, T + 1))
    for it in range(3):
        env.rec(f"loss {it}", f"it {it} loss {step(ids).item():.5f}")
    env.rec("emb row norms", model.emb.weight.norm(dim=-1))
    env.rec("params", dict(model.named_parameters()))


PROGRAMS = {f.__name__: f for f in (reward_model, speculative_decoding, mixture_of_depths,
                                    medusa_heads, ngpt)}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
