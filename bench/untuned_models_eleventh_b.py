"""untuned_models_eleventh.py's WGAN-GP, MADE and gMLP (that file holds the other two, build()
and the runner): each _name(lib, small) -> (model, optimizer, loss closure[, {"clip"/
"scheduler"/"after"}]), seeded by build."""
import numpy as np


def _wgangp(lib, small):
    # (igul222/improved_wgan_training's gan_mnist as caogang/wgan-gp writes it in PyTorch: one
    # critic iteration with calc_gradient_penalty, then the generator's iteration with the
    # critic's parameters' requires_grad off; the three critic terms summed into one backward)
    nn, autograd = lib.nn, lib.autograd
    DIM, BATCH_SIZE, LAMBDA = (2, 3, 10) if small else (16, 50, 10)
    OUTPUT_DIM = 784

    class Generator(nn.Module):
        def __init__(self):
            super(Generator, self).__init__()
            preprocess = nn.Sequential(nn.Linear(128, 4 * 4 * 4 * DIM), nn.ReLU(True))
            block1 = nn.Sequential(nn.ConvTranspose2d(4 * DIM, 2 * DIM, 5), nn.ReLU(True))
            block2 = nn.Sequential(nn.ConvTranspose2d(2 * DIM, DIM, 5), nn.ReLU(True))
            deconv_out = nn.ConvTranspose2d(DIM, 1, 8, stride=2)
            self.block1, self.block2 = block1, block2
            self.deconv_out, self.preprocess = deconv_out, preprocess
            self.sigmoid = nn.Sigmoid()

        def forward(self, input):
            output = self.preprocess(input)
            output = output.view(-1, 4 * DIM, 4, 4)
            output = self.block1(output)
            output = output[:, :, :7, :7]
            output = self.block2(output)
            output = self.deconv_out(output)
            output = self.sigmoid(output)
            return output.view(-1, OUTPUT_DIM)

    class Discriminator(nn.Module):
        def __init__(self):
            super(Discriminator, self).__init__()
            self.main = nn.Sequential(
                nn.Conv2d(1, DIM, 5, stride=2, padding=2), nn.ReLU(True),
                nn.Conv2d(DIM, 2 * DIM, 5, stride=2, padding=2), nn.ReLU(True),
                nn.Conv2d(2 * DIM, 4 * DIM, 5, stride=2, padding=2), nn.ReLU(True))
            self.output = nn.Linear(4 * 4 * 4 * DIM, 1)

        def forward(self, input):
            input = input.view(-1, 1, 28, 28)
            out = self.main(input)
            out = out.view(-1, 4 * 4 * 4 * DIM)
            out = self.output(out)
            return out.view(-1)

    def calc_gradient_penalty(netD, real_data, fake_data):
        alpha = lib.rand(BATCH_SIZE, 1)
        alpha = alpha.expand(real_data.size())
        interpolates = alpha * real_data + ((1 - alpha) * fake_data)
        interpolates = autograd.Variable(interpolates, requires_grad=True)
        disc_interpolates = netD(interpolates)
        gradients = autograd.grad(outputs=disc_interpolates, inputs=interpolates,
                                  grad_outputs=lib.ones(disc_interpolates.size()),
                                  create_graph=True, retain_graph=True, only_inputs=True)[0]
        return ((gradients.norm(2, dim=1) - 1) ** 2).mean() * LAMBDA

    netG, netD = Generator(), Discriminator()
    optimizerD = lib.optim.Adam(netD.parameters(), lr=1e-4, betas=(0.5, 0.9))
    optimizerG = lib.optim.Adam(netG.parameters(), lr=1e-4, betas=(0.5, 0.9))
    real_data = (lib.rand(BATCH_SIZE, OUTPUT_DIM) > 0.7).float()

    def critic_loss():
        for p in netD.parameters():     # reset requires_grad
            p.requires_grad = True
        D_real = netD(real_data).mean()
        noise = lib.randn(BATCH_SIZE, 128)
        with lib.no_grad():
            fake = netG(noise)
        D_fake = netD(fake).mean()
        gradient_penalty = calc_gradient_penalty(netD, real_data, fake)
        return D_fake - D_real + gradient_penalty

    def generator_step():
        for p in netD.parameters():
            p.requires_grad = False     # to avoid computation
        netG.zero_grad()
        noise = lib.randn(BATCH_SIZE, 128)
        fake = netG(noise)
        G_cost = -netD(fake).mean()
        G_cost.backward()
        optimizerG.step()

    return nn.ModuleList([netG, netD]), optimizerD, critic_loss, {"after": generator_step}


