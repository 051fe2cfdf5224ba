"""Sweep 63 (t8), file a: multi-task and value-normalisation training steps whose
bookkeeping lives beside the graph, run with PyTorch, with llgrad eagerly and with llgrad
compiling the whole step through tutorial_harness.py.

- GradNorm (Chen et al. 2018, the common re-implementation): learnable task weights (a
  Parameter), the per-task gradient norms of the shared layer by autograd.grad with
  create_graph and retain_graph, the initial losses kept by .detach().clone() on the first
  step (Python state), the weights' own gradient from a second autograd.grad, a second
  optimizer, and the weights renormalised through .data under no_grad;
- PopArt (van Hasselt et al. 2016): running first and second moments in register_buffer
  tensors updated under no_grad, the output layer's weight and bias rescaled in place to
  preserve outputs, a step counter buffer incremented each step and .item() logging."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _grads(model):
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def gradnorm(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_tasks, alpha = 2, 1.5

    class MultiTaskNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.shared = nn.Linear(8, 16)
            self.heads = nn.ModuleList([nn.Linear(16, 1) for _ in range(n_tasks)])

        def forward(self, x):
            h = torch.relu(self.shared(x))
            return [head(h) for head in self.heads]

    model = env.init(MultiTaskNet())
    weights = nn.Parameter(torch.ones(n_tasks))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    opt_w = torch.optim.Adam([weights], lr=2.5e-2)
    state = {"l0": None}
    log = []

    def train_step(x, ys):
        outs = model(x)
        task_losses = torch.stack([F.mse_loss(o.squeeze(-1), y) for o, y in zip(outs, ys)])
        if state["l0"] is None:
            state["l0"] = task_losses.detach().clone()
        weighted = weights * task_losses
        loss = weighted.sum()
        opt.zero_grad()
        loss.backward(retain_graph=True)
        W = model.shared.weight
        norms = []
        for i in range(n_tasks):
            g, = torch.autograd.grad(weighted[i], W, retain_graph=True, create_graph=True)
            norms.append(torch.norm(g))
        norms = torch.stack(norms)
        with torch.no_grad():
            ratio = task_losses / state["l0"]
            inverse_rate = ratio / ratio.mean()
            target = (norms.mean() * inverse_rate ** alpha).detach()
        grad_loss = (norms - target).abs().sum()
        weights.grad = torch.autograd.grad(grad_loss, weights)[0]
        opt.step()
        opt_w.step()
        with torch.no_grad():
            weights.data = weights.data / weights.data.sum() * n_tasks
        log.append(round(loss.item(), 4))
        return loss.detach(), grad_loss.detach(), norms.detach()

    step = env.step(train_step)
    w1, w2 = env.randn(8), env.randn(8)
    for it in range(4):
        x = env.randn(32, 8)
        env.rec(f"step {it}", step(x, [x @ w1, 3.0 * torch.sin(x @ w2)]))
        env.rec(f"weights {it}", weights)
    env.rec("log", log)
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


def popart(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class PopArtLayer(nn.Module):
        def __init__(self, n_in, n_out, beta=0.1):
            super().__init__()
            self.beta = beta
            self.linear = nn.Linear(n_in, n_out)
            self.register_buffer("mu", torch.zeros(n_out))
            self.register_buffer("nu", torch.ones(n_out))
            self.register_buffer("step", torch.zeros((), dtype=torch.long))

        @property
        def sigma(self):
            return (self.nu - self.mu ** 2).clamp(min=1e-4).sqrt()

        def forward(self, x):
            normalized = self.linear(x)
            return normalized, normalized * self.sigma + self.mu

        @torch.no_grad()
        def update(self, targets):
            old_mu, old_sigma = self.mu.clone(), self.sigma.clone()
            self.mu.mul_(1 - self.beta).add_(self.beta * targets.mean(0))
            self.nu.mul_(1 - self.beta).add_(self.beta * (targets ** 2).mean(0))
            new_sigma = self.sigma
            self.linear.weight.data.mul_((old_sigma / new_sigma).unsqueeze(1))
            self.linear.bias.data.mul_(old_sigma).add_(old_mu - self.mu).div_(new_sigma)
            self.step += 1

    body = env.init(nn.Sequential(nn.Linear(4, 32), nn.Tanh()))
    head = env.init(PopArtLayer(32, 2))
    opt = torch.optim.SGD(list(body.parameters()) + list(head.parameters()), lr=0.05)
    log = []

    def train_step(x, targets):
        head.update(targets)
        normalized, _ = head(body(x))
        norm_targets = (targets - head.mu) / head.sigma
        loss = F.mse_loss(normalized, norm_targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.append((int(head.step.item()), round(loss.item(), 4)))
        return loss.detach()

    step = env.step(train_step)
    w = env.randn(4, 2)
    for it in range(5):
        x = env.randn(16, 4)
        scale = 10.0 ** it                         # (targets' scale grows: PopArt's case)
        env.rec(f"step {it}", step(x, (x @ w) * scale + scale))
        env.rec(f"stats {it}", (head.mu, head.nu, head.step))
    env.rec("log", log)
    env.rec("grads", {**_grads(body), **_grads(head)})
    env.rec("params", {**body.state_dict(), **head.state_dict()})


# (gradnorm: three traces of a double backward, seconds of cold compile)
@pytest.mark.parametrize("name, program", program_params(
    {"gradnorm": gradnorm, "popart": popart}, slow=("gradnorm",)))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
