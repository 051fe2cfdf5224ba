"""Sweep 64 (p1), smaller models from blog posts and course notebooks, run with PyTorch,
with llgrad eagerly and with llgrad compiling the training step (tutorial_harness.py):

- capsule networks' dynamic routing by agreement: squash, routing logits updated from
  detached predictions for all but the last iteration, margin loss on capsule lengths;
- Gaussian-process regression in float64 (torch.set_default_dtype): an RBF kernel from
  softplus-parameterised hyperparameters, Cholesky factor, cholesky_solve, and the
  negative log marginal likelihood with log-det from the factor's diagonal;
- an energy-based model trained by contrastive divergence with short-run Langevin dynamics:
  torch.autograd.grad of the energy in a loop inside the step, noise drawn outside;
- mixup with a Beta-distributed mixing weight drawn by NumPy's Generator each step (a
  Python float argument that changes every call: past the 8 specialisations, one trace)
  and a permutation index;
- Bayes by Backprop: weights mu + softplus(rho) * eps with eps given, the closed-form KL
  to a Normal prior, and the ELBO;
- Kolmogorov-Arnold network layer: B-spline bases by the Cox-de Boor recursion on
  comparison masks, plus a SiLU base branch."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def capsule_routing(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_in, d_in, n_out, d_out, iters = 8, 4, 3, 6, 3

    def squash(s, dim=-1):
        sq = (s ** 2).sum(dim=dim, keepdim=True)
        return sq / (1 + sq) * s / torch.sqrt(sq + 1e-8)

    class CapsNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.primary = nn.Linear(10, n_in * d_in)
            self.W = nn.Parameter(0.1 * torch.ones(1, n_in, n_out, d_out, d_in))

        def forward(self, x):
            u = squash(self.primary(x).view(-1, n_in, d_in))
            u_hat = (self.W @ u[:, :, None, :, None]).squeeze(-1)     # (B, n_in, n_out, d)
            b = torch.zeros(x.shape[0], n_in, n_out)
            for i in range(iters):
                c = F.softmax(b, dim=2)
                if i == iters - 1:
                    return squash((c.unsqueeze(-1) * u_hat).sum(dim=1))
                v = squash((c.unsqueeze(-1) * u_hat.detach()).sum(dim=1))
                b = b + (u_hat.detach() * v.unsqueeze(1)).sum(-1)

    def margin_loss(v, y):
        lengths = v.norm(dim=-1)
        t = F.one_hot(y, n_out).float()
        loss = t * F.relu(0.9 - lengths) ** 2 + 0.5 * (1 - t) * F.relu(lengths - 0.1) ** 2
        return loss.sum(1).mean()

    net = env.init(CapsNet())
    with torch.no_grad():
        net.W.copy_(env.randn(1, n_in, n_out, d_out, d_in, scale=0.3))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)

    def train_step(x, y):
        loss = margin_loss(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"loss {it}", step(env.randn(6, 10), env.randint(0, n_out, (6,))))
    env.rec("params", dict(net.state_dict()))


def gp_regression_float64(torch, env):
    nn, F = torch.nn, torch.nn.functional
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        class ExactGP(nn.Module):
            def __init__(self):
                super().__init__()
                self.raw_lengthscale = nn.Parameter(torch.tensor(0.0))
                self.raw_outputscale = nn.Parameter(torch.tensor(0.0))
                self.raw_noise = nn.Parameter(torch.tensor(-1.0))

            def kernel(self, a, b):
                ls = F.softplus(self.raw_lengthscale)
                d2 = (a.unsqueeze(1) - b.unsqueeze(0)).pow(2).sum(-1)
                return F.softplus(self.raw_outputscale) * torch.exp(-0.5 * d2 / ls ** 2)

            def nll(self, x, y):
                n = x.shape[0]
                K = self.kernel(x, x) + (F.softplus(self.raw_noise) + 1e-6) * torch.eye(n)
                L = torch.linalg.cholesky(K)
                alpha = torch.cholesky_solve(y.unsqueeze(1), L)
                return (0.5 * (y.unsqueeze(1) * alpha).sum()
                        + torch.log(torch.diagonal(L)).sum() + 0.5 * n * math.log(2 * math.pi))

            def predict(self, x, y, xs):
                n = x.shape[0]
                K = self.kernel(x, x) + (F.softplus(self.raw_noise) + 1e-6) * torch.eye(n)
                L = torch.linalg.cholesky(K)
                Ks = self.kernel(xs, x)
                mean = Ks @ torch.cholesky_solve(y.unsqueeze(1), L)
                v = torch.linalg.solve_triangular(L, Ks.T, upper=False)
                var = self.kernel(xs, xs).diagonal() - (v ** 2).sum(0)
                return mean.squeeze(1), var

        gp = GP = ExactGP()
        env.init(GP)
        opt = torch.optim.Adam(gp.parameters(), lr=0.1)

        def train_step(x, y):
            opt.zero_grad()
            loss = gp.nll(x, y)
            loss.backward()
            opt.step()
            return loss.detach()

        step = env.step(train_step)
        x = env.rand(12, 1).double() * 4
        y = torch.sin(2 * x[:, 0]) + 0.1 * env.randn(12).double()
        for it in range(5):
            env.rec(f"nll {it}", step(x, y))
        with torch.no_grad():
            env.rec("predict", gp.predict(x, y, torch.linspace(0, 4, 5).unsqueeze(1)))
        env.rec("hyper", dict(gp.state_dict()))
    finally:
        torch.set_default_dtype(old)


def langevin_ebm(torch, env):
    nn = torch.nn
    K, step_size = 5, 0.05

    energy = env.init(nn.Sequential(nn.Linear(2, 32), nn.SiLU(), nn.Linear(32, 32), nn.SiLU(),
                                    nn.Linear(32, 1)))
    opt = torch.optim.Adam(energy.parameters(), lr=1e-3, betas=(0.0, 0.999))

    def train_step(x_pos, x_init, noises):
        x = x_init.clone().requires_grad_(True)
        for k in range(K):                      # (short-run Langevin, no graph kept)
            g = torch.autograd.grad(energy(x).sum(), x)[0]
            x = (x - step_size / 2 * g + math.sqrt(step_size) * noises[k]).detach()
            x.requires_grad_(True)
        x_neg = x.detach()
        e_pos, e_neg = energy(x_pos), energy(x_neg)
        loss = e_pos.mean() - e_neg.mean() + 0.1 * (e_pos ** 2 + e_neg ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), x_neg

    step = env.step(train_step)
    for it in range(4):
        x_pos = env.randn(16, 2) * 0.3 + torch.tensor([1.0, -1.0])
        noises = [env.randn(16, 2) for _ in range(K)]
        env.rec(f"step {it}", step(x_pos, env.rand(16, 2) * 4 - 2, noises))
    env.rec("params", dict(energy.state_dict()))


def mixup_numpy_lambda(torch, env):
    nn, F = torch.nn, torch.nn.functional

    model = env.init(nn.Sequential(nn.Linear(6, 24), nn.ReLU(), nn.Linear(24, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = nn.CrossEntropyLoss()

    def mixup_criterion(pred, y_a, y_b, lam):
        return lam * criterion(pred, y_a) + (1 - lam) * criterion(pred, y_b)

    def train_step(x, y, lam, index):
        mixed_x = lam * x + (1 - lam) * x[index, :]
        y_a, y_b = y, y[index]
        out = model(mixed_x)
        loss = mixup_criterion(out, y_a, y_b, lam)
        opt.zero_grad()
        loss.backward()
        opt.step()
        correct = (lam * out.argmax(1).eq(y_a).sum().float()
                   + (1 - lam) * out.argmax(1).eq(y_b).sum().float())
        return loss.item(), correct.item()

    step = env.step(train_step)
    rng = np.random.default_rng(1)
    for it in range(10):                        # (more calls than the 8 specialisations)
        lam = rng.beta(0.4, 0.4)
        index = torch.tensor(rng.permutation(8))
        env.rec(f"step {it}", step(env.randn(8, 6), env.randint(0, 4, (8,)), lam, index))
    if env.compiled:        # (the changing lam is a graph input: no trace per value)
        assert step.n_traces == 1, step.n_traces
    env.rec("params", dict(model.state_dict()))


def bayes_by_backprop(torch, env):
    nn, F = torch.nn, torch.nn.functional
    prior_sigma = 1.0

    class BayesLinear(nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            self.w_mu = nn.Parameter(torch.zeros(n_out, n_in))
            self.w_rho = nn.Parameter(torch.full((n_out, n_in), -3.0))
            self.b_mu = nn.Parameter(torch.zeros(n_out))
            self.b_rho = nn.Parameter(torch.full((n_out,), -3.0))

        def kl(self):
            total = 0.0
            for mu, rho in ((self.w_mu, self.w_rho), (self.b_mu, self.b_rho)):
                sigma = F.softplus(rho)
                total = total + (torch.log(prior_sigma / sigma)
                                 + (sigma ** 2 + mu ** 2) / (2 * prior_sigma ** 2) - 0.5).sum()
            return total

        def forward(self, x, eps_w, eps_b):
            w = self.w_mu + F.softplus(self.w_rho) * eps_w
            b = self.b_mu + F.softplus(self.b_rho) * eps_b
            return F.linear(x, w, b)

    l1, l2 = BayesLinear(3, 16), BayesLinear(16, 1)
    with torch.no_grad():
        l1.w_mu.copy_(env.randn(16, 3, scale=0.5))
        l2.w_mu.copy_(env.randn(1, 16, scale=0.5))
    opt = torch.optim.Adam(list(l1.parameters()) + list(l2.parameters()), lr=1e-2)
    n_data = 100

    def train_step(x, y, eps):
        h = torch.relu(l1(x, eps[0], eps[1]))
        pred = l2(h, eps[2], eps[3])
        nll = F.gaussian_nll_loss(pred, y, torch.full_like(pred, 0.1), reduction="sum")
        loss = nll + (l1.kl() + l2.kl()) * x.shape[0] / n_data
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), nll.detach()

    step = env.step(train_step)
    w = env.randn(3, 1)
    for it in range(5):
        x = env.randn(10, 3)
        eps = [env.randn(16, 3), env.randn(16), env.randn(1, 16), env.randn(1)]
        env.rec(f"step {it}", step(x, torch.tanh(x @ w), eps))
    env.rec("params", {**l1.state_dict(), **l2.state_dict()})


def kan_bspline(torch, env):
    nn, F = torch.nn, torch.nn.functional
    grid_size, order = 5, 3

    class KANLayer(nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            h = 2.0 / grid_size
            grid = torch.arange(-order, grid_size + order + 1) * h - 1.0
            self.register_buffer("grid", grid.expand(n_in, -1).contiguous())
            self.base = nn.Linear(n_in, n_out, bias=False)
            self.spline_weight = nn.Parameter(torch.zeros(n_out, n_in, grid_size + order))

        def b_splines(self, x):
            g = self.grid
            x = x.unsqueeze(-1)
            bases = ((x >= g[:, :-1]) & (x < g[:, 1:])).to(x.dtype)
            for k in range(1, order + 1):
                bases = ((x - g[:, :-(k + 1)]) / (g[:, k:-1] - g[:, :-(k + 1)]) * bases[..., :-1]
                         + (g[:, k + 1:] - x) / (g[:, k + 1:] - g[:, 1:-k]) * bases[..., 1:])
            return bases

        def forward(self, x):
            spline = F.linear(self.b_splines(x).flatten(1), self.spline_weight.flatten(1))
            return self.base(F.silu(x)) + spline

    layers = nn.Sequential(KANLayer(2, 5), KANLayer(5, 1))
    with torch.no_grad():
        for i, layer in enumerate(layers):
            layer.spline_weight.copy_(env.randn(*layer.spline_weight.shape, scale=0.1))
    env.init(layers)
    opt = torch.optim.LBFGS(layers.parameters(), lr=0.5, max_iter=3, history_size=5,
                            line_search_fn="strong_wolfe")

    x = env.rand(32, 2) * 1.8 - 0.9
    y = torch.exp(torch.sin(math.pi * x[:, :1]) + x[:, 1:] ** 2)

    def closure():
        opt.zero_grad()
        loss = F.mse_loss(layers(x), y)
        loss.backward()
        return loss

    step = env.step(closure)
    for it in range(3):
        env.rec(f"loss {it}", opt.step(step))
    env.rec("params", dict(layers.state_dict()))


PROGRAMS = {"capsule_routing": capsule_routing, "gp_regression_float64": gp_regression_float64,
            "langevin_ebm": langevin_ebm, "mixup_numpy_lambda": mixup_numpy_lambda,
            "bayes_by_backprop": bayes_by_backprop, "kan_bspline": kan_bspline}


# (the default run keeps the quickest; the others, 1.5-8 s each with a cold kernel
# cache, are marked slow)
FAST = ('gp_regression_float64', 'mixup_numpy_lambda')


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
