"""Sweep 20 (C), part 3: nanoGPT-style GPT-2 and a ViT. The GPT: fused c_attn split into
q, k, v, F.scaled_dot_product_attention(is_causal=True), GELU(approximate="tanh"), the
token embedding tied to lm_head (`self.transformer.wte.weight = self.lm_head.weight`),
configure_optimizers' decay / no-decay groups by p.dim() >= 2, the warmup + cosine get_lr
written into param_group["lr"] every step, clip_grad_norm_ returning the norm read with
.item(), estimate_loss under @torch.no_grad with model.eval()/train(), and generate()
cropping the context and sampling from the softmax (compared eager vs compiled only). The
ViT: Conv2d patch embedding flattened and transposed, a cls token expanded over the batch,
learned positions, nn.TransformerEncoder(norm_first=True, batch_first=True,
activation="gelu") and a LayerNorm head on the cls token. Run with PyTorch, with llgrad
eagerly and with llgrad.compile (tutorial_harness.py)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def nanogpt(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, T, C, H, L = 23, 8, 16, 2, 2

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)

        def forward(self, x):
            B, T_, C_ = x.size()
            q, k, v = self.c_attn(x).split(C, dim=2)
            k = k.view(B, T_, H, C_ // H).transpose(1, 2)
            q = q.view(B, T_, H, C_ // H).transpose(1, 2)
            v = v.view(B, T_, H, C_ // H).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T_, C_)
            return self.c_proj(y)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(C), CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(C)
            self.mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(approximate="tanh"), nn.Linear(4 * C, C))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(V, C), wpe=nn.Embedding(T, C),
                h=nn.ModuleList([Block() for _ in range(L)]), ln_f=nn.LayerNorm(C)))
            self.lm_head = nn.Linear(C, V, bias=False)
            self.transformer.wte.weight = self.lm_head.weight

        def forward(self, idx, targets=None):
            B, T_ = idx.size()
            pos = torch.arange(0, T_, dtype=torch.long)
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            return logits, loss

        def configure_optimizers(self, weight_decay, lr):
            params = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
            decay = [p for p in params.values() if p.dim() >= 2]
            nodecay = [p for p in params.values() if p.dim() < 2]
            groups = [{"params": decay, "weight_decay": weight_decay},
                      {"params": nodecay, "weight_decay": 0.0}]
            return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)

        @torch.no_grad()
        def generate(self, idx, n):
            for _ in range(n):
                idx_cond = idx if idx.size(1) <= T else idx[:, -T:]
                logits, _ = self(idx_cond)
                probs = F.softmax(logits[:, -1, :] / 0.8, dim=-1)
                idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
            return idx

    model = env.init(GPT())
    assert model.lm_head.weight is model.transformer.wte.weight
    n_params = sum(p.numel() for p in model.parameters())
    env.rec("n_params", n_params)
    max_lr, min_lr, warmup, max_steps = 6e-3, 6e-4, 2, 6
    optimizer = model.configure_optimizers(0.1, max_lr)

    def get_lr(it):
        if it < warmup:
            return max_lr * (it + 1) / warmup
        ratio = (it - warmup) / (max_steps - warmup)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (max_lr - min_lr)

    data = env.randint(0, V, (400,))

    def get_batch(i):
        ix = [(37 * i + 11 * j) % (len(data) - T - 1) for j in range(4)]
        x = torch.stack([data[k:k + T] for k in ix])
        y = torch.stack([data[k + 1:k + T + 1] for k in ix])
        return x, y

    def train_step(x, y, lr):
        for g in optimizer.param_groups:
            g["lr"] = lr
        optimizer.zero_grad()
        _, loss = model(x, y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss, norm
    train_step = env.step(train_step)

    @torch.no_grad()
    def estimate_loss():
        model.eval()
        losses = torch.zeros(3)
        for k in range(3):
            _, loss = model(*get_batch(100 + k))
            losses[k] = loss.item()
        model.train()
        return losses.mean()
    estimate_loss = env.step(estimate_loss)
    for it in range(max_steps):
        loss, norm = train_step(*get_batch(it), get_lr(it))
        env.rec(f"step{it}", (loss.item(), norm.item()))
        if it % 3 == 2:
            env.rec(f"val{it}", estimate_loss())
    # (the key bias's gradient is zero but for rounding, softmax being shift-invariant, and
    # Adam scales rounding noise to lr-sized steps: it is left out)
    env.rec("params", {k: v for k, v in model.state_dict().items() if not k.endswith("c_attn.bias")})
    env.rec("qv bias", [torch.cat([b.attn.c_attn.bias[:C], b.attn.c_attn.bias[2 * C:]]) for b in model.transformer.h])
    env.rec("sample", model.generate(torch.zeros((1, 1), dtype=torch.long), 10), cross=False)


def vit(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class PatchEmbed(nn.Module):
        def __init__(self, img=8, patch=4, cin=3, dim=16):
            super().__init__()
            self.n_patches = (img // patch) ** 2
            self.proj = nn.Conv2d(cin, dim, kernel_size=patch, stride=patch)

        def forward(self, x):
            return self.proj(x).flatten(2).transpose(1, 2)

    class ViT(nn.Module):
        def __init__(self, dim=16, depth=2, heads=4, n_classes=5):
            super().__init__()
            self.patch_embed = PatchEmbed(dim=dim)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos_embed = nn.Parameter(torch.zeros(1, 1 + self.patch_embed.n_patches, dim))
            layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=32, dropout=0.0,
                                               activation="gelu", batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, n_classes)

        def forward(self, x):
            x = self.patch_embed(x)
            cls = self.cls_token.expand(x.shape[0], -1, -1)
            x = torch.cat((cls, x), dim=1) + self.pos_embed
            x = self.encoder(x)
            return self.head(self.norm(x[:, 0]))

    model = ViT()
    with torch.no_grad():
        model.cls_token.copy_(env.randn(1, 1, 16) * 0.02)
        model.pos_embed.copy_(env.randn(1, 5, 16) * 0.02)
    env.init(model)
    # (SGD, not Adam: the key bias's gradient is rounding noise that Adam would scale up)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5)
    crit = nn.CrossEntropyLoss(label_smoothing=0.1)
    X, y = env.randn(6, 3, 8, 8), env.randint(0, 5, (6,))

    def train_step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    for i in range(4):
        env.rec(f"loss{i}", train_step(X, y))
        sched.step()
    model.eval()
    with torch.no_grad():
        env.rec("eval", env.step(model)(X))
    env.rec("state", model.state_dict())


@pytest.mark.parametrize("program", [nanogpt, vit])
def test_gpt_vit(program):
    run_tutorial(program)
