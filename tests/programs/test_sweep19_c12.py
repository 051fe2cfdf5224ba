"""Sweep 19 (C), part 12: neural-graphics programs: Instant-NGP's multiresolution hash
encoding as HashNeRF-pytorch writes it (voxel corners from floor(...).int() plus box
offsets, the spatial hash by int64 products with large primes XORed in place and masked with
&, one nn.Embedding table per level, bilinear interpolation of the corner features) fitting
a 2-D signal; and 2-D Gaussian splatting (covariances R S S^T R^T from rotations and log
scales, their inverses by torch.linalg.inv, the quadratic form through einsum, front-to-back
alpha compositing with a shifted cumprod of 1 - alpha). Run with PyTorch, with llgrad
eagerly and with llgrad.compile (tutorial_harness.py)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def hash_encoding(torch, env):
    nn, F = torch.nn, torch.nn.functional
    BOX_OFFSETS = torch.tensor([[[i, j] for i in [0, 1] for j in [0, 1]]])

    def hash(coords, log2_hashmap_size):
        primes = [1, 2654435761, 805459861, 3674653429, 2097192037, 1434869437, 2165219737]
        xor_result = torch.zeros_like(coords)[..., 0]
        for i in range(coords.shape[-1]):
            xor_result ^= coords[..., i] * primes[i]
        return torch.tensor((1 << log2_hashmap_size) - 1).to(xor_result.device) & xor_result

    def get_voxel_vertices(xy, bounding_box, resolution, log2_hashmap_size):
        box_min, box_max = bounding_box
        grid_size = (box_max - box_min) / resolution
        bottom_left_idx = torch.floor((xy - box_min) / grid_size).int()
        voxel_min_vertex = bottom_left_idx * grid_size + box_min
        voxel_max_vertex = voxel_min_vertex + torch.tensor([1.0, 1.0]) * grid_size
        voxel_indices = bottom_left_idx.unsqueeze(1) + BOX_OFFSETS
        return voxel_min_vertex, voxel_max_vertex, hash(voxel_indices, log2_hashmap_size)

    class HashEmbedder(nn.Module):
        def __init__(self, bounding_box, n_levels=4, n_features_per_level=2,
                     log2_hashmap_size=7, base_resolution=4, finest_resolution=32):
            super().__init__()
            self.bounding_box = bounding_box
            self.n_levels = n_levels
            self.log2_hashmap_size = log2_hashmap_size
            self.base_resolution = torch.tensor(base_resolution)
            self.finest_resolution = torch.tensor(finest_resolution)
            self.out_dim = n_levels * n_features_per_level
            self.b = torch.exp((torch.log(self.finest_resolution) - torch.log(self.base_resolution))
                               / (n_levels - 1))
            self.embeddings = nn.ModuleList([nn.Embedding(2 ** log2_hashmap_size, n_features_per_level)
                                             for i in range(n_levels)])
            for i in range(n_levels):
                nn.init.uniform_(self.embeddings[i].weight, a=-0.0001, b=0.0001)

        def bilinear_interp(self, x, voxel_min_vertex, voxel_max_vertex, voxel_embedds):
            weights = (x - voxel_min_vertex) / (voxel_max_vertex - voxel_min_vertex)
            c0 = voxel_embedds[:, 0] * (1 - weights[:, 1][:, None]) + voxel_embedds[:, 1] * weights[:, 1][:, None]
            c1 = voxel_embedds[:, 2] * (1 - weights[:, 1][:, None]) + voxel_embedds[:, 3] * weights[:, 1][:, None]
            return c0 * (1 - weights[:, 0][:, None]) + c1 * weights[:, 0][:, None]

        def forward(self, x):
            x_embedded_all = []
            for i in range(self.n_levels):
                resolution = torch.floor(self.base_resolution * self.b ** i)
                voxel_min_vertex, voxel_max_vertex, hashed_voxel_indices = get_voxel_vertices(
                    x, self.bounding_box, resolution, self.log2_hashmap_size)
                voxel_embedds = self.embeddings[i](hashed_voxel_indices)
                x_embedded_all.append(self.bilinear_interp(x, voxel_min_vertex, voxel_max_vertex,
                                                           voxel_embedds))
            return torch.cat(x_embedded_all, dim=-1)

    bbox = (torch.tensor([-1.0, -1.0]), torch.tensor([1.0, 1.0]))
    embedder = env.init(HashEmbedder(bbox))
    mlp = env.init(nn.Sequential(nn.Linear(embedder.out_dim, 16), nn.ReLU(), nn.Linear(16, 1)))
    opt = torch.optim.Adam([{"params": embedder.parameters(), "eps": 1e-15},
                            {"params": mlp.parameters(), "weight_decay": 1e-6}],
                           lr=1e-2, betas=(0.9, 0.99))
    xy = env.rand(64, 2) * 1.98 - 0.99
    target = torch.sin(3 * xy[:, :1]) * torch.cos(5 * xy[:, 1:])

    def train_step(xy, target):
        pred = mlp(embedder(xy))
        loss = F.mse_loss(pred, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    for i in range(6):
        env.rec(f"loss{i}", train_step(xy, target))
    env.rec("hashes", get_voxel_vertices(xy[:5], bbox, torch.tensor(8.0), 7)[2])
    env.rec("tables", [e.weight for e in embedder.embeddings])
    env.rec("mlp", list(mlp.parameters()))


def gaussian_splatting_2d(torch, env):
    nn, F = torch.nn, torch.nn.functional
    N, Hh, W = 6, 8, 8

    class Splats(nn.Module):
        def __init__(self):
            super().__init__()
            self.means = nn.Parameter(env.rand(N, 2) * torch.tensor([W - 1.0, Hh - 1.0]))
            self.log_scales = nn.Parameter(torch.full((N, 2), math.log(1.5)) + 0.1 * env.randn(N, 2))
            self.rot = nn.Parameter(env.rand(N) * math.pi)
            self.colors = nn.Parameter(env.randn(N, 3))
            self.opacity = nn.Parameter(torch.zeros(N))
            self.depth = nn.Parameter(env.randn(N), requires_grad=False)

        def forward(self):
            c, s = torch.cos(self.rot), torch.sin(self.rot)
            R = torch.stack([c, -s, s, c], dim=-1).view(N, 2, 2)
            S = torch.diag_embed(torch.exp(self.log_scales))
            M = R @ S
            cov = M @ M.transpose(-1, -2) + 1e-4 * torch.eye(2)
            inv = torch.linalg.inv(cov)
            ys, xs = torch.meshgrid(torch.arange(Hh, dtype=torch.float32),
                                    torch.arange(W, dtype=torch.float32), indexing="ij")
            pix = torch.stack([xs, ys], dim=-1).view(-1, 2)
            d = pix[None, :, :] - self.means[:, None, :]
            power = -0.5 * torch.einsum("npi,nij,npj->np", d, inv, d)
            alpha = (torch.sigmoid(self.opacity)[:, None] * torch.exp(power)).clamp(max=0.99)
            order = torch.argsort(self.depth)
            alpha = alpha[order]
            T = torch.cat([torch.ones(1, alpha.shape[1]), torch.cumprod(1 - alpha, dim=0)[:-1]], dim=0)
            weights = alpha * T
            rgb = weights.t() @ torch.sigmoid(self.colors[order])
            return rgb.view(Hh, W, 3), weights.sum(0).view(Hh, W)

    splats = Splats()
    opt = torch.optim.Adam([p for p in splats.parameters() if p.requires_grad], lr=0.05)
    target = env.rand(Hh, W, 3)

    def train_step(target):
        img, acc = splats()
        loss = 0.8 * F.l1_loss(img, target) + 0.2 * F.mse_loss(img, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            splats.log_scales.clamp_(max=math.log(4.0))
        return loss, acc.mean()
    train_step = env.step(train_step)
    for i in range(6):
        env.rec(f"step{i}", train_step(target))
    env.rec("params", dict(splats.named_parameters()))


@pytest.mark.parametrize("program", [hash_encoding, gaussian_splatting_2d])
def test_neural_graphics(program):
    run_tutorial(program)
