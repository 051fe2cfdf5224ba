"""Generative programs: a GAN on 2-D points (two optimisers, detach, discriminator and
generator steps compiled separately), a RealNVP normalising flow (coupling layers,
log-det-jacobian, torch.distributions.Normal log_prob), a VAE with Normal.rsample and
kl_divergence, and a mixture density network (log-softmax + log-sum-exp over components).
Programs `f(torch, env)`, see tutorial_harness.py."""
import math


def gan_2d(torch, env):
    nn, optim = torch.nn, torch.optim
    nz = 3
    G = env.init(nn.Sequential(nn.Linear(nz, 16), nn.LeakyReLU(0.2), nn.Linear(16, 2)))
    D = env.init(nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1)))
    optD = optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optG = optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
    criterion = nn.BCEWithLogitsLoss()

    def d_step(real, z):
        optD.zero_grad()
        fake = G(z).detach()
        ones = torch.ones(real.size(0), 1)
        zeros = torch.zeros(fake.size(0), 1)
        loss = criterion(D(real), ones) + criterion(D(fake), zeros)
        loss.backward()
        optD.step()
        return loss

    def g_step(z):
        optG.zero_grad()
        out = D(G(z))
        loss = criterion(out, torch.ones_like(out))
        loss.backward()
        optG.step()
        return loss, torch.sigmoid(out).mean()

    d_step, g_step = env.step(d_step), env.step(g_step)
    theta = env.rand(32) * 2 * math.pi
    real = torch.stack([torch.cos(theta), torch.sin(theta)], dim=1) * 2
    for i in range(4):
        idx = env.randint(0, 32, (8,))
        env.rec(f"d {i}", d_step(real[idx], env.randn(8, nz)))
        env.rec(f"g {i}", g_step(env.randn(8, nz)))
        env.rec(f"D grad {i}", [p.grad for p in D.parameters()])
    env.rec("G", G.state_dict())
    env.rec("D", D.state_dict())
    with torch.no_grad():
        env.rec("samples", G(env.randn(4, nz)))


def realnvp(torch, env, mvn_prior=False):
    """mvn_prior: the prior is a MultivariateNormal (its log_prob a triangular solve)."""
    nn, optim = torch.nn, torch.optim
    Normal, MVN = torch.distributions.Normal, torch.distributions.MultivariateNormal

    class Coupling(nn.Module):
        def __init__(self, mask, hidden=16):
            super().__init__()
            self.register_buffer("mask", mask)
            self.s = nn.Sequential(nn.Linear(2, hidden), nn.Tanh(), nn.Linear(hidden, 2),
                                   nn.Tanh())
            self.t = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, 2))

        def forward(self, x):
            xm = x * self.mask
            s = self.s(xm) * (1 - self.mask)
            t = self.t(xm) * (1 - self.mask)
            y = xm + (1 - self.mask) * (x * torch.exp(s) + t)
            return y, s.sum(dim=1)

        def inverse(self, y):
            ym = y * self.mask
            s = self.s(ym) * (1 - self.mask)
            t = self.t(ym) * (1 - self.mask)
            return ym + (1 - self.mask) * ((y - t) * torch.exp(-s))

    class RealNVP(nn.Module):
        def __init__(self, n=4):
            super().__init__()
            masks = [torch.tensor([1., 0.]) if i % 2 == 0 else torch.tensor([0., 1.])
                     for i in range(n)]
            self.layers = nn.ModuleList([Coupling(m) for m in masks])
            self.prior = (MVN(torch.zeros(2), torch.eye(2)) if mvn_prior else
                          torch.distributions.Independent(Normal(torch.zeros(2),
                                                                 torch.ones(2)), 1))

        def forward(self, x):
            log_det = torch.zeros(x.shape[0])
            for layer in self.layers:
                x, ld = layer(x)
                log_det = log_det + ld
            return x, log_det

        def log_prob(self, x):
            z, log_det = self(x)
            return self.prior.log_prob(z) + log_det

        def inverse(self, z):
            for layer in reversed(self.layers):
                z = layer.inverse(z)
            return z

    flow = env.init(RealNVP())
    optimizer = optim.Adam(flow.parameters(), lr=1e-2)

    def train_step(x):
        optimizer.zero_grad()
        loss = -flow.log_prob(x).mean()
        loss.backward()
        optimizer.step()
        return loss

    train_step = env.step(train_step)
    data = env.randn(64, 2) * torch.tensor([0.5, 2.0]) + torch.tensor([1.0, -1.0])
    for i in range(4):
        env.rec(f"nll {i}", train_step(data[i * 16:(i + 1) * 16]))
    env.rec("state", flow.state_dict())
    with torch.no_grad():
        z, log_det = flow(data[:5])
        env.rec("z", (z, log_det))
        env.rec("inverse", flow.inverse(z))
        env.rec("sample", flow.inverse(flow.prior.sample((3,))), cross=False)


