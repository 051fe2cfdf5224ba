"""Sweep 63 (t1), file h: generative programs on 1-d and 3-d signals run with PyTorch,
with llgrad eagerly and with llgrad compiling each whole training step through
tutorial_harness.py (the same per-step losses, parameters and gradients, no llgrad
warning, compiled code for every step).

- WaveGAN (Donahue et al.) scaled down: a ConvTranspose1d generator (stride 2, padding
  and output_padding as in the paper's upsampling), a strided Conv1d discriminator with
  LeakyReLU(0.2) and phase shuffle done tensor-wise (per-sample shifts from the data
  stream, reflect indexing by abs/where, gather along time), the non-saturating GAN
  loss, the discriminator and generator steps compiled separately, Adam(0.5, 0.9);
- a voxel autoencoder (after Brock et al.'s voxel VAE): Conv3d encoder, Linear bottleneck,
  ConvTranspose3d decoder on 8^3 occupancy grids of random spheres, BCEWithLogitsLoss
  with pos_weight for the sparse occupied voxels, plus an ELU and BatchNorm3d."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _grads(model):
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def wavegan_phase_shuffle(torch, env):
    nn, F = torch.nn, torch.nn.functional
    latent, ch, length, batch, shift_factor = 8, 4, 32, 6, 2

    class PhaseShuffle(nn.Module):
        """Shift each sample by k in [-n, n] along time, reflecting at the ends."""
        def __init__(self, shift_factor):
            super().__init__()
            self.shift_factor = shift_factor

        def forward(self, x, k):            # k: (batch,) int64 shifts
            L = x.size(-1)
            idx = torch.arange(L).unsqueeze(0) - k.unsqueeze(1)
            idx = idx.abs()
            idx = torch.where(idx > L - 1, 2 * (L - 1) - idx, idx)
            return x.gather(2, idx.unsqueeze(1).expand(-1, x.size(1), -1))

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(latent, 4 * ch * (length // 8))
            self.up = nn.ModuleList([
                nn.ConvTranspose1d(4 * ch, 2 * ch, 9, stride=2, padding=4, output_padding=1),
                nn.ConvTranspose1d(2 * ch, ch, 9, stride=2, padding=4, output_padding=1),
                nn.ConvTranspose1d(ch, 1, 9, stride=2, padding=4, output_padding=1)])

        def forward(self, z):
            x = F.relu(self.fc(z).view(-1, 4 * ch, length // 8))
            for i, up in enumerate(self.up):
                x = up(x)
                x = torch.tanh(x) if i == len(self.up) - 1 else F.relu(x)
            return x

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = nn.ModuleList([nn.Conv1d(1, ch, 9, stride=2, padding=4),
                                        nn.Conv1d(ch, 2 * ch, 9, stride=2, padding=4),
                                        nn.Conv1d(2 * ch, 4 * ch, 9, stride=2, padding=4)])
            self.ps = PhaseShuffle(shift_factor)
            self.fc = nn.Linear(4 * ch * (length // 8), 1)

        def forward(self, x, shifts):
            for i, conv in enumerate(self.convs):
                x = F.leaky_relu(conv(x), 0.2)
                if i < len(self.convs) - 1:
                    x = self.ps(x, shifts[i])
            return self.fc(x.flatten(1)).squeeze(1)

    G, D = env.init(Generator()), env.init(Discriminator())
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-3, betas=(0.5, 0.9))
    opt_d = torch.optim.Adam(D.parameters(), lr=1e-3, betas=(0.5, 0.9))
    bce = nn.BCEWithLogitsLoss()

    def d_step(real, z, shifts):
        opt_d.zero_grad()
        fake = G(z).detach()
        loss = bce(D(real, shifts), torch.ones(real.size(0))) + \
            bce(D(fake, shifts), torch.zeros(fake.size(0)))
        loss.backward()
        opt_d.step()
        return loss.detach()

    def g_step(z, shifts):
        opt_g.zero_grad()
        loss = bce(D(G(z), shifts), torch.ones(z.size(0)))
        loss.backward()
        opt_g.step()
        return loss.detach()

    d_train, g_train = env.step(d_step), env.step(g_step)
    t = torch.arange(length).float()
    for it in range(4):
        freq = 0.2 + 0.3 * env.rand(batch, 1)
        real = torch.sin(freq * t).unsqueeze(1)
        shifts = env.randint(-shift_factor, shift_factor + 1, (2, batch))
        env.rec(f"d {it}", d_train(real, env.randn(batch, latent), shifts))
        env.rec(f"g {it}", g_train(env.randn(batch, latent), shifts))
    env.rec("grads G", _grads(G))
    env.rec("grads D", _grads(D))
    env.rec("params", (dict(G.state_dict()), dict(D.state_dict())))


def voxel_autoencoder(torch, env):
    nn, F = torch.nn, torch.nn.functional
    grid, latent, batch = 8, 12, 4

    class VoxelAE(nn.Module):
        def __init__(self):
            super().__init__()
            # (no bias before a BatchNorm: its gradient is rounding noise Adam scales up)
            self.enc = nn.Sequential(nn.Conv3d(1, 4, 3, padding=1, bias=False), nn.BatchNorm3d(4),
                                     nn.ELU(), nn.Conv3d(4, 8, 3, stride=2, padding=1, bias=False),
                                     nn.BatchNorm3d(8), nn.ELU(),
                                     nn.Conv3d(8, 8, 3, stride=2, padding=1), nn.ELU())
            self.to_latent = nn.Linear(8 * 2 * 2 * 2, latent)
            self.from_latent = nn.Linear(latent, 8 * 2 * 2 * 2)
            self.dec = nn.Sequential(
                nn.ConvTranspose3d(8, 8, 3, stride=2, padding=1, output_padding=1, bias=False),
                nn.BatchNorm3d(8), nn.ELU(),
                nn.ConvTranspose3d(8, 4, 3, stride=2, padding=1, output_padding=1, bias=False),
                nn.BatchNorm3d(4), nn.ELU(),
                nn.ConvTranspose3d(4, 1, 3, stride=1, padding=1))

        def forward(self, x):
            z = self.to_latent(self.enc(x).flatten(1))
            h = F.elu(self.from_latent(z)).view(-1, 8, 2, 2, 2)
            return self.dec(h)

    model = env.init(VoxelAE())
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    criterion = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(3.0))

    coords = torch.stack(torch.meshgrid(*[torch.arange(grid).float()] * 3, indexing="ij"))

    def spheres(centres, radii):
        d = (coords.unsqueeze(0) - centres.view(-1, 3, 1, 1, 1)).pow(2).sum(1).sqrt()
        return (d <= radii.view(-1, 1, 1, 1)).float().unsqueeze(1)

    def train_step(vox):
        model.train()
        optimizer.zero_grad()
        logits = model(vox)
        loss = criterion(logits, vox)
        loss.backward()
        optimizer.step()
        iou = ((logits > 0) & (vox > 0.5)).sum() / ((logits > 0) | (vox > 0.5)).sum()
        return loss.detach(), iou

    step = env.step(train_step)
    for it in range(4):
        vox = spheres(2 + 3 * env.rand(batch, 3), 1.5 + 1.5 * env.rand(batch))
        env.rec(f"step {it}", step(vox))
    env.rec("grads", _grads(model))
    model.eval()
    with torch.no_grad():
        env.rec("eval", model(spheres(torch.full((1, 3), 3.5), torch.tensor([2.0]))))
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {
    "wavegan_phase_shuffle": wavegan_phase_shuffle,
    "voxel_autoencoder": voxel_autoencoder,
}


# (over ~1 s each on an idle machine, most of it cold compile)
SLOW = {'wavegan_phase_shuffle', 'voxel_autoencoder'}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW
                                               else [], id=n) for n in PROGRAMS])
def test_program(name):
    _, _, compiled = run_tutorial(PROGRAMS[name], rtol=1e-4, atol=1e-5)
    for cf in compiled.steps:
        assert cf.n_traces == 1, (cf.fn.__name__, cf.n_traces)
