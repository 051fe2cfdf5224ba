"""untuned_models_twentieth.py's top-k sparse autoencoder, deep-kernel GP regression and LISTA
(the docstring there says what each is)."""
import math

import numpy as np


def _topksae(lib, small):
    # (openai/sparse_autoencoder's model.py Autoencoder with TopK activation, loss.py's
    # normalized_mean_squared_error, train.py's unit_norm_decoder_ after the step)
    nn, F = lib.nn, lib.nn.functional
    batch, d_model, n_latents, k = (8, 12, 32, 4) if small else (256, 256, 2048, 32)

    class TopK(nn.Module):
        def __init__(self, k, postact_fn=nn.ReLU()):
            super().__init__()
            self.k = k
            self.postact_fn = postact_fn

        def forward(self, x):
            topk = lib.topk(x, k=self.k, dim=-1)
            values = self.postact_fn(topk.values)
            result = lib.zeros_like(x)
            result.scatter_(-1, topk.indices, values)
            return result

    class Autoencoder(nn.Module):
        def __init__(self, n_latents, n_inputs, activation=nn.ReLU(), tied=False,
                     normalize=False):
            super().__init__()
            self.pre_bias = nn.Parameter(lib.zeros(n_inputs))
            self.encoder = nn.Linear(n_inputs, n_latents, bias=False)
            self.latent_bias = nn.Parameter(lib.zeros(n_latents))
            self.activation = activation
            self.decoder = nn.Linear(n_latents, n_inputs, bias=False)
            self.normalize = normalize

        def encode_pre_act(self, x, latent_slice=slice(None)):
            x = x - self.pre_bias
            latents_pre_act = F.linear(x, self.encoder.weight[latent_slice],
                                       self.latent_bias[latent_slice])
            return latents_pre_act

        def decode(self, latents, info=None):
            return self.decoder(latents) + self.pre_bias

        def forward(self, x):
            latents_pre_act = self.encode_pre_act(x)
            latents = self.activation(latents_pre_act)
            recons = self.decode(latents)
            return latents_pre_act, latents, recons

    def normalized_mean_squared_error(reconstruction, original_input):
        return (((reconstruction - original_input) ** 2).mean(dim=1)
                / (original_input ** 2).mean(dim=1)).mean()

    def unit_norm_decoder_(autoencoder):
        autoencoder.decoder.weight.data /= autoencoder.decoder.weight.data.norm(dim=0)

    model = Autoencoder(n_latents, d_model, activation=TopK(k))
    unit_norm_decoder_(model)
    opt = lib.optim.Adam(model.parameters(), lr=1e-3, eps=6.25e-10)
    rng = np.random.RandomState(1)
    acts = lib.tensor(rng.randn(batch, d_model).astype(np.float32))

    def loss():
        _, _, recons = model(acts)
        return normalized_mean_squared_error(recons, acts)
    return model, opt, loss, {"clip": 1.0, "after": lambda: unit_norm_decoder_(model)}


