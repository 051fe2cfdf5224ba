"""Sweep 62 (t1), file a: tutorial programs of kinds the earlier sweeps had not written,
run with PyTorch, with llgrad eagerly and with llgrad compiling each whole training step
(forward, loss, backward, optimizer step) through tutorial_harness.py: the same losses,
parameters and gradients, no warning from llgrad (so no eager fallback) and compiled code
for every step.

- IGR / DeepSDF-style signed distance learning: Softplus(beta=100) MLP, the SDF's gradient
  in the points by autograd.grad(create_graph=True), an eikonal and a normal loss;
- exact Gaussian-process regression (the GPyTorch tutorial's model written by hand):
  softplus-constrained hyperparameters, cdist RBF kernel, GPyTorch's psd_safe_cholesky
  (cholesky_ex, then jitter retries behind `if not torch.any(info): return L`),
  cholesky_solve and the negative marginal log likelihood; predictive mean under no_grad;
- Poincare embeddings (Nickel & Kiela) of a small tree's transitive closure: the acosh
  distance as the repository's custom autograd.Function (hand-written backward on
  expanded views), negative sampling with cross entropy, and the paper's Riemannian SGD
  written as a torch.optim.Optimizer subclass (rescaled gradient, projection back into
  the ball)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _grads(model):
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def igr_eikonal_sdf(torch, env):
    """Implicit geometric regularisation (Gropp et al.): f(x) ~ 0 and grad f ~ normal on
    the surface samples, |grad f| ~ 1 (eikonal) at points near the surface and in the box."""
    nn = torch.nn
    n, hidden = 48, 32
    theta = env.rand(n) * (2 * math.pi)
    surf = torch.stack([0.6 * torch.cos(theta), 0.6 * torch.sin(theta)], dim=1)
    normals = surf / 0.6

    class SDFNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin0 = nn.Linear(2, hidden)
            self.lin1 = nn.Linear(hidden, hidden)
            self.lin2 = nn.Linear(hidden + 2, hidden)     # DeepSDF's skip connection
            self.out = nn.Linear(hidden, 1)
            self.act = nn.Softplus(beta=100)

        def forward(self, x):
            h = self.act(self.lin0(x))
            h = self.act(self.lin1(h))
            h = self.act(self.lin2(torch.cat([h, x], dim=-1)) / math.sqrt(2))
            return self.out(h).squeeze(-1)

    model = env.init(SDFNet())
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[3], gamma=0.5)

    def gradient(y, x):
        g, = torch.autograd.grad(y, x, grad_outputs=torch.ones_like(y), create_graph=True,
                                 retain_graph=True, only_inputs=True)
        return g

    def train_step(pts, nrm, local_noise, global_pts):
        optimizer.zero_grad()
        pts = pts.clone().requires_grad_(True)
        space = torch.cat([pts.detach() + local_noise, global_pts]).requires_grad_(True)
        on_surface = model(pts)
        off_surface = model(space)
        g_surf = gradient(on_surface, pts)
        g_space = gradient(off_surface, space)
        surface_loss = on_surface.abs().mean()
        normal_loss = (g_surf - nrm).norm(2, dim=-1).mean()
        eikonal = ((g_space.norm(2, dim=-1) - 1) ** 2).mean()
        loss = surface_loss + normal_loss + 0.1 * eikonal
        loss.backward()
        optimizer.step()
        return loss.detach(), eikonal.detach()

    step = env.step(train_step)
    for it in range(5):
        idx = env.randint(0, n, (24,))
        out = step(surf[idx], normals[idx], 0.05 * env.randn(24, 2), env.rand(8, 2) * 2 - 1)
        env.rec(f"step {it}", out)
        scheduler.step()
    env.rec("grads", _grads(model))
    with torch.no_grad():
        probe = torch.tensor([[0.0, 0.0], [0.6, 0.0], [0.0, -0.9]])
        env.rec("sdf at probes", model(probe))
    env.rec("params", dict(model.state_dict()))


def gp_exact_marginal_likelihood(torch, env):
    """Exact GP regression trained by the negative marginal log likelihood (GPyTorch's
    simple regression tutorial, by hand): K = s * exp(-|x - x'|^2 / (2 l^2)) + noise * I,
    L = cholesky(K), alpha = cholesky_solve(y - m, L), nll = y'alpha/2 + sum log diag L."""
    nn, F = torch.nn, torch.nn.functional
    n, n_test = 20, 6
    train_x = env.rand(n, 1)
    train_y = torch.sin(2 * math.pi * train_x[:, 0]) + 0.1 * env.randn(n)
    test_x = torch.linspace(0, 1, n_test).unsqueeze(-1)

    def psd_safe_cholesky(A, jitter=1e-6, max_tries=3):
        """GPyTorch's: Cholesky, retried with a growing jitter on the diagonal."""
        L, info = torch.linalg.cholesky_ex(A)
        if not torch.any(info):
            return L
        Aprime = A.clone()
        jitter_prev = 0
        for i in range(max_tries):
            jitter_new = jitter * (10 ** i)
            Aprime.diagonal(dim1=-2, dim2=-1).add_(jitter_new - jitter_prev)
            jitter_prev = jitter_new
            L, info = torch.linalg.cholesky_ex(Aprime)
            if not torch.any(info):
                return L
        raise ValueError("matrix not positive definite after adding jitter")

    class ExactGP(nn.Module):
        def __init__(self):
            super().__init__()
            self.raw_lengthscale = nn.Parameter(torch.zeros(1))
            self.raw_outputscale = nn.Parameter(torch.zeros(()))
            self.raw_noise = nn.Parameter(torch.zeros(()))
            self.mean_constant = nn.Parameter(torch.zeros(()))

        def kernel(self, a, b):
            ls = F.softplus(self.raw_lengthscale)
            sq = torch.cdist(a / ls, b / ls).pow(2)
            return F.softplus(self.raw_outputscale) * torch.exp(-0.5 * sq)

        def covariance(self, x):
            noise = F.softplus(self.raw_noise) + 1e-4
            return self.kernel(x, x) + noise * torch.eye(x.shape[0])

        def neg_mll(self, x, y):
            L = psd_safe_cholesky(self.covariance(x))
            r = (y - self.mean_constant).unsqueeze(-1)
            alpha = torch.cholesky_solve(r, L)
            fit = 0.5 * (r * alpha).sum()
            complexity = torch.log(torch.diagonal(L)).sum()
            return (fit + complexity) / x.shape[0] + 0.5 * math.log(2 * math.pi)

        def predict(self, x, y, xs):
            L = psd_safe_cholesky(self.covariance(x))
            alpha = torch.cholesky_solve((y - self.mean_constant).unsqueeze(-1), L)
            return self.mean_constant + (self.kernel(xs, x) @ alpha).squeeze(-1)

    model = env.init(ExactGP())
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)

    def train_step(x, y):
        optimizer.zero_grad()
        loss = model.neg_mll(x, y)
        loss.backward()
        optimizer.step()
        return loss.item()

    step = env.step(train_step)
    for it in range(8):
        env.rec(f"iter {it}", step(train_x, train_y))
    env.rec("grads", _grads(model))
    env.rec("hyper", [F.softplus(model.raw_lengthscale), F.softplus(model.raw_outputscale),
                      F.softplus(model.raw_noise)])
    with torch.no_grad():
        env.rec("posterior mean", model.predict(train_x, train_y, test_x))
    env.rec("params", dict(model.state_dict()))


