"""Six more training steps beside bench/untuned_models.py's, written as their reference code
writes them and run before llgrad was tuned on any of them (2026-12-06): a CapsNet
(XifengGuo/CapsNet-Pytorch: PrimaryCapsule by conv + view + squash, DenseCapsule's
matmul of a 4-d weight by x[:, None, :, :, None], three iterations of dynamic routing with
the detached predictions, the margin loss and the masked reconstruction decoder; Adam with
ExponentialLR), a Deep & Cross Network v2 (DeepCTR-Torch's CrossNet, parameterization
"matrix": x0 * (W xl + b) + xl over an Embedding per field and the dense columns, a DNN
tower with dropout, the L2 penalty on the embeddings added to BCE; Adam), an efficient-kan
KAN (KANLinear: B-spline bases by comparisons and the Cox-de Boor recursion, F.linear of
the flattened bases, SiLU base branch, the spline scaler; the entropy regulariser; AdamW,
ExponentialLR), and in untuned_models_ninth_b.py a mixture density network
(sagelywizard/pytorch-mdn: Softmax pi, exp sigma, the product of per-dimension Gaussians,
-log of the mixture), a causal linear-attention LM ("Transformers are RNNs": elu + 1 feature
maps, the einsum outer products' cumsum) and a Mamba LM (johnma2006/mamba-minimal:
in_proj split, the causal depthwise conv1d cut to length, softplus deltas, the selective
scan as a Python loop over time, RMSNorm, the tied head).

    python bench/untuned_models_ninth.py [name,...] [--torch-compile]

Per model: torch eager, torch.compile (with --torch-compile), llgrad eager and llgrad compiled
(LLGRAD_COMPILE=sync, warm), 1 thread each, seeded alike, as untuned_models_seventh.py's
runner does (6 steps checked against torch, then blocks of 3 steps interleaved, medians of
7). build(lib, name, small=True) makes the tests' smaller versions."""
import math
import os
import sys

import untuned_models_ninth_b
import untuned_models_seventh
from untuned_models_fifth import training_step

NAMES = ("capsnet", "dcn", "kan", "mdn", "linattn", "mamba")


def build(lib, name, small=False):
    make = getattr(untuned_models_ninth_b, "_" + name, None) or globals()["_" + name]
    return training_step(lib, lambda lib: make(lib, small))


