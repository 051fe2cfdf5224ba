"""Tutorial programs on density models and generative training, written as blog posts write
them (seeded with torch.manual_seed, modules built by their constructors; see
tutorial_harness.py): Glow (ActNorm with data-dependent init, invertible 1x1 convolution
with slogdet, affine coupling), a MADE / masked autoregressive flow, rectified flow
matching with Euler sampling, a noise-conditional score network with annealed Langevin
sampling, Gaussian-mixture EM under no_grad, a sparse autoencoder with a KL sparsity
penalty."""
import math


def glow_actnorm_invconv(torch, env):
    """A one-level Glow on 2x2x4 'images': ActNorm whose scale/bias are set from the first
    batch (an `initialized` buffer flag), an invertible 1x1 convolution (F.conv2d with a
    weight viewed from a square matrix, log-det from torch.linalg.slogdet), an affine
    coupling (sigmoid scale) on channel halves; NLL in bits per dimension; the inverse
    pass reconstructs the input."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    C = 4

    class ActNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.loc = nn.Parameter(torch.zeros(1, C, 1, 1))
            self.log_scale = nn.Parameter(torch.zeros(1, C, 1, 1))
            self.register_buffer("initialized", torch.tensor(0, dtype=torch.uint8))

        def forward(self, x):
            if self.initialized.item() == 0:
                with torch.no_grad():
                    mean = x.mean(dim=(0, 2, 3), keepdim=True)
                    std = x.std(dim=(0, 2, 3), keepdim=True)
                    self.loc.data.copy_(-mean)
                    self.log_scale.data.copy_(torch.log(1 / (std + 1e-6)))
                    self.initialized.fill_(1)
            logdet = x.shape[2] * x.shape[3] * self.log_scale.sum()
            return (x + self.loc) * torch.exp(self.log_scale), logdet

        def reverse(self, y):
            return y * torch.exp(-self.log_scale) - self.loc

    class InvConv(nn.Module):
        def __init__(self):
            super().__init__()
            q, _ = torch.linalg.qr(torch.randn(C, C))
            self.weight = nn.Parameter(q)

        def forward(self, x):
            logdet = x.shape[2] * x.shape[3] * torch.linalg.slogdet(self.weight)[1]
            return F.conv2d(x, self.weight.view(C, C, 1, 1)), logdet

        def reverse(self, y):
            return F.conv2d(y, torch.inverse(self.weight).view(C, C, 1, 1))

    class Coupling(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Conv2d(C // 2, 8, 3, padding=1), nn.ReLU(),
                                     nn.Conv2d(8, C, 3, padding=1))
            nn.init.zeros_(self.net[-1].weight)
            nn.init.zeros_(self.net[-1].bias)

        def forward(self, x):
            xa, xb = x.chunk(2, 1)
            log_s, t = self.net(xa).chunk(2, 1)
            s = torch.sigmoid(log_s + 2)
            yb = (xb + t) * s
            return torch.cat([xa, yb], 1), torch.log(s).flatten(1).sum(-1)

        def reverse(self, y):
            ya, yb = y.chunk(2, 1)
            log_s, t = self.net(ya).chunk(2, 1)
            return torch.cat([ya, yb / torch.sigmoid(log_s + 2) - t], 1)

    class Glow(nn.Module):
        def __init__(self):
            super().__init__()
            self.steps = nn.ModuleList()
            for _ in range(2):
                self.steps.extend([ActNorm(), InvConv(), Coupling()])

        def forward(self, x):
            logdet = torch.zeros(x.shape[0])
            for layer in self.steps:
                x, ld = layer(x)
                logdet = logdet + ld
            return x, logdet

        def reverse(self, z):
            for layer in reversed(self.steps):
                z = layer.reverse(z)
            return z

    model = Glow()
    data = torch.randn(16, C, 2, 2) * torch.tensor([1.0, 0.5, 2.0, 0.3]).view(1, C, 1, 1) + 1
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data), batch_size=8)
    # (SGD, not Adam: right after ActNorm's data-dependent init the gradients of its loc
    # and of the zero-initialised coupling bias are zero up to rounding, which Adam's
    # normalisation would turn into full steps)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    n_dims = C * 2 * 2

    def train_step(x):
        z, logdet = model(x)
        log_pz = (-0.5 * z.pow(2) - 0.5 * math.log(2 * math.pi)).flatten(1).sum(-1)
        nll = -(log_pz + logdet).mean()
        bpd = nll / (n_dims * math.log(2))
        opt.zero_grad()
        bpd.backward()
        opt.step()
        return bpd.item()

    step = env.step(train_step)
    hist = [step(xb) for _ in range(3) for (xb,) in loader]
    env.rec("hist", hist)
    env.rec("flags", [int(m.initialized) for m in model.steps if isinstance(m, ActNorm)])
    with torch.no_grad():
        z, _ = model(data)
        env.rec("recon err", (model.reverse(z) - data).abs().max().item() < 1e-4)
    env.rec("params", list(model.parameters()))


def made_maf(torch, env):
    """A masked autoregressive flow from two MADE layers: MaskedLinear modules with
    registered mask buffers (degrees built with torch.arange and comparisons), the output
    split into mu / alpha, u = (x - mu) * exp(-alpha), the order flipped between layers,
    log-likelihood under a standard normal; sampling inverts dimension by dimension."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    D, Hd = 3, 12

    class MaskedLinear(nn.Linear):
        def __init__(self, n_in, n_out, mask):
            super().__init__(n_in, n_out)
            self.register_buffer("mask", mask)

        def forward(self, x):
            return F.linear(x, self.weight * self.mask, self.bias)

    class MADE(nn.Module):
        def __init__(self):
            super().__init__()
            d_in = torch.arange(1, D + 1)
            d_h = torch.arange(Hd) % (D - 1) + 1
            m1 = (d_h[:, None] >= d_in[None, :]).float()
            m2 = (d_in[:, None] > d_h[None, :]).float().repeat(2, 1)
            self.l1 = MaskedLinear(D, Hd, m1)
            self.l2 = MaskedLinear(Hd, 2 * D, m2)

        def forward(self, x):
            mu, alpha = self.l2(torch.tanh(self.l1(x))).chunk(2, dim=-1)
            return mu, alpha.clamp(-5, 5)

    class MAF(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([MADE(), MADE()])

        def log_prob(self, x):
            log_det = x.new_zeros(x.shape[0])
            for made in self.layers:
                mu, alpha = made(x)
                x = (x - mu) * torch.exp(-alpha)
                log_det = log_det - alpha.sum(-1)
                x = x.flip(-1)
            base = torch.distributions.Normal(0.0, 1.0).log_prob(x).sum(-1)
            return base + log_det

        @torch.no_grad()
        def sample(self, u):
            for made in reversed(self.layers):
                u = u.flip(-1)
                x = torch.zeros_like(u)
                for i in range(D):
                    mu, alpha = made(x)
                    x[:, i] = mu[:, i] + u[:, i] * torch.exp(alpha[:, i])
                u = x
            return u

    model = MAF()
    z = torch.randn(64, D)
    data = torch.stack([z[:, 0], z[:, 0] ** 2 * 0.5 + 0.3 * z[:, 1],
                        torch.sin(z[:, 0]) + 0.2 * z[:, 2]], -1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data), batch_size=16,
                                         shuffle=True)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=1e-5)

    def train_step(x):
        loss = -model.log_prob(x).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(xb) for _ in range(2) for (xb,) in loader])
    u = torch.randn(5, D)
    x = model.sample(u)
    with torch.no_grad():
        env.rec("samples", x)
        env.rec("sample log prob", model.log_prob(x))
    env.rec("params", list(model.parameters()))


