"""Six more training steps for bench/untuned_models.py, written as the reference code of the
tutorials and papers writes them and run before llgrad was tuned on any of them (2026-12-05):
a DenseNet-BC stack (BN-ReLU-Conv1x1-BN-ReLU-Conv3x3 bottlenecks grown by torch.cat,
transitions with avg-pool; SGD with Nesterov momentum and weight decay), a TCN (weight_norm'd
dilated Conv1d, Chomp1d slicing, dropout, 1x1 downsample residual; Adam + clip_grad_norm_),
a VQ-VAE (codebook lookup by distance and argmin, the straight-through estimator, the
commitment loss, the perplexity read by .item() inside the step; the codebook drawn from
encoder outputs, so that codes and perplexity change from step to step), SimCLR (two views made in
the step, NT-Xent with F.normalize and an eye mask; AdamW with CosineAnnealingLR stepped each
step), a DDPM noise-prediction step (sinusoidal time embedding, randint timesteps, gather of
the cumulative alphas, randn_like noise) and DeepFM (an Embedding per field, the FM
second-order term, an MLP tower; BCEWithLogitsLoss, Adagrad).
build(lib, name) -> (model, step) as in untuned_models_fourth.py; the last three models are
in untuned_models_fifth_b.py."""
import untuned_models_fifth_b

NAMES = ("densenet", "tcn", "vqvae", "simclr", "ddpm", "deepfm")


def build(lib, name):
    return training_step(lib, getattr(untuned_models_fifth_b, "_" + name, None) or
                         globals()["_" + name])


def training_step(lib, make):
    """(model, step) of make(lib) -> (model, optimiser, loss closure[, extras]): zero_grad,
    the loss, backward, clipping, the optimiser's step, the scheduler's (the sixth and
    seventh sets' models are built so too). extras: "clip" (clip_grad_norm_), "clip_value"
    (clip_grad_value_), "scheduler", "after" (run after the step: a DQN's soft update of its
    target net)."""
    lib.manual_seed(0)
    m, opt, loss, *extra = make(lib)
    extra = extra[0] if extra else {}
    clip, clip_value = extra.get("clip"), extra.get("clip_value")
    sched, after = extra.get("scheduler"), extra.get("after")
    m.train()

    def step():
        opt.zero_grad()
        l = loss()
        l.backward()
        if clip is not None:
            lib.nn.utils.clip_grad_norm_(m.parameters(), clip)
        if clip_value is not None:
            lib.nn.utils.clip_grad_value_(m.parameters(), clip_value)
        opt.step()
        if sched is not None:
            sched.step()
        if after is not None:
            after()
        return l
    return m, step


