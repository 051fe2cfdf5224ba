"""Tutorial programs on point clouds, variational flows and linear algebra, written as blog
posts write them (seeded with torch.manual_seed, modules built by their constructors; see
tutorial_harness.py): DGCNN's EdgeConv on a k-nearest-neighbour graph rebuilt every layer,
variational inference with planar flows, PCA / ZCA whitening with eigh (eigenvector signs
made canonical), fitting a Gaussian by the 2-Wasserstein distance through an eigh-based
matrix square root."""


def dgcnn_edgeconv(torch, env):
    """DGCNN: for each point its k nearest neighbours from -||x_i - x_j||^2 (computed as
    2 x x^T - |x|^2 - |x|^2^T) by topk, neighbour features gathered with a flattened index
    (idx + arange(B)[:, None, None] * N), edge features cat(x_j - x_i, x_i), a shared MLP
    (Conv2d 1x1 + BatchNorm2d + LeakyReLU), max over neighbours; the graph is recomputed
    from the features in the second layer; global max + mean pooling classifies."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    B, N, K = 4, 10, 3

    def knn(x, k):
        inner = -2 * torch.matmul(x.transpose(2, 1), x)
        xx = torch.sum(x ** 2, dim=1, keepdim=True)
        return (-xx - inner - xx.transpose(2, 1)).topk(k=k, dim=-1)[1]

    def graph_feature(x, k):
        b, c, n = x.shape
        idx = knn(x, k) + torch.arange(b).view(-1, 1, 1) * n
        x = x.transpose(2, 1).contiguous()
        feat = x.view(b * n, -1)[idx.view(-1), :].view(b, n, k, c)
        x = x.view(b, n, 1, c).repeat(1, 1, k, 1)
        return torch.cat((feat - x, x), dim=3).permute(0, 3, 1, 2).contiguous()

    class DGCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Sequential(nn.Conv2d(6, 8, 1, bias=False), nn.BatchNorm2d(8),
                                       nn.LeakyReLU(0.2))
            self.conv2 = nn.Sequential(nn.Conv2d(16, 8, 1, bias=False), nn.BatchNorm2d(8),
                                       nn.LeakyReLU(0.2))
            self.head = nn.Linear(32, 2)

        def forward(self, x):
            x1 = self.conv1(graph_feature(x, K)).max(dim=-1, keepdim=False)[0]
            x2 = self.conv2(graph_feature(x1, K)).max(dim=-1, keepdim=False)[0]
            h = torch.cat([x1, x2], 1)
            return self.head(torch.cat([F.adaptive_max_pool1d(h, 1).squeeze(-1),
                                        F.adaptive_avg_pool1d(h, 1).squeeze(-1)], 1))

    model = DGCNN()
    pts = torch.randn(B, 3, N)
    pts[2:] *= torch.tensor([3.0, 0.3, 0.3]).view(1, 3, 1)
    labels = torch.tensor([0, 0, 1, 1])
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, 5, eta_min=1e-3)

    def train_step(x, y):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y, label_smoothing=0.2)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        hist.append(step(pts, labels))
        sched.step()
    env.rec("hist", hist)
    env.rec("knn", knn(pts, K))
    model.eval()
    with torch.no_grad():
        env.rec("eval", model(pts))
    env.rec("params", list(model.parameters()))


def planar_flow_vi(torch, env):
    """Variational inference of an unnormalised 2-D density (a ring) with planar flows
    (Rezende & Mohamed): z' = z + u_hat tanh(w.z + b) with u_hat made invertible
    (u + (m(w.u) - w.u) w / |w|^2, m(x) = -1 + softplus(x)), log|det| = log|1 + u_hat.psi|,
    base samples by torch.randn each step; the reverse KL (free energy) minimised with
    RMSprop."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Planar(nn.Module):
        def __init__(self):
            super().__init__()
            self.u = nn.Parameter(torch.randn(2) * 0.1)
            self.w = nn.Parameter(torch.randn(2) * 0.1)
            self.b = nn.Parameter(torch.zeros(1))

        def forward(self, z):
            wu = self.w @ self.u
            u_hat = self.u + (-1 + F.softplus(wu) - wu) * self.w / (self.w @ self.w)
            lin = z @ self.w + self.b
            psi = (1 - torch.tanh(lin) ** 2)[:, None] * self.w
            log_det = torch.log(torch.abs(1 + psi @ u_hat) + 1e-8)
            return z + u_hat * torch.tanh(lin)[:, None], log_det

    def log_target(z):
        r = z.norm(dim=1)
        return -0.5 * ((r - 2) / 0.4) ** 2

    flows = nn.ModuleList([Planar() for _ in range(4)])
    opt = torch.optim.RMSprop(flows.parameters(), lr=5e-3, momentum=0.5)

    def train_step(n):
        z = torch.randn(n, 2)
        log_q = (-0.5 * z.pow(2) - 0.9189385332046727).sum(1)
        for f in flows:
            z, ld = f(z)
            log_q = log_q - ld
        loss = (log_q - log_target(z)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(64) for _ in range(6)])
    env.rec("params", list(flows.parameters()))


