"""Six more training steps, written as their reference code writes them and run before llgrad
was tuned on any of them (2026-12-07, stop 75): N-BEATS (philipperemy/n-beats's
NBeatsNet: trend and seasonality stacks whose bases are NumPy arrays made into tensors in each
forward, backcasts subtracted block by block; Adam on an MSE forecast loss), a spiking network
trained by surrogate gradients (fzenke/spytorch's tutorial: SurrGradSpike, a
torch.autograd.Function whose forward writes spikes by a boolean mask, leaky
integrate-and-fire synapses and membranes in a Python loop over time steps, einsum inputs, a
max-over-time readout, spike-count regularisers; Adam), PoolFormer (sail-sg/poolformer:
GroupNorm(1, C), AvgPool2d(count_include_pad=False) minus its input as the token mixer, 1x1
convolution MLPs with GELU, layer scales by unsqueeze; AdamW with label smoothing), and in
untuned_models_eighteenth_b.py a HyperNetwork ResNet (g1910/HyperNetworks: every 3x3 kernel
generated from learned z vectors by one shared two-layer hypernetwork, assembled by torch.cat,
applied by F.conv2d; Adam with weight decay), a stacked hourglass network
(princeton-vl/pytorch_stacked_hourglass: recursive Hourglass of pre-activation Residuals,
MaxPool and nearest Upsample, intermediate supervision by heatmap MSE) and the Gumbel-softmax
VAE (YongfeiYan/Gumbel_Softmax_VAE: Gumbel noise by -log(-log(rand)), a categorical latent of
30 x 10, summed BCE plus the KL to the uniform prior; Adam).

    python bench/untuned_models_eighteenth.py [name,...] [--torch-compile]

Per model: torch eager, torch.compile (with --torch-compile), llgrad eager and llgrad compiled,
1 thread each; the checks, the timing and its printout are untuned_models_eleventh.py's (main
there). build(lib, name, small=True) makes the tests' smaller versions."""
import os
import sys
import types

import numpy as np

import untuned_models_eighteenth_b
from untuned_models_fifth import training_step

NAMES = ("nbeats", "snn", "poolformer", "hypernet", "hourglass", "gumbelvae")


def _maker(name):
    if hasattr(untuned_models_eighteenth_b, "_" + name):
        return getattr(untuned_models_eighteenth_b, "_" + name)
    return globals()["_" + name]


def build(lib, name, small=False):
    np.random.seed(0)
    return training_step(lib, lambda lib: _maker(name)(lib, small))


