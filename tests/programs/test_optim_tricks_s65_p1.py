"""Sweep 65 (p1), training-loop tricks as blog posts write them, run with PyTorch, with
llgrad eagerly and with llgrad compiling the training step (tutorial_harness.py):

- the Lion optimizer written as a torch.optim.Optimizer subclass (its @torch.no_grad()
  step, state created lazily, sign of the interpolated momentum, decoupled weight decay),
  with linear warmup by LambdaLR;
- Shampoo-lite: a hand-written preconditioner for each matrix parameter, left and right
  statistics accumulated by matmul and their inverse fourth roots by torch.linalg.eigh,
  inside the compiled step;
- Adam(maximize=True, amsgrad=True, foreach=True) on a log-likelihood;
- a multi-label classifier with nn.Sigmoid + BCELoss(weight=...) per class, the step run
  under torch.autograd.detect_anomaly();
- variable-length sequences through pad_sequence, a GRU, unpad_sequence and a per-sequence
  mean, clip_grad_value_;
- gradient centralisation (the gradient of every conv/linear weight made zero-mean over
  its fan-in in place before the step) with parameters_to_vector for an L2 penalty;
- Sharpness-aware minimisation as its reference implementation writes it (first_step
  perturbs by e_w = rho * g / ||g|| and keeps old_p in optimizer state, second_step
  restores and steps the base optimizer), both passes in one compiled step;
- SWA via torch.optim.swa_utils.AveragedModel with a custom avg_fn, updated every step;
- a LayerNorm MLP trained by RMSprop(centered=True, momentum) with ReduceLROnPlateau fed
  the step's loss."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def lion_optimizer(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Lion(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
            super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.data.mul_(1 - group["lr"] * group["weight_decay"])
                    state = self.state[p]
                    if len(state) == 0:
                        state["exp_avg"] = torch.zeros_like(p)
                    exp_avg = state["exp_avg"]
                    beta1, beta2 = group["betas"]
                    update = exp_avg * beta1 + p.grad * (1 - beta1)
                    p.add_(torch.sign(update), alpha=-group["lr"])
                    exp_avg.mul_(beta2).add_(p.grad, alpha=1 - beta2)

    model = env.init(nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 3)))
    opt = Lion(model.parameters(), lr=3e-3, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 3))

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        env.rec(f"loss {it}", step(env.randn(16, 6), env.randint(0, 3, (16,))))
        sched.step()
        env.rec(f"lr {it}", sched.get_last_lr())
    env.rec("params", dict(model.state_dict()))
    env.rec("exp_avg", [opt.state[p]["exp_avg"] for p in model.parameters()])


def shampoo_lite(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 2)))
    eps, lr = 1e-4, 0.1
    stats = {p: (eps * torch.eye(p.shape[0]), eps * torch.eye(p.shape[1]))
             for p in model.parameters() if p.dim() == 2}

    def inv_root(mat, root):
        vals, vecs = torch.linalg.eigh(mat)
        return vecs @ torch.diag(vals.clamp(min=1e-12).pow(-1.0 / root)) @ vecs.T

    def train_step(x, y):
        loss = F.mse_loss(model(x), y)
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                g = p.grad
                if p.dim() == 2:
                    L, R = stats[p]
                    L.add_(g @ g.T)
                    R.add_(g.T @ g)
                    g = inv_root(L, 4) @ g @ inv_root(R, 4)
                p.sub_(lr * g)
        return loss.detach()

    step = env.step(train_step)
    w = env.randn(5, 2)
    for it in range(5):
        x = env.randn(16, 5)
        env.rec(f"loss {it}", step(x, torch.sin(x @ w)))
    env.rec("params", dict(model.state_dict()))


def adam_maximize(torch, env):
    D = torch.distributions
    mu = torch.zeros(3, requires_grad=True)
    raw = torch.zeros(3, requires_grad=True)
    opt = torch.optim.Adam([mu, raw], lr=0.05, maximize=True, amsgrad=True, foreach=True)

    def train_step(x):
        ll = D.Normal(mu, torch.nn.functional.softplus(raw)).log_prob(x).sum(-1).mean()
        opt.zero_grad()
        ll.backward()
        opt.step()
        return ll.detach()

    step = env.step(train_step)
    for it in range(6):
        env.rec(f"ll {it}", step(env.randn(16, 3) * 2 + 1))
    env.rec("params", (mu, raw))
    env.rec("max_exp_avg_sq", opt.state[mu]["max_exp_avg_sq"])


def multilabel_bce_anomaly(torch, env):
    nn = torch.nn
    model = env.init(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4), nn.Sigmoid()))
    crit = nn.BCELoss(weight=torch.tensor([1.0, 2.0, 0.5, 1.5]))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)

    def train_step(x, y):
        with torch.autograd.detect_anomaly():
            probs = model(x)
            loss = crit(probs, y)
            opt.zero_grad()
            loss.backward()
        opt.step()
        return loss.detach(), (probs > 0.5).float().eq(y).float().mean()

    step = env.step(train_step)
    for it in range(4):
        x = env.randn(16, 8)
        env.rec(f"step {it}", step(x, (x[:, :4] > 0).float()))
    env.rec("params", dict(model.state_dict()))


def unpad_sequences(torch, env):
    nn, F = torch.nn, torch.nn.functional
    rnn_utils = nn.utils.rnn

    class Pooler(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(3, 8, batch_first=True)
            self.out = nn.Linear(8, 1)

        def forward(self, seqs):
            lengths = torch.tensor([len(s) for s in seqs])
            padded = rnn_utils.pad_sequence(seqs, batch_first=True)
            out, _ = self.gru(padded)
            pieces = rnn_utils.unpad_sequence(out, lengths, batch_first=True)
            return self.out(torch.stack([p.mean(0) for p in pieces])).squeeze(-1)

    model = env.init(Pooler())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(seqs, y):
        loss = F.mse_loss(model(seqs), y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.05)
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        seqs = [env.randn(n, 3) for n in (4, 2, 5)]
        y = torch.stack([s[:, 0].sum() for s in seqs])
        env.rec(f"loss {it}", step(seqs, y))
    env.rec("params", dict(model.state_dict()))


def gradient_centralization(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(),
                                   nn.Linear(4 * 4 * 4, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def train_step(x, y):
        logits = model(x)
        vec = nn.utils.parameters_to_vector(model.parameters())
        loss = F.cross_entropy(logits, y) + 1e-3 * vec.pow(2).sum()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            if p.grad is not None and p.dim() > 1:
                p.grad.sub_(p.grad.mean(dim=tuple(range(1, p.dim())), keepdim=True))
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"loss {it}", step(env.randn(8, 1, 6, 6), env.randint(0, 3, (8,))))
    env.rec("params", dict(model.state_dict()))


def sam_two_pass(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class SAM(torch.optim.Optimizer):
        def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
            super().__init__(params, dict(rho=rho, **kwargs))
            self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
            self.param_groups = self.base_optimizer.param_groups

        @torch.no_grad()
        def first_step(self, zero_grad=False):
            grad_norm = self._grad_norm()
            for group in self.param_groups:
                scale = group["rho"] / (grad_norm + 1e-12)
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    self.state[p]["old_p"] = p.data.clone()
                    p.add_(p.grad * scale.to(p))
            if zero_grad:
                self.zero_grad()

        @torch.no_grad()
        def second_step(self, zero_grad=False):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.data = self.state[p]["old_p"]
            self.base_optimizer.step()
            if zero_grad:
                self.zero_grad()

        def _grad_norm(self):
            return torch.norm(torch.stack([p.grad.norm(p=2) for group in self.param_groups
                                           for p in group["params"] if p.grad is not None]), p=2)

    model = env.init(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = SAM(model.parameters(), torch.optim.SGD, rho=0.05, lr=0.1, momentum=0.9)

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.first_step(zero_grad=True)
        F.cross_entropy(model(x), y).backward()
        opt.second_step(zero_grad=True)
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"loss {it}", step(env.randn(16, 4), env.randint(0, 2, (16,))))
    env.rec("params", dict(model.state_dict()))


def swa_custom_avg(torch, env):
    nn, F = torch.nn, torch.nn.functional
    swa = torch.optim.swa_utils
    model = env.init(nn.Sequential(nn.Linear(3, 12), nn.ReLU(), nn.Linear(12, 1)))
    ema = swa.AveragedModel(model, avg_fn=lambda avg, p, n: 0.8 * avg + 0.2 * p)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def train_step(x, y):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ema.update_parameters(model)
        with torch.no_grad():
            ema_loss = F.mse_loss(ema(x), y)
        return loss.detach(), ema_loss

    step = env.step(train_step)
    for it in range(5):
        x = env.randn(16, 3)
        env.rec(f"step {it}", step(x, x.sum(1, keepdim=True) ** 2))
    env.rec("ema", dict(ema.state_dict()))


def rmsprop_plateau(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 16), nn.LayerNorm(16), nn.SiLU(),
                                   nn.Linear(16, 1)))
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-2, centered=True, momentum=0.5)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0)

    def train_step(x, y):
        loss = F.smooth_l1_loss(model(x), y, beta=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(6):
        x = env.randn(16, 4)
        loss = step(x, x[:, :1] * 3)
        sched.step(loss)
        env.rec(f"step {it}", (loss, opt.param_groups[0]["lr"]))
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {"lion_optimizer": lion_optimizer, "shampoo_lite": shampoo_lite,
            "adam_maximize": adam_maximize, "multilabel_bce_anomaly": multilabel_bce_anomaly,
            "unpad_sequences": unpad_sequences,
            "gradient_centralization": gradient_centralization, "sam_two_pass": sam_two_pass,
            "swa_custom_avg": swa_custom_avg, "rmsprop_plateau": rmsprop_plateau}

# (the default run keeps the quickest; the others are marked slow)
FAST = ("adam_maximize", "swa_custom_avg")


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
