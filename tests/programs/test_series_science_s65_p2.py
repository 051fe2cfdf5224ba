"""Sweep 65 (p2), time-series, audio, scientific and training-loop programs as tutorials
write them, run with PyTorch, with llgrad eagerly and with llgrad compiling the training
step (tutorial_harness.py):

- N-BEATS: generic blocks whose backcast is subtracted from the residual input and whose
  forecasts are summed (a doubly residual stack), trained with L1 loss;
- DeepAR: an LSTM over lagged targets emitting torch.distributions.Normal(mu, softplus)
  and trained on -log_prob, forecast samples drawn under no_grad (library stream: eager
  vs compiled only);
- temporal fusion gating: GLU, a gated residual network with LayerNorm, variable
  selection by softmax weights over per-variable GRNs;
- a mel filterbank built as a triangular matrix and applied by matmul to |rfft|^2 frames
  from unfold, log(1e-6 + .) (outside the step), then a 1d U-Net (Conv1d, MaxPool1d,
  ConvTranspose1d, cat);
- a PINN for u'' = -pi^2 sin(pi x): torch.autograd.grad of the output by the input with
  create_graph=True, twice, inside the compiled step;
- a Hamiltonian NN: dH/d(q, p) by autograd.grad, the symplectic field (dp, -dq) matched
  to the true one, trained with create_graph;
- a training loop with gradient accumulation over micro-batches, manual loss scaling
  (scale, unscale, an isfinite check that skips the step), clip_grad_norm_, EMA weights
  by torch._foreach_lerp_ style mul_/add_, OneCycleLR stepped inside the compiled step,
  early-stopping state kept in Python."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def nbeats(torch, env):
    nn, F = torch.nn, torch.nn.functional
    back, fore, H = 8, 3, 16

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Sequential(nn.Linear(back, H), nn.ReLU(), nn.Linear(H, H), nn.ReLU())
            self.theta = nn.Linear(H, back + fore)

        def forward(self, x):
            th = self.theta(self.fc(x))
            return th[:, :back], th[:, back:]

    blocks = env.init(nn.ModuleList([Block() for _ in range(3)]))
    opt = torch.optim.Adam(blocks.parameters(), lr=1e-3)

    def forward(x):
        residual, forecast = x, 0
        for b in blocks:
            bc, fc = b(residual)
            residual = residual - bc
            forecast = forecast + fc
        return forecast

    def train_step(x, y):
        loss = F.l1_loss(forward(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    t = torch.arange(40, dtype=torch.float32)
    series = torch.sin(t / 3) + 0.1 * t / 10
    windows = series.unfold(0, back + fore, 2)
    for it in range(4):
        env.rec(f"loss {it}", step(windows[:, :back], windows[:, back:]))
    env.rec("params", dict(blocks.state_dict()))


def deepar(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions

    class DeepAR(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(2, 12, batch_first=True)
            self.mu = nn.Linear(12, 1)
            self.sigma = nn.Linear(12, 1)

        def forward(self, x, state=None):
            h, state = self.rnn(x, state)
            return self.mu(h).squeeze(-1), F.softplus(self.sigma(h)).squeeze(-1) + 1e-3, state

    model = env.init(DeepAR())
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(z, cov):
        x = torch.stack([z[:, :-1], cov[:, 1:]], dim=-1)
        mu, sigma, _ = model(x)
        dist = D.Normal(mu, sigma)
        loss = -dist.log_prob(z[:, 1:]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), dist.entropy().mean().detach()

    step = env.step(train_step)
    for it in range(4):
        z = env.randn(4, 10).cumsum(1) * 0.1
        loss, ent = step(z, env.randn(4, 10))
        env.rec(f"nll {it}", loss)
        env.rec(f"entropy {it}", ent)

    @torch.no_grad()
    def sample(z, cov, n=3):
        _, _, state = model(torch.stack([z[:, :-1], cov[:, 1:z.shape[1]]], dim=-1))
        last = z[:, -1]
        out = []
        for k in range(n):
            mu, sigma, state = model(torch.stack([last, cov[:, z.shape[1] + k]], -1)[:, None],
                                     state)
            last = D.Normal(mu[:, 0], sigma[:, 0]).sample()
            out.append(last)
        return torch.stack(out, 1)

    env.rec("samples", env.step(sample)(env.randn(4, 6), env.randn(4, 9)), cross=False)


def tft_gating(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, D = 3, 8

    class GRN(nn.Module):
        def __init__(self, i, h, o, ctx=None):
            super().__init__()
            self.skip = nn.Linear(i, o) if i != o else nn.Identity()
            self.fc1 = nn.Linear(i, h)
            self.ctx = nn.Linear(ctx, h, bias=False) if ctx else None
            self.fc2 = nn.Linear(h, h)
            self.glu = nn.Linear(h, 2 * o)
            self.norm = nn.LayerNorm(o)

        def forward(self, x, c=None):
            h = self.fc1(x)
            if c is not None:
                h = h + self.ctx(c)
            h = self.fc2(F.elu(h))
            return self.norm(self.skip(x) + F.glu(self.glu(h), dim=-1))

    class VSN(nn.Module):
        def __init__(self):
            super().__init__()
            self.weights = GRN(V * D, D, V, ctx=D)
            self.vars = nn.ModuleList([GRN(D, D, D) for _ in range(V)])

        def forward(self, xs, c):
            w = torch.softmax(self.weights(torch.cat(xs, -1), c), dim=-1)
            processed = torch.stack([g(x) for g, x in zip(self.vars, xs)], dim=-1)
            return (processed * w.unsqueeze(-2)).sum(-1), w

    vsn = env.init(VSN())
    head = env.init(nn.Linear(D, 1))
    opt = torch.optim.Adam(list(vsn.parameters()) + list(head.parameters()), lr=3e-3)

    def train_step(a, b, c, ctx, y):
        out, w = vsn([a, b, c], ctx)
        loss = F.mse_loss(head(out).squeeze(-1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), w.mean(0).detach()

    step = env.step(train_step)
    for it in range(4):
        loss, w = step(env.randn(5, D), env.randn(5, D), env.randn(5, D), env.randn(5, D),
                       env.randn(5))
        env.rec(f"loss {it}", loss)
        env.rec(f"weights {it}", w)


def mel_unet(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_fft, hop, n_mels, sr = 16, 8, 6, 800

    def mel_filterbank():
        hz = lambda m: 700 * (10 ** (m / 2595) - 1)           # noqa: E731
        mel = lambda f: 2595 * math.log10(1 + f / 700)        # noqa: E731
        pts = torch.tensor([hz(m) for m in torch.linspace(0, mel(sr / 2), n_mels + 2).tolist()])
        freqs = torch.linspace(0, sr / 2, n_fft // 2 + 1)
        lo, ce, hi = pts[:-2, None], pts[1:-1, None], pts[2:, None]
        up = (freqs[None] - lo) / (ce - lo)
        down = (hi - freqs[None]) / (hi - ce)
        return torch.clamp(torch.minimum(up, down), min=0)     # (n_mels, n_freq)

    fb = mel_filterbank()
    window = torch.hann_window(n_fft)

    def logmel(wave):
        frames = wave.unfold(-1, n_fft, hop) * window
        power = torch.fft.rfft(frames).abs() ** 2
        return torch.log(1e-6 + power @ fb.T).transpose(1, 2)  # (B, n_mels, T)

    class UNet1d(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1 = nn.Sequential(nn.Conv1d(n_mels, 8, 3, padding=1), nn.ReLU())
            self.d2 = nn.Sequential(nn.MaxPool1d(2), nn.Conv1d(8, 16, 3, padding=1), nn.ReLU())
            self.up = nn.ConvTranspose1d(16, 8, 2, stride=2)
            self.u1 = nn.Sequential(nn.Conv1d(16, 8, 3, padding=1), nn.ReLU(),
                                    nn.Conv1d(8, n_mels, 1))

        def forward(self, x):
            a = self.d1(x)
            b = self.d2(a)
            return self.u1(torch.cat([self.up(b), a], dim=1))

    model = env.init(UNet1d())
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)

    def train_step(x, target):
        loss = F.smooth_l1_loss(model(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    env.rec("fb", fb)
    for it in range(3):
        clean = torch.sin(torch.arange(72.0) * 0.7)[None].repeat(2, 1) * (1 + it)
        # (features made outside the step, as a data pipeline does: compiled code has no
        # complex values, so an rfft inside the step runs eagerly with a warning)
        env.rec(f"loss {it}", step(logmel(clean + env.randn(2, 72, scale=0.2)), logmel(clean)))
    env.rec("params", dict(model.state_dict()))


def pinn(torch, env):
    nn = torch.nn
    model = env.init(nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                                   nn.Linear(16, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def train_step(x):
        x = x.requires_grad_(True)
        u = model(x)
        du = torch.autograd.grad(u, x, torch.ones_like(u), create_graph=True)[0]
        d2u = torch.autograd.grad(du.sum(), x, create_graph=True)[0]
        residual = d2u + math.pi ** 2 * torch.sin(math.pi * x)
        bc = model(torch.tensor([[0.0], [1.0]]))
        loss = residual.pow(2).mean() + bc.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), du.detach()

    step = env.step(train_step)
    for it in range(4):
        loss, du = step(env.rand(12, 1))
        env.rec(f"loss {it}", loss)
        env.rec(f"du {it}", du)
    env.rec("params", dict(model.state_dict()))


def hamiltonian_nn(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(2, 16), nn.Softplus(), nn.Linear(16, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def field(qp):
        H = model(qp).sum()
        dH = torch.autograd.grad(H, qp, create_graph=True)[0]
        dq, dp = dH.chunk(2, dim=1)
        return torch.cat([dp, -dq], dim=1)

    def train_step(qp):
        qp = qp.detach().requires_grad_()
        true = torch.stack([qp[:, 1], -qp[:, 0]], dim=1).detach()   # H = (q^2 + p^2) / 2
        loss = F.mse_loss(field(qp), true)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        env.rec(f"loss {it}", step(env.randn(10, 2)))
    qp = env.randn(3, 2).requires_grad_()
    env.rec("field", field(qp))


def accumulate_scale_ema(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 2)))
    ema = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.2, total_steps=12)
    state = {"scale": 2.0 ** 10, "skipped": 0}

    def train_step(xs, ys, scale):
        opt.zero_grad(set_to_none=True)
        for x, y in zip(xs.chunk(3), ys.chunk(3)):
            loss = F.cross_entropy(model(x), y) / 3
            (loss * scale).backward()
        grads = [p.grad for p in model.parameters()]
        finite = all(torch.isfinite(g).all() for g in grads)
        if not finite:
            return torch.tensor(float("nan")), False, 0.0
        for g in grads:
            g.div_(scale)
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        with torch.no_grad():
            for e, p in zip(ema, model.parameters()):
                e.mul_(0.9).add_(p, alpha=0.1)
        return norm, True, sched.get_last_lr()[0]

    step = env.step(train_step)
    best, bad = float("inf"), 0
    for it in range(6):
        xs = env.randn(9, 6) * (1e30 if it == 2 else 1.0)
        norm, ok, lr = step(xs, env.randint(0, 2, (9,)), state["scale"])
        env.rec(f"step {it}", (norm, ok, lr))
        if not ok:
            state["scale"] /= 2
            state["skipped"] += 1
            continue
        with torch.no_grad():
            val = F.cross_entropy(model(env.randn(4, 6)), torch.tensor([0, 1, 1, 0])).item()
        if val < best - 1e-3:
            best, bad = val, 0
        else:
            bad += 1
        env.rec(f"val {it}", val)
    env.rec("state", (state["scale"], state["skipped"], bad))
    env.rec("ema", ema)
    env.rec("params", list(model.parameters()))


PROGRAMS = {"nbeats": nbeats, "deepar": deepar, "tft_gating": tft_gating,
            "mel_unet": mel_unet, "pinn": pinn, "hamiltonian_nn": hamiltonian_nn,
            "accumulate_scale_ema": accumulate_scale_ema}

# (the default run keeps the quickest; the others are marked slow)
FAST = ("pinn",)


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
