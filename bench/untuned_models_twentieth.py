"""Six more training steps, written as their reference code writes them and run before llgrad
was tuned on any of them (2026-12-07, stop 77): Slot Attention (lucidrains/slot-attention: slots
drawn as mu + sigma * randn each call, iterative attention softmaxed over the slots, a GRUCell
update on flattened slots, a small CNN encoder with a soft position embedding; Adam), VICReg
(facebookresearch/vicreg: two views through a backbone and a BatchNorm1d expander, the
invariance, variance (relu(1 - std)) and covariance terms, off_diagonal by flatten()[:-1].view;
LARS replaced by AdamW), a Neural Additive Model (google-research/nam: one feature net per input
with an ExU first layer exp(w) * (x - b) clamped as ReLU-n, summed with a bias, an output
penalty; Adam), and in untuned_models_twentieth_b.py a top-k sparse autoencoder
(openai/sparse_autoencoder: pre-bias, topk of the latents scattered into zeros, normalised MSE,
decoder columns renormalised under no_grad after each step), deep-kernel GP regression
(GPyTorch-style exact marginal likelihood written by hand: an MLP feature extractor, an RBF
kernel with softplus lengthscale, cholesky, cholesky_solve and the log-det from the diagonal,
in float64; Adam) and LISTA (Gregor & LeCun's unrolled ISTA: a shared S matrix, learned per-layer
thresholds through sign * relu(|x| - theta), clip_grad_value_; Adam).

    python bench/untuned_models_twentieth.py [name,...] [--torch-compile]

Per model: torch eager, torch.compile (with --torch-compile), llgrad eager and llgrad compiled,
1 thread each; the checks, the timing and its printout are untuned_models_eleventh.py's (main
there). build(lib, name, small=True) makes the tests' smaller versions."""
import os
import sys
import types

import numpy as np

import untuned_models_twentieth_b
from untuned_models_fifth import training_step

NAMES = ("slotattn", "vicreg", "nam", "topksae", "dkgp", "lista")


def _maker(name):
    if hasattr(untuned_models_twentieth_b, "_" + name):
        return getattr(untuned_models_twentieth_b, "_" + name)
    return globals()["_" + name]


def build(lib, name, small=False):
    np.random.seed(0)
    return training_step(lib, lambda lib: _maker(name)(lib, small))