def pca_whitening_eigh(torch, env):
    """PCA / ZCA whitening as preprocessing: centre the data, covariance by X^T X / (n-1),
    torch.linalg.eigh, eigenvalues flipped to descending order, each eigenvector's sign
    made canonical (largest-magnitude entry positive: LAPACK's signs are arbitrary),
    explained-variance ratios, the PCA projection onto two components and the ZCA
    whitening matrix; a logistic regression trained on the whitened data by LBFGS (its
    closure compiled)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    mix = torch.tensor([[2.0, 0.5, 0.0, 0.1], [0.0, 1.0, 0.3, 0.0],
                        [0.0, 0.0, 0.5, 0.2], [0.0, 0.0, 0.0, 0.1]])
    x = torch.randn(60, 4) @ mix + torch.tensor([1.0, -2.0, 0.5, 3.0])
    y = (x[:, 0] - 1 + 0.5 * (x[:, 1] + 2) > 0).float()
    mean = x.mean(0)
    xc = x - mean
    cov = xc.T @ xc / (x.shape[0] - 1)
    evals, evecs = torch.linalg.eigh(cov)
    evals, evecs = evals.flip(0), evecs.flip(1)
    signs = torch.sign(evecs.gather(0, evecs.abs().argmax(0, keepdim=True)))
    evecs = evecs * signs
    env.rec("explained", evals / evals.sum())
    env.rec("components", evecs)
    proj = xc @ evecs[:, :2]
    env.rec("projection", proj)
    zca = evecs @ torch.diag(1.0 / torch.sqrt(evals + 1e-5)) @ evecs.T
    xw = xc @ zca
    env.rec("whitened cov", xw.T @ xw / (x.shape[0] - 1))
    model = nn.Linear(4, 1)
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5, tolerance_change=0.0)

    def closure():
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(model(xw).squeeze(1), y)
        loss.backward()
        return loss

    closure = env.step(closure)
    env.rec("hist", [opt.step(closure).item() for _ in range(3)])
    env.rec("params", list(model.parameters()))


def gaussian_w2_sqrtm(torch, env):
    """Fitting a Gaussian N(m, L L^T) to data by the closed-form 2-Wasserstein distance
    |m1 - m2|^2 + tr(S1 + S2 - 2 (S2^1/2 S1 S2^1/2)^1/2), the matrix square roots from
    torch.linalg.eigh (V diag(sqrt(clamped eigenvalues)) V^T, independent of the
    eigenvectors' signs), gradients through eigh into the Cholesky-like factor L (tril)."""
    nn = torch.nn
    torch.manual_seed(0)
    data = torch.randn(80, 3) @ torch.tensor([[1.5, 0.0, 0.0], [0.6, 0.8, 0.0],
                                              [0.2, -0.3, 0.4]]) + torch.tensor([1.0, 0.0, -1.0])
    m_data = data.mean(0)
    S_data = torch.cov(data.T)

    def sqrtm(S):
        evals, evecs = torch.linalg.eigh(S)
        return evecs @ torch.diag_embed(evals.clamp(min=1e-8).sqrt()) @ evecs.transpose(-1, -2)

    class Gaussian(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = nn.Parameter(torch.zeros(3))
            self.L = nn.Parameter(torch.eye(3) + 0.1 * torch.randn(3, 3))

        def cov(self):
            L = torch.tril(self.L)
            return L @ L.T

    g = Gaussian()
    root_data = sqrtm(S_data)
    opt = torch.optim.Adam(g.parameters(), lr=0.05)

    def train_step(m_data, S_data, root_data):
        S = g.cov()
        cross = sqrtm(root_data @ S @ root_data)
        w2 = (g.m - m_data).pow(2).sum() + torch.trace(S + S_data - 2 * cross)
        opt.zero_grad()
        w2.backward()
        opt.step()
        return w2.item()

    step = env.step(train_step)
    env.rec("hist", [step(m_data, S_data, root_data) for _ in range(6)])
    env.rec("cov", g.cov())
    env.rec("params", [g.m, torch.tril(g.L)])
