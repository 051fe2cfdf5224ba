"""Sweep 19 (C), part 2: optimizers written as torch.optim.Optimizer subclasses the way
recent repositories write them: Muon (the nanoGPT speedrun's momentum orthogonalised by a
quintic Newton-Schulz iteration, transposing tall matrices, scaled by the aspect ratio, with
AdamW for the vectors and embeddings) and Lion (sign of an interpolated momentum, decoupled
weight decay, lerp_), each inside a compiled training step. Run with PyTorch, with llgrad
eagerly and with llgrad.compile (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def muon(torch, env):
    nn, F = torch.nn, torch.nn.functional

    def zeropower_via_newtonschulz5(G, steps=5):
        assert G.ndim == 2
        a, b, c = (3.4445, -4.7750, 2.0315)
        X = G.float()
        if G.size(0) > G.size(1):
            X = X.T
        X = X / (X.norm() + 1e-7)
        for _ in range(steps):
            A = X @ X.T
            B = b * A + c * A @ A
            X = a * X + B @ X
        if G.size(0) > G.size(1):
            X = X.T
        return X

    class Muon(torch.optim.Optimizer):
        def __init__(self, params, lr=0.02, momentum=0.95, nesterov=True, ns_steps=5):
            defaults = dict(lr=lr, momentum=momentum, nesterov=nesterov, ns_steps=ns_steps)
            super().__init__(params, defaults)

        @torch.no_grad()
        def step(self):
            for group in self.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    state = self.state[p]
                    if "momentum_buffer" not in state:
                        state["momentum_buffer"] = torch.zeros_like(g)
                    buf = state["momentum_buffer"]
                    buf.lerp_(g, 1 - group["momentum"])
                    g = g.lerp_(buf, group["momentum"]) if group["nesterov"] else buf
                    g = zeropower_via_newtonschulz5(g, steps=group["ns_steps"])
                    p.add_(g, alpha=-group["lr"] * max(1, p.size(-2) / p.size(-1)) ** 0.5)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(11, 8)
            self.fc1 = nn.Linear(8, 16, bias=False)
            self.fc2 = nn.Linear(16, 8, bias=False)
            self.ln = nn.LayerNorm(8)
            self.head = nn.Linear(8, 11)

        def forward(self, idx):
            x = self.emb(idx)
            x = x + self.fc2(F.relu(self.fc1(self.ln(x))).square())
            return self.head(x)

    model = env.init(Net())
    hidden = [p for n, p in model.named_parameters() if p.ndim >= 2 and "emb" not in n and "head" not in n]
    other = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "emb" not in n and "head" not in n)]
    optimizers = [Muon(hidden, lr=0.05), torch.optim.AdamW(other, lr=3e-3, betas=(0.9, 0.95),
                                                           weight_decay=0.0)]
    idx, tgt = env.randint(0, 11, (4, 6)), env.randint(0, 11, (4, 6))

    def train_step(idx, tgt):
        logits = model(idx)
        loss = F.cross_entropy(logits.view(-1, 11), tgt.view(-1))
        loss.backward()
        for opt in optimizers:
            opt.step()
        model.zero_grad(set_to_none=True)
        return loss
    train_step = env.step(train_step)
    for i in range(5):
        env.rec(f"loss{i}", train_step(idx, tgt))
    env.rec("params", dict(model.named_parameters()))
    env.rec("buf", optimizers[0].state[model.fc1.weight]["momentum_buffer"])
    ortho = zeropower_via_newtonschulz5(env.randn(6, 4))
    env.rec("ns", ortho)
    env.rec("ns singular", torch.linalg.svdvals(ortho))


def lion(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Lion(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
            if not 0.0 <= lr:
                raise ValueError("Invalid learning rate: {}".format(lr))
            defaults = dict(lr=lr, betas=betas, weight_decay=weight_decay)
            super().__init__(params, defaults)

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.data.mul_(1 - group["lr"] * group["weight_decay"])
                    grad = p.grad
                    state = self.state[p]
                    if len(state) == 0:
                        state["exp_avg"] = torch.zeros_like(p)
                    exp_avg = state["exp_avg"]
                    beta1, beta2 = group["betas"]
                    update = exp_avg * beta1 + grad * (1 - beta1)
                    p.add_(torch.sign(update), alpha=-group["lr"])
                    exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)
            return loss

    model = env.init(nn.Sequential(nn.Linear(5, 12), nn.GELU(), nn.Linear(12, 12), nn.GELU(),
                                   nn.Linear(12, 2)))
    opt = Lion(model.parameters(), lr=1e-3, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6)
    X, y = env.randn(16, 5), env.randn(16, 2)

    def train_step(X, y):
        def closure():
            opt.zero_grad()
            loss = F.smooth_l1_loss(model(X), y)
            loss.backward()
            return loss
        return opt.step(closure)
    train_step = env.step(train_step)
    for i in range(6):
        env.rec(f"loss{i}", train_step(X, y))
        sched.step()
        env.rec(f"lr{i}", opt.param_groups[0]["lr"])
    env.rec("params", list(model.parameters()))
    env.rec("exp_avg", [opt.state[p]["exp_avg"] for p in model.parameters()])


@pytest.mark.parametrize("program", [muon, lion])
def test_optimizers(program):
    run_tutorial(program)