def _densenet(lib):
    # (kuangliu/pytorch-cifar's densenet.py, DenseNet-BC at growth 12 with 2 bottlenecks a block)
    import math
    nn, F = lib.nn, lib.nn.functional

    class Bottleneck(nn.Module):
        def __init__(self, in_planes, growth_rate):
            super(Bottleneck, self).__init__()
            self.bn1 = nn.BatchNorm2d(in_planes)
            self.conv1 = nn.Conv2d(in_planes, 4 * growth_rate, kernel_size=1, bias=False)
            self.bn2 = nn.BatchNorm2d(4 * growth_rate)
            self.conv2 = nn.Conv2d(4 * growth_rate, growth_rate, kernel_size=3, padding=1, bias=False)

        def forward(self, x):
            out = self.conv1(F.relu(self.bn1(x)))
            out = self.conv2(F.relu(self.bn2(out)))
            out = lib.cat([out, x], 1)
            return out

    class Transition(nn.Module):
        def __init__(self, in_planes, out_planes):
            super(Transition, self).__init__()
            self.bn = nn.BatchNorm2d(in_planes)
            self.conv = nn.Conv2d(in_planes, out_planes, kernel_size=1, bias=False)

        def forward(self, x):
            out = self.conv(F.relu(self.bn(x)))
            out = F.avg_pool2d(out, 2)
            return out

    class DenseNet(nn.Module):
        def __init__(self, block, nblocks, growth_rate=12, reduction=0.5, num_classes=10):
            super(DenseNet, self).__init__()
            self.growth_rate = growth_rate
            num_planes = 2 * growth_rate
            self.conv1 = nn.Conv2d(3, num_planes, kernel_size=3, padding=1, bias=False)
            self.dense1 = self._make_dense_layers(block, num_planes, nblocks[0])
            num_planes += nblocks[0] * growth_rate
            out_planes = int(math.floor(num_planes * reduction))
            self.trans1 = Transition(num_planes, out_planes)
            num_planes = out_planes
            self.dense2 = self._make_dense_layers(block, num_planes, nblocks[1])
            num_planes += nblocks[1] * growth_rate
            out_planes = int(math.floor(num_planes * reduction))
            self.trans2 = Transition(num_planes, out_planes)
            num_planes = out_planes
            self.dense3 = self._make_dense_layers(block, num_planes, nblocks[2])
            num_planes += nblocks[2] * growth_rate
            self.bn = nn.BatchNorm2d(num_planes)
            self.linear = nn.Linear(num_planes, num_classes)

        def _make_dense_layers(self, block, in_planes, nblock):
            layers = []
            for i in range(nblock):
                layers.append(block(in_planes, self.growth_rate))
                in_planes += self.growth_rate
            return nn.Sequential(*layers)

        def forward(self, x):
            out = self.conv1(x)
            out = self.trans1(self.dense1(out))
            out = self.trans2(self.dense2(out))
            out = self.dense3(out)
            out = F.avg_pool2d(F.relu(self.bn(out)), 8)
            out = out.view(out.size(0), -1)
            out = self.linear(out)
            return out

    m = DenseNet(Bottleneck, [2, 2, 2])
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    criterion = nn.CrossEntropyLoss()
    x, y = lib.randn(6, 3, 32, 32), lib.randint(0, 10, (6,))
    return m, opt, lambda: criterion(m(x), y)


def _tcn(lib):
    # (locuslab/TCN's tcn.py and its sequential-MNIST model, shortened to 96 steps)
    nn, F = lib.nn, lib.nn.functional
    weight_norm = nn.utils.weight_norm

    class Chomp1d(nn.Module):
        def __init__(self, chomp_size):
            super(Chomp1d, self).__init__()
            self.chomp_size = chomp_size

        def forward(self, x):
            return x[:, :, :-self.chomp_size].contiguous()

    class TemporalBlock(nn.Module):
        def __init__(self, n_inputs, n_outputs, kernel_size, stride, dilation, padding, dropout=0.2):
            super(TemporalBlock, self).__init__()
            self.conv1 = weight_norm(nn.Conv1d(n_inputs, n_outputs, kernel_size,
                                               stride=stride, padding=padding, dilation=dilation))
            self.chomp1 = Chomp1d(padding)
            self.relu1 = nn.ReLU()
            self.dropout1 = nn.Dropout(dropout)
            self.conv2 = weight_norm(nn.Conv1d(n_outputs, n_outputs, kernel_size,
                                               stride=stride, padding=padding, dilation=dilation))
            self.chomp2 = Chomp1d(padding)
            self.relu2 = nn.ReLU()
            self.dropout2 = nn.Dropout(dropout)
            self.net = nn.Sequential(self.conv1, self.chomp1, self.relu1, self.dropout1,
                                     self.conv2, self.chomp2, self.relu2, self.dropout2)
            self.downsample = nn.Conv1d(n_inputs, n_outputs, 1) if n_inputs != n_outputs else None
            self.relu = nn.ReLU()
            self.init_weights()

        def init_weights(self):
            self.conv1.weight.data.normal_(0, 0.01)
            self.conv2.weight.data.normal_(0, 0.01)
            if self.downsample is not None:
                self.downsample.weight.data.normal_(0, 0.01)

        def forward(self, x):
            out = self.net(x)
            res = x if self.downsample is None else self.downsample(x)
            return self.relu(out + res)

    class TemporalConvNet(nn.Module):
        def __init__(self, num_inputs, num_channels, kernel_size=2, dropout=0.2):
            super(TemporalConvNet, self).__init__()
            layers = []
            num_levels = len(num_channels)
            for i in range(num_levels):
                dilation_size = 2 ** i
                in_channels = num_inputs if i == 0 else num_channels[i - 1]
                out_channels = num_channels[i]
                layers += [TemporalBlock(in_channels, out_channels, kernel_size, stride=1, dilation=dilation_size,
                                         padding=(kernel_size - 1) * dilation_size, dropout=dropout)]
            self.network = nn.Sequential(*layers)

        def forward(self, x):
            return self.network(x)

    class TCN(nn.Module):
        def __init__(self, input_size, output_size, num_channels, kernel_size, dropout):
            super(TCN, self).__init__()
            self.tcn = TemporalConvNet(input_size, num_channels, kernel_size=kernel_size, dropout=dropout)
            self.linear = nn.Linear(num_channels[-1], output_size)

        def forward(self, inputs):
            y1 = self.tcn(inputs)
            o = self.linear(y1[:, :, -1])
            return F.log_softmax(o, dim=1)

    m = TCN(1, 10, [25] * 4, kernel_size=7, dropout=0.05)
    opt = lib.optim.Adam(m.parameters(), lr=2e-3)
    x, y = lib.randn(16, 1, 96), lib.randint(0, 10, (16,))
    return m, opt, lambda: F.nll_loss(m(x), y), {"clip": 0.2}