def _capsnet(lib, small):
    # (XifengGuo/CapsNet-Pytorch's capsulenet.py and capsulelayers.py, on 20x20 images with
    # smaller convolutions than its 256-channel 9x9 ones for 28x28 MNIST)
    nn, F = lib.nn, lib.nn.functional
    batch, chans, routings = (4, 16, 3) if small else (32, 64, 3)

    def squash(inputs, axis=-1):
        norm = lib.norm(inputs, p=2, dim=axis, keepdim=True)
        scale = norm ** 2 / (1 + norm ** 2) / (norm + 1e-8)
        return scale * inputs

    class DenseCapsule(nn.Module):
        def __init__(self, in_num_caps, in_dim_caps, out_num_caps, out_dim_caps, routings=3):
            super(DenseCapsule, self).__init__()
            self.in_num_caps, self.in_dim_caps = in_num_caps, in_dim_caps
            self.out_num_caps, self.out_dim_caps = out_num_caps, out_dim_caps
            self.routings = routings
            self.weight = nn.Parameter(0.01 * lib.randn(out_num_caps, in_num_caps, out_dim_caps, in_dim_caps))

        def forward(self, x):
            x_hat = lib.squeeze(lib.matmul(self.weight, x[:, None, :, :, None]), dim=-1)
            x_hat_detached = x_hat.detach()
            b = lib.zeros(x.size(0), self.out_num_caps, self.in_num_caps)
            assert self.routings > 0, 'The \'routings\' should be > 0.'
            for i in range(self.routings):
                c = F.softmax(b, dim=1)
                if i == self.routings - 1:
                    outputs = squash(lib.sum(c[:, :, :, None] * x_hat, dim=-2, keepdim=True))
                else:
                    outputs = squash(lib.sum(c[:, :, :, None] * x_hat_detached, dim=-2, keepdim=True))
                    b = b + lib.sum(outputs * x_hat_detached, dim=-1)
            return lib.squeeze(outputs, dim=-2)

    class PrimaryCapsule(nn.Module):
        def __init__(self, in_channels, out_channels, dim_caps, kernel_size, stride=1, padding=0):
            super(PrimaryCapsule, self).__init__()
            self.dim_caps = dim_caps
            self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size=kernel_size, stride=stride,
                                    padding=padding)

        def forward(self, x):
            outputs = self.conv2d(x)
            outputs = outputs.view(x.size(0), -1, self.dim_caps)
            return squash(outputs)

    class CapsuleNet(nn.Module):
        def __init__(self, input_size, classes, routings):
            super(CapsuleNet, self).__init__()
            self.input_size, self.classes, self.routings = input_size, classes, routings
            self.conv1 = nn.Conv2d(input_size[0], chans, kernel_size=5, stride=1, padding=0)
            self.primarycaps = PrimaryCapsule(chans, chans, 8, kernel_size=5, stride=2, padding=0)
            self.digitcaps = DenseCapsule(in_num_caps=chans // 8 * 6 * 6, in_dim_caps=8,
                                          out_num_caps=classes, out_dim_caps=16, routings=routings)
            self.decoder = nn.Sequential(
                nn.Linear(16 * classes, 128), nn.ReLU(inplace=True), nn.Linear(128, 256),
                nn.ReLU(inplace=True), nn.Linear(256, input_size[0] * input_size[1] * input_size[2]),
                nn.Sigmoid())
            self.relu = nn.ReLU()

        def forward(self, x, y=None):
            x = self.relu(self.conv1(x))
            x = self.primarycaps(x)
            x = self.digitcaps(x)
            length = x.norm(dim=-1)
            if y is None:
                index = length.max(dim=1)[1]
                y = lib.zeros(length.size()).scatter_(1, index.view(-1, 1), 1.)
            reconstruction = self.decoder((x * y[:, :, None]).view(x.size(0), -1))
            return length, reconstruction.view(-1, *self.input_size)

    def caps_loss(y_true, y_pred, x, x_recon, lam_recon):
        L = y_true * lib.clamp(0.9 - y_pred, min=0.) ** 2 + \
            0.5 * (1 - y_true) * lib.clamp(y_pred - 0.1, min=0.) ** 2
        L_margin = L.sum(dim=1).mean()
        L_recon = nn.MSELoss()(x_recon, x)
        return L_margin + lam_recon * L_recon

    m = CapsuleNet(input_size=[1, 20, 20], classes=10, routings=routings)
    opt = lib.optim.Adam(m.parameters(), lr=0.001)
    sched = lib.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
    x = lib.rand(batch, 1, 20, 20)
    y = lib.zeros(batch, 10).scatter_(1, lib.randint(0, 10, (batch,)).view(-1, 1), 1.)

    def loss():
        y_pred, x_recon = m(x, y)
        return caps_loss(y, y_pred, x, x_recon, 0.0005 * 400)
    return m, opt, loss, {"scheduler": sched}


