"""Sweep 20 (C), part 4: generative models. A tiny DDPM: linear beta schedule, alphas_cumprod
by torch.cumprod, q_sample gathering sqrt(alpha_bar_t) per example with `.gather(-1, t)`
reshaped to (B, 1, 1, 1), a small UNet (GroupNorm, SiLU, a sinusoidal time embedding made
with torch.exp(arange * -log(10000)/(half-1)) and cat(sin, cos), a strided Conv2d down and
ConvTranspose2d up with a skip connection), the simple MSE noise loss, and one ancestral
sampling step under torch.no_grad (noise from the program's stream). Then a conv VAE:
reparameterise with eps supplied, BCE(reduction="sum") plus the analytic KL, the loss
divided by the batch, and a decode of z from the prior in eval. Run with PyTorch, with
llgrad eagerly and with llgrad.compile (tutorial_harness.py)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def ddpm(torch, env):
    nn, F = torch.nn, torch.nn.functional
    T_steps = 50
    betas = torch.linspace(1e-4, 0.02, T_steps)
    alphas = 1.0 - betas
    alphas_cumprod = torch.cumprod(alphas, dim=0)
    alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
    sqrt_ab = torch.sqrt(alphas_cumprod)
    sqrt_1m_ab = torch.sqrt(1.0 - alphas_cumprod)
    posterior_var = betas * (1.0 - alphas_cumprod_prev) / (1.0 - alphas_cumprod)

    def extract(a, t, x_shape):
        out = a.gather(-1, t)
        return out.reshape(t.shape[0], *((1,) * (len(x_shape) - 1)))

    class SinusoidalPositionEmbeddings(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dim = dim

        def forward(self, time):
            half = self.dim // 2
            emb = math.log(10000) / (half - 1)
            emb = torch.exp(torch.arange(half) * -emb)
            emb = time[:, None] * emb[None, :]
            return torch.cat((emb.sin(), emb.cos()), dim=-1)

    class Block(nn.Module):
        def __init__(self, cin, cout, tdim):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
            self.norm1 = nn.GroupNorm(4, cout)
            self.time = nn.Linear(tdim, cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
            self.norm2 = nn.GroupNorm(4, cout)
            self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x, temb):
            h = F.silu(self.norm1(self.conv1(x)))
            h = h + self.time(temb)[:, :, None, None]
            h = F.silu(self.norm2(self.conv2(h)))
            return h + self.skip(x)

    class UNet(nn.Module):
        def __init__(self, ch=8, tdim=16):
            super().__init__()
            self.time_mlp = nn.Sequential(SinusoidalPositionEmbeddings(tdim), nn.Linear(tdim, tdim), nn.GELU())
            self.inc = nn.Conv2d(1, ch, 3, padding=1)
            self.down = Block(ch, ch, tdim)
            self.pool = nn.Conv2d(ch, ch, 4, stride=2, padding=1)
            self.mid = Block(ch, 2 * ch, tdim)
            self.up = nn.ConvTranspose2d(2 * ch, ch, 4, stride=2, padding=1)
            self.dec = Block(2 * ch, ch, tdim)
            self.out = nn.Conv2d(ch, 1, 1)

        def forward(self, x, t):
            temb = self.time_mlp(t.float())
            h1 = self.down(self.inc(x), temb)
            h = self.mid(self.pool(h1), temb)
            h = self.up(h)
            h = self.dec(torch.cat([h, h1], dim=1), temb)
            return self.out(h)

    model = env.init(UNet())
    # (SGD, not Adam: some gradients here are 1e-8, rounding-level, and Adam's first step
    # scales every one to lr)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x0 = env.rand(4, 1, 8, 8) * 2 - 1

    def train_step(x0, t, noise):
        opt.zero_grad()
        x_t = extract(sqrt_ab, t, x0.shape) * x0 + extract(sqrt_1m_ab, t, x0.shape) * noise
        loss = F.mse_loss(model(x_t, t), noise)
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    for i in range(4):
        t = env.randint(0, T_steps, (4,))
        env.rec(f"loss{i}", train_step(x0, t, env.randn(4, 1, 8, 8)))

    @torch.no_grad()
    def p_sample(x, t, t_index, z):
        betas_t = extract(betas, t, x.shape)
        model_mean = (1 / extract(alphas, t, x.shape).sqrt()) * (
            x - betas_t * model(x, t) / extract(sqrt_1m_ab, t, x.shape))
        if t_index == 0:
            return model_mean
        return model_mean + torch.sqrt(extract(posterior_var, t, x.shape)) * z
    p_sample = env.step(p_sample)
    x = env.randn(2, 1, 8, 8)
    for i in reversed(range(3)):
        x = p_sample(x, torch.full((2,), i, dtype=torch.long), i, env.randn(2, 1, 8, 8))
    env.rec("sample", x)
    env.rec("state", model.state_dict())


def conv_vae(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class VAE(nn.Module):
        def __init__(self, z=4):
            super().__init__()
            self.enc = nn.Sequential(nn.Conv2d(1, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 16, 3, 2, 1),
                                     nn.ReLU(), nn.Flatten())
            self.fc_mu, self.fc_logvar = nn.Linear(64, z), nn.Linear(64, z)
            self.fc_dec = nn.Linear(z, 64)
            self.dec = nn.Sequential(nn.ConvTranspose2d(16, 8, 4, 2, 1), nn.ReLU(),
                                     nn.ConvTranspose2d(8, 1, 4, 2, 1), nn.Sigmoid())

        def encode(self, x):
            h = self.enc(x)
            return self.fc_mu(h), self.fc_logvar(h)

        def reparameterize(self, mu, logvar, eps):
            std = torch.exp(0.5 * logvar)
            return mu + eps * std

        def decode(self, z):
            return self.dec(self.fc_dec(z).view(-1, 16, 2, 2))

        def forward(self, x, eps):
            mu, logvar = self.encode(x)
            return self.decode(self.reparameterize(mu, logvar, eps)), mu, logvar

    def loss_function(recon_x, x, mu, logvar):
        bce = F.binary_cross_entropy(recon_x, x, reduction="sum")
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return bce + kld, bce, kld

    model = env.init(VAE())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = (env.rand(12, 1, 8, 8) > 0.6).float()

    def train_step(x, eps):
        model.train()
        optimizer.zero_grad()
        recon, mu, logvar = model(x, eps)
        loss, bce, kld = loss_function(recon, x, mu, logvar)
        (loss / x.size(0)).backward()
        optimizer.step()
        return loss.item(), bce.item(), kld.item()
    train_step = env.step(train_step)
    train_loss = 0
    for epoch in range(2):
        for b in range(0, 12, 5):       # (a ragged last batch of 2)
            x = data[b:b + 5]
            out = train_step(x, env.randn(x.size(0), 4))
            train_loss += out[0]
            env.rec(f"e{epoch}b{b}", out)
    env.rec("avg", train_loss / 24)
    model.eval()
    with torch.no_grad():
        env.rec("samples", env.step(model.decode)(env.randn(3, 4)))
    env.rec("state", model.state_dict())


@pytest.mark.parametrize("program", [ddpm, pytest.param(conv_vae, marks=pytest.mark.slow)])
def test_generative(program):
    run_tutorial(program)
