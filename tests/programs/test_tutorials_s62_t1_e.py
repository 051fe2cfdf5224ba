"""Sweep 62 (t1), file e: tutorial programs on torch.distributions objects the earlier
sweeps' programs had not trained through, run with PyTorch, with llgrad eagerly and with
llgrad compiling each whole training step (tutorial_harness.py; in-step draws come from
the library's own generator, whose streams are torch's, so they are compared with torch):

- a categorical VAE with the Gumbel-softmax trick (Jang et al.): RelaxedOneHotCategorical
  rsample, a straight-through hard one_hot, kl_divergence between OneHotCategorical
  posterior and a uniform prior, Bernoulli likelihood by BCE-with-logits;
- robust regression with a Student-t likelihood (learned degrees of freedom, softplus
  scale from the network): StudentT.log_prob, .mean and .entropy inside the step;
- mixup (Zhang et al.) with lam drawn by Beta(1, 1).sample() and the partner order by
  torch.randperm inside the compiled step."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _grads(model):
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def gumbel_softmax_vae(torch, env):
    nn, F, D = torch.nn, torch.nn.functional, torch.distributions
    n_lat, n_cat, d = 4, 5, 12
    data = (env.rand(32, d) > 0.5).float()

    class CategoricalVAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(d, 32), nn.ELU(), nn.Linear(32, n_lat * n_cat))
            self.dec = nn.Sequential(nn.Linear(n_lat * n_cat, 32), nn.ELU(), nn.Linear(32, d))

        def forward(self, x, tau):
            logits = self.enc(x).view(-1, n_lat, n_cat)
            z = D.RelaxedOneHotCategorical(torch.tensor(tau), logits=logits).rsample()
            z_hard = F.one_hot(z.argmax(-1), n_cat).float()
            z = (z_hard - z).detach() + z          # straight-through
            return self.dec(z.view(-1, n_lat * n_cat)), logits

    model = env.init(CategoricalVAE())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    prior = D.OneHotCategorical(probs=torch.full((n_lat, n_cat), 1.0 / n_cat))

    def train_step(x, tau):
        optimizer.zero_grad()
        recon, logits = model(x, tau)
        kl = D.kl_divergence(D.OneHotCategorical(logits=logits), prior).sum(-1).mean()
        nll = F.binary_cross_entropy_with_logits(recon, x, reduction="sum") / x.shape[0]
        loss = nll + kl
        loss.backward()
        optimizer.step()
        return loss.detach(), kl.detach()

    step = env.step(train_step)
    torch.manual_seed(3)
    for it in range(4):
        b = (it % 2) * 16
        env.rec(f"it{it}", step(data[b:b + 16], 1.0))
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


def student_t_regression(torch, env):
    nn, F, D = torch.nn, torch.nn.functional, torch.distributions
    x = env.randn(40, 3)
    y = x @ env.randn(3) + 0.3 * env.randn(40) + (env.rand(40) < 0.1).float() * 5.0

    class StudentTNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(3, 16), nn.GELU(), nn.Linear(16, 2))
            self.raw_df = nn.Parameter(torch.tensor(1.0))

        def forward(self, x):
            loc, raw_scale = self.body(x).unbind(-1)
            return D.StudentT(F.softplus(self.raw_df) + 1.0, loc, F.softplus(raw_scale) + 1e-3)

    model = env.init(StudentTNet())
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-2)

    def train_step(x, y):
        optimizer.zero_grad()
        dist = model(x)
        loss = -dist.log_prob(y).mean()
        loss.backward()
        optimizer.step()
        return loss.detach(), dist.mean.detach(), dist.entropy().detach()

    step = env.step(train_step)
    for it in range(4):
        b = (it % 2) * 20
        env.rec(f"it{it}", step(x[b:b + 20], y[b:b + 20]))
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


def mixup_beta_randperm(torch, env):
    nn, F = torch.nn, torch.nn.functional
    x_all, y_all = env.randn(32, 2, 8, 8), env.randint(0, 3, (32,))
    model = env.init(nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(),
                                   nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    beta = torch.distributions.Beta(torch.tensor(1.0), torch.tensor(1.0))

    def mixup_data(x, y):
        lam = beta.sample()
        index = torch.randperm(x.size(0))
        return lam * x + (1 - lam) * x[index, :], y, y[index], lam

    def train_step(x, y):
        inputs, targets_a, targets_b, lam = mixup_data(x, y)
        out = model(inputs)
        loss = lam * F.cross_entropy(out, targets_a) + (1 - lam) * F.cross_entropy(out, targets_b)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item(), lam.item()

    step = env.step(train_step)
    torch.manual_seed(1)
    for it in range(4):
        b = (it % 2) * 16
        env.rec(f"it{it}", step(x_all[b:b + 16], y_all[b:b + 16]))
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {        # name: (program, most traces of any of its compiled steps)
    "gumbel_softmax_vae": (gumbel_softmax_vae, 1),
    "student_t_regression": (student_t_regression, 1),
    "mixup_beta_randperm": (mixup_beta_randperm, 1),
}
SLOW = {"gumbel_softmax_vae"}       # (cold compile: ~10 s)


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW
                                               else [], id=n) for n in PROGRAMS])
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program)
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)