def vae_distributions(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    D = torch.distributions

    class VAE(nn.Module):
        def __init__(self, d=12, h=16, z=3):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(d, h), nn.ReLU())
            self.mu = nn.Linear(h, z)
            self.logvar = nn.Linear(h, z)
            self.dec = nn.Sequential(nn.Linear(z, h), nn.ReLU(), nn.Linear(h, d))

        def forward(self, x, eps=None):
            h = self.enc(x)
            q = D.Normal(self.mu(h), torch.exp(0.5 * self.logvar(h)))
            z = q.rsample() if eps is None else q.loc + q.scale * eps
            p = D.Normal(torch.zeros_like(q.loc), torch.ones_like(q.scale))
            kl = D.kl_divergence(q, p).sum(-1)
            return self.dec(z), kl, q

    model = env.init(VAE())
    optimizer = optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, eps):
        optimizer.zero_grad()
        recon, kl, q = model(x, eps)
        rec = F.binary_cross_entropy_with_logits(recon, x, reduction="none").sum(-1)
        loss = (rec + kl).mean()
        loss.backward()
        optimizer.step()
        return loss, kl.mean(), q.entropy().sum()

    train_step = env.step(train_step)
    x = (env.rand(8, 12) > 0.5).float()
    for i in range(3):
        env.rec(f"step {i}", train_step(x, env.randn(8, 3)))

    def train_step_rsample(x):
        optimizer.zero_grad()
        recon, kl, q = model(x)
        loss = (F.binary_cross_entropy_with_logits(recon, x, reduction="sum") + kl.sum())
        loss.backward()
        optimizer.step()
        return loss

    train_step_rsample = env.step(train_step_rsample)
    for i in range(2):
        env.rec(f"rsample {i}", train_step_rsample(x), cross=False)
    env.rec("state", model.state_dict(), cross=False)


def mixture_density(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    K = 3

    class MDN(nn.Module):
        def __init__(self, hidden=16):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(1, hidden), nn.Tanh())
            self.pi = nn.Linear(hidden, K)
            self.mu = nn.Linear(hidden, K)
            self.log_sigma = nn.Linear(hidden, K)

        def forward(self, x):
            h = self.body(x)
            return F.log_softmax(self.pi(h), dim=-1), self.mu(h), self.log_sigma(h)

    def mdn_loss(log_pi, mu, log_sigma, y):
        sigma = log_sigma.exp()
        log_n = (-0.5 * ((y - mu) / sigma) ** 2 - log_sigma
                 - 0.5 * math.log(2 * math.pi))
        return -torch.logsumexp(log_pi + log_n, dim=-1).mean()

    def mdn_loss_distributions(log_pi, mu, log_sigma, y):
        D = torch.distributions
        gmm = D.MixtureSameFamily(D.Categorical(logits=log_pi),
                                  D.Normal(mu, log_sigma.exp()))
        return -gmm.log_prob(y.squeeze(-1)).mean(), gmm.mean

    model = env.init(MDN())
    optimizer = optim.RMSprop(model.parameters(), lr=1e-2)

    def train_step(x, y):
        optimizer.zero_grad()
        log_pi, mu, log_sigma = model(x)
        loss = mdn_loss(log_pi, mu, log_sigma, y)
        loss2, mean = mdn_loss_distributions(log_pi, mu, log_sigma, y)
        (loss + loss2).backward()
        optimizer.step()
        return loss, loss2, mean

    train_step = env.step(train_step)
    x = env.rand(32, 1) * 2 - 1
    y = torch.sin(3 * x) + 0.1 * env.randn(32, 1)
    for i in range(4):
        env.rec(f"loss {i}", train_step(x, y))
    env.rec("state", model.state_dict())
    with torch.no_grad():
        log_pi, mu, log_sigma = model(x[:4])
        env.rec("mixture", (log_pi.exp(), mu, log_sigma))
        k = torch.argmax(log_pi, dim=-1, keepdim=True)
        env.rec("mode", torch.gather(mu, 1, k))
        mix = torch.distributions.Categorical(logits=log_pi)
        env.rec("mix entropy", mix.entropy())
