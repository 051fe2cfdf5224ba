"""Sweep 19 (C), part 8: attention variants of 2023-24 papers written as their reference
code writes them: the Differential Transformer (two softmax maps subtracted with a lambda
reparameterised by exp of dot products, lambda_init depending on the layer, RMSNorm per head
with F.rms_norm, the nanoGPT speedrun's squared ReLU, QK-norm and tanh logit soft-capping)
and RetNet's retention in its parallel form (decay mask from gamma^(n-m) with tril and
masked_fill, xPos-free rotation via complex-free cos/sin) checked against its recurrent form
step by step. Run with PyTorch, with llgrad eagerly and with llgrad.compile
(tutorial_harness.py)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def diff_transformer(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, D, H, T = 16, 16, 2, 6
    hd = D // H // 2          # (each head: two query/key halves)

    def lambda_init_fn(depth):
        return 0.8 - 0.6 * math.exp(-0.3 * depth)

    class MultiheadDiffAttn(nn.Module):
        def __init__(self, depth):
            super().__init__()
            self.q_proj = nn.Linear(D, D, bias=False)
            self.k_proj = nn.Linear(D, D, bias=False)
            self.v_proj = nn.Linear(D, D, bias=False)
            self.out_proj = nn.Linear(D, D, bias=False)
            self.lambda_init = lambda_init_fn(depth)
            self.lambda_q1 = nn.Parameter(torch.zeros(hd, dtype=torch.float32).normal_(mean=0, std=0.1))
            self.lambda_k1 = nn.Parameter(torch.zeros(hd, dtype=torch.float32).normal_(mean=0, std=0.1))
            self.lambda_q2 = nn.Parameter(torch.zeros(hd, dtype=torch.float32).normal_(mean=0, std=0.1))
            self.lambda_k2 = nn.Parameter(torch.zeros(hd, dtype=torch.float32).normal_(mean=0, std=0.1))
            self.subln_weight = nn.Parameter(torch.ones(2 * hd))

        def forward(self, x):
            bsz, tgt_len, _ = x.size()
            q = self.q_proj(x).view(bsz, tgt_len, 2 * H, hd)
            k = self.k_proj(x).view(bsz, tgt_len, 2 * H, hd)
            v = self.v_proj(x).view(bsz, tgt_len, H, 2 * hd)
            q = F.rms_norm(q, (hd,))           # QK-norm
            k = F.rms_norm(k, (hd,))
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            attn_weights = torch.matmul(q, k.transpose(-1, -2)) * hd ** -0.5
            attn_mask = torch.triu(torch.zeros([tgt_len, tgt_len]).float().fill_(float("-inf")), 1)
            attn_weights = torch.nan_to_num(attn_weights)
            attn_weights += attn_mask
            attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).type_as(attn_weights)
            lambda_1 = torch.exp(torch.sum(self.lambda_q1 * self.lambda_k1, dim=-1).float()).type_as(q)
            lambda_2 = torch.exp(torch.sum(self.lambda_q2 * self.lambda_k2, dim=-1).float()).type_as(q)
            lambda_full = lambda_1 - lambda_2 + self.lambda_init
            attn_weights = attn_weights.view(bsz, H, 2, tgt_len, tgt_len)
            attn_weights = attn_weights[:, :, 0] - lambda_full * attn_weights[:, :, 1]
            attn = torch.matmul(attn_weights, v)
            attn = F.rms_norm(attn, (2 * hd,), self.subln_weight, eps=1e-5)
            attn = attn * (1 - self.lambda_init)
            attn = attn.transpose(1, 2).reshape(bsz, tgt_len, H * 2 * hd)
            return self.out_proj(attn)

    class Block(nn.Module):
        def __init__(self, depth):
            super().__init__()
            self.attn = MultiheadDiffAttn(depth)
            self.fc = nn.Linear(D, 4 * D, bias=False)
            self.proj = nn.Linear(4 * D, D, bias=False)
            self.proj.weight.data.zero_()

        def forward(self, x):
            x = x + self.attn(F.rms_norm(x, (x.size(-1),)))
            return x + self.proj(F.relu(self.fc(F.rms_norm(x, (x.size(-1),)))).square())

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, D)
            self.blocks = nn.ModuleList([Block(d) for d in range(2)])
            self.lm_head = nn.Linear(D, V, bias=False)

        def forward(self, idx, targets):
            x = self.wte(idx)
            for b in self.blocks:
                x = b(x)
            logits = self.lm_head(F.rms_norm(x, (x.size(-1),))).float()
            logits = 15 * torch.tanh(logits / 15)
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))

    model = env.init(GPT())
    opt = torch.optim.Adam(model.parameters(), lr=4e-3, betas=(0.8, 0.95), fused=False)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda it: min(1.0, (it + 1) / 3))
    data = env.randint(0, V, (3, T + 1))

    def train_step(x, y):
        loss = model(x, y)
        loss.backward()
        for p in model.parameters():
            p.grad /= 2.0
        opt.step()
        sched.step()
        model.zero_grad(set_to_none=True)
        return loss
    train_step = env.step(train_step)
    for i in range(5):
        env.rec(f"loss{i}", train_step(data[:, :-1], data[:, 1:]))
    env.rec("params", dict(model.named_parameters()))


def retnet_retention(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D, H, T, B = 8, 2, 7, 2
    hd = D // H

    def rotate_every_two(x):
        x1 = x[:, :, :, ::2]
        x2 = x[:, :, :, 1::2]
        x = torch.stack((-x2, x1), dim=-1)
        return x.flatten(-2)

    def theta_shift(x, sin, cos):
        return (x * cos) + (rotate_every_two(x) * sin)

    class RetNetRelPos(nn.Module):
        def __init__(self):
            super().__init__()
            angle = 1.0 / (10000 ** torch.linspace(0, 1, hd // 2))
            angle = angle.unsqueeze(-1).repeat(1, 2).flatten()
            decay = torch.log(1 - 2 ** (-5 - torch.arange(H, dtype=torch.float)))
            self.register_buffer("angle", angle)
            self.register_buffer("decay", decay)

        def forward(self, slen):
            index = torch.arange(slen).to(self.decay)
            sin = torch.sin(index[:, None] * self.angle[None, :])
            cos = torch.cos(index[:, None] * self.angle[None, :])
            mask = torch.tril(torch.ones(slen, slen).to(self.decay))
            mask = torch.masked_fill(index[:, None] - index[None, :], ~mask.bool(), float("inf"))
            mask = torch.exp(mask * self.decay[:, None, None])
            mask = torch.nan_to_num(mask)
            mask = mask / mask.sum(dim=-1, keepdim=True).sqrt()
            return (sin, cos), mask

    class Retention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(D, D, bias=False)
            self.k_proj = nn.Linear(D, D, bias=False)
            self.v_proj = nn.Linear(D, D, bias=False)
            self.g_proj = nn.Linear(D, D, bias=False)
            self.out_proj = nn.Linear(D, D, bias=False)
            self.group_norm = nn.LayerNorm(hd, elementwise_affine=False, eps=1e-6)

        def qkv(self, x, sin, cos):
            bsz, tgt_len, _ = x.size()
            q, k, v = self.q_proj(x), self.k_proj(x) * hd ** -0.5, self.v_proj(x)
            q = q.view(bsz, tgt_len, H, hd).transpose(1, 2)
            k = k.view(bsz, tgt_len, H, hd).transpose(1, 2)
            return theta_shift(q, sin, cos), theta_shift(k, sin, cos), v.view(bsz, tgt_len, H, hd).transpose(1, 2)

        def parallel(self, x, rel_pos):
            (sin, cos), mask = rel_pos
            qr, kr, v = self.qkv(x, sin, cos)
            qk_mat = qr @ kr.transpose(-1, -2)
            qk_mat = qk_mat * mask
            qk_mat = qk_mat / qk_mat.detach().abs().sum(dim=-1, keepdim=True).clamp(min=1)
            output = torch.matmul(qk_mat, v).transpose(1, 2)
            return self.finish(x, output)

        def recurrent(self, x, rel_pos, decay):
            (sin, cos), mask = rel_pos
            qr, kr, v = self.qkv(x, sin, cos)
            scale = mask.sum(dim=-1).sqrt()         # (the parallel form's row norms)
            state = torch.zeros(x.size(0), H, hd, hd)
            outs = []
            for t in range(x.size(1)):
                state = state * decay.exp()[:, None, None] + kr[:, :, t, :, None] * v[:, :, t, None, :]
                outs.append(torch.einsum("bhd,bhde->bhe", qr[:, :, t], state) / scale[:, t, None])
            return torch.stack(outs, dim=2)

        def finish(self, x, output):
            output = self.group_norm(output).reshape(x.size(0), x.size(1), D)
            return self.out_proj(F.silu(self.g_proj(x)) * output)

    relpos = RetNetRelPos()
    layer = env.init(Retention())
    head = env.init(nn.Linear(D, 1))
    opt = torch.optim.AdamW(list(layer.parameters()) + list(head.parameters()), lr=5e-3)
    X, y = env.randn(B, T, D), env.randn(B, 1)

    def train_step(X, y):
        rel = relpos(X.size(1))
        out = layer.parallel(X, rel)
        loss = F.mse_loss(head(out.mean(1)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    for i in range(5):
        env.rec(f"loss{i}", train_step(X, y))
    with torch.no_grad():
        rel = relpos(T)
        (sin, cos), mask = rel
        qr, kr, v = layer.qkv(X, sin, cos)
        par = (qr @ kr.transpose(-1, -2)) * mask @ v
        rec = layer.recurrent(X, rel, relpos.decay)
        env.rec("parallel", par)
        env.rec("forms agree", torch.allclose(par, rec, atol=1e-5))
    env.rec("params", list(layer.parameters()))


@pytest.mark.parametrize("program", [diff_transformer, retnet_retention])
def test_attention_variants(program):
    run_tutorial(program)
