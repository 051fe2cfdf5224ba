"""Sweep 63 (t1), file b: tutorial programs run with PyTorch, with llgrad eagerly and with
llgrad compiling each whole training step through tutorial_harness.py (the same per-step
losses, parameters and gradients, no llgrad warning, compiled code for every step).

- a DiT (Peebles & Xie) noise-prediction step: patchify by a strided Conv2d, frozen 2-d
  sin-cos position embedding, the sinusoidal timestep embedder, adaLN-Zero blocks
  (modulate = x * (1 + scale) + shift, gated residuals, the modulation Linear and the
  final layer zero-initialised, so the first steps' gradients flow through zeros only),
  unpatchify by reshape and einsum, the DDPM q_sample with a linear beta schedule;
- DeepONet (Lu et al.) learning the antiderivative operator: branch net over sensor
  values, trunk net over query points, einsum("bp,np->bn") plus a scalar bias, targets
  made by torch.cumsum, Adam with an ExponentialLR;
- a neural additive model (Agarwal et al.): one small net per feature whose first layer
  is the paper's ExU unit, (x - b) * exp(w) clipped by ReLU-n (clamp to [0, 1]), the
  feature nets' outputs summed with a bias, BCE-with-logits plus the paper's output
  penalty (mean squared feature contributions) and L2 weight decay by hand."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _grads(model):
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def dit_adaln_zero(torch, env):
    nn, F = torch.nn, torch.nn.functional
    img, patch, ch, hidden, heads, depth, T, batch = 8, 2, 2, 16, 2, 2, 50, 4

    def modulate(x, shift, scale):
        return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)

    class TimestepEmbedder(nn.Module):
        def __init__(self, hidden_size, frequency_embedding_size=16):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(frequency_embedding_size, hidden_size), nn.SiLU(),
                                     nn.Linear(hidden_size, hidden_size))
            self.frequency_embedding_size = frequency_embedding_size

        @staticmethod
        def timestep_embedding(t, dim, max_period=10000):
            half = dim // 2
            freqs = torch.exp(-math.log(max_period)
                              * torch.arange(start=0, end=half, dtype=torch.float32) / half)
            args = t[:, None].float() * freqs[None]
            return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

        def forward(self, t):
            return self.mlp(self.timestep_embedding(t, self.frequency_embedding_size))

    class DiTBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
            self.attn = nn.MultiheadAttention(hidden, heads, batch_first=True)
            self.norm2 = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * hidden, hidden))
            self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden, 6 * hidden))

        def forward(self, x, c):
            shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = \
                self.adaLN_modulation(c).chunk(6, dim=1)
            h = modulate(self.norm1(x), shift_msa, scale_msa)
            x = x + gate_msa.unsqueeze(1) * self.attn(h, h, h, need_weights=False)[0]
            h = modulate(self.norm2(x), shift_mlp, scale_mlp)
            return x + gate_mlp.unsqueeze(1) * self.mlp(h)

    class FinalLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm_final = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
            self.linear = nn.Linear(hidden, patch * patch * ch)
            self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden, 2 * hidden))

        def forward(self, x, c):
            shift, scale = self.adaLN_modulation(c).chunk(2, dim=1)
            return self.linear(modulate(self.norm_final(x), shift, scale))

    def sincos_pos_embed(dim, grid):
        coords = torch.arange(grid, dtype=torch.float32)
        omega = 1.0 / 10000 ** (torch.arange(dim // 4, dtype=torch.float32) / (dim / 4.0))
        gy, gx = torch.meshgrid(coords, coords, indexing="ij")
        out_y = gy.reshape(-1, 1) * omega[None]
        out_x = gx.reshape(-1, 1) * omega[None]
        return torch.cat([out_y.sin(), out_y.cos(), out_x.sin(), out_x.cos()], dim=1)

    class DiT(nn.Module):
        def __init__(self):
            super().__init__()
            self.x_embedder = nn.Conv2d(ch, hidden, kernel_size=patch, stride=patch)
            self.t_embedder = TimestepEmbedder(hidden)
            self.pos_embed = nn.Parameter(sincos_pos_embed(hidden, img // patch).unsqueeze(0),
                                          requires_grad=False)
            self.blocks = nn.ModuleList([DiTBlock() for _ in range(depth)])
            self.final_layer = FinalLayer()
            for block in self.blocks:      # adaLN-Zero: every block starts as the identity
                nn.init.constant_(block.adaLN_modulation[-1].weight, 0)
                nn.init.constant_(block.adaLN_modulation[-1].bias, 0)
            for m in (self.final_layer.adaLN_modulation[-1], self.final_layer.linear):
                nn.init.constant_(m.weight, 0)
                nn.init.constant_(m.bias, 0)

        def unpatchify(self, x):
            h = w = int(x.shape[1] ** 0.5)
            x = x.reshape(x.shape[0], h, w, patch, patch, ch)
            x = torch.einsum("nhwpqc->nchpwq", x)
            return x.reshape(x.shape[0], ch, h * patch, h * patch)

        def forward(self, x, t):
            x = self.x_embedder(x).flatten(2).transpose(1, 2) + self.pos_embed
            c = self.t_embedder(t)
            for block in self.blocks:
                x = block(x, c)
            return self.unpatchify(self.final_layer(x, c))

    model = env.init(DiT())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0)
    betas = torch.linspace(1e-4, 0.02, T)
    alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)

    def train_step(x0, t, noise):
        optimizer.zero_grad()
        a = alphas_cumprod[t].view(-1, 1, 1, 1)
        x_t = a.sqrt() * x0 + (1 - a).sqrt() * noise
        loss = F.mse_loss(model(x_t, t), noise)
        loss.backward()
        optimizer.step()
        return loss.detach()

    step = env.step(train_step)
    data = env.randn(16, ch, img, img)
    for it in range(5):
        idx = env.randint(0, 16, (batch,))
        env.rec(f"step {it}", step(data[idx], env.randint(0, T, (batch,)),
                                   env.randn(batch, ch, img, img)))
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


def deeponet_antiderivative(torch, env):
    nn = torch.nn
    m_sensors, n_points, p, batch = 20, 16, 12, 8
    sensors = torch.linspace(0, 1, m_sensors)
    dx = 1.0 / (m_sensors - 1)

    def mlp(sizes):
        layers = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(a, b), nn.Tanh()]
        return nn.Sequential(*layers[:-1])

    class DeepONet(nn.Module):
        def __init__(self):
            super().__init__()
            self.branch = mlp([m_sensors, 32, p])
            self.trunk = mlp([1, 32, p])
            self.trunk_act = nn.Tanh()       # (DeepXDE: the trunk's last layer activated)
            self.b = nn.Parameter(torch.tensor(0.0))

        def forward(self, u, y):
            branch = self.branch(u)                       # (batch, p)
            trunk = self.trunk_act(self.trunk(y))         # (n_points, p)
            return torch.einsum("bp,np->bn", branch, trunk) + self.b

    model = env.init(DeepONet())
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)

    def antiderivative(u):
        """s(x) = int_0^x u, by the trapezoid rule on the sensor grid."""
        inc = 0.5 * (u[:, 1:] + u[:, :-1]) * dx
        return torch.cat([torch.zeros(u.shape[0], 1), torch.cumsum(inc, dim=1)], dim=1)

    def train_step(u, idx):
        optimizer.zero_grad()
        target = antiderivative(u)[:, idx]
        pred = model(u, sensors[idx].unsqueeze(-1))
        loss = ((pred - target) ** 2).mean()
        loss.backward()
        optimizer.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(6):
        coeffs = env.randn(batch, 3)
        freqs = torch.tensor([1.0, 2.0, 3.0]) * math.pi
        u = (coeffs.unsqueeze(-1) * torch.sin(freqs[:, None] * sensors[None])).sum(1)
        env.rec(f"step {it}", step(u, env.randint(0, m_sensors, (n_points,))))
        scheduler.step()
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


def neural_additive_model(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_features, hidden, batch = 4, 8, 32

    class ExU(nn.Module):
        def __init__(self, in_features, out_features):
            super().__init__()
            self.weights = nn.Parameter(torch.empty(in_features, out_features))
            self.bias = nn.Parameter(torch.empty(in_features))
            nn.init.trunc_normal_(self.weights, mean=4.0, std=0.5)
            nn.init.trunc_normal_(self.bias, std=0.5)

        def forward(self, x, n=1):
            out = torch.matmul(x - self.bias, torch.exp(self.weights))
            return torch.clamp(F.relu(out), 0, n)       # ReLU-n

    class FeatureNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.exu = ExU(1, hidden)
            self.fc = nn.Linear(hidden, hidden)
            self.out = nn.Linear(hidden, 1, bias=False)

        def forward(self, x):
            h = self.exu(x.unsqueeze(1))
            return self.out(F.relu(self.fc(h))).squeeze(1)

    class NAM(nn.Module):
        def __init__(self):
            super().__init__()
            self.feature_nns = nn.ModuleList([FeatureNN() for _ in range(n_features)])
            self._bias = nn.Parameter(torch.zeros(1))

        def forward(self, x):
            contributions = torch.stack([fnn(x[:, i]) for i, fnn in enumerate(self.feature_nns)],
                                        dim=-1)
            return contributions.sum(-1) + self._bias, contributions

    model = env.init(NAM())
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    output_penalty, weight_decay = 0.01, 1e-4

    def train_step(x, y):
        optimizer.zero_grad()
        logits, fnn_out = model(x)
        loss = F.binary_cross_entropy_with_logits(logits, y)
        loss = loss + output_penalty * fnn_out.pow(2).mean()
        l2 = sum(p.pow(2).sum() for p in model.parameters()) / len(list(model.parameters()))
        loss = loss + weight_decay * l2
        loss.backward()
        optimizer.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(6):
        x = env.rand(batch, n_features) * 2 - 1
        y = ((x[:, 0] ** 2 + torch.sin(3 * x[:, 1]) - x[:, 2]) > 0.3).float()
        env.rec(f"step {it}", step(x, y))
    env.rec("grads", _grads(model))
    with torch.no_grad():
        grid = torch.linspace(-1, 1, 5)
        env.rec("shape functions", [fnn(grid) for fnn in model.feature_nns])
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {
    "dit_adaln_zero": dit_adaln_zero,
    "deeponet_antiderivative": deeponet_antiderivative,
    "neural_additive_model": neural_additive_model,
}


# (over ~1 s each on an idle machine, most of it cold compile)
SLOW = {'dit_adaln_zero'}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW
                                               else [], id=n) for n in PROGRAMS])
def test_program(name):
    _, _, compiled = run_tutorial(PROGRAMS[name], rtol=1e-4, atol=1e-5)
    for cf in compiled.steps:
        assert cf.n_traces == 1, (cf.fn.__name__, cf.n_traces)
