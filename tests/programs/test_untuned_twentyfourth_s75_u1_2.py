"""Batch 24 (s75, u1), second file: Bayesian optimisation (a GP surrogate, expected improvement
by torch.special.ndtr over a torch.cartesian_prod grid, gradient ascent on the acquisition
with the candidate point as the optimised leaf, clamp_ under no_grad, a new compiled-step
optimizer each round) and Burgess's beta-VAE with an annealed capacity (Conv2d encoder,
Unflatten + ConvTranspose2d decoder, gamma * |KL - C|, per-dimension KL)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]     # (1-4 s a program: the slow set)

def bayes_opt(torch, env):
    """Bayesian optimisation: a GP surrogate with fixed hyperparameters, expected improvement
    via torch.special.ndtr, the best point of a torch.cartesian_prod grid, then gradient
    ascent on EI from it (the input a parameter), the new point appended to the data."""
    def f(x):
        return -((x - 0.3) ** 2).sum(-1) + 0.1 * torch.sin(8 * x).sum(-1)

    X = env.rand(5, 2)
    y = f(X)
    g = torch.linspace(0, 1, 6)
    grid = torch.cartesian_prod(g, g)

    def posterior(Xs, X, y, ls=0.3, noise=1e-3):
        K = torch.exp(-0.5 * torch.cdist(X / ls, X / ls) ** 2) + noise * torch.eye(len(X))
        Ks = torch.exp(-0.5 * torch.cdist(X / ls, Xs / ls) ** 2)
        L = torch.linalg.cholesky(K)
        ym = y.mean()
        mu = Ks.T @ torch.cholesky_solve((y - ym).unsqueeze(-1), L) + ym
        v = torch.linalg.solve_triangular(L, Ks, upper=False)
        var = (1.0 - (v * v).sum(0)).clamp_min(1e-9)
        return mu.squeeze(-1), var.sqrt()

    def expected_improvement(Xs, X, y, xi=0.01):
        mu, sigma = posterior(Xs, X, y)
        imp = mu - y.max() - xi
        z = imp / sigma
        pdf = torch.exp(-0.5 * z ** 2) / math.sqrt(2 * math.pi)
        return imp * torch.special.ndtr(z) + sigma * pdf

    def ascent_step(x, opt, X, y):
        opt.zero_grad()
        loss = -expected_improvement(x, X, y).sum()
        loss.backward()
        opt.step()
        with torch.no_grad():
            x.clamp_(0, 1)
        return loss.detach()

    step = env.step(ascent_step)
    for it in range(3):
        with torch.no_grad():
            ei = expected_improvement(grid, X, y)
        start = grid[ei.argmax()].clone().unsqueeze(0)
        x = start.clone().requires_grad_()
        opt = torch.optim.Adam([x], lr=0.05)
        for _ in range(3):
            loss = step(x, opt, X, y)
        env.rec(f"it {it}", (ei, start, x, loss))
        X = torch.cat([X, x.detach()])
        y = torch.cat([y, f(x.detach())])
        env.rec(f"best {it}", f"iter {it}: best y {y.max().item():.5f} at "
                              f"{X[y.argmax()].tolist()}")


def beta_vae(torch, env):
    """Burgess et al.'s beta-VAE with a capacity C annealed linearly: loss = recon +
    gamma * |KL - C|, a conv encoder / ConvTranspose2d decoder, the reparameterisation
    with given noise, the KL per latent dimension reported (which latents are active)."""
    nn, F = torch.nn, torch.nn.functional
    Zd, gamma, C_max, C_steps = 3, 10.0, 2.0, 4

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Conv2d(1, 4, 4, 2, 1), nn.ReLU(),
                                     nn.Conv2d(4, 8, 4, 2, 1), nn.ReLU(), nn.Flatten())
            self.fc = nn.Linear(8 * 2 * 2, 2 * Zd)
            self.dec_fc = nn.Linear(Zd, 8 * 2 * 2)
            self.dec = nn.Sequential(nn.Unflatten(1, (8, 2, 2)), nn.ReLU(),
                                     nn.ConvTranspose2d(8, 4, 4, 2, 1), nn.ReLU(),
                                     nn.ConvTranspose2d(4, 1, 4, 2, 1))

        def forward(self, x, eps):
            mu, logvar = self.fc(self.enc(x)).chunk(2, dim=1)
            z = mu + torch.exp(0.5 * logvar) * eps
            return self.dec(self.dec_fc(z)), mu, logvar

    model = env.init(VAE())
    opt = torch.optim.Adam(model.parameters(), lr=5e-3, betas=(0.9, 0.999))
    x = (env.rand(6, 1, 8, 8) > 0.5).float()

    def train_step(x, eps, it):
        recon, mu, logvar = model(x, eps)
        rec = F.binary_cross_entropy_with_logits(recon, x, reduction="sum") / x.size(0)
        kld_dims = (-0.5 * (1 + logvar - mu.pow(2) - logvar.exp())).mean(0)
        kld = kld_dims.sum()
        C = min(C_max / C_steps * it, C_max)
        loss = rec + gamma * (kld - C).abs()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), rec.detach(), kld_dims.detach()

    step = env.step(train_step)
    for it in range(4):
        loss, rec, kd = step(x, env.randn(6, Zd), it)
        env.rec(f"it {it}", f"[{it}] loss {loss:.4f} recon {rec.item():.4f} "
                            f"active {(kd > 0.01).sum().item()}")
        env.rec(f"kld {it}", kd)
    env.rec("params", dict(model.named_parameters()))


PROGRAMS = {f.__name__: f for f in (bayes_opt, beta_vae)}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