def _nbeats(lib, small):
    # (nbeats_pytorch/model.py: NBeatsNet with stacks (TREND, SEASONALITY), 3 blocks a stack,
    # shared thetas in both; thetas_dim (4, 8); the ParameterList bookkeeping as a ModuleList)
    nn, F = lib.nn, lib.nn.functional
    batch, back, fore, units, per_stack = (8, 20, 5, 16, 2) if small else (256, 50, 10, 256, 3)

    def squeeze_last_dim(tensor):
        if len(tensor.shape) == 3 and tensor.shape[-1] == 1:
            return tensor[..., 0]
        return tensor

    def seasonality_model(thetas, t):
        p = thetas.size()[-1]
        assert p <= thetas.shape[1], 'thetas_dim is too big.'
        p1, p2 = (p // 2, p // 2) if p % 2 == 0 else (p // 2, p // 2 + 1)
        s1 = lib.tensor(np.array([np.cos(2 * np.pi * i * t) for i in range(p1)])).float()
        s2 = lib.tensor(np.array([np.sin(2 * np.pi * i * t) for i in range(p2)])).float()
        S = lib.cat([s1, s2])
        return thetas.mm(S)

    def trend_model(thetas, t):
        p = thetas.size()[-1]
        assert p <= 4, 'thetas_dim is too big.'
        T = lib.tensor(np.array([t ** i for i in range(p)])).float()
        return thetas.mm(T)

    def linear_space(backcast_length, forecast_length, is_forecast=True):
        horizon = forecast_length if is_forecast else backcast_length
        return np.arange(0, horizon) / horizon

    class Block(nn.Module):
        def __init__(self, units, thetas_dim, backcast_length=10, forecast_length=5,
                     share_thetas=False):
            super(Block, self).__init__()
            self.fc1 = nn.Linear(backcast_length, units)
            self.fc2 = nn.Linear(units, units)
            self.fc3 = nn.Linear(units, units)
            self.fc4 = nn.Linear(units, units)
            self.backcast_linspace = linear_space(backcast_length, forecast_length, False)
            self.forecast_linspace = linear_space(backcast_length, forecast_length, True)
            if share_thetas:
                self.theta_f_fc = self.theta_b_fc = nn.Linear(units, thetas_dim, bias=False)
            else:
                self.theta_b_fc = nn.Linear(units, thetas_dim, bias=False)
                self.theta_f_fc = nn.Linear(units, thetas_dim, bias=False)

        def forward(self, x):
            x = squeeze_last_dim(x)
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            x = F.relu(self.fc3(x))
            x = F.relu(self.fc4(x))
            return x

    class SeasonalityBlock(Block):
        def __init__(self, units, thetas_dim, backcast_length=10, forecast_length=5):
            super().__init__(units, forecast_length, backcast_length, forecast_length, True)

        def forward(self, x):
            x = super(SeasonalityBlock, self).forward(x)
            backcast = seasonality_model(self.theta_b_fc(x), self.backcast_linspace)
            forecast = seasonality_model(self.theta_f_fc(x), self.forecast_linspace)
            return backcast, forecast

    class TrendBlock(Block):
        def __init__(self, units, thetas_dim, backcast_length=10, forecast_length=5):
            super().__init__(units, thetas_dim, backcast_length, forecast_length, True)

        def forward(self, x):
            x = super(TrendBlock, self).forward(x)
            backcast = trend_model(self.theta_b_fc(x), self.backcast_linspace)
            forecast = trend_model(self.theta_f_fc(x), self.forecast_linspace)
            return backcast, forecast

    class NBeatsNet(nn.Module):
        def __init__(self, stack_types=(TrendBlock, SeasonalityBlock), nb_blocks_per_stack=3,
                     forecast_length=5, backcast_length=10, thetas_dim=(4, 8),
                     hidden_layer_units=256):
            super(NBeatsNet, self).__init__()
            self.forecast_length = forecast_length
            self.stacks = nn.ModuleList()
            for stack_id, block_init in enumerate(stack_types):
                self.stacks.append(nn.ModuleList(
                    [block_init(hidden_layer_units, thetas_dim[stack_id], backcast_length,
                                forecast_length) for _ in range(nb_blocks_per_stack)]))

        def forward(self, backcast):
            backcast = squeeze_last_dim(backcast)
            forecast = lib.zeros(size=(backcast.size()[0], self.forecast_length,))
            for stack_id in range(len(self.stacks)):
                for block_id in range(len(self.stacks[stack_id])):
                    b, f = self.stacks[stack_id][block_id](backcast)
                    backcast = backcast - b
                    forecast = forecast + f
            return backcast, forecast

    model = NBeatsNet(nb_blocks_per_stack=per_stack, forecast_length=fore, backcast_length=back,
                      hidden_layer_units=units)
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.RandomState(1)      # (a batch of noisy sines, as the repo's examples)
    t = np.arange(back + fore)[None] * rng.uniform(0.05, 0.3, (batch, 1)) + rng.uniform(0, 6, (batch, 1))
    series = (np.sin(t) + 0.1 * rng.randn(batch, back + fore)).astype(np.float32)
    x, y = lib.tensor(series[:, :back]), lib.tensor(series[:, back:])

    def loss():
        _, forecast = model(x)
        return F.mse_loss(forecast, squeeze_last_dim(y))
    return model, opt, loss


def _snn(lib, small):
    # (spytorch's SpyTorchTutorial2: SurrGradSpike, run_snn and the training loop's loss, the
    # inputs Poisson spikes of fixed rates; w1, w2 a module's parameters so the state compares;
    # batch 64 and 50 time steps where the tutorial has 256 and 100: torch's step ~0.8 s)
    nn = lib.nn
    batch, nb_inputs, nb_hidden, nb_outputs, nb_steps = (
        (8, 20, 16, 2, 12) if small else (64, 100, 200, 2, 50))
    time_step, tau_mem, tau_syn, weight_scale = 1e-3, 10e-3, 5e-3, 7 * (1.0 - 0.9)
    alpha, beta = float(np.exp(-time_step / tau_syn)), float(np.exp(-time_step / tau_mem))

    class SurrGradSpike(lib.autograd.Function):
        scale = 100.0

        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            out = lib.zeros_like(input)
            out[input > 0] = 1.0
            return out

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            grad_input = grad_output.clone()
            grad = grad_input / (SurrGradSpike.scale * lib.abs(input) + 1.0) ** 2
            return grad
    spike_fn = SurrGradSpike.apply

    class SNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Parameter(lib.empty((nb_inputs, nb_hidden)))
            lib.nn.init.normal_(self.w1, mean=0.0, std=weight_scale / np.sqrt(nb_inputs))
            self.w2 = nn.Parameter(lib.empty((nb_hidden, nb_outputs)))
            lib.nn.init.normal_(self.w2, mean=0.0, std=weight_scale / np.sqrt(nb_hidden))

        def forward(self, inputs):
            w1, w2 = self.w1, self.w2
            h1 = lib.einsum("abc,cd->abd", (inputs, w1))
            syn = lib.zeros((batch, nb_hidden))
            mem = lib.zeros((batch, nb_hidden))
            mem_rec, spk_rec = [], []
            for t in range(nb_steps):
                mthr = mem - 1.0
                out = spike_fn(mthr)
                rst = out.detach()
                new_syn = alpha * syn + h1[:, t]
                new_mem = (beta * mem + syn) * (1.0 - rst)
                mem_rec.append(mem)
                spk_rec.append(out)
                mem = new_mem
                syn = new_syn
            mem_rec = lib.stack(mem_rec, dim=1)
            spk_rec = lib.stack(spk_rec, dim=1)
            h2 = lib.einsum("abc,cd->abd", (spk_rec, w2))
            flt = lib.zeros((batch, nb_outputs))
            out = lib.zeros((batch, nb_outputs))
            out_rec = [out]
            for t in range(nb_steps):
                new_flt = alpha * flt + h2[:, t]
                new_out = beta * out + flt
                flt = new_flt
                out = new_out
                out_rec.append(out)
            out_rec = lib.stack(out_rec, dim=1)
            return out_rec, [mem_rec, spk_rec]

    model = SNN()
    opt = lib.optim.Adam(model.parameters(), lr=2e-3, betas=(0.9, 0.999))
    log_softmax_fn, loss_fn = nn.LogSoftmax(dim=1), nn.NLLLoss()
    rng = np.random.RandomState(1)
    rates = rng.uniform(5, 60, (nb_outputs, nb_inputs)) * time_step * 4     # (per class)
    y = rng.randint(0, nb_outputs, batch)
    spikes = (rng.rand(batch, nb_steps, nb_inputs) < rates[y][:, None]).astype(np.float32)
    x_local, y_local = lib.tensor(spikes), lib.tensor(y)

    def loss():
        output, recs = model(x_local)
        _, spks = recs
        m, _ = lib.max(output, 1)
        log_p_y = log_softmax_fn(m)
        reg_loss = 1e-5 * lib.sum(spks)
        reg_loss += 1e-5 * lib.mean(lib.sum(lib.sum(spks, dim=0), dim=0) ** 2)
        return loss_fn(log_p_y, y_local) + reg_loss
    return model, opt, loss


def _poolformer(lib, small):
    # (poolformer/models/poolformer.py: PatchEmbed, GroupNorm, Pooling, Mlp, PoolFormerBlock,
    # basic_blocks, PoolFormer with _init_weights' trunc_normal_ on Linear; a CIFAR-sized
    # poolformer with layers (1, 1, 2, 1), drop_path 0; timm's AdamW and label smoothing)
    nn, F = lib.nn, lib.nn.functional
    batch, size, dims, layers = (2, 16, (8, 8, 16, 16), (1, 1, 1, 1)) if small else (
        32, 32, (32, 64, 128, 256), (1, 1, 2, 1))

    class PatchEmbed(nn.Module):
        def __init__(self, patch_size=16, stride=16, padding=0, in_chans=3, embed_dim=768,
                     norm_layer=None):
            super().__init__()
            self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=stride,
                                  padding=padding)
            self.norm = norm_layer(embed_dim) if norm_layer else nn.Identity()

        def forward(self, x):
            x = self.proj(x)
            x = self.norm(x)
            return x

    class GroupNorm(nn.GroupNorm):
        def __init__(self, num_channels, **kwargs):
            super().__init__(1, num_channels, **kwargs)

    class Pooling(nn.Module):
        def __init__(self, pool_size=3):
            super().__init__()
            self.pool = nn.AvgPool2d(pool_size, stride=1, padding=pool_size // 2,
                                     count_include_pad=False)

        def forward(self, x):
            return self.pool(x) - x

    class Mlp(nn.Module):
        def __init__(self, in_features, hidden_features=None, out_features=None,
                     act_layer=nn.GELU, drop=0.):
            super().__init__()
            out_features = out_features or in_features
            hidden_features = hidden_features or in_features
            self.fc1 = nn.Conv2d(in_features, hidden_features, 1)
            self.act = act_layer()
            self.fc2 = nn.Conv2d(hidden_features, out_features, 1)
            self.drop = nn.Dropout(drop)

        def forward(self, x):
            x = self.fc1(x)
            x = self.act(x)
            x = self.drop(x)
            x = self.fc2(x)
            x = self.drop(x)
            return x

    class PoolFormerBlock(nn.Module):
        def __init__(self, dim, pool_size=3, mlp_ratio=4., act_layer=nn.GELU,
                     norm_layer=GroupNorm, drop=0., layer_scale_init_value=1e-5):
            super().__init__()
            self.norm1 = norm_layer(dim)
            self.token_mixer = Pooling(pool_size=pool_size)
            self.norm2 = norm_layer(dim)
            self.mlp = Mlp(in_features=dim, hidden_features=int(dim * mlp_ratio),
                           act_layer=act_layer, drop=drop)
            self.drop_path = nn.Identity()
            self.layer_scale_1 = nn.Parameter(layer_scale_init_value * lib.ones((dim)),
                                              requires_grad=True)
            self.layer_scale_2 = nn.Parameter(layer_scale_init_value * lib.ones((dim)),
                                              requires_grad=True)

        def forward(self, x):
            x = x + self.drop_path(self.layer_scale_1.unsqueeze(-1).unsqueeze(-1)
                                   * self.token_mixer(self.norm1(x)))
            x = x + self.drop_path(self.layer_scale_2.unsqueeze(-1).unsqueeze(-1)
                                   * self.mlp(self.norm2(x)))
            return x

    class PoolFormer(nn.Module):
        def __init__(self, layers, embed_dims, mlp_ratios=4, num_classes=10):
            super().__init__()
            self.patch_embed = PatchEmbed(patch_size=3 if small else 7, stride=2 if small else 4,
                                          padding=1 if small else 2, in_chans=3,
                                          embed_dim=embed_dims[0])
            network = []
            for i in range(len(layers)):
                network.append(nn.Sequential(*[PoolFormerBlock(embed_dims[i], mlp_ratio=mlp_ratios)
                                               for _ in range(layers[i])]))
                if i < len(layers) - 1:
                    network.append(PatchEmbed(patch_size=3, stride=2, padding=1,
                                              in_chans=embed_dims[i], embed_dim=embed_dims[i + 1]))
            self.network = nn.ModuleList(network)
            self.norm = GroupNorm(embed_dims[-1])
            self.head = nn.Linear(embed_dims[-1], num_classes)
            self.apply(self.cls_init_weights)

        def cls_init_weights(self, m):
            if isinstance(m, nn.Linear):
                lib.nn.init.trunc_normal_(m.weight, std=.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.constant_(m.bias, 0)

        def forward(self, x):
            x = self.patch_embed(x)
            for idx, block in enumerate(self.network):
                x = block(x)
            x = self.norm(x)
            cls_out = self.head(x.mean([-2, -1]))
            return cls_out

    model = PoolFormer(layers, dims)
    opt = lib.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    images, labels = lib.randn(batch, 3, size, size), lib.randint(0, 10, (batch,))
    return model, opt, lambda: criterion(model(images), labels)


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
