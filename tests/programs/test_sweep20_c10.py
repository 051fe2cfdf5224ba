"""Sweep 20 (C), part 10: memory and regularisation idioms. A deep residual MLP whose blocks
run through torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False) in training
and directly in eval, trained with a focal loss (alpha-weighted per class via gather,
(1 - pt) ** gamma on the log-probabilities' exp) and CosineAnnealingWarmRestarts stepped
with a fractional epoch (epoch + i / iters). Then a spectral-normalised critic
(nn.utils.parametrizations.spectral_norm, its power-iteration vectors u, v copied in from
the program so both libraries start alike) and an orthogonal-free weight-norm layer,
trained with a hinge loss; the parametrized weights, `parametrizations.weight.original`
and the u buffer after training are compared. Run with PyTorch, with llgrad eagerly and
with llgrad.compile (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def checkpointed_focal(torch, env):
    nn, F = torch.nn, torch.nn.functional
    from importlib import import_module
    checkpoint = import_module(torch.__name__ + ".utils.checkpoint").checkpoint

    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))

        def forward(self, x):
            return x + self.ff(self.norm(x))

    class Net(nn.Module):
        def __init__(self, d=12, depth=3):
            super().__init__()
            self.inp = nn.Linear(6, d)
            self.blocks = nn.ModuleList([Block(d) for _ in range(depth)])
            self.out = nn.Linear(d, 4)

        def forward(self, x):
            x = self.inp(x)
            for blk in self.blocks:
                if self.training:
                    x = checkpoint(blk, x, use_reentrant=False)
                else:
                    x = blk(x)
            return self.out(x)

    class FocalLoss(nn.Module):
        def __init__(self, alpha, gamma=2.0):
            super().__init__()
            self.register_buffer("alpha", alpha)
            self.gamma = gamma

        def forward(self, logits, target):
            logp = F.log_softmax(logits, dim=1).gather(1, target.unsqueeze(1)).squeeze(1)
            pt = logp.exp()
            at = self.alpha.gather(0, target)
            return (-at * (1 - pt) ** self.gamma * logp).mean()

    model = env.init(Net())
    crit = FocalLoss(torch.tensor([0.25, 0.75, 0.5, 0.5]))
    opt = torch.optim.AdamW(model.parameters(), lr=4e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2, eta_min=1e-4)
    X, y = env.randn(18, 6), env.randint(0, 4, (18,))
    iters = 3

    def train_step(x, y):
        opt.zero_grad()
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    lrs = []
    for epoch in range(3):
        model.train()
        for i in range(iters):
            xb, yb = X[i * 6:(i + 1) * 6], y[i * 6:(i + 1) * 6]
            env.rec(f"e{epoch}i{i}", train_step(xb, yb))
            sched.step(epoch + i / iters)
            lrs.append(opt.param_groups[0]["lr"])
    env.rec("lrs", lrs)
    model.eval()
    with torch.no_grad():
        env.rec("eval", env.step(model)(X))
    env.rec("state", model.state_dict())


def spectral_critic(torch, env):
    nn, F = torch.nn, torch.nn.functional
    from importlib import import_module
    P = import_module(torch.__name__ + ".nn.utils.parametrizations")
    critic = nn.Sequential(P.spectral_norm(nn.Linear(4, 16)), nn.LeakyReLU(0.1),
                           P.spectral_norm(nn.Linear(16, 16)), nn.LeakyReLU(0.1),
                           P.weight_norm(nn.Linear(16, 1)))
    env.init(critic)        # (the u, v buffers come across with the weights)
    # (SGD, not Adam: a hidden unit here gets a rounding-level gradient, 0 in one library
    # and 2e-9 in the other, and Adam's first step scales either to lr)
    opt = torch.optim.SGD(critic.parameters(), lr=0.05, momentum=0.5)
    real, fake = env.randn(8, 4) + 1.0, env.randn(8, 4)

    def step(real, fake):
        critic.train()
        opt.zero_grad()
        loss = F.relu(1.0 - critic(real)).mean() + F.relu(1.0 + critic(fake)).mean()
        loss.backward()
        opt.step()
        return loss
    step = env.step(step)
    for i in range(5):
        env.rec(f"loss{i}", step(real, fake))
    env.rec("state", critic.state_dict())
    critic.eval()
    with torch.no_grad():
        env.rec("sigma", [torch.linalg.matrix_norm(critic[i].weight, ord=2) for i in (0, 2)])
        env.rec("eval", critic(real))


@pytest.mark.parametrize("program", [checkpointed_focal, spectral_critic])
def test_memory_regularisation(program):
    run_tutorial(program)
