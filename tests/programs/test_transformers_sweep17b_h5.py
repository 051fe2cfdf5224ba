"""Sweep 17b (H), part 5: a small ViT: patches by Conv2d and by F.unfold, a class token,
trunc_normal_ positions resized by bicubic / antialiased interpolation, MultiheadAttention with
dropout, stochastic depth from torch.rand per sample, mixup and cutmix with
distributions.Beta and randperm, SequentialLR(LinearLR, CosineAnnealingLR). Dropout and the
draws use llgrad's generator, which gives PyTorch's numbers, so all are compared with torch.
Run with PyTorch, with llgrad eagerly and compiled (tutorial_harness.py)."""
import math  # noqa: F401

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def vit(torch, env):
    nn = torch.nn
    F = nn.functional
    C, S, P, D, H, NC = 3, 8, 4, 16, 2, 4
    N = (S // P) ** 2

    def drop_path(x, p, training):
        if p == 0.0 or not training:
            return x
        keep = 1 - p
        shape = (x.shape[0],) + (1,) * (x.ndim - 1)
        rt = keep + torch.rand(shape, dtype=x.dtype, device=x.device)
        rt.floor_()
        return x.div(keep) * rt

    class Block(nn.Module):
        def __init__(self, dp):
            super().__init__()
            self.n1 = nn.LayerNorm(D, eps=1e-6)
            self.attn = nn.MultiheadAttention(D, H, batch_first=True, dropout=0.1)
            self.n2 = nn.LayerNorm(D, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Dropout(0.1),
                                     nn.Linear(2 * D, D))
            self.dp = dp

        def forward(self, x):
            h = self.n1(x)
            a, _ = self.attn(h, h, h, need_weights=False)
            x = x + drop_path(a, self.dp, self.training)
            return x + drop_path(self.mlp(self.n2(x)), self.dp, self.training)

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(C, D, P, stride=P)
            self.cls = nn.Parameter(torch.zeros(1, 1, D))
            self.pos = nn.Parameter(torch.zeros(1, N + 1, D))
            nn.init.trunc_normal_(self.pos, std=0.02)
            dpr = [v.item() for v in torch.linspace(0, 0.2, 2)]
            self.blocks = nn.Sequential(*[Block(d) for d in dpr])
            self.norm = nn.LayerNorm(D)
            self.head = nn.Linear(D, NC)

        def embed_unfold(self, x):
            cols = F.unfold(x, kernel_size=P, stride=P)          # B, C*P*P, N
            w = self.patch.weight.view(D, -1)
            return (w @ cols + self.patch.bias[:, None]).transpose(1, 2)

        def forward(self, x, via_unfold=False):
            B = x.shape[0]
            t = self.embed_unfold(x) if via_unfold else self.patch(x).flatten(2).transpose(1, 2)
            t = torch.cat([self.cls.expand(B, -1, -1), t], dim=1) + self.pos
            t = self.norm(self.blocks(t))
            return self.head(t[:, 0])

    model = env.init(ViT())
    x = env.rand(6, C, S, S)
    y = env.randint(0, NC, (6,))
    model.eval()
    with torch.no_grad():
        a, b = model(x), model(x, via_unfold=True)
        env.rec("conv", a)
        env.rec("unfold", b)
    # pos-embedding resize for a larger input, as fine-tuning at higher resolution does
    with torch.no_grad():
        grid = model.pos[:, 1:].reshape(1, 2, 2, D).permute(0, 3, 1, 2)
        env.rec("pos bicubic", F.interpolate(grid, size=(3, 3), mode="bicubic",
                                             align_corners=False))
        env.rec("pos bilinear aa", F.interpolate(grid, size=(3, 3), mode="bilinear",
                                                 antialias=True))

    def decays(n, p):
        return p.ndim > 1 and "pos" not in n and "cls" not in n
    decay = [p for n, p in model.named_parameters() if decays(n, p)]
    rest = [p for n, p in model.named_parameters() if not decays(n, p)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": rest, "weight_decay": 0.}], lr=1e-3)
    sched = torch.optim.lr_scheduler.SequentialLR(
        opt, [torch.optim.lr_scheduler.LinearLR(opt, 0.1, 1.0, total_iters=2),
              torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=1e-5)],
        milestones=[2])
    beta = torch.distributions.Beta(torch.tensor([0.8]), torch.tensor([0.8]))

    def mix(x, y, step):
        lam = beta.sample().item()
        idx = torch.randperm(x.size(0))
        yo = F.one_hot(y, NC).float()
        if step % 2 == 0:
            xm = lam * x + (1 - lam) * x[idx]
        else:
            cut = math.sqrt(1 - lam)
            cw, ch = int(S * cut), int(S * cut)
            cx, cy = torch.randint(S, (1,)).item(), torch.randint(S, (1,)).item()
            x1, x2 = max(cx - cw // 2, 0), min(cx + cw // 2, S)
            y1, y2 = max(cy - ch // 2, 0), min(cy + ch // 2, S)
            xm = x.clone()
            xm[:, :, y1:y2, x1:x2] = x[idx, :, y1:y2, x1:x2]
            lam = 1 - (x2 - x1) * (y2 - y1) / (S * S)
        return xm, lam * yo + (1 - lam) * yo[idx], lam

    def step(xm, ym):
        opt.zero_grad()
        out = model(xm)
        loss = torch.sum(-ym * F.log_softmax(out, dim=-1), dim=-1).mean()
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.5)
        opt.step()
        return loss
    step = env.step(step)
    torch.manual_seed(11)
    model.train()
    for i in range(6):
        xm, ym, lam = mix(x, y, i)
        env.rec(f"lam{i}", lam)
        env.rec(f"ym{i}", ym)
        env.rec(f"loss{i}", step(xm, ym).item())
        sched.step()
        env.rec(f"lr{i}", sched.get_last_lr())
    env.rec("head", model.head.weight)
    env.rec("cls", model.cls)
    model.eval()
    with torch.no_grad():
        env.rec("eval", model(x))


def test_vit_mixup_cutmix_drop_path():
    run_tutorial(vit)
