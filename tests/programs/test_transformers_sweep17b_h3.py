"""Sweep 17b (H), part 3: a GPT-2-style decoder (learned positions, a registered causal
buffer, weight tying), AdamW with a decay / no-decay parameter-group split, LambdaLR warm-up
then cosine, gradient accumulation over micro-batches, clip_grad_norm_, label-smoothed
cross_entropy with ignore_index; greedy, top-k with temperature, and beam-search decoding.
Run with PyTorch, with llgrad eagerly and compiled (tutorial_harness.py)."""
import math  # noqa: F401

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def gpt(torch, env):
    nn = torch.nn
    F = nn.functional
    V, D, H, T = 17, 16, 2, 8

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(D)
            self.attn = nn.Linear(D, 3 * D)
            self.proj = nn.Linear(D, D)
            self.ln2 = nn.LayerNorm(D)
            self.fc = nn.Linear(D, 4 * D)
            self.fc2 = nn.Linear(4 * D, D)
            self.register_buffer("bias", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

        def forward(self, x):
            Bn, Tn, C = x.size()
            q, k, v = self.attn(self.ln1(x)).split(D, dim=2)
            q = q.view(Bn, Tn, H, C // H).transpose(1, 2)
            k = k.view(Bn, Tn, H, C // H).transpose(1, 2)
            v = v.view(Bn, Tn, H, C // H).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :Tn, :Tn] == 0, float('-inf'))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(Bn, Tn, C)
            x = x + self.proj(y)
            x = x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
            return x

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, D)
            self.wpe = nn.Embedding(T, D)
            self.h = nn.ModuleList([Block() for _ in range(2)])
            self.ln_f = nn.LayerNorm(D)
            self.lm_head = nn.Linear(D, V, bias=False)
            self.wte.weight = self.lm_head.weight

        def forward(self, idx):
            pos = torch.arange(0, idx.size(1), dtype=torch.long)
            x = self.wte(idx) + self.wpe(pos)
            for b in self.h:
                x = b(x)
            return self.lm_head(self.ln_f(x))

    model = env.init(GPT())
    env.rec("n", sum(p.numel() for p in model.parameters()))
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.dim() >= 2 else no_decay).append(p)
    env.rec("split", (len(decay), len(no_decay)))
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-2, betas=(0.9, 0.95), eps=1e-8)
    warm, total = 3, 12

    def lr_lambda(s):
        if s < warm:
            return (s + 1) / warm
        prog = (s - warm) / max(1, total - warm)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * prog))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    data = env.randint(0, V, (6, 4, T + 1))
    data[0, 0, -3:] = -100   # ignored targets

    def micro(x, y, accum):
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, V), y.reshape(-1), ignore_index=-100,
                               label_smoothing=0.1)
        (loss / accum).backward()
        return loss
    micro = env.step(micro)
    accum = 2
    for it in range(6):
        opt.zero_grad(set_to_none=True)
        tot = 0.0
        for m in range(accum):
            batch = data[it, 2 * m:2 * m + 2]
            x = batch[:, :-1].clamp(min=0)
            y = batch[:, 1:]
            tot += micro(x, y, accum).item() / accum
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        sched.step()
        env.rec(f"loss{it}", tot)
        env.rec(f"gn{it}", gn)
        env.rec(f"lr{it}", sched.get_last_lr())
    env.rec("wte", model.wte.weight)
    env.rec("sched", sched.state_dict()["last_epoch"])
    env.rec("opt state step", opt.state_dict()["state"][0]["step"])
    model.eval()

    @torch.no_grad()
    def greedy(idx, n):
        for _ in range(n):
            logits = model(idx[:, -T:])[:, -1, :]
            nxt = torch.argmax(logits, dim=-1, keepdim=True)
            idx = torch.cat((idx, nxt), dim=1)
        return idx

    @torch.no_grad()
    def topk_sample(idx, n, temp, k, g):
        for _ in range(n):
            logits = model(idx[:, -T:])[:, -1, :] / temp
            v, _ = torch.topk(logits, k)
            logits[logits < v[:, [-1]]] = -float('Inf')
            probs = F.softmax(logits, dim=-1)
            nxt = torch.multinomial(probs, num_samples=1, generator=g)
            idx = torch.cat((idx, nxt), dim=1)
        return idx

    @torch.no_grad()
    def beam(start, n, width):
        beams = [(start, 0.0)]
        for _ in range(n):
            cand = []
            for seq, score in beams:
                lp = F.log_softmax(model(seq[:, -T:])[:, -1, :], dim=-1)[0]
                vals, ix = lp.topk(width)
                for v, i in zip(vals.tolist(), ix.tolist()):
                    cand.append((torch.cat([seq, torch.tensor([[i]])], 1), score + v))
            cand.sort(key=lambda c: c[1], reverse=True)
            beams = cand[:width]
        return beams

    start = torch.tensor([[1, 5]])
    env.rec("greedy", greedy(start, 10))
    g = torch.Generator().manual_seed(42)
    env.rec("topk", topk_sample(torch.tensor([[1], [3]]), 8, 0.8, 5, g))
    bs = beam(start, 4, 3)
    env.rec("beam seqs", [b[0] for b in bs])
    env.rec("beam scores", [b[1] for b in bs])
    # same under a compiled forward
    fwd = env.step(lambda i: model(i))
    with torch.no_grad():
        env.rec("fwd", fwd(data[1, :, :T]))


def test_gpt2_accumulation_schedule_and_decoding():
    run_tutorial(gpt)