def _dcn(lib, small):
    # (shenweichen/DeepCTR-Torch's DCN with CrossNet(parameterization="matrix"), i.e. DCN-V2,
    # its DNN and its embedding L2 regulariser, on Criteo-shaped rows: 13 dense, 26 sparse)
    nn, F = lib.nn, lib.nn.functional
    batch, n_sparse, vocab, emb = (16, 6, 50, 4) if small else (512, 26, 1000, 8)
    n_dense, hidden, layer_num, l2_reg_embedding = 13, (256, 128), 2, 1e-5

    class CrossNet(nn.Module):
        def __init__(self, in_features, layer_num=2):
            super(CrossNet, self).__init__()
            self.layer_num = layer_num
            self.kernels = nn.Parameter(lib.Tensor(self.layer_num, in_features, in_features))
            self.bias = nn.Parameter(lib.Tensor(self.layer_num, in_features, 1))
            for i in range(self.kernels.shape[0]):
                nn.init.xavier_normal_(self.kernels[i])
            for i in range(self.bias.shape[0]):
                nn.init.zeros_(self.bias[i])

        def forward(self, inputs):
            x_0 = inputs.unsqueeze(2)
            x_l = x_0
            for i in range(self.layer_num):
                xl_w = lib.matmul(self.kernels[i], x_l)     # W * xi  (bs, in_features, 1)
                dot_ = xl_w + self.bias[i]                   # W * xi + b
                x_l = x_0 * dot_ + x_l                       # x0 . (W * xi + b) + xl
            x_l = lib.squeeze(x_l, dim=2)
            return x_l

    class DNN(nn.Module):
        def __init__(self, inputs_dim, hidden_units, dropout_rate=0.1, init_std=0.0001):
            super(DNN, self).__init__()
            hidden_units = [inputs_dim] + list(hidden_units)
            self.linears = nn.ModuleList(
                [nn.Linear(hidden_units[i], hidden_units[i + 1]) for i in range(len(hidden_units) - 1)])
            self.activation_layers = nn.ModuleList([nn.ReLU(inplace=True) for _ in range(len(hidden_units) - 1)])
            self.dropout = nn.Dropout(dropout_rate)
            for name, tensor in self.linears.named_parameters():
                if 'weight' in name:
                    nn.init.normal_(tensor, mean=0, std=init_std)

        def forward(self, inputs):
            deep_input = inputs
            for i in range(len(self.linears)):
                fc = self.linears[i](deep_input)
                fc = self.activation_layers[i](fc)
                fc = self.dropout(fc)
                deep_input = fc
            return deep_input

    class DCN(nn.Module):
        def __init__(self):
            super(DCN, self).__init__()
            self.embedding_dict = nn.ModuleDict(
                {f"C{i}": nn.Embedding(vocab, emb) for i in range(n_sparse)})
            for tensor in self.embedding_dict.values():
                nn.init.normal_(tensor.weight, mean=0, std=0.0001)
            dim = n_sparse * emb + n_dense
            self.dnn = DNN(dim, hidden)
            self.crossnet = CrossNet(dim, layer_num=layer_num)
            self.dnn_linear = nn.Linear(dim + hidden[-1], 1, bias=False)

        def forward(self, sparse, dense):
            sparse_embedding_list = [self.embedding_dict[f"C{i}"](sparse[:, i:i + 1])
                                     for i in range(n_sparse)]
            sparse_dnn_input = lib.flatten(lib.cat(sparse_embedding_list, dim=-1), start_dim=1)
            dnn_input = lib.cat([sparse_dnn_input, dense], dim=-1)
            deep_out = self.dnn(dnn_input)
            cross_out = self.crossnet(dnn_input)
            stack_out = lib.cat((cross_out, deep_out), dim=-1)
            return lib.sigmoid(self.dnn_linear(stack_out))

    m = DCN()
    opt = lib.optim.Adam(m.parameters(), lr=1e-3)
    sparse = lib.randint(0, vocab, (batch, n_sparse))
    dense = lib.rand(batch, n_dense)
    y = lib.randint(0, 2, (batch, 1)).float()

    def loss():
        y_pred = m(sparse, dense)
        reg = sum(l2_reg_embedding * lib.sum(lib.square(e.weight)) for e in m.embedding_dict.values())
        return F.binary_cross_entropy(y_pred.squeeze(), y.squeeze(), reduction='sum') / batch + reg
    return m, opt, loss


