"""Programs of common kinds: Barlow Twins (BatchNorm1d without affine, the cross-correlation
matrix's off-diagonal taken by the flatten/view trick); NeRF-style volume rendering
(positional encoding, alpha compositing with an exclusive cumprod, hierarchical sampling by
inverse CDF with torch.searchsorted); a Kalman filter whose noise scales are learned by the
marginal log-likelihood (torch.linalg.solve and cholesky in a loop); a Transformer
warm-up schedule as a custom LRScheduler subclass, with training resumed from a saved
checkpoint; a conditional neural process (mean aggregation of context encodings, a
Gaussian predictive); entropic optimal transport by Sinkhorn iterations in the log domain.
Programs `f(torch, env)`, see tutorial_harness.py."""
import math


def barlow_twins(torch, env):
    nn, optim = torch.nn, torch.optim
    lambd, D = 5e-3, 8

    def off_diagonal(x):
        n, m = x.shape
        assert n == m
        return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()

    class BarlowTwins(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(nn.Linear(6, 16), nn.ReLU())
            self.projector = nn.Sequential(nn.Linear(16, 16, bias=False), nn.BatchNorm1d(16),
                                           nn.ReLU(inplace=True), nn.Linear(16, D, bias=False))
            self.bn = nn.BatchNorm1d(D, affine=False)

        def forward(self, y1, y2):
            z1 = self.projector(self.backbone(y1))
            z2 = self.projector(self.backbone(y2))
            c = self.bn(z1).T @ self.bn(z2)
            c.div_(y1.size(0))
            on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
            off_diag = off_diagonal(c).pow_(2).sum()
            return on_diag + lambd * off_diag, c

    model = env.init(BarlowTwins())
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    x = env.randn(16, 6)

    def train_step(y1, y2):
        model.train()
        optimizer.zero_grad()
        loss, c = model(y1, y2)
        loss.backward()
        optimizer.step()
        return loss.item(), c.detach()

    train_step = env.step(train_step)
    for it in range(4):
        y1 = x + 0.1 * env.randn(16, 6)
        y2 = x * (1 + 0.1 * env.randn(16, 6))
        env.rec(f"step {it}", train_step(y1, y2))
    env.rec("running", (model.bn.running_mean, model.bn.running_var,
                        model.bn.num_batches_tracked))


def nerf_rendering(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    n_coarse, n_fine, L = 6, 5, 3

    def encode(x):
        out = [x]
        for k in range(L):
            out += [torch.sin(2.0 ** k * math.pi * x), torch.cos(2.0 ** k * math.pi * x)]
        return torch.cat(out, dim=-1)

    field = env.init(nn.Sequential(nn.Linear(3 * (1 + 2 * L), 32), nn.ReLU(),
                                   nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4)))
    optimizer = optim.Adam(field.parameters(), lr=5e-3)

    def render(origins, dirs, t_vals):
        pts = origins[:, None, :] + dirs[:, None, :] * t_vals[..., None]
        raw = field(encode(pts))
        rgb, sigma = torch.sigmoid(raw[..., :3]), F.relu(raw[..., 3])
        deltas = torch.cat([t_vals[:, 1:] - t_vals[:, :-1],
                            torch.full_like(t_vals[:, :1], 1e10)], dim=-1)
        alpha = 1.0 - torch.exp(-sigma * deltas)
        trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]),
                                         1.0 - alpha + 1e-10], dim=-1), dim=-1)[:, :-1]
        weights = alpha * trans
        return (weights[..., None] * rgb).sum(1), weights

    def sample_pdf(bins, weights, u):
        weights = weights + 1e-5
        pdf = weights / weights.sum(-1, keepdim=True)
        cdf = torch.cat([torch.zeros_like(pdf[:, :1]), torch.cumsum(pdf, -1)], dim=-1)
        inds = torch.searchsorted(cdf, u.contiguous(), right=True)
        below = (inds - 1).clamp(min=0)
        above = inds.clamp(max=cdf.shape[-1] - 1)
        cdf_g0, cdf_g1 = cdf.gather(1, below), cdf.gather(1, above)
        bins_g0, bins_g1 = bins.gather(1, below), bins.gather(1, above)
        denom = torch.where(cdf_g1 - cdf_g0 < 1e-5, torch.ones_like(cdf_g0), cdf_g1 - cdf_g0)
        return bins_g0 + (u - cdf_g0) / denom * (bins_g1 - bins_g0)

    def train_step(origins, dirs, target, jitter, u):
        optimizer.zero_grad()
        t_coarse = torch.linspace(0.0, 1.0, n_coarse)[None, :] + jitter
        rgb_c, weights = render(origins, dirs, t_coarse)
        with torch.no_grad():
            mids = 0.5 * (t_coarse[:, 1:] + t_coarse[:, :-1])
            t_fine = sample_pdf(mids, weights[:, 1:-1], u)
        t_all, _ = torch.sort(torch.cat([t_coarse, t_fine], dim=-1), dim=-1)
        rgb_f, _ = render(origins, dirs, t_all)
        loss = F.mse_loss(rgb_c, target) + F.mse_loss(rgb_f, target)
        loss.backward()
        optimizer.step()
        return loss.item(), rgb_f.detach(), t_fine

    train_step = env.step(train_step)
    n_rays = 8
    origins = env.randn(n_rays, 3) * 0.1
    dirs = F.normalize(env.randn(n_rays, 3), dim=-1)
    target = env.rand(n_rays, 3)
    for it in range(4):
        jitter = env.rand(n_rays, n_coarse) * 0.1
        u = env.rand(n_rays, n_fine)
        env.rec(f"step {it}", train_step(origins, dirs, target, jitter, u))