def _slotattn(lib, small):
    # (slot_attention.py's SlotAttention; the encoder and soft position embedding of the
    # paper's object-discovery model, a mean-of-slots readout to a property regression)
    nn, F = lib.nn, lib.nn.functional
    batch, size, dim, n_slots, iters, hid = (2, 8, 16, 3, 2, 16) if small else (
        16, 32, 64, 5, 3, 128)

    class SlotAttention(nn.Module):
        def __init__(self, num_slots, dim, iters=3, eps=1e-8, hidden_dim=128):
            super().__init__()
            self.num_slots = num_slots
            self.iters = iters
            self.eps = eps
            self.scale = dim ** -0.5
            self.slots_mu = nn.Parameter(lib.randn(1, 1, dim))
            self.slots_logsigma = nn.Parameter(lib.zeros(1, 1, dim))
            nn.init.xavier_uniform_(self.slots_logsigma)
            self.to_q = nn.Linear(dim, dim)
            self.to_k = nn.Linear(dim, dim)
            self.to_v = nn.Linear(dim, dim)
            self.gru = nn.GRUCell(dim, dim)
            hidden_dim = max(dim, hidden_dim)
            self.mlp = nn.Sequential(nn.Linear(dim, hidden_dim), nn.ReLU(inplace=True),
                                     nn.Linear(hidden_dim, dim))
            self.norm_input = nn.LayerNorm(dim)
            self.norm_slots = nn.LayerNorm(dim)
            self.norm_pre_ff = nn.LayerNorm(dim)

        def forward(self, inputs, num_slots=None):
            b, n, d, device, dtype = *inputs.shape, inputs.device, inputs.dtype
            n_s = num_slots if num_slots is not None else self.num_slots
            mu = self.slots_mu.expand(b, n_s, -1)
            sigma = self.slots_logsigma.exp().expand(b, n_s, -1)
            slots = mu + sigma * lib.randn(mu.shape, device=device, dtype=dtype)
            inputs = self.norm_input(inputs)
            k, v = self.to_k(inputs), self.to_v(inputs)
            for _ in range(self.iters):
                slots_prev = slots
                slots = self.norm_slots(slots)
                q = self.to_q(slots)
                dots = lib.einsum('bid,bjd->bij', q, k) * self.scale
                attn = dots.softmax(dim=1) + self.eps
                attn = attn / attn.sum(dim=-1, keepdim=True)
                updates = lib.einsum('bjd,bij->bid', v, attn)
                slots = self.gru(updates.reshape(-1, d), slots_prev.reshape(-1, d))
                slots = slots.reshape(b, -1, d)
                slots = slots + self.mlp(self.norm_pre_ff(slots))
            return slots

    def build_grid(resolution):
        ranges = [np.linspace(0., 1., num=res) for res in resolution]
        grid = np.meshgrid(*ranges, sparse=False, indexing="ij")
        grid = np.stack(grid, axis=-1).reshape([resolution[0], resolution[1], -1])
        grid = np.expand_dims(grid, axis=0).astype(np.float32)
        return lib.from_numpy(np.concatenate([grid, 1.0 - grid], axis=-1))

    class SoftPositionEmbed(nn.Module):
        def __init__(self, hidden_size, resolution):
            super().__init__()
            self.embedding = nn.Linear(4, hidden_size, bias=True)
            self.grid = build_grid(resolution)

        def forward(self, inputs):
            return inputs + self.embedding(self.grid)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, hid, 5, padding=2)
            self.conv2 = nn.Conv2d(hid, dim, 5, padding=2)
            self.pos = SoftPositionEmbed(dim, (size, size))
            self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
            self.slot_attention = SlotAttention(n_slots, dim, iters, hidden_dim=hid)
            self.head = nn.Linear(dim, 4)

        def forward(self, image):
            x = F.relu(self.conv2(F.relu(self.conv1(image))))
            x = x.permute(0, 2, 3, 1)
            x = self.pos(x)
            x = lib.flatten(x, 1, 2)
            x = self.mlp(nn.LayerNorm(x.shape[1:])(x))
            slots = self.slot_attention(x)
            return lib.sigmoid(self.head(slots))

    model = Model()
    opt = lib.optim.Adam(model.parameters(), lr=4e-4)
    rng = np.random.RandomState(1)
    image = lib.tensor(rng.rand(batch, 3, size, size).astype(np.float32))
    target = lib.tensor(rng.rand(batch, n_slots, 4).astype(np.float32))

    def loss():
        pred = model(image)
        # (a set loss with a fixed sort order in place of the Hungarian matching)
        return F.mse_loss(pred.sort(dim=1)[0], target.sort(dim=1)[0])
    return model, opt, loss


def _vicreg(lib, small):
    # (vicreg/main_vicreg.py's VICReg.forward, Projector and off_diagonal; an MLP backbone
    # over flattened images in place of the ResNet-50)
    nn, F = lib.nn, lib.nn.functional
    batch, d_in, rep, mlp = (8, 48, 16, "32-32") if small else (64, 3 * 32 * 32, 256, "512-512")

    def Projector(args, embedding):
        mlp_spec = f"{embedding}-{args.mlp}"
        layers = []
        f = list(map(int, mlp_spec.split("-")))
        for i in range(len(f) - 2):
            layers.append(nn.Linear(f[i], f[i + 1]))
            layers.append(nn.BatchNorm1d(f[i + 1]))
            layers.append(nn.ReLU(True))
        layers.append(nn.Linear(f[-2], f[-1], bias=False))
        return nn.Sequential(*layers)

    def off_diagonal(x):
        n, m = x.shape
        assert n == m
        return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()

    class VICReg(nn.Module):
        def __init__(self, args):
            super().__init__()
            self.args = args
            self.num_features = int(args.mlp.split("-")[-1])
            self.backbone = nn.Sequential(nn.Flatten(), nn.Linear(d_in, rep * 2), nn.ReLU(),
                                          nn.Linear(rep * 2, rep))
            self.embedding = rep
            self.projector = Projector(args, self.embedding)

        def forward(self, x, y):
            x = self.projector(self.backbone(x))
            y = self.projector(self.backbone(y))
            repr_loss = F.mse_loss(x, y)
            x = x - x.mean(dim=0)
            y = y - y.mean(dim=0)
            std_x = lib.sqrt(x.var(dim=0) + 0.0001)
            std_y = lib.sqrt(y.var(dim=0) + 0.0001)
            std_loss = lib.mean(F.relu(1 - std_x)) / 2 + lib.mean(F.relu(1 - std_y)) / 2
            cov_x = (x.T @ x) / (self.args.batch_size - 1)
            cov_y = (y.T @ y) / (self.args.batch_size - 1)
            cov_loss = off_diagonal(cov_x).pow_(2).sum().div(
                self.num_features) + off_diagonal(cov_y).pow_(2).sum().div(self.num_features)
            return (self.args.sim_coeff * repr_loss + self.args.std_coeff * std_loss
                    + self.args.cov_coeff * cov_loss)

    args = types.SimpleNamespace(mlp=mlp, batch_size=batch, sim_coeff=25.0, std_coeff=25.0,
                                 cov_coeff=1.0)
    model = VICReg(args)
    opt = lib.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-6)
    rng = np.random.RandomState(1)
    img = rng.rand(batch, d_in).astype(np.float32)
    dtype = lib.get_default_dtype()     # (the tests run it in float64)
    x = lib.tensor(img + 0.1 * rng.randn(batch, d_in).astype(np.float32)).to(dtype)
    y = lib.tensor(img[:, ::-1].copy() * 0.9).to(dtype)     # (two fixed "augmentations")

    def loss():
        return model.forward(x, y)
    return model, opt, loss


