"""Sweep 65 (p1), probabilistic-regression and RL programs as blog posts write them, run with
PyTorch, with llgrad eagerly and with llgrad compiling the training step
(tutorial_harness.py):

- angle regression with a von Mises likelihood: loc by atan2 of two outputs, concentration
  by softplus, VonMises.log_prob (Bessel I0 inside);
- a full-covariance Gaussian head: the Cholesky factor filled from a vector through
  torch.tril_indices, a softplus diagonal, MultivariateNormal(scale_tril=...).log_prob and
  its entropy;
- robust regression with a StudentT likelihood whose degrees of freedom are learned, a
  Laplace term beside it;
- deep evidential regression (Amini et al.): the Normal-Inverse-Gamma NLL with lgamma and
  the evidence regulariser;
- evidential classification (Sensoy et al.): a Dirichlet from ReLU evidence, the digamma
  loss and the KL to the uniform Dirichlet annealed by a Python coefficient;
- SAC's update with a tanh-squashed Gaussian (noise given), the SpinningUp log-prob
  correction, twin critics, polyak targets by lerp_ in the step, a learned temperature;
- a Poisson GLM with PoissonNLLLoss(full=True) and an xlogy deviance."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def vonmises_angles(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    net = env.init(nn.Sequential(nn.Linear(3, 24), nn.Tanh(), nn.Linear(24, 3)))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)

    def train_step(x, theta):
        out = net(x)
        loc = torch.atan2(out[:, 0], out[:, 1])
        kappa = F.softplus(out[:, 2]) + 1e-3
        loss = -D.VonMises(loc, kappa).log_prob(theta).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), kappa.mean().detach()

    step = env.step(train_step)
    for it in range(5):
        x = env.randn(32, 3)
        theta = torch.remainder(x[:, 0] * 1.5 + 0.3 * x[:, 1], 2 * math.pi) - math.pi
        env.rec(f"step {it}", step(x, theta))
    env.rec("params", dict(net.state_dict()))


def full_cov_gaussian(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    d = 3
    rows, cols = torch.tril_indices(d, d)
    n_tril = rows.numel()

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 32), nn.ReLU())
            self.mean = nn.Linear(32, d)
            self.tril = nn.Linear(32, n_tril)

        def forward(self, x):
            h = self.body(x)
            L = torch.zeros(x.shape[0], d, d)
            L[:, rows, cols] = self.tril(h)
            diag = F.softplus(torch.diagonal(L, dim1=-2, dim2=-1)) + 1e-3
            L = torch.tril(L, -1) + torch.diag_embed(diag)
            return D.MultivariateNormal(self.mean(h), scale_tril=L)

    model = env.init(Head())
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(x, y):
        dist = model(x)
        nll = -dist.log_prob(y).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        return nll.detach(), dist.entropy().mean().detach()

    step = env.step(train_step)
    mix = env.randn(d, d)
    for it in range(5):
        x = env.randn(16, 4)
        y = x[:, :d] + 0.3 * env.randn(16, d) @ mix
        env.rec(f"step {it}", step(x, y))
    env.rec("params", dict(model.state_dict()))


def student_t_robust(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions

    class Robust(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(5, 1)
            self.raw_df = nn.Parameter(torch.tensor(1.0))
            self.raw_scale = nn.Parameter(torch.tensor(0.0))

        def forward(self, x):
            df = F.softplus(self.raw_df) + 1.0
            scale = F.softplus(self.raw_scale)
            loc = self.lin(x).squeeze(-1)
            return D.StudentT(df, loc, scale), D.Laplace(loc, scale)

    model = env.init(Robust())
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)

    def train_step(x, y):
        t, lap = model(x)
        loss = -t.log_prob(y).mean() - 0.1 * lap.log_prob(y).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), t.df.detach()

    step = env.step(train_step)
    w = env.randn(5)
    for it in range(5):
        x = env.randn(32, 5)
        noise = env.randn(32) * (1 + 4 * (env.rand(32) < 0.1).float())
        env.rec(f"step {it}", step(x, x @ w + 0.2 * noise))
    env.rec("params", dict(model.state_dict()))


def evidential_regression(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class NIG(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(1, 32), nn.ReLU(), nn.Linear(32, 4))

        def forward(self, x):
            gamma, lognu, logalpha, logbeta = self.body(x).chunk(4, dim=-1)
            return (gamma, F.softplus(lognu), F.softplus(logalpha) + 1, F.softplus(logbeta))

    def nig_nll(y, gamma, v, alpha, beta):
        omega = 2 * beta * (1 + v)
        return (0.5 * torch.log(math.pi / v) - alpha * torch.log(omega)
                + (alpha + 0.5) * torch.log(v * (y - gamma) ** 2 + omega)
                + torch.lgamma(alpha) - torch.lgamma(alpha + 0.5))

    model = env.init(NIG())
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    coeff = 0.01

    def train_step(x, y):
        gamma, v, alpha, beta = model(x)
        nll = nig_nll(y, gamma, v, alpha, beta).mean()
        reg = (torch.abs(y - gamma) * (2 * v + alpha)).mean()
        loss = nll + coeff * reg
        opt.zero_grad()
        loss.backward()
        opt.step()
        epistemic = beta / (v * (alpha - 1))
        return loss.detach(), epistemic.mean().detach()

    step = env.step(train_step)
    for it in range(5):
        x = env.rand(32, 1) * 8 - 4
        env.rec(f"step {it}", step(x, x ** 3 / 10 + 0.3 * env.randn(32, 1)))
    env.rec("params", dict(model.state_dict()))


def evidential_classification(torch, env):
    nn, F = torch.nn, torch.nn.functional
    K = 4
    model = env.init(nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, K)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=5e-3)

    def kl_uniform(alpha):
        ones = torch.ones(1, K)
        S = alpha.sum(1, keepdim=True)
        first = (torch.lgamma(S) - torch.lgamma(alpha).sum(1, keepdim=True)
                 + torch.lgamma(ones).sum(1, keepdim=True)
                 - torch.lgamma(ones.sum(1, keepdim=True)))
        second = ((alpha - ones) * (torch.digamma(alpha) - torch.digamma(S))).sum(1, keepdim=True)
        return first + second

    def train_step(x, y, annealing):
        evidence = F.relu(model(x))
        alpha = evidence + 1
        S = alpha.sum(1, keepdim=True)
        y1 = F.one_hot(y, K).float()
        A = (y1 * (torch.digamma(S) - torch.digamma(alpha))).sum(1, keepdim=True)
        kl_alpha = (alpha - 1) * (1 - y1) + 1
        loss = (A + annealing * kl_uniform(kl_alpha)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        uncertainty = K / S
        return loss.detach(), uncertainty.mean().detach()

    step = env.step(train_step)
    for epoch in range(6):
        x = env.randn(24, 6)
        y = (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long()
        env.rec(f"step {epoch}", step(x, y, min(1.0, epoch / 4)))
    env.rec("params", dict(model.state_dict()))


def sac_update(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    obs_dim, act_dim, gamma, polyak = 5, 2, 0.99, 0.995

    def mlp(i, o):
        return nn.Sequential(nn.Linear(i, 32), nn.ReLU(), nn.Linear(32, o))

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp(obs_dim, 2 * act_dim)

        def forward(self, obs, eps):
            mu, log_std = self.net(obs).chunk(2, -1)
            std = torch.clamp(log_std, -20, 2).exp()
            u = mu + std * eps
            logp = D.Normal(mu, std).log_prob(u).sum(-1)
            logp = logp - (2 * (math.log(2) - u - F.softplus(-2 * u))).sum(-1)
            return torch.tanh(u), logp

    actor = env.init(Actor())
    q1, q2 = env.init(mlp(obs_dim + act_dim, 1)), env.init(mlp(obs_dim + act_dim, 1))
    q1_t, q2_t = env.init(mlp(obs_dim + act_dim, 1)), env.init(mlp(obs_dim + act_dim, 1))
    q1_t.load_state_dict(q1.state_dict())
    q2_t.load_state_dict(q2.state_dict())
    for p in list(q1_t.parameters()) + list(q2_t.parameters()):
        p.requires_grad = False
    log_alpha = torch.zeros(1, requires_grad=True)
    q_opt = torch.optim.Adam(list(q1.parameters()) + list(q2.parameters()), lr=3e-3)
    pi_opt = torch.optim.Adam(actor.parameters(), lr=3e-3)
    a_opt = torch.optim.Adam([log_alpha], lr=3e-3)
    target_entropy = -float(act_dim)

    def update(o, a, r, o2, d, eps, eps2):
        alpha = log_alpha.exp().detach()
        with torch.no_grad():
            a2, logp2 = actor(o2, eps2)
            sa2 = torch.cat([o2, a2], -1)
            q_targ = torch.min(q1_t(sa2), q2_t(sa2)).squeeze(-1)
            backup = r + gamma * (1 - d) * (q_targ - alpha * logp2)
        sa = torch.cat([o, a], -1)
        loss_q = ((q1(sa).squeeze(-1) - backup) ** 2).mean() + \
            ((q2(sa).squeeze(-1) - backup) ** 2).mean()
        q_opt.zero_grad()
        loss_q.backward()
        q_opt.step()

        pi, logp = actor(o, eps)
        spi = torch.cat([o, pi], -1)
        loss_pi = (alpha * logp - torch.min(q1(spi), q2(spi)).squeeze(-1)).mean()
        pi_opt.zero_grad()
        loss_pi.backward()
        pi_opt.step()

        loss_alpha = -(log_alpha * (logp.detach() + target_entropy)).mean()
        a_opt.zero_grad()
        loss_alpha.backward()
        a_opt.step()
        with torch.no_grad():
            for net, targ in ((q1, q1_t), (q2, q2_t)):
                for p, p_t in zip(net.parameters(), targ.parameters()):
                    p_t.lerp_(p, 1 - polyak)
        return loss_q.detach(), loss_pi.detach(), loss_alpha.detach()

    step = env.step(update)
    for it in range(4):
        o, o2 = env.randn(16, obs_dim), env.randn(16, obs_dim)
        a = env.rand(16, act_dim) * 2 - 1
        d = (env.rand(16) < 0.1).float()
        env.rec(f"step {it}", step(o, a, env.randn(16), o2, d,
                                   env.randn(16, act_dim), env.randn(16, act_dim)))
    env.rec("params", (dict(actor.state_dict()), dict(q1.state_dict()),
                       dict(q2_t.state_dict()), log_alpha))


def poisson_glm(torch, env):
    nn = torch.nn
    model = env.init(nn.Linear(4, 1))
    crit = nn.PoissonNLLLoss(log_input=True, full=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)

    def train_step(x, y):
        log_rate = model(x).squeeze(-1)
        loss = crit(log_rate, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            mu = log_rate.exp()
            deviance = 2 * (torch.xlogy(y, y / mu) - (y - mu)).sum()
        return loss.detach(), deviance

    step = env.step(train_step)
    w = env.randn(4) * 0.5
    for it in range(5):
        x = env.randn(32, 4)
        y = torch.floor((x @ w).exp() * env.rand(32) * 2)
        env.rec(f"step {it}", step(x, y))
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {"vonmises_angles": vonmises_angles, "full_cov_gaussian": full_cov_gaussian,
            "student_t_robust": student_t_robust,
            "evidential_regression": evidential_regression,
            "evidential_classification": evidential_classification,
            "sac_update": sac_update, "poisson_glm": poisson_glm}

# (the default run keeps the quickest; the others are marked slow)
FAST = ("poisson_glm", "evidential_classification")


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
