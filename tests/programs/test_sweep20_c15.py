"""Sweep 20 (C), part 15: flows. Rectified flow / flow matching: x_t = (1 - t) x0 + t x1 with
t broadcast by t[:, None], the velocity target x1 - x0, a time-conditioned MLP fed
torch.cat([x, t[:, None]], -1), and an Euler sampler looping over torch.linspace steps
under torch.no_grad with model.eval(). Then RealNVP: affine coupling layers with
alternating checkerboard masks kept as buffers, scale from tanh, the log-determinant
summed per example, a standard-normal prior's log_prob written out
(-0.5 * (z ** 2 + log(2 pi))), the negative log-likelihood in bits per dim, and the inverse
pass checked to reconstruct the input. Run with PyTorch, with llgrad eagerly and with
llgrad.compile (tutorial_harness.py)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def flow_matching(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class VelocityNet(nn.Module):
        def __init__(self, d=2, h=32):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(d + 1, h), nn.SiLU(), nn.Linear(h, h), nn.SiLU(), nn.Linear(h, d))

        def forward(self, x, t):
            return self.net(torch.cat([x, t[:, None]], dim=-1))

    model = env.init(VelocityNet())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def train_step(x1, x0, t):
        xt = (1 - t[:, None]) * x0 + t[:, None] * x1
        loss = F.mse_loss(model(xt, t), x1 - x0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    centers = torch.tensor([[2.0, 0.0], [-2.0, 0.0]])
    for i in range(6):
        x1 = centers[env.randint(0, 2, (16,))] + 0.2 * env.randn(16, 2)
        env.rec(f"loss{i}", train_step(x1, env.randn(16, 2), env.rand(16)))

    @torch.no_grad()
    def sample(x, n_steps=8):
        model.eval()
        ts = torch.linspace(0, 1, n_steps + 1)
        for i in range(n_steps):
            t = ts[i].expand(x.shape[0])
            x = x + (ts[i + 1] - ts[i]) * model(x, t)
        model.train()
        return x
    env.rec("samples", env.step(sample)(env.randn(5, 2)))
    env.rec("state", model.state_dict())


def realnvp(torch, env):
    nn = torch.nn

    class Coupling(nn.Module):
        def __init__(self, d, mask):
            super().__init__()
            self.register_buffer("mask", mask)
            self.s = nn.Sequential(nn.Linear(d, 16), nn.ReLU(), nn.Linear(16, d), nn.Tanh())
            self.t = nn.Sequential(nn.Linear(d, 16), nn.ReLU(), nn.Linear(16, d))

        def forward(self, x):
            x_ = x * self.mask
            s = self.s(x_) * (1 - self.mask)
            t = self.t(x_) * (1 - self.mask)
            y = x_ + (1 - self.mask) * (x * torch.exp(s) + t)
            return y, s.sum(dim=1)

        def inverse(self, y):
            y_ = y * self.mask
            s = self.s(y_) * (1 - self.mask)
            t = self.t(y_) * (1 - self.mask)
            return y_ + (1 - self.mask) * ((y - t) * torch.exp(-s))

    class RealNVP(nn.Module):
        def __init__(self, d=4, n=4):
            super().__init__()
            masks = [torch.arange(d) % 2 == (i % 2) for i in range(n)]
            self.layers = nn.ModuleList([Coupling(d, m.float()) for m in masks])

        def forward(self, x):
            log_det = torch.zeros(x.shape[0])
            for layer in self.layers:
                x, ld = layer(x)
                log_det += ld
            return x, log_det

        def inverse(self, z):
            for layer in reversed(self.layers):
                z = layer.inverse(z)
            return z

        def log_prob(self, x):
            z, log_det = self(x)
            prior = (-0.5 * (z ** 2 + math.log(2 * math.pi))).sum(dim=1)
            return prior + log_det

    flow = env.init(RealNVP())
    opt = torch.optim.Adam(flow.parameters(), lr=2e-3, weight_decay=1e-5)
    data = env.randn(32, 4) @ torch.tensor([[1.0, 0.5, 0, 0], [0, 1.0, 0.3, 0], [0, 0, 0.5, 0.2], [0.1, 0, 0, 1.0]])

    def train_step(x):
        nll = -flow.log_prob(x).mean()
        bpd = nll / (x.shape[1] * math.log(2))
        opt.zero_grad()
        nll.backward()
        torch.nn.utils.clip_grad_norm_(flow.parameters(), max_norm=5.0)
        opt.step()
        return nll, bpd.item()
    train_step = env.step(train_step)
    for i in range(5):
        env.rec(f"step{i}", train_step(data[(i % 2) * 16:(i % 2 + 1) * 16]))
    with torch.no_grad():
        z, _ = flow(data[:4])
        env.rec("recon", (flow.inverse(z), data[:4]))
    env.rec("state", flow.state_dict())


@pytest.mark.parametrize("program", [flow_matching, realnvp])
def test_flows(program):
    run_tutorial(program)