def _dkgp(lib, small):
    # (GPyTorch's deep kernel learning example written out: ExactMarginalLogLikelihood of an
    # RBF kernel with softplus-constrained lengthscale, outputscale and noise over an MLP's
    # features; cholesky, cholesky_solve, the log-det as twice the log-diagonal sum)
    nn, F = lib.nn, lib.nn.functional
    n, d_in, feat = (12, 3, 2) if small else (256, 8, 2)

    class FeatureExtractor(nn.Sequential):
        def __init__(self):
            super().__init__()
            self.add_module("linear1", nn.Linear(d_in, 32))
            self.add_module("relu1", nn.ReLU())
            self.add_module("linear2", nn.Linear(32, 16))
            self.add_module("relu2", nn.ReLU())
            self.add_module("linear3", nn.Linear(16, feat))

    class DKLModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.feature_extractor = FeatureExtractor()
            self.raw_lengthscale = nn.Parameter(lib.zeros(1, feat))
            self.raw_outputscale = nn.Parameter(lib.tensor(0.0))
            self.raw_noise = nn.Parameter(lib.tensor(-2.0))
            self.mean_constant = nn.Parameter(lib.zeros(1))

        def kernel(self, x1, x2):
            ls = F.softplus(self.raw_lengthscale)
            x1, x2 = x1 / ls, x2 / ls
            d2 = (x1.pow(2).sum(-1, keepdim=True) - 2 * x1 @ x2.transpose(-2, -1)
                  + x2.pow(2).sum(-1, keepdim=True).transpose(-2, -1))
            return F.softplus(self.raw_outputscale) * lib.exp(-0.5 * d2.clamp_min(0))

        def mll(self, x, y):
            z = self.feature_extractor(x)
            z = z - z.min(0)[0]
            z = 2 * (z / z.max(0)[0]) - 1            # (ScaleToBounds(-1, 1))
            K = self.kernel(z, z)
            noise = F.softplus(self.raw_noise) + 1e-4
            K = K + noise * lib.eye(K.size(-1), dtype=K.dtype)
            L = lib.linalg.cholesky(K)
            r = (y - self.mean_constant).unsqueeze(-1)
            alpha = lib.cholesky_solve(r, L)
            logdet = 2 * lib.log(lib.diagonal(L, dim1=-2, dim2=-1)).sum()
            nll = 0.5 * (r * alpha).sum() + 0.5 * logdet + 0.5 * n * math.log(2 * math.pi)
            return -nll / n

    model = DKLModel().double()        # (an exact GP's cholesky wants float64, as GPyTorch's)
    opt = lib.optim.Adam([{"params": model.feature_extractor.parameters()},
                          {"params": [model.raw_lengthscale, model.raw_outputscale,
                                      model.raw_noise, model.mean_constant], "lr": 0.05}],
                         lr=0.01)
    rng = np.random.RandomState(1)
    xs = rng.rand(n, d_in) * 2 - 1
    x = lib.tensor(xs)
    y = lib.tensor(np.sin(4 * xs[:, 0]) + 0.1 * rng.randn(n))

    def loss():
        return -model.mll(x, y)
    return model, opt, loss


def _lista(lib, small):
    # (the LISTA of Gregor & LeCun 2010 as the common PyTorch ports write it: W_e = A^T / L,
    # S = I - A^T A / L shared over T unrolled layers, per-layer thresholds, the soft
    # threshold as sign(x) * relu(|x| - theta); supervised on ISTA-style sparse codes)
    nn, F = lib.nn, lib.nn.functional
    batch, m, n_atoms, T = (8, 10, 20, 3) if small else (256, 64, 256, 16)
    rng = np.random.RandomState(1)
    A = rng.randn(m, n_atoms).astype(np.float32) / np.sqrt(m)
    L = float(np.linalg.norm(A, 2) ** 2)

    def shrink(x, theta):
        return x.sign() * F.relu(x.abs() - theta)

    class LISTA(nn.Module):
        def __init__(self, A, T, lam=0.1):
            super().__init__()
            self.T = T
            self.We = nn.Linear(A.shape[0], A.shape[1], bias=False)
            self.S = nn.Linear(A.shape[1], A.shape[1], bias=False)
            self.thr = nn.Parameter(lam / L * lib.ones(T + 1, 1, A.shape[1]))
            with lib.no_grad():
                self.We.weight.copy_(lib.from_numpy(A.T / L))
                self.S.weight.copy_(lib.from_numpy(np.eye(A.shape[1], dtype=np.float32)
                                                   - A.T @ A / L))

        def forward(self, y):
            b = self.We(y)
            x = shrink(b, self.thr[0])
            for t in range(self.T):
                x = shrink(b + self.S(x), self.thr[t + 1])
            return x

    codes = rng.randn(batch, n_atoms) * (rng.rand(batch, n_atoms) < 0.1)
    y = lib.tensor((codes @ A.T).astype(np.float32))
    x_star = lib.tensor(codes.astype(np.float32))
    model = LISTA(A, T)
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)

    def loss():
        return F.mse_loss(model(y), x_star, reduction="sum") / batch
    return model, opt, loss, {"clip_value": 10.0}