def kalman_filter(torch, env):
    optim = torch.optim
    T = 8
    A = torch.tensor([[1.0, 0.1], [0.0, 1.0]])
    Hm = torch.tensor([[1.0, 0.0]])
    obs = (torch.arange(T).float() * 0.1)[:, None] ** 2 + 0.05 * env.randn(T, 1)

    log_q = torch.tensor([-2.0, -2.0], requires_grad=True)
    log_r = torch.tensor([-1.0], requires_grad=True)
    optimizer = optim.Adam([log_q, log_r], lr=0.05)

    def neg_log_likelihood(obs):
        Q, R = torch.diag(log_q.exp()), torch.diag(log_r.exp())
        x, P = torch.zeros(2, 1), torch.eye(2)
        nll = torch.zeros(())
        for t in range(T):
            x, P = A @ x, A @ P @ A.T + Q                      # predict
            S = Hm @ P @ Hm.T + R
            resid = obs[t][:, None] - Hm @ x
            L = torch.linalg.cholesky(S)
            sol = torch.linalg.solve(S, resid)
            nll = nll + 0.5 * (resid.T @ sol).squeeze() + torch.log(torch.diagonal(L)).sum() \
                + 0.5 * math.log(2 * math.pi)
            K = torch.linalg.solve(S, Hm @ P).T                # (S symmetric)
            x = x + K @ resid                                  # update
            P = (torch.eye(2) - K @ Hm) @ P
        return nll, x, 2 * torch.log(torch.diagonal(torch.linalg.cholesky(P))).sum()

    def train_step(obs):
        optimizer.zero_grad()
        nll, x, logdet = neg_log_likelihood(obs)
        nll.backward()
        optimizer.step()
        return nll.item(), x.detach(), logdet.detach()

    train_step = env.step(train_step)
    for it in range(5):
        env.rec(f"step {it}", train_step(obs))
    env.rec("noise", (log_q, log_r))


