"""Sweep 64 (p1), generative models as blog posts and course notebooks write them, run with
PyTorch, with llgrad eagerly and with llgrad compiling the training step
(tutorial_harness.py):

- DDPM on 2D points: a linear beta schedule and its cumprod kept as buffers, a timestep
  gathered per example, a sinusoidal time embedding, noise drawn outside the step;
- RealNVP on 2D moons-like data: alternating masks, tanh-bounded scales, the log-det
  summed, a standard-normal prior through torch.distributions;
- VQ-VAE: codebook distances by torch.cdist, argmin, the straight-through estimator,
  commitment loss, and an EMA codebook update by index_add_ under no_grad;
- a mixture density network: log_softmax weights, softplus scales, Normal.log_prob and
  logsumexp over components;
- Glow's ActNorm and invertible 1x1 convolution, with torch.linalg.slogdet in the
  log-likelihood."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def ddpm_2d(torch, env):
    nn, F = torch.nn, torch.nn.functional
    T = 50

    class Denoiser(nn.Module):
        def __init__(self, dim=32):
            super().__init__()
            self.dim = dim
            self.net = nn.Sequential(nn.Linear(2 + dim, 64), nn.SiLU(), nn.Linear(64, 64),
                                     nn.SiLU(), nn.Linear(64, 2))
            betas = torch.linspace(1e-4, 0.02, T)
            alphas = 1.0 - betas
            self.register_buffer("betas", betas)
            self.register_buffer("alphas_cumprod", torch.cumprod(alphas, dim=0))

        def time_embedding(self, t):
            half = self.dim // 2
            freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32)
                              / half)
            args = t.float()[:, None] * freqs[None]
            return torch.cat([torch.sin(args), torch.cos(args)], dim=-1)

        def forward(self, x, t):
            return self.net(torch.cat([x, self.time_embedding(t)], dim=1))

    model = env.init(Denoiser())
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)

    def train_step(x0, t, noise):
        a_bar = model.alphas_cumprod.gather(0, t).view(-1, 1)
        xt = a_bar.sqrt() * x0 + (1 - a_bar).sqrt() * noise
        loss = F.mse_loss(model(xt, t), noise)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        angle = env.rand(64) * 2 * math.pi
        x0 = torch.stack([torch.cos(angle), torch.sin(angle)], dim=1) + 0.05 * env.randn(64, 2)
        env.rec(f"loss {it}", step(x0, env.randint(0, T, (64,)), env.randn(64, 2)))

    @torch.no_grad()
    def sample(x):              # (the DDPM sampler, noise from env)
        for t in reversed(range(0, T, 10)):
            tt = torch.full((x.shape[0],), t, dtype=torch.long)
            eps = model(x, tt)
            a, ab = 1 - model.betas[t], model.alphas_cumprod[t]
            x = (x - (1 - a) / (1 - ab).sqrt() * eps) / a.sqrt()
            if t > 0:
                x = x + model.betas[t].sqrt() * env.randn(*x.shape)
        return x

    env.rec("samples", sample(env.randn(8, 2)))
    env.rec("params", dict(model.state_dict()))


def realnvp_2d(torch, env):
    nn = torch.nn
    D = torch.distributions

    class Coupling(nn.Module):
        def __init__(self, mask):
            super().__init__()
            self.register_buffer("mask", mask)
            self.s = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(), nn.Linear(32, 2), nn.Tanh())
            self.t = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(), nn.Linear(32, 2))

        def forward(self, x):
            x_m = x * self.mask
            s = self.s(x_m) * (1 - self.mask)
            t = self.t(x_m) * (1 - self.mask)
            y = x_m + (1 - self.mask) * (x * torch.exp(s) + t)
            return y, s.sum(dim=1)

    class RealNVP(nn.Module):
        def __init__(self):
            super().__init__()
            masks = [torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])] * 2
            self.layers = nn.ModuleList([Coupling(m) for m in masks])
            self.prior = D.Normal(torch.zeros(2), torch.ones(2))

        def log_prob(self, x):
            log_det = torch.zeros(x.shape[0])
            for layer in self.layers:
                x, ld = layer(x)
                log_det = log_det + ld
            return self.prior.log_prob(x).sum(dim=1) + log_det

    flow = env.init(RealNVP())
    opt = torch.optim.Adam(flow.parameters(), lr=1e-3)

    def train_step(x):
        loss = -flow.log_prob(x).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    for it in range(5):
        u = env.rand(48) * math.pi
        x = torch.stack([torch.cos(u), torch.sin(u) - 0.5], 1) + 0.1 * env.randn(48, 2)
        env.rec(f"nll {it}", step(x))
    with torch.no_grad():
        env.rec("logp", flow.log_prob(env.randn(6, 2)))
    env.rec("params", dict(flow.state_dict()))


def vq_vae(torch, env):
    nn, F = torch.nn, torch.nn.functional
    K, dim, decay, eps = 8, 4, 0.9, 1e-5

    class VectorQuantizerEMA(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("embedding", torch.randn(K, dim))
            self.register_buffer("cluster_size", torch.zeros(K))
            self.register_buffer("embed_avg", torch.zeros(K, dim))

        def forward(self, z):
            flat = z.reshape(-1, dim)
            dist = torch.cdist(flat, self.embedding)
            idx = dist.argmin(dim=1)
            quantized = self.embedding[idx].view_as(z)
            if self.training:
                with torch.no_grad():
                    onehot = F.one_hot(idx, K).type(flat.dtype)
                    self.cluster_size.mul_(decay).add_(onehot.sum(0), alpha=1 - decay)
                    sums = torch.zeros(K, dim).index_add_(0, idx, flat)
                    self.embed_avg.mul_(decay).add_(sums, alpha=1 - decay)
                    n = self.cluster_size.sum()
                    size = (self.cluster_size + eps) / (n + K * eps) * n
                    self.embedding.copy_(self.embed_avg / size.unsqueeze(1))
            commit = F.mse_loss(z, quantized.detach())
            quantized = z + (quantized - z).detach()
            return quantized, commit, idx

    enc = env.init(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2 * dim)))
    dec = env.init(nn.Sequential(nn.Linear(2 * dim, 16), nn.ReLU(), nn.Linear(16, 6)))
    vq = env.init(VectorQuantizerEMA())
    opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=3e-3)

    def train_step(x):
        z = enc(x).view(-1, 2, dim)
        q, commit, idx = vq(z)
        recon = dec(q.flatten(1))
        loss = F.mse_loss(recon, x) + 0.25 * commit
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), idx

    step = env.step(train_step)
    for it in range(5):
        env.rec(f"step {it}", step(env.randn(10, 6)))
        env.rec(f"codebook {it}", vq.embedding)
    env.rec("params", {**enc.state_dict(), **dec.state_dict(), **vq.state_dict()})


def mixture_density(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    n_comp = 5

    class MDN(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(1, 32), nn.Tanh())
            self.pi = nn.Linear(32, n_comp)
            self.mu = nn.Linear(32, n_comp)
            self.sigma = nn.Linear(32, n_comp)

        def forward(self, x):
            h = self.body(x)
            return F.log_softmax(self.pi(h), dim=-1), self.mu(h), F.softplus(self.sigma(h)) + 1e-3

    mdn = env.init(MDN())
    opt = torch.optim.RMSprop(mdn.parameters(), lr=5e-3)

    def train_step(x, y):
        log_pi, mu, sigma = mdn(x)
        log_p = D.Normal(mu, sigma).log_prob(y.expand_as(mu))
        loss = -torch.logsumexp(log_pi + log_p, dim=-1).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(mdn.parameters(), 5.0)
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):      # (the inverse sine problem: y -> x is multi-valued)
        y = env.rand(40, 1) * 2 - 1
        x = torch.sin(3 * y) + 0.1 * env.randn(40, 1)
        env.rec(f"loss {it}", step(x, y))
    with torch.no_grad():
        log_pi, mu, sigma = mdn(torch.linspace(-1, 1, 5).unsqueeze(1))
        env.rec("mixture", (log_pi.exp(), mu, sigma))
    env.rec("params", dict(mdn.state_dict()))


def glow_actnorm_invconv(torch, env):
    nn, F = torch.nn, torch.nn.functional
    C = 4

    class ActNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.loc = nn.Parameter(torch.zeros(1, C, 1, 1))
            self.log_scale = nn.Parameter(torch.zeros(1, C, 1, 1))
            self.register_buffer("initialized", torch.tensor(0, dtype=torch.uint8))

        def forward(self, x):
            if self.initialized.item() == 0:       # (data-dependent init, first batch)
                with torch.no_grad():
                    mean = x.mean(dim=(0, 2, 3), keepdim=True)
                    std = x.std(dim=(0, 2, 3), keepdim=True)
                    self.loc.data.copy_(-mean)
                    self.log_scale.data.copy_(torch.log(1 / (std + 1e-6)))
                    self.initialized.fill_(1)
            h, w = x.shape[2:]
            return (x + self.loc) * torch.exp(self.log_scale), h * w * self.log_scale.sum()

    class InvConv(nn.Module):
        def __init__(self, weight):
            super().__init__()
            self.weight = nn.Parameter(weight)

        def forward(self, x):
            h, w = x.shape[2:]
            logdet = h * w * torch.linalg.slogdet(self.weight)[1]
            return F.conv2d(x, self.weight.view(C, C, 1, 1)), logdet

    # (the Glow paper's init: a random rotation)
    q = env.tensor(np.linalg.qr(env.np.standard_normal((C, C)))[0].astype(np.float32))
    norm, conv = ActNorm(), InvConv(q)
    # (SGD: after the data-dependent init loc's first gradient is rounding noise, which
    # Adam's first step would scale to a full lr step)
    opt = torch.optim.SGD(list(norm.parameters()) + list(conv.parameters()), lr=0.05,
                          momentum=0.9)

    def train_step(x):
        y, ld1 = norm(x)
        z, ld2 = conv(y)
        n_pixels = x[0].numel()
        log_pz = (-0.5 * (z ** 2 + math.log(2 * math.pi))).flatten(1).sum(1)
        loss = -(log_pz + ld1 + ld2).mean() / n_pixels
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        env.rec(f"bpd {it}", step(env.randn(4, C, 3, 3) * 2.0 + 0.5))
    env.rec("params", (norm.loc, norm.log_scale, conv.weight, norm.initialized))


PROGRAMS = {"ddpm_2d": ddpm_2d, "realnvp_2d": realnvp_2d, "vq_vae": vq_vae,
            "mixture_density": mixture_density, "glow_actnorm_invconv": glow_actnorm_invconv}


# (the default run keeps the quickest; the others, 1.5-8 s each with a cold kernel
# cache, are marked slow)
FAST = ('glow_actnorm_invconv',)


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