def _vqvae(lib):
    # (zalandoresearch/pytorch-vq-vae's notebook: VectorQuantizer, Residual stacks, Model)
    nn, F = lib.nn, lib.nn.functional

    class VectorQuantizer(nn.Module):
        def __init__(self, num_embeddings, embedding_dim, commitment_cost):
            super(VectorQuantizer, self).__init__()
            self._embedding_dim = embedding_dim
            self._num_embeddings = num_embeddings
            self._embedding = nn.Embedding(self._num_embeddings, self._embedding_dim)
            self._embedding.weight.data.uniform_(-1 / self._num_embeddings, 1 / self._num_embeddings)
            self._commitment_cost = commitment_cost

        def forward(self, inputs):
            inputs = inputs.permute(0, 2, 3, 1).contiguous()
            input_shape = inputs.shape
            flat_input = inputs.view(-1, self._embedding_dim)
            distances = (lib.sum(flat_input ** 2, dim=1, keepdim=True)
                         + lib.sum(self._embedding.weight ** 2, dim=1)
                         - 2 * lib.matmul(flat_input, self._embedding.weight.t()))
            encoding_indices = lib.argmin(distances, dim=1).unsqueeze(1)
            encodings = lib.zeros(encoding_indices.shape[0], self._num_embeddings)
            encodings.scatter_(1, encoding_indices, 1)
            quantized = lib.matmul(encodings, self._embedding.weight).view(input_shape)
            e_latent_loss = F.mse_loss(quantized.detach(), inputs)
            q_latent_loss = F.mse_loss(quantized, inputs.detach())
            loss = q_latent_loss + self._commitment_cost * e_latent_loss
            quantized = inputs + (quantized - inputs).detach()
            avg_probs = lib.mean(encodings, dim=0)
            perplexity = lib.exp(-lib.sum(avg_probs * lib.log(avg_probs + 1e-10)))
            return loss, quantized.permute(0, 3, 1, 2).contiguous(), perplexity, encodings

    class Residual(nn.Module):
        def __init__(self, in_channels, num_hiddens, num_residual_hiddens):
            super(Residual, self).__init__()
            self._block = nn.Sequential(
                nn.ReLU(True),
                nn.Conv2d(in_channels, num_residual_hiddens, kernel_size=3, stride=1, padding=1, bias=False),
                nn.ReLU(True),
                nn.Conv2d(num_residual_hiddens, num_hiddens, kernel_size=1, stride=1, bias=False))

        def forward(self, x):
            return x + self._block(x)

    class ResidualStack(nn.Module):
        def __init__(self, in_channels, num_hiddens, num_residual_layers, num_residual_hiddens):
            super(ResidualStack, self).__init__()
            self._num_residual_layers = num_residual_layers
            self._layers = nn.ModuleList([Residual(in_channels, num_hiddens, num_residual_hiddens)
                                          for _ in range(self._num_residual_layers)])

        def forward(self, x):
            for i in range(self._num_residual_layers):
                x = self._layers[i](x)
            return F.relu(x)

    class Encoder(nn.Module):
        def __init__(self, in_channels, num_hiddens, num_residual_layers, num_residual_hiddens):
            super(Encoder, self).__init__()
            self._conv_1 = nn.Conv2d(in_channels, num_hiddens // 2, kernel_size=4, stride=2, padding=1)
            self._conv_2 = nn.Conv2d(num_hiddens // 2, num_hiddens, kernel_size=4, stride=2, padding=1)
            self._conv_3 = nn.Conv2d(num_hiddens, num_hiddens, kernel_size=3, stride=1, padding=1)
            self._residual_stack = ResidualStack(num_hiddens, num_hiddens, num_residual_layers, num_residual_hiddens)

        def forward(self, inputs):
            x = F.relu(self._conv_1(inputs))
            x = F.relu(self._conv_2(x))
            x = self._conv_3(x)
            return self._residual_stack(x)

    class Decoder(nn.Module):
        def __init__(self, in_channels, num_hiddens, num_residual_layers, num_residual_hiddens):
            super(Decoder, self).__init__()
            self._conv_1 = nn.Conv2d(in_channels, num_hiddens, kernel_size=3, stride=1, padding=1)
            self._residual_stack = ResidualStack(num_hiddens, num_hiddens, num_residual_layers, num_residual_hiddens)
            self._conv_trans_1 = nn.ConvTranspose2d(num_hiddens, num_hiddens // 2, kernel_size=4, stride=2, padding=1)
            self._conv_trans_2 = nn.ConvTranspose2d(num_hiddens // 2, 3, kernel_size=4, stride=2, padding=1)

        def forward(self, inputs):
            x = self._conv_1(inputs)
            x = self._residual_stack(x)
            x = F.relu(self._conv_trans_1(x))
            return self._conv_trans_2(x)

    class Model(nn.Module):
        def __init__(self, num_hiddens, num_residual_layers, num_residual_hiddens, num_embeddings,
                     embedding_dim, commitment_cost):
            super(Model, self).__init__()
            self._encoder = Encoder(3, num_hiddens, num_residual_layers, num_residual_hiddens)
            self._pre_vq_conv = nn.Conv2d(num_hiddens, embedding_dim, kernel_size=1, stride=1)
            self._vq_vae = VectorQuantizer(num_embeddings, embedding_dim, commitment_cost)
            self._decoder = Decoder(embedding_dim, num_hiddens, num_residual_layers, num_residual_hiddens)

        def forward(self, x):
            z = self._encoder(x)
            z = self._pre_vq_conv(z)
            loss, quantized, perplexity, _ = self._vq_vae(z)
            x_recon = self._decoder(quantized)
            return loss, x_recon, perplexity

    m = Model(32, 2, 8, 64, 16, 0.25)
    opt = lib.optim.Adam(m.parameters(), lr=1e-3, amsgrad=False)
    data = lib.rand(8, 3, 32, 32) - 0.5
    data_variance = 0.0625      # (the notebook's np.var of the training set, a float)
    # the codebook drawn from encoder outputs (Jukebox's and vector-quantize-pytorch's
    # data-dependent init): at the notebook's uniform(-1/K, 1/K) every vector of random
    # images picks one code for hundreds of steps, argmin and perplexity then constants
    with lib.no_grad():
        z = m._pre_vq_conv(m._encoder(data)).permute(0, 2, 3, 1).reshape(-1, 16)
        m._vq_vae._embedding.weight.copy_(z[lib.randperm(z.shape[0])[:64]])
    m.train_res_perplexity = []

    def loss():
        vq_loss, data_recon, perplexity = m(data)
        recon_error = F.mse_loss(data_recon, data) / data_variance
        m.train_res_perplexity.append(perplexity.item())
        return recon_error + vq_loss
    return m, opt, loss