def noam_resume(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class NoamLR(optim.lr_scheduler.LRScheduler):
        def __init__(self, optimizer, d_model, warmup, last_epoch=-1):
            self.d_model, self.warmup = d_model, warmup
            super().__init__(optimizer, last_epoch)

        def get_lr(self):
            step = max(self.last_epoch, 1)
            scale = self.d_model ** -0.5 * min(step ** -0.5, step * self.warmup ** -1.5)
            return [base_lr * scale for base_lr in self.base_lrs]

    def build():
        model = nn.Sequential(nn.Linear(5, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 2))
        optimizer = optim.Adam(model.parameters(), lr=2.0, betas=(0.9, 0.98), eps=1e-9)
        return model, optimizer, NoamLR(optimizer, d_model=16, warmup=3)

    model, optimizer, scheduler = build()
    env.init(model)
    x, y = env.randn(12, 5), env.randint(0, 2, (12,))

    def make_step(model, optimizer):
        def train_step(x, y):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
            loss.backward()
            optimizer.step()
            return loss.item()
        return env.step(train_step)

    train_step = make_step(model, optimizer)
    for it in range(3):
        env.rec(f"step {it}", (train_step(x, y), scheduler.get_last_lr()))
        scheduler.step()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict()}, env.path("ckpt.pt"))
    reference = [train_step(x, y) for _ in range(1)]
    # a fresh process's view: build, load the checkpoint, continue
    model2, optimizer2, scheduler2 = build()
    ckpt = torch.load(env.path("ckpt.pt"), weights_only=True)
    model2.load_state_dict(ckpt["model"])
    optimizer2.load_state_dict(ckpt["optimizer"])
    scheduler2.load_state_dict(ckpt["scheduler"])
    env.rec("resumed lr", (scheduler2.last_epoch, scheduler2.get_last_lr(),
                           optimizer2.param_groups[0]["lr"]))
    train_step2 = make_step(model2, optimizer2)
    env.rec("resumed", (train_step2(x, y), reference[0]))
    for it in range(2):
        scheduler2.step()
        env.rec(f"resumed {it}", (train_step2(x, y), scheduler2.get_last_lr()))
    env.rec("state", optimizer2.state_dict()["state"][0])


def neural_process(torch, env):
    nn, optim = torch.nn, torch.optim
    Normal = torch.distributions.Normal

    class CNP(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(2, 24), nn.ReLU(), nn.Linear(24, 16))
            self.decoder = nn.Sequential(nn.Linear(17, 24), nn.ReLU(), nn.Linear(24, 2))

        def forward(self, xc, yc, xt):
            r = self.encoder(torch.cat([xc, yc], dim=-1)).mean(dim=1, keepdim=True)
            h = torch.cat([r.expand(-1, xt.size(1), -1), xt], dim=-1)
            mu, raw_sigma = self.decoder(h).chunk(2, dim=-1)
            return mu, 0.1 + 0.9 * nn.functional.softplus(raw_sigma)

    model = env.init(CNP())
    optimizer = optim.Adam(model.parameters(), lr=3e-3)

    def train_step(xc, yc, xt, yt):
        optimizer.zero_grad()
        mu, sigma = model(xc, yc, xt)
        dist = Normal(mu, sigma)
        loss = -dist.log_prob(yt).mean()
        loss.backward()
        optimizer.step()
        return loss.item(), dist.stddev.mean()

    train_step = env.step(train_step)
    for it in range(5):
        x = env.rand(4, 10, 1) * 4 - 2
        amp = env.rand(4, 1, 1) + 0.5
        y = amp * torch.sin(x)
        env.rec(f"step {it}", train_step(x[:, :6], y[:, :6], x, y))


def sinkhorn(torch, env):
    nn, optim = torch.nn, torch.optim
    eps, n_iter = 0.1, 20

    def sinkhorn_loss(x, y):
        C = torch.cdist(x, y, p=2) ** 2
        n, m = C.shape
        log_a = torch.full((n,), -math.log(n))
        log_b = torch.full((m,), -math.log(m))
        f, g = torch.zeros(n), torch.zeros(m)
        for _ in range(n_iter):
            f = -eps * torch.logsumexp((g[None, :] - C) / eps + log_b[None, :], dim=1)
            g = -eps * torch.logsumexp((f[:, None] - C) / eps + log_a[:, None], dim=0)
        log_P = (f[:, None] + g[None, :] - C) / eps + log_a[:, None] + log_b[None, :]
        P = log_P.exp()
        return (P * C).sum(), P

    generator = env.init(nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2)))
    optimizer = optim.Adam(generator.parameters(), lr=1e-2)
    target = torch.cat([env.randn(6, 2) * 0.2 + 1.0, env.randn(6, 2) * 0.2 - 1.0])

    def train_step(z, target):
        optimizer.zero_grad()
        loss, P = sinkhorn_loss(generator(z), target)
        loss.backward()
        optimizer.step()
        return loss.item(), P.sum(0).detach()

    train_step = env.step(train_step)
    z = env.randn(10, 2)
    for it in range(4):
        env.rec(f"step {it}", train_step(z, target))
