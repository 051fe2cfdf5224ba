"""Sweep 65 (p1), programs whose step keeps Python-side state or runs a recurrence written
out in Python, run with PyTorch, with llgrad eagerly and with llgrad compiling the step
(tutorial_harness.py):

- a step that keeps a loss EMA tensor, a best loss and a patience counter in a dict, halves
  the lr in param_groups when patience runs out (decided by loss.item()), switches the model
  to eval for a no_grad check and back, and counts seen examples in a buffer reassigned by
  the module's forward (`self.seen = self.seen + n`);
- REINFORCE with the action drawn by Categorical.sample() inside the step, discounted
  returns built by a reversed Python loop with list.insert(0, ...), normalised returns;
- resampling layers together: interpolate (bicubic and bilinear with antialias=True),
  avg_pool2d with ceil_mode / count_include_pad=False and with divisor_override,
  Upsample(scale_factor=1.5, recompute_scale_factor=True), grid_sample bicubic and
  nearest with reflection padding;
- Embedding(max_norm, scale_grad_by_freq, padding_idx) with clip_grad_norm_(foreach=True,
  error_if_nonfinite=True) whose returned norm is recorded;
- a Mamba-style selective scan: input-dependent delta (softplus), B and C, A = -exp(A_log),
  the discretised recurrence h = exp(delta A) h + delta B x as a Python loop over time,
  a SiLU gate and a depthwise causal Conv1d in front;
- RWKV-style time mixing: token shift by nn.ZeroPad2d((0, 0, 1, -1)), mixing
  coefficients, and the WKV recurrence with its running max for stability;
- a retention layer (RetNet's parallel form): a decay mask gamma^(n-m) built from
  arange, tril and masked_fill, group-normed heads, swish gate."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def python_side_state(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(),
                                    nn.Linear(8, 2))
            self.register_buffer("seen", torch.zeros(()))

        def forward(self, x):
            self.seen = self.seen + x.shape[0]
            return self.fc(x)

    model = env.init(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = {"ema": torch.zeros(()), "best": float("inf"), "bad": 0}

    def train_step(x, y):
        model.train()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        g["ema"] = 0.9 * g["ema"] + 0.1 * loss.detach()
        if loss.item() < g["best"]:
            g["best"], g["bad"] = loss.item(), 0
        else:
            g["bad"] += 1
            if g["bad"] >= 2:
                for pg in opt.param_groups:
                    pg["lr"] *= 0.5
                g["bad"] = 0
        model.eval()
        with torch.no_grad():
            val = model(x[:2])
        model.train()
        return loss.detach(), val

    step = env.step(train_step)
    for it in range(8):
        env.rec(f"step {it}", step(env.randn(8, 4), env.randint(0, 2, (8,))))
        env.rec(f"state {it}", (g["ema"], g["best"], g["bad"], opt.param_groups[0]["lr"],
                                model.seen))
    env.rec("params", dict(model.state_dict()))


def reinforce_sampled(torch, env):
    nn = torch.nn
    D = torch.distributions
    policy = env.init(nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3)))
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)

    def train_step(obs, rewards_table):
        dist = D.Categorical(logits=policy(obs))
        a = dist.sample()
        r = rewards_table.gather(1, a[:, None]).squeeze(1)
        R, returns = 0.0, []
        for t in reversed(range(r.shape[0])):
            R = r[t] + 0.9 * R
            returns.insert(0, R)
        returns = torch.stack(returns)
        returns = (returns - returns.mean()) / (returns.std() + 1e-8)
        loss = -(dist.log_prob(a) * returns).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), a

    step = env.step(train_step)
    torch.manual_seed(3)
    for it in range(4):
        # (the sampled actions are the library's draws: compared between llgrad's runs)
        env.rec(f"step {it}", step(env.randn(6, 4), env.randn(6, 3)), cross=False)
    env.rec("params", dict(policy.state_dict()), cross=False)


def resampling_layers(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(2, 4, 3, padding=1)
            self.up = nn.Upsample(scale_factor=1.5, mode="bilinear", align_corners=False,
                                  recompute_scale_factor=True)
            self.c2 = nn.Conv2d(4, 2, 3, padding=1)

        def forward(self, x):
            h = F.relu(self.c1(x))
            a = F.interpolate(h, size=(5, 5), mode="bicubic", antialias=True)
            b = F.interpolate(h, size=(5, 5), mode="bilinear", antialias=True)
            c = F.avg_pool2d(h, 3, 2, padding=1, ceil_mode=True, count_include_pad=False)
            d = F.avg_pool2d(h, 2, 2, divisor_override=3)
            grid = torch.tanh(x[:, :2].permute(0, 2, 3, 1))
            g = F.grid_sample(h, grid, mode="bicubic", align_corners=False)
            n = F.grid_sample(h, grid, mode="nearest", padding_mode="reflection")
            return (self.c2(a).mean() + b.pow(2).mean() + c.mean() + self.up(d).std()
                    + g.abs().mean() + n.mean())

    model = env.init(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_step(x):
        loss = model(x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(3):
        env.rec(f"loss {it}", step(env.randn(2, 2, 10, 10)))
    env.rec("params", dict(model.state_dict()))


def embedding_maxnorm_freq(torch, env):
    nn, F = torch.nn, torch.nn.functional
    emb = env.init(nn.Embedding(10, 4, max_norm=1.0, scale_grad_by_freq=True, padding_idx=0))
    lin = env.init(nn.Linear(4, 1))
    params = list(emb.parameters()) + list(lin.parameters())
    opt = torch.optim.SGD(params, lr=0.5)

    def train_step(ids, y):
        loss = F.mse_loss(lin(emb(ids).mean(1)).squeeze(-1), y)
        opt.zero_grad()
        loss.backward()
        norm = nn.utils.clip_grad_norm_(params, 0.5, foreach=True, error_if_nonfinite=True)
        opt.step()
        return loss.detach(), norm

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"step {it}", step(env.randint(0, 10, (6, 3)), env.randn(6)))
    env.rec("params", (dict(emb.state_dict()), dict(lin.state_dict())))


def mamba_selective_scan(torch, env):
    nn, F = torch.nn, torch.nn.functional
    d_model, d_inner, d_state, L = 6, 8, 4, 5

    class MambaBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_proj = nn.Linear(d_model, 2 * d_inner)
            self.conv = nn.Conv1d(d_inner, d_inner, 3, groups=d_inner, padding=2)
            self.x_proj = nn.Linear(d_inner, 1 + 2 * d_state, bias=False)
            self.dt_proj = nn.Linear(1, d_inner)
            A = torch.arange(1, d_state + 1).float().repeat(d_inner, 1)
            self.A_log = nn.Parameter(torch.log(A))
            self.D = nn.Parameter(torch.ones(d_inner))
            self.out_proj = nn.Linear(d_inner, d_model)

        def forward(self, x):                                  # (B, L, d_model)
            xz = self.in_proj(x)
            u, z = xz.chunk(2, dim=-1)
            u = F.silu(self.conv(u.transpose(1, 2))[..., :L].transpose(1, 2))
            dt, B, C = self.x_proj(u).split([1, d_state, d_state], dim=-1)
            delta = F.softplus(self.dt_proj(dt))               # (B, L, d_inner)
            A = -torch.exp(self.A_log)                         # (d_inner, d_state)
            dA = torch.exp(delta.unsqueeze(-1) * A)            # (B, L, d_inner, d_state)
            dBu = delta.unsqueeze(-1) * B.unsqueeze(2) * u.unsqueeze(-1)
            h = torch.zeros(x.shape[0], d_inner, d_state)
            ys = []
            for t in range(L):
                h = dA[:, t] * h + dBu[:, t]
                ys.append((h * C[:, t].unsqueeze(1)).sum(-1))
            y = torch.stack(ys, 1) + u * self.D
            return self.out_proj(y * F.silu(z))

    model = env.init(MambaBlock())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def train_step(x):
        loss = F.mse_loss(model(x[:, :-1]), x[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"loss {it}", step(torch.cumsum(env.randn(3, L + 1, d_model), 1) * 0.3))
    env.rec("params", dict(model.state_dict()))


def rwkv_time_mix(torch, env):
    nn, F = torch.nn, torch.nn.functional
    C, T = 8, 5

    class TimeMix(nn.Module):
        def __init__(self):
            super().__init__()
            self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
            self.mix_k = nn.Parameter(torch.linspace(0, 1, C).view(1, 1, C))
            self.mix_v = nn.Parameter(torch.linspace(1, 0, C).view(1, 1, C))
            self.mix_r = nn.Parameter(torch.full((1, 1, C), 0.5))
            self.time_decay = nn.Parameter(torch.linspace(-2, 1, C))
            self.time_first = nn.Parameter(torch.full((C,), math.log(0.3)))
            self.key, self.value = nn.Linear(C, C, bias=False), nn.Linear(C, C, bias=False)
            self.receptance, self.output = nn.Linear(C, C, bias=False), nn.Linear(C, C, bias=False)

        def forward(self, x):
            xx = self.time_shift(x)
            k = self.key(x * self.mix_k + xx * (1 - self.mix_k))
            v = self.value(x * self.mix_v + xx * (1 - self.mix_v))
            r = torch.sigmoid(self.receptance(x * self.mix_r + xx * (1 - self.mix_r)))
            w, u = -torch.exp(self.time_decay), self.time_first
            aa = torch.zeros(x.shape[0], C)
            bb = torch.zeros(x.shape[0], C)
            pp = torch.full((x.shape[0], C), -1e38)
            outs = []
            for t in range(T):
                kt, vt = k[:, t], v[:, t]
                ww = u + kt
                p = torch.maximum(pp, ww)
                e1, e2 = torch.exp(pp - p), torch.exp(ww - p)
                outs.append((e1 * aa + e2 * vt) / (e1 * bb + e2))
                ww = pp + w
                p = torch.maximum(ww, kt)
                e1, e2 = torch.exp(ww - p), torch.exp(kt - p)
                aa, bb, pp = e1 * aa + e2 * vt, e1 * bb + e2, p
            return self.output(r * torch.stack(outs, 1))

    model = env.init(TimeMix())
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(x, y):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        x = env.randn(2, T, C)
        env.rec(f"loss {it}", step(x, torch.cumsum(x, 1) * 0.5))
    env.rec("params", dict(model.state_dict()))


def retention_parallel(torch, env):
    nn, F = torch.nn, torch.nn.functional
    d, heads, L = 8, 2, 6
    hd = d // heads

    class Retention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d, bias=False)
            self.gate = nn.Linear(d, d, bias=False)
            self.norm = nn.GroupNorm(heads, d)
            self.out = nn.Linear(d, d, bias=False)
            self.register_buffer("gammas", 1 - 2.0 ** (-5 - torch.arange(heads).float()))

        def forward(self, x):
            B = x.shape[0]
            q, k, v = self.qkv(x).view(B, L, 3, heads, hd).permute(2, 0, 3, 1, 4)
            n = torch.arange(L).float()
            diff = n[:, None] - n[None, :]
            decay = self.gammas.view(-1, 1, 1) ** diff.clamp(min=0)
            decay = decay.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), 0)
            ret = (q @ k.transpose(-1, -2)) / math.sqrt(hd) * decay
            y = (ret @ v).transpose(1, 2).reshape(B * L, d)
            y = self.norm(y).view(B, L, d)
            return self.out(F.silu(self.gate(x)) * y)

    model = env.init(Retention())
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(x):
        loss = F.mse_loss(model(x[:, :-1]), x[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"loss {it}", step(torch.cumsum(env.randn(2, L + 1, d), 1) * 0.3))
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {"python_side_state": python_side_state, "reinforce_sampled": reinforce_sampled,
            "resampling_layers": resampling_layers,
            "embedding_maxnorm_freq": embedding_maxnorm_freq,
            "mamba_selective_scan": mamba_selective_scan, "rwkv_time_mix": rwkv_time_mix,
            "retention_parallel": retention_parallel}

# (the default run keeps the quickest; the others are marked slow)
FAST = ("embedding_maxnorm_freq",)


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
