"""Batch 25 (s75, u2), part 2: RepVGG (3x3, 1x1 and identity branches with BatchNorm trained,
then fused into one 3x3 kernel: BN folded by running stats, the 1x1 padded by F.pad, an
identity kernel built by index; the fused eval output equals the branches'), AdaBelief
written as an Optimizer subclass with gradient centralisation and unitwise adaptive
gradient clipping inside its step, wrapped by a Lookahead (slow weights every k steps), a
self-normalising CNN (SELU, FractionalMaxPool2d by output_ratio, FeatureAlphaDropout and
AlphaDropout), DSNT keypoint regression (soft-argmax over a flattened heatmap, a
Jensen-Shannon pull toward a Gaussian target, DropBlock and per-sample stochastic depth)
a GhostNet module (cheap depthwise features concatenated then sliced) and ULMFiT's
gradual unfreezing (requires_grad_ inside the step, discriminative lrs, a slanted
triangular LambdaLR)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]     # (1-5 s a program, the first
# with torch's import and the builds: the slow set)


def repvgg(torch, env):
    nn, F = torch.nn, torch.nn.functional
    C = 4

    def conv_bn(k):
        return nn.Sequential(nn.Conv2d(C, C, k, padding=k // 2, bias=False), nn.BatchNorm2d(C))

    class RepVGGBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.dense, self.one = conv_bn(3), conv_bn(1)
            self.identity = nn.BatchNorm2d(C)
            self.fused = None

        def forward(self, x):
            if self.fused is not None:
                return F.relu(F.conv2d(x, self.fused[0], self.fused[1], padding=1))
            return F.relu(self.dense(x) + self.one(x) + self.identity(x))

        @staticmethod
        def _fuse(kernel, bn):
            std = (bn.running_var + bn.eps).sqrt()
            t = (bn.weight / std).reshape(-1, 1, 1, 1)
            return kernel * t, bn.bias - bn.running_mean * bn.weight / std

        def reparameterize(self):
            k3, b3 = self._fuse(self.dense[0].weight, self.dense[1])
            k1, b1 = self._fuse(F.pad(self.one[0].weight, [1, 1, 1, 1]), self.one[1])
            eye = torch.zeros(C, C, 3, 3)
            eye[torch.arange(C), torch.arange(C), 1, 1] = 1
            kid, bid = self._fuse(eye, self.identity)
            self.fused = ((k3 + k1 + kid).detach(), (b3 + b1 + bid).detach())

    model = env.init(nn.Sequential(nn.Conv2d(1, C, 3, padding=1), RepVGGBlock(), RepVGGBlock(),
                                   nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(C, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)

    def train_step(x, y):
        model.train()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    for t in range(4):
        env.rec(f"loss {t}", step(env.randn(4, 1, 6, 6), env.randint(0, 2, (4,))))
    model.eval()
    x = env.randn(3, 1, 6, 6)
    with torch.no_grad():
        before = model(x)
        for blk in (model[1], model[2]):
            blk.reparameterize()
        after = model(x)
    env.rec("eval", before)
    env.rec("fused same", torch.allclose(before, after, atol=1e-5))
    env.rec("fused kernel", model[1].fused[0])
    env.rec("buffers", dict(model.named_buffers()))


def adabelief_lookahead(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class AdaBelief(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-16, clip=0.1):
            super().__init__(params, dict(lr=lr, betas=betas, eps=eps, clip=clip))

        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                b1, b2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    g = p.grad
                    if g.dim() > 1:                 # gradient centralisation
                        g = g - g.mean(dim=tuple(range(1, g.dim())), keepdim=True)
                    # unitwise adaptive gradient clipping (Brock et al.)
                    dims = tuple(range(1, g.dim())) if g.dim() > 1 else None
                    p_norm = p.norm(dim=dims, keepdim=True).clamp_min(1e-3) if dims \
                        else p.norm().clamp_min(1e-3)
                    g_norm = g.norm(dim=dims, keepdim=True) if dims else g.norm()
                    max_norm = p_norm * group["clip"]
                    g = torch.where(g_norm > max_norm, g * (max_norm / g_norm.clamp_min(1e-6)), g)
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = 0
                        state["exp_avg"] = torch.zeros_like(p)
                        state["exp_avg_var"] = torch.zeros_like(p)
                    state["step"] += 1
                    m, s = state["exp_avg"], state["exp_avg_var"]
                    m.mul_(b1).add_(g, alpha=1 - b1)
                    diff = g - m
                    s.mul_(b2).addcmul_(diff, diff, value=1 - b2).add_(group["eps"])
                    bc1, bc2 = 1 - b1 ** state["step"], 1 - b2 ** state["step"]
                    denom = (s.sqrt() / math.sqrt(bc2)).add_(group["eps"])
                    p.addcdiv_(m, denom, value=-group["lr"] / bc1)

    class Lookahead:
        def __init__(self, base, k=2, alpha=0.5):
            self.base, self.k, self.alpha, self.counter = base, k, alpha, 0
            self.slow = [[p.detach().clone() for p in g["params"]] for g in base.param_groups]

        def zero_grad(self):
            self.base.zero_grad()

        def step(self):
            self.base.step()
            self.counter += 1
            if self.counter % self.k == 0:
                with torch.no_grad():
                    for group, slow in zip(self.base.param_groups, self.slow):
                        for p, q in zip(group["params"], slow):
                            q.add_(p - q, alpha=self.alpha)
                            p.copy_(q)

    model = env.init(nn.Sequential(nn.Linear(5, 10), nn.SiLU(), nn.Linear(10, 1)))
    opt = Lookahead(AdaBelief(model.parameters(), lr=1e-2))

    def train_step(x, y):
        loss = F.smooth_l1_loss(model(x).squeeze(-1), y, beta=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    x = env.randn(16, 5)
    y = x[:, 0] * 2 - x[:, 1] ** 2
    for t in range(5):
        env.rec(f"loss {t}", step(x, y))
    env.rec("params", dict(model.named_parameters()))
    env.rec("slow", opt.slow)
    env.rec("steps", [opt.base.state[p]["step"] for p in model.parameters()])


def selu_fractional(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Conv2d(1, 4, 3), nn.SELU(), nn.FeatureAlphaDropout(0.1),
                                   nn.FractionalMaxPool2d(2, output_ratio=0.5), nn.Flatten(),
                                   nn.AlphaDropout(0.1), nn.Linear(4 * 3 * 3, 3)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, y):
        model.train()
        out = model(x)
        loss = F.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), out.detach()
    step = env.step(train_step)
    for t in range(4):
        loss, out = step(env.randn(4, 1, 8, 8), env.randint(0, 3, (4,)))
        env.rec(f"loss {t}", loss)
        env.rec(f"out {t}", out)
    env.rec("params", dict(model.named_parameters()))
    model.eval()
    with torch.no_grad():
        x = env.randn(2, 1, 8, 8)
        pooled = F.fractional_max_pool2d(model[1](model[0](x)), 2, output_size=3,
                                         _random_samples=torch.full((2, 4, 2), 0.5))
        env.rec("pooled", pooled)


def dsnt_keypoints(torch, env):
    nn, F = torch.nn, torch.nn.functional
    S, J = 8, 2

    def drop_block(x, p=0.2, block=3):
        if p == 0:
            return x
        gamma = p / block ** 2
        mask = (torch.rand(x.shape[0], *x.shape[2:]) < gamma).float()
        block_mask = 1 - F.max_pool2d(mask[:, None], block, stride=1, padding=block // 2)
        return x * block_mask * block_mask.numel() / block_mask.sum()

    class Block(nn.Module):
        def __init__(self, c, survival=0.8):
            super().__init__()
            self.conv, self.survival = nn.Conv2d(c, c, 3, padding=1), survival

        def forward(self, x):
            if self.training:
                keep = torch.empty(x.shape[0], 1, 1, 1).bernoulli_(self.survival)
                return x + F.relu(self.conv(x)) * keep / self.survival
            return x + F.relu(self.conv(x))

    def soft_argmax(hm):
        b, j, h, w = hm.shape
        p = F.softmax(hm.flatten(2), dim=-1).view(b, j, h, w)
        xs, ys = torch.linspace(-1, 1, w), torch.linspace(-1, 1, h)
        return torch.stack([(p.sum(2) * xs).sum(-1), (p.sum(3) * ys).sum(-1)], dim=-1), p

    def gaussian(coords, sigma=0.3):
        xs, ys = torch.linspace(-1, 1, S), torch.linspace(-1, 1, S)
        gx = torch.exp(-(xs - coords[..., :1]) ** 2 / (2 * sigma ** 2))
        gy = torch.exp(-(ys - coords[..., 1:]) ** 2 / (2 * sigma ** 2))
        g = gy.unsqueeze(-1) * gx.unsqueeze(-2)
        return g / g.sum(dim=(-2, -1), keepdim=True)

    def js(p, q, eps=1e-12):
        m = 0.5 * (p + q)
        return 0.5 * ((p * ((p + eps) / (m + eps)).log()).sum((-2, -1))
                      + (q * ((q + eps) / (m + eps)).log()).sum((-2, -1)))

    stem, body, head = nn.Conv2d(1, 6, 3, padding=1), Block(6), nn.Conv2d(6, J, 1)
    model = env.init(nn.ModuleDict({"stem": stem, "body": body, "head": head}))
    # (SGD, not Adam: the softmax over the heatmap drops a shift of a body channel that every
    # pixel passes the ReLU with: that bias's gradient is rounding, which Adam scales to lr)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)

    def train_step(img, target):
        model.train()
        h = drop_block(F.relu(model["stem"](img)))
        coords, p = soft_argmax(model["head"](model["body"](h)))
        loss = F.mse_loss(coords, target) + js(p, gaussian(target)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), coords.detach()
    step = env.step(train_step)
    for t in range(4):
        target = env.rand(3, J, 2) * 1.6 - 0.8
        img = gaussian(target).sum(1, keepdim=True)
        loss, coords = step(img, target)
        env.rec(f"loss {t}", loss)
        env.rec(f"coords {t}", coords)
    env.rec("params", dict(model.named_parameters()))


def ghostnet(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class GhostModule(nn.Module):
        def __init__(self, inp, oup, ratio=2, dw_size=3, relu=True):
            super().__init__()
            self.oup = oup
            init_channels = math.ceil(oup / ratio)
            new_channels = init_channels * (ratio - 1)
            self.primary_conv = nn.Sequential(
                nn.Conv2d(inp, init_channels, 1, bias=False), nn.BatchNorm2d(init_channels),
                nn.ReLU(inplace=True) if relu else nn.Sequential())
            self.cheap_operation = nn.Sequential(
                nn.Conv2d(init_channels, new_channels, dw_size, 1, dw_size // 2,
                          groups=init_channels, bias=False),
                nn.BatchNorm2d(new_channels), nn.ReLU(inplace=True) if relu else nn.Sequential())

        def forward(self, x):
            x1 = self.primary_conv(x)
            x2 = self.cheap_operation(x1)
            out = torch.cat([x1, x2], dim=1)
            return out[:, :self.oup, :, :]

    model = env.init(nn.Sequential(GhostModule(3, 5), GhostModule(5, 7, relu=False),
                                   nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.0),
                                   nn.Linear(7, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=0.01)

    def train_step(x, y):
        model.train()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        return loss.detach()
    step = env.step(train_step)
    for t in range(4):
        img = env.rand(4, 3, 6, 6)
        cy, cx = env.choice(6), env.choice(6)          # (Cutout of a 2x2 patch)
        img[:, :, max(cy - 1, 0):cy + 1, max(cx - 1, 0):cx + 1] = 0
        env.rec(f"loss {t}", step(img, env.randint(0, 4, (4,))))
    env.rec("params", dict(model.named_parameters()))
    env.rec("buffers", dict(model.named_buffers()))

def gradual_unfreezing(torch, env):
    """ULMFiT's fine-tuning: discriminative learning rates (lr / 2.6 ** depth per layer
    group), a slanted triangular schedule by LambdaLR and gradual unfreezing done inside
    the step by requires_grad_ on the groups not yet reached (compile replays the flags)."""
    nn, F = torch.nn, torch.nn.functional
    groups = nn.ModuleList([nn.Sequential(nn.Linear(6, 8), nn.Tanh()),
                            nn.Sequential(nn.Linear(8, 8), nn.Tanh()), nn.Linear(8, 3)])
    env.init(groups)
    base_lr, T, cut = 0.05, 6, 2
    opt = torch.optim.Adam([{"params": g.parameters(), "lr": base_lr / 2.6 ** (2 - i)}
                            for i, g in enumerate(groups)])

    def stlr(t):
        p = t / cut if t < cut else 1 - (t - cut) / (cut * (T / cut - 1))
        return (1 + p * 31) / 32
    sched = torch.optim.lr_scheduler.LambdaLR(opt, stlr)

    def train_step(x, y, n_unfrozen):
        for i, g in enumerate(groups):
            g.requires_grad_(i >= len(groups) - n_unfrozen)
        h = x
        for g in groups:
            h = g(h)
        loss = F.cross_entropy(h, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        return loss.detach(), [p.grad is not None for p in groups.parameters()]
    step = env.step(train_step)
    x, y = env.randn(12, 6), env.randint(0, 3, (12,))
    for t in range(T):
        loss, has_grad = step(x, y, min(1 + t // 2, 3))
        env.rec(f"loss {t}", loss)
        env.rec(f"has grad {t}", has_grad)
    env.rec("lrs", sched.get_last_lr())
    env.rec("params", dict(groups.named_parameters()))


PROGRAMS = {f.__name__: f for f in (repvgg, adabelief_lookahead, selu_fractional,
                                    dsnt_keypoints, ghostnet, gradual_unfreezing)}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