def _made(lib, small):
    # (karpathy/pytorch-made's made.py and run.py: binarized 28x28 inputs, hidden [500], two
    # orderings (num_masks=2) resampled every step (its --resample-every 1), Adam with weight
    # decay 1e-4, binary_cross_entropy_with_logits summed over pixels over the batch)
    nn, F = lib.nn, lib.nn.functional
    B, nin, hidden = (4, 12, [16]) if small else (100, 784, [500])

    class MaskedLinear(nn.Linear):
        def __init__(self, in_features, out_features, bias=True):
            super().__init__(in_features, out_features, bias)
            self.register_buffer('mask', lib.ones(out_features, in_features))

        def set_mask(self, mask):
            self.mask.data.copy_(lib.from_numpy(mask.astype(np.uint8).T))

        def forward(self, input):
            return F.linear(input, self.mask * self.weight, self.bias)

    class MADE(nn.Module):
        def __init__(self, nin, hidden_sizes, nout, num_masks=1, natural_ordering=False):
            super().__init__()
            self.nin, self.nout, self.hidden_sizes = nin, nout, hidden_sizes
            self.net = []
            hs = [nin] + hidden_sizes + [nout]
            for h0, h1 in zip(hs, hs[1:]):
                self.net.extend([MaskedLinear(h0, h1), nn.ReLU()])
            self.net.pop()  # pop the last ReLU for the output layer
            self.net = nn.Sequential(*self.net)
            self.natural_ordering = natural_ordering
            self.num_masks = num_masks
            self.seed = 0  # for cycling through num_masks orderings
            self.m = {}
            self.update_masks()  # builds the initial self.m connectivity

        def update_masks(self):
            if self.m and self.num_masks == 1:
                return  # only a single seed, skip for efficiency
            L = len(self.hidden_sizes)
            rng = np.random.RandomState(self.seed)
            self.seed = (self.seed + 1) % self.num_masks
            self.m[-1] = np.arange(self.nin) if self.natural_ordering else rng.permutation(self.nin)
            for l in range(L):
                self.m[l] = rng.randint(self.m[l - 1].min(), self.nin - 1, size=self.hidden_sizes[l])
            masks = [self.m[l - 1][:, None] <= self.m[l][None, :] for l in range(L)]
            masks.append(self.m[L - 1][:, None] < self.m[-1][None, :])
            if self.nout > self.nin:
                k = int(self.nout / self.nin)
                masks[-1] = np.concatenate([masks[-1]] * k, axis=1)
            layers = [l for l in self.net.modules() if isinstance(l, MaskedLinear)]
            for l, m in zip(layers, masks):
                l.set_mask(m)

        def forward(self, x):
            return self.net(x)

    model = MADE(nin, hidden, nin, num_masks=2)
    opt = lib.optim.Adam(model.parameters(), 1e-3, weight_decay=1e-4)
    xb = (lib.rand(B, nin) > 0.5).float()

    def loss():
        model.update_masks()
        xbhat = model(xb)
        return F.binary_cross_entropy_with_logits(xbhat, xb, reduction='sum') / B
    return model, opt, loss, {"data": (xb,)}


def _gmlp(lib, small):
    # (jaketae/g-mlp's gMLP blocks under an Embedding and a token-classification head (as
    # its language-model use); the spatial projection's bias at 1 and weight near 0 as the
    # paper says)
    nn, F = lib.nn, lib.nn.functional
    batch, seq_len, d_model, d_ffn, n_layers, vocab = ((2, 6, 8, 16, 1, 11) if small else
                                                       (16, 64, 128, 512, 4, 256))

    class SpatialGatingUnit(nn.Module):
        def __init__(self, d_ffn, seq_len):
            super().__init__()
            self.norm = nn.LayerNorm(d_ffn)
            self.spatial_proj = nn.Conv1d(seq_len, seq_len, kernel_size=1)
            nn.init.uniform_(self.spatial_proj.weight, -1e-3 / seq_len, 1e-3 / seq_len)
            nn.init.constant_(self.spatial_proj.bias, 1.0)

        def forward(self, x):
            u, v = x.chunk(2, dim=-1)
            v = self.norm(v)
            v = self.spatial_proj(v)
            out = u * v
            return out

    class gMLPBlock(nn.Module):
        def __init__(self, d_model, d_ffn, seq_len):
            super().__init__()
            self.norm = nn.LayerNorm(d_model)
            self.channel_proj1 = nn.Linear(d_model, d_ffn * 2)
            self.channel_proj2 = nn.Linear(d_ffn, d_model)
            self.sgu = SpatialGatingUnit(d_ffn, seq_len)

        def forward(self, x):
            residual = x
            x = self.norm(x)
            x = F.gelu(self.channel_proj1(x))
            x = self.sgu(x)
            x = self.channel_proj2(x)
            out = x + residual
            return out

    class gMLP(nn.Module):
        def __init__(self, d_model=256, d_ffn=512, seq_len=256, num_layers=6):
            super().__init__()
            self.model = nn.Sequential(*[gMLPBlock(d_model, d_ffn, seq_len) for _ in range(num_layers)])

        def forward(self, x):
            return self.model(x)

    class gMLPForLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d_model)
            self.gmlp = gMLP(d_model, d_ffn, seq_len, n_layers)
            self.to_logits = nn.Sequential(nn.LayerNorm(d_model), nn.Linear(d_model, vocab))

        def forward(self, x):
            return self.to_logits(self.gmlp(self.embed(x)))

    model = gMLPForLM()
    optimizer = lib.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = lib.randint(0, vocab, (batch, seq_len + 1))
    inp, target = tokens[:, :-1], tokens[:, 1:]

    def loss():
        logits = model(inp)
        return F.cross_entropy(logits.reshape(-1, vocab), target.reshape(-1))
    return model, optimizer, loss, {"data": (inp, target)}