def _kan(lib, small):
    # (Blealtan/efficient-kan's KANLinear and KAN as its MNIST example trains them, on 14x14
    # images; the spline weights' initial noise is taken as the coefficients: its
    # curve2coeff's least-squares fit of that noise would give other small numbers)
    nn, F = lib.nn, lib.nn.functional
    batch, n_in, hidden = (8, 16, 8) if small else (64, 196, 64)

    class KANLinear(nn.Module):
        def __init__(self, in_features, out_features, grid_size=5, spline_order=3, scale_noise=0.1,
                     scale_base=1.0, scale_spline=1.0, base_activation=nn.SiLU, grid_range=(-1, 1)):
            super(KANLinear, self).__init__()
            self.in_features, self.out_features = in_features, out_features
            self.grid_size, self.spline_order = grid_size, spline_order
            h = (grid_range[1] - grid_range[0]) / grid_size
            grid = ((lib.arange(-spline_order, grid_size + spline_order + 1) * h + grid_range[0])
                    .expand(in_features, -1).contiguous())
            self.register_buffer("grid", grid)
            self.base_weight = nn.Parameter(lib.Tensor(out_features, in_features))
            self.spline_weight = nn.Parameter(lib.Tensor(out_features, in_features, grid_size + spline_order))
            self.spline_scaler = nn.Parameter(lib.Tensor(out_features, in_features))
            self.scale_noise, self.scale_base, self.scale_spline = scale_noise, scale_base, scale_spline
            self.base_activation = base_activation()
            self.reset_parameters()

        def reset_parameters(self):
            nn.init.kaiming_uniform_(self.base_weight, a=math.sqrt(5) * self.scale_base)
            with lib.no_grad():
                noise = ((lib.rand(self.out_features, self.in_features, self.grid_size + self.spline_order)
                          - 1 / 2) * self.scale_noise / self.grid_size)
                self.spline_weight.data.copy_(noise)
                nn.init.kaiming_uniform_(self.spline_scaler, a=math.sqrt(5) * self.scale_spline)

        def b_splines(self, x):
            grid = self.grid
            x = x.unsqueeze(-1)
            bases = ((x >= grid[:, :-1]) & (x < grid[:, 1:])).to(x.dtype)
            for k in range(1, self.spline_order + 1):
                bases = (((x - grid[:, : -(k + 1)]) / (grid[:, k:-1] - grid[:, : -(k + 1)]) * bases[:, :, :-1])
                         + ((grid[:, k + 1:] - x) / (grid[:, k + 1:] - grid[:, 1:(-k)]) * bases[:, :, 1:]))
            return bases.contiguous()

        @property
        def scaled_spline_weight(self):
            return self.spline_weight * self.spline_scaler.unsqueeze(-1)

        def forward(self, x):
            original_shape = x.shape
            x = x.reshape(-1, self.in_features)
            base_output = F.linear(self.base_activation(x), self.base_weight)
            spline_output = F.linear(self.b_splines(x).view(x.size(0), -1),
                                     self.scaled_spline_weight.view(self.out_features, -1))
            output = base_output + spline_output
            return output.reshape(*original_shape[:-1], self.out_features)

        def regularization_loss(self, regularize_activation=1.0, regularize_entropy=1.0):
            l1_fake = self.spline_weight.abs().mean(-1)
            regularization_loss_activation = l1_fake.sum()
            p = l1_fake / regularization_loss_activation
            regularization_loss_entropy = -lib.sum(p * p.log())
            return (regularize_activation * regularization_loss_activation
                    + regularize_entropy * regularization_loss_entropy)

    class KAN(nn.Module):
        def __init__(self, layers_hidden):
            super(KAN, self).__init__()
            self.layers = nn.ModuleList([KANLinear(i, o) for i, o in zip(layers_hidden, layers_hidden[1:])])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

        def regularization_loss(self, regularize_activation=1.0, regularize_entropy=1.0):
            return sum(layer.regularization_loss(regularize_activation, regularize_entropy)
                       for layer in self.layers)

    m = KAN([n_in, hidden, 10])
    opt = lib.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=1e-4)
    sched = lib.optim.lr_scheduler.ExponentialLR(opt, gamma=0.8)
    images = (lib.rand(batch, 1, 14, 14).view(batch, -1)[:, :n_in] - 0.5) / 0.5
    labels = lib.randint(0, 10, (batch,))
    criterion = nn.CrossEntropyLoss()
    return m, opt, lambda: criterion(m(images), labels) + 1e-4 * m.regularization_loss(), \
        {"scheduler": sched}


def main(names, with_torch_compile):
    return untuned_models_seventh.main(names, with_torch_compile, build, steps=6)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    chosen = args[0].split(",") if args else list(NAMES)
    if "-h" in sys.argv or "--help" in sys.argv or set(chosen) - set(NAMES):
        sys.exit(__doc__ + f"\n\nmodels: {', '.join(NAMES)}")
    os.environ.setdefault("LLGRAD_COMPILE", "sync")     # (read when llgrad is imported)
    os.environ.setdefault("LLGRAD_NUM_THREADS", "1")
    main(chosen, "--torch-compile" in sys.argv)