def poincare_embeddings(torch, env):
    """facebookresearch/poincare-embeddings on a depth-3 binary tree's transitive closure:
    d(u, v) = acosh(1 + 2|u - v|^2 / ((1 - |u|^2)(1 - |v|^2))), a softmax over one positive
    and K sampled negatives (the distance a custom autograd.Function with the
    repository's hand-written backward), Riemannian SGD (grad * (1 - |p|^2)^2 / 4, then renormalised
    into the open ball), a "burn-in" of a lower learning rate for the first epochs."""
    nn, F = torch.nn, torch.nn.functional
    n_nodes, dim, n_neg, eps = 15, 2, 5, 1e-5
    edges = []                              # (descendant, ancestor) pairs
    for v in range(1, n_nodes):
        a = v
        while a > 0:
            a = (a - 1) // 2
            edges.append((v, a))
    edges = torch.tensor(edges)

    class PoincareDistance(torch.autograd.Function):
        """The repository's distance: forward its own acosh, backward by hand."""
        @staticmethod
        def grad(x, v, sqnormx, sqnormv, sqdist, eps):
            alpha = (1 - sqnormx)
            beta = (1 - sqnormv)
            z = 1 + 2 * sqdist / (alpha * beta)
            a = ((sqnormv - 2 * torch.sum(x * v, dim=-1) + 1) / torch.pow(alpha, 2)) \
                .unsqueeze(-1).expand_as(x)
            a = a * x - v / alpha.unsqueeze(-1).expand_as(v)
            z = torch.sqrt(torch.pow(z, 2) - 1)
            z = torch.clamp(z * beta, min=eps).unsqueeze(-1)
            return 4 * a / z.expand_as(x)

        @staticmethod
        def forward(ctx, u, v, eps):
            squnorm = torch.clamp(torch.sum(u * u, dim=-1), 0, 1 - eps)
            sqvnorm = torch.clamp(torch.sum(v * v, dim=-1), 0, 1 - eps)
            sqdist = torch.sum(torch.pow(u - v, 2), dim=-1)
            ctx.eps = eps
            ctx.save_for_backward(u, v, squnorm, sqvnorm, sqdist)
            x = sqdist / ((1 - squnorm) * (1 - sqvnorm)) * 2 + 1
            z = torch.sqrt(torch.pow(x, 2) - 1)
            return torch.log(x + z)

        @staticmethod
        def backward(ctx, g):
            u, v, squnorm, sqvnorm, sqdist = ctx.saved_tensors
            g = g.unsqueeze(-1)
            gu = PoincareDistance.grad(u, v, squnorm, sqvnorm, sqdist, ctx.eps)
            gv = PoincareDistance.grad(v, u, sqvnorm, squnorm, sqdist, ctx.eps)
            return g.expand_as(gu) * gu, g.expand_as(gv) * gv, None

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lt = nn.Embedding(n_nodes, dim)
            self.lt.weight.data.uniform_(-0.1, 0.1)

        def forward(self, inputs):
            e = self.lt(inputs)
            o = e.narrow(1, 1, e.size(1) - 1)
            s = e.narrow(1, 0, 1).expand_as(o)
            return -PoincareDistance.apply(s, o, eps)

    class RiemannianSGD(torch.optim.Optimizer):
        def __init__(self, params, lr):
            super().__init__(params, dict(lr=lr))

        @torch.no_grad()
        def step(self, lr=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    d_p = p.grad
                    sqnorm = torch.sum(p * p, dim=-1, keepdim=True)
                    d_p = d_p * ((1 - sqnorm) ** 2 / 4)
                    p.add_(d_p, alpha=-(lr if lr is not None else group["lr"]))
                    norm = p.norm(dim=-1, keepdim=True)
                    p.copy_(torch.where(norm >= 1, p / norm * (1 - eps), p))

    model = env.init(Model())
    optimizer = RiemannianSGD(model.parameters(), lr=0.3)

    def train_step(inputs, lr):
        optimizer.zero_grad()
        preds = model(inputs)
        loss = F.cross_entropy(preds, torch.zeros(inputs.size(0), dtype=torch.long))
        loss.backward()
        optimizer.step(lr=lr)
        return loss.detach()

    step = env.step(train_step)
    for epoch in range(4):
        lr = 0.03 if epoch < 2 else 0.3    # burn-in
        pick = env.randint(0, edges.size(0), (16,))
        negatives = env.randint(0, n_nodes, (16, n_neg))
        env.rec(f"epoch {epoch}", step(torch.cat([edges[pick], negatives], dim=1), lr))
    env.rec("grads", _grads(model))
    with torch.no_grad():
        w = model.lt.weight
        env.rec("norms", w.norm(dim=-1))
        env.rec("root to leaves", PoincareDistance.apply(w[:1].expand(8, dim), w[7:], eps))
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {        # name: (program, most traces of any of its compiled steps)
    "igr_eikonal_sdf": (igr_eikonal_sdf, 1),
    "gp_exact_marginal_likelihood": (gp_exact_marginal_likelihood, 1),
    # (lr is a Python float: the burn-in's and the main phase's values are two traces)
    "poincare_embeddings": (poincare_embeddings, 2),
}
SLOW = {"igr_eikonal_sdf"}      # (two double-backward graphs: ~5 s of cold compile)


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW
                                               else [], id=n) for n in PROGRAMS])
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program)
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)