def flow_matching(torch, env):
    """Rectified flow / conditional flow matching on a 2-D two-moons-like set: t ~ U(0, 1)
    (torch.rand), x_t = (1 - t) x0 + t x1, the network (with a sinusoidal time embedding)
    regresses the velocity x1 - x0; sampling integrates dx/dt = v(x, t) with Euler steps
    under no_grad; a cosine annealing schedule."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    def time_embed(t, dim=8):
        freqs = torch.exp(-math.log(100.0) * torch.arange(dim // 2) / (dim // 2))
        ang = t[:, None] * freqs[None] * 10
        return torch.cat([ang.sin(), ang.cos()], dim=-1)

    class Velocity(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(2 + 8, 32), nn.SiLU(), nn.Linear(32, 32),
                                     nn.SiLU(), nn.Linear(32, 2))

        def forward(self, x, t):
            return self.net(torch.cat([x, time_embed(t)], -1))

    model = Velocity()
    theta = torch.rand(128) * math.pi
    moons = torch.stack([theta.cos(), theta.sin()], -1)
    moons[64:] = moons[64:] * torch.tensor([1.0, -1.0]) + torch.tensor([1.0, 0.5])
    moons = moons + 0.05 * torch.randn_like(moons)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=8, eta_min=1e-4)

    def train_step(x1):
        x0 = torch.randn_like(x1)
        t = torch.rand(x1.shape[0])
        xt = (1 - t[:, None]) * x0 + t[:, None] * x1
        loss = F.mse_loss(model(xt, t), x1 - x0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    hist = []
    for i in range(8):
        hist.append(step(moons[(i % 4) * 32:(i % 4 + 1) * 32]))
        sched.step()
    env.rec("hist", hist)
    x = torch.randn(6, 2)
    with torch.no_grad():
        n = 5
        for k in range(n):
            t = torch.full((x.shape[0],), k / n)
            x = x + model(x, t) / n
    env.rec("samples", x)
    env.rec("params", list(model.parameters()))


def ncsn_langevin(torch, env):
    """A noise-conditional score network: geometric noise levels, the denoising score
    matching loss sigma^2 * ||s(x + sigma z, sigma) + z / sigma||^2 with a random level
    per example (torch.randint, indexing a sigma buffer); annealed Langevin dynamics
    (randn noise each step) under no_grad."""
    nn = torch.nn
    torch.manual_seed(0)
    sigmas = torch.exp(torch.linspace(math.log(1.0), math.log(0.05), 4))

    class Score(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(4, 16)
            self.fc1, self.fc2, self.fc3 = nn.Linear(2, 16), nn.Linear(16, 16), nn.Linear(16, 2)
            self.register_buffer("sigmas", sigmas)

        def forward(self, x, idx):
            h = nn.functional.softplus(self.fc1(x) + self.embed(idx))
            h = nn.functional.softplus(self.fc2(h))
            return self.fc3(h) / self.sigmas[idx][:, None]

    model = Score()
    data = torch.cat([torch.randn(32, 2) * 0.2 + 1, torch.randn(32, 2) * 0.2 - 1])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x):
        idx = torch.randint(0, len(sigmas), (x.shape[0],))
        sigma = model.sigmas[idx][:, None]
        z = torch.randn_like(x)
        target = -z / sigma
        score = model(x + sigma * z, idx)
        loss = 0.5 * ((score - target) ** 2).sum(-1).mul(sigma.squeeze(-1) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(data) for _ in range(6)])
    x = torch.rand(8, 2) * 4 - 2
    with torch.no_grad():
        for i, s in enumerate(model.sigmas):
            alpha = 0.1 * (s / model.sigmas[-1]) ** 2 * 1e-3
            idx = torch.full((x.shape[0],), i, dtype=torch.long)
            for _ in range(3):
                x = x + alpha / 2 * model(x, idx) + alpha.sqrt() * torch.randn_like(x)
    env.rec("samples", x)
    env.rec("params", list(model.parameters()))


def gmm_em(torch, env):
    """A Gaussian mixture fitted by EM under torch.no_grad: responsibilities from
    log-densities (diagonal covariances) normalised with logsumexp, M-step updates of
    weights / means / variances by weighted sums; the EM step compiled; log-likelihood
    increases every iteration."""
    torch.manual_seed(0)
    K, D = 3, 2
    centres = torch.tensor([[0.0, 0.0], [3.0, 3.0], [-3.0, 2.0]])
    x = torch.cat([torch.randn(20, D) * 0.5 + c for c in centres])
    means = x[torch.randperm(x.shape[0])[:K]].clone()
    variances = torch.ones(K, D)
    log_w = torch.full((K,), -math.log(K))

    @torch.no_grad()
    def em_step(x, means, variances, log_w):
        diff = x[:, None, :] - means[None]
        log_p = -0.5 * (diff ** 2 / variances + torch.log(2 * math.pi * variances)).sum(-1)
        log_joint = log_p + log_w
        ll = torch.logsumexp(log_joint, dim=1)
        resp = torch.exp(log_joint - ll[:, None])
        nk = resp.sum(0) + 1e-8
        means = resp.t() @ x / nk[:, None]
        diff = x[:, None, :] - means[None]
        variances = (resp[:, :, None] * diff ** 2).sum(0) / nk[:, None] + 1e-4
        return means, variances, torch.log(nk / x.shape[0]), ll.mean()

    step = env.step(em_step)
    lls = []
    for _ in range(6):
        means, variances, log_w, ll = step(x, means, variances, log_w)
        lls.append(ll.item())
    env.rec("lls", lls)
    env.rec("monotone", all(b >= a - 1e-5 for a, b in zip(lls, lls[1:])))
    env.rec("fit", [means, variances, log_w.exp()])


def sparse_autoencoder_kl(torch, env):
    """A sparse autoencoder: sigmoid hidden units whose mean activation rho_hat is pushed
    to rho = 0.05 by a KL(rho || rho_hat) penalty, plus an L1 weight penalty summed over
    the named weight parameters; DataLoader epochs with shuffle; evaluation of the mean
    activation under eval() and no_grad."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    rho, beta = 0.05, 0.5

    class SAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(10, 16)
            self.dec = nn.Linear(16, 10)

        def forward(self, x):
            h = torch.sigmoid(self.enc(x))
            return self.dec(h), h

    model = SAE()
    data = torch.randn(40, 3) @ torch.randn(3, 10)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data), batch_size=10,
                                         shuffle=True)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def kl(rho_hat):
        rho_hat = rho_hat.clamp(1e-6, 1 - 1e-6)
        return (rho * torch.log(rho / rho_hat)
                + (1 - rho) * torch.log((1 - rho) / (1 - rho_hat))).sum()

    def train_step(x):
        model.train()
        recon, h = model(x)
        l1 = sum(p.abs().sum() for n, p in model.named_parameters() if "weight" in n)
        loss = F.mse_loss(recon, x) + beta * kl(h.mean(0)) + 1e-4 * l1
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(xb) for _ in range(3) for (xb,) in loader])
    model.eval()
    with torch.no_grad():
        _, h = model(data)
    env.rec("mean act", h.mean().item())
    env.rec("params", list(model.parameters()))