def _nam(lib, small):
    # (nam/models/nam.py's NAM and FeatureNN, nam/models/activation/exu.py's ExU with ReLU-n,
    # nam/trainer/losses.py's penalized_loss without dropout: output_regularization on the
    # per-feature outputs; a regression target)
    nn, F = lib.nn, lib.nn.functional
    batch, n_feat, units, hidden = (8, 3, 8, (8, 4)) if small else (256, 16, 64, (64, 32))

    class ExU(nn.Module):
        def __init__(self, in_features, out_features):
            super().__init__()
            self.weights = nn.Parameter(lib.Tensor(in_features, out_features))
            self.bias = nn.Parameter(lib.Tensor(in_features))
            self.reset_parameters()

        def reset_parameters(self):
            nn.init.trunc_normal_(self.weights, mean=4.0, std=0.5, a=3.0, b=5.0)
            nn.init.trunc_normal_(self.bias, std=0.5)

        def forward(self, inputs, n=1):
            output = (inputs - self.bias).matmul(lib.exp(self.weights))
            output = F.relu(output)
            output = lib.clamp(output, 0, n)
            return output

    class FeatureNN(nn.Module):
        def __init__(self, shallow_units, hidden_units=(), dropout=0.0):
            super().__init__()
            self.layers = nn.ModuleList([ExU(1, shallow_units)])
            in_units = shallow_units
            for out_units in hidden_units:
                self.layers.append(nn.Linear(in_units, out_units))
                self.layers.append(nn.ReLU())
                in_units = out_units
            self.layers.append(nn.Linear(in_units, 1, bias=False))

        def forward(self, inputs):
            outputs = inputs.unsqueeze(1)
            for layer in self.layers:
                outputs = layer(outputs)
            return outputs

    class NAM(nn.Module):
        def __init__(self, num_inputs):
            super().__init__()
            self.num_inputs = num_inputs
            self.feature_nns = nn.ModuleList(
                [FeatureNN(units, hidden) for i in range(num_inputs)])
            self._bias = nn.Parameter(data=lib.zeros(1))

        def calc_outputs(self, inputs):
            return [self.feature_nns[i](inputs[:, i]) for i in range(self.num_inputs)]

        def forward(self, inputs):
            individual_outputs = self.calc_outputs(inputs)
            conc_out = lib.cat(individual_outputs, dim=-1)
            out = lib.sum(conc_out, dim=-1)
            return out + self._bias, conc_out

    model = NAM(n_feat)
    opt = lib.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-6)
    rng = np.random.RandomState(1)
    xs = rng.rand(batch, n_feat).astype(np.float32) * 2 - 1
    x = lib.tensor(xs)
    y = lib.tensor((np.sin(3 * xs).sum(1) + xs[:, 0] ** 2).astype(np.float32))
    output_regularization = 0.01

    def loss():
        logits, fnns_out = model(x)
        per_feature_norm = [lib.mean(lib.square(outputs)) for outputs in fnns_out]
        out_reg = sum(per_feature_norm) / len(per_feature_norm)
        return F.mse_loss(logits.view(-1), y.view(-1)) + output_regularization * out_reg
    return model, opt, loss


if __name__ == "__main__":
    import untuned_models_eleventh
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    chosen = args[0].split(",") if args else list(NAMES)
    if "-h" in sys.argv or "--help" in sys.argv or set(chosen) - set(NAMES):
        sys.exit(__doc__ + f"\n\nmodels: {', '.join(NAMES)}")
    os.environ.setdefault("LLGRAD_COMPILE", "sync")     # (read when llgrad is imported)
    os.environ.setdefault("LLGRAD_NUM_THREADS", "1")
    untuned_models_eleventh.main(chosen, "--torch-compile" in sys.argv, build=build,
                                 raw=None, jax_models=types.SimpleNamespace(NAMES=()))
