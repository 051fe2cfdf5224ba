"""Sweep 20 (C), part 7: contrastive learning and adapters. SimCLR's NT-Xent: two augmented
views (noise and a flip given by the program), a projection head, F.normalize, the 2N x 2N
similarity matrix with its diagonal masked by masked_fill(torch.eye(...).bool(), -inf),
positives found by roll-style index arithmetic, cross_entropy over sim / temperature, and
a CLIP-style symmetric loss with a learnable logit_scale clamped in place under no_grad
after the step. Then LoRA: a pretrained Linear frozen with requires_grad_(False), low-rank A
(kaiming_uniform_ from a given draw) and B (zeros) added with a scale alpha / r, the
optimizer built from `filter(lambda p: p.requires_grad, ...)`, the trainable-parameter
count, and the adapter merged into the base weight under no_grad at the end (the merged
model's outputs equal the adapted ones). Run with PyTorch, with llgrad eagerly and with
llgrad.compile (tutorial_harness.py)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def simclr_clip(torch, env):
    nn, F = torch.nn, torch.nn.functional
    encoder = env.init(nn.Sequential(nn.Linear(12, 24, bias=False), nn.BatchNorm1d(24), nn.ReLU(), nn.Linear(24, 16)))
    proj = env.init(nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 8)))
    opt = torch.optim.Adam(list(encoder.parameters()) + list(proj.parameters()), lr=1e-3)

    def info_nce_loss(feats, temperature=0.5):
        cos_sim = F.cosine_similarity(feats[:, None, :], feats[None, :, :], dim=-1)
        self_mask = torch.eye(cos_sim.shape[0], dtype=torch.bool)
        cos_sim.masked_fill_(self_mask, -9e15)
        pos_mask = self_mask.roll(shifts=cos_sim.shape[0] // 2, dims=0)
        cos_sim = cos_sim / temperature
        nll = -cos_sim[pos_mask] + torch.logsumexp(cos_sim, dim=-1)
        comb = torch.cat([cos_sim[pos_mask][:, None], cos_sim.masked_fill(pos_mask, -9e15)], dim=-1)
        sim_argsort = comb.argsort(dim=-1, descending=True).argmin(dim=-1)
        return nll.mean(), (sim_argsort == 0).float().mean()

    def nt_xent(z1, z2, temperature=0.5):
        z = F.normalize(torch.cat([z1, z2]), dim=1)
        n = z1.shape[0]
        sim = z @ z.t()
        sim = sim.masked_fill(torch.eye(2 * n).bool(), float("-inf")) / temperature
        labels = torch.cat([torch.arange(n, 2 * n), torch.arange(n)])
        return F.cross_entropy(sim, labels)

    def train_step(x1, x2):
        opt.zero_grad()
        z1, z2 = proj(encoder(x1)), proj(encoder(x2))
        loss = nt_xent(z1, z2)
        loss2, acc = info_nce_loss(torch.cat([z1, z2]))
        (loss + loss2).backward()
        opt.step()
        return loss, loss2, acc.item()
    train_step = env.step(train_step)
    x = env.randn(6, 12)
    for i in range(4):
        x1 = x + 0.1 * env.randn(6, 12)
        x2 = x.flip(1) if env.choice(2) else x * 0.9
        env.rec(f"step{i}", train_step(x1, x2))

    # CLIP: two towers and a learnable temperature
    img, txt = env.init(nn.Linear(12, 8, bias=False)), env.init(nn.Linear(10, 8, bias=False))
    logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))
    copt = torch.optim.AdamW(list(img.parameters()) + list(txt.parameters()) + [logit_scale], lr=0.05)

    def clip_step(images, texts):
        ie = F.normalize(img(images), dim=-1)
        te = F.normalize(txt(texts), dim=-1)
        logits_per_image = logit_scale.exp() * ie @ te.t()
        labels = torch.arange(images.shape[0])
        loss = (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_image.t(), labels)) / 2
        copt.zero_grad()
        loss.backward()
        copt.step()
        with torch.no_grad():
            logit_scale.clamp_(0, math.log(100))
        return loss
    clip_step = env.step(clip_step)
    images, texts = env.randn(5, 12), env.randn(5, 10)
    for i in range(4):
        env.rec(f"clip{i}", (clip_step(images, texts), logit_scale))
    env.rec("state", (encoder.state_dict(), proj.state_dict(), img.weight, txt.weight))


def lora(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class LoRALinear(nn.Module):
        def __init__(self, base, r=4, alpha=8):
            super().__init__()
            self.base = base
            self.base.weight.requires_grad_(False)
            self.base.bias.requires_grad_(False)
            self.lora_A = nn.Parameter(torch.zeros(r, base.in_features))
            self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
            bound = 1 / math.sqrt(base.in_features)
            with torch.no_grad():
                self.lora_A.copy_((env.rand(r, base.in_features) * 2 - 1) * bound)
            self.scaling = alpha / r
            self.merged = False

        def forward(self, x):
            out = self.base(x)
            if not self.merged:
                out = out + (x @ self.lora_A.T @ self.lora_B.T) * self.scaling
            return out

        @torch.no_grad()
        def merge(self):
            self.base.weight += (self.lora_B @ self.lora_A) * self.scaling
            self.merged = True

    pretrained = env.init(nn.Sequential(nn.Linear(10, 20), nn.GELU(), nn.Linear(20, 20), nn.GELU(),
                                        nn.Linear(20, 3)))
    model = pretrained
    model[0] = LoRALinear(model[0])
    model[2] = LoRALinear(model[2])
    for p in model[4].parameters():
        p.requires_grad_(False)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    env.rec("trainable", (trainable, sum(p.numel() for p in model.parameters())))
    opt = torch.optim.AdamW(filter(lambda p: p.requires_grad, model.parameters()), lr=1e-2)
    X, y = env.randn(16, 10), env.randint(0, 3, (16,))

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    step = env.step(step)
    for i in range(5):
        env.rec(f"loss{i}", step(X, y))
    env.rec("frozen grads", [p.grad is None for p in model.parameters() if not p.requires_grad])
    before = model(X).detach()
    for m in (model[0], model[2]):
        m.merge()
    forward = env.step(torch.no_grad()(model))
    after = forward(X)
    env.rec("merged", (before, after))
    env.rec("state", model.state_dict())


@pytest.mark.parametrize("program", [simclr_clip, lora])
def test_contrastive_lora(program):
    run_tutorial(program)
