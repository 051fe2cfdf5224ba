"""Tutorial scientific and probabilistic programs (see tutorial_harness.py): a continuous
normalising flow with Hutchinson's trace estimator, the Deep Ritz method, a
Kolmogorov-Arnold network on B-splines, random Fourier features with a ridge solve, a
restricted Boltzmann machine trained by contrastive divergence, a modern Hopfield layer,
a Koopman autoencoder and a deep equilibrium layer with an implicit backward hook."""


def ffjord_hutchinson(torch, env):
    """FFJORD's log-density: dz/dt = f(z, t) by a small MLP, the divergence estimated as
    e^T (df/dz) e with a vector-Jacobian product (torch.autograd.grad(f, z, e,
    create_graph=True)), 4 Euler steps from data to the base N(0, I), log p(x) = log N(z_1)
    + integral of the trace; maximum likelihood with Adam."""
    nn, F = torch.nn, torch.nn.functional
    import math
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 32), nn.Softplus(), nn.Linear(32, 2))
    opt = torch.optim.Adam(net.parameters(), lr=5e-3)
    x = torch.randn(32, 2) * torch.tensor([1.5, 0.5])

    def train_step(x, e):
        z, logdet, dt = x, torch.zeros(x.shape[0]), 0.25
        for k in range(4):
            if not z.requires_grad:
                z = z.requires_grad_(True)
            t = torch.full((z.shape[0], 1), k * dt)
            f = net(torch.cat([z, t], 1))
            (vjp,) = torch.autograd.grad(f, z, e, create_graph=True)
            logdet = logdet + dt * (vjp * e).sum(1)
            z = z + dt * f
        logp = -0.5 * (z.pow(2).sum(1) + 2 * math.log(2 * math.pi)) + logdet
        loss = -logp.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, torch.randn(32, 2)).item() for _ in range(4)])
    env.rec("params", list(net.parameters()))


def deep_ritz_poisson(torch, env):
    """E & Yu's Deep Ritz method for -Laplace u = 1 on the square: the energy 0.5|grad
    u|^2 - u at interior samples with grad u from torch.autograd.grad(u.sum(), x,
    create_graph=True), a penalty beta * u^2 on boundary samples, residual blocks with
    cubed ReLU activations (relu(x) ** 3); a MultiStepLR schedule."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self, w):
            super().__init__()
            self.l1, self.l2 = nn.Linear(w, w), nn.Linear(w, w)

        def forward(self, x):
            return x + F.relu(self.l2(F.relu(self.l1(x)) ** 3)) ** 3

    model = nn.Sequential(nn.Linear(2, 10), Block(10), Block(10), nn.Linear(10, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, [2, 4], gamma=0.5)
    interior = torch.rand(40, 2) * 2 - 1
    side = torch.rand(16, 1) * 2 - 1
    boundary = torch.cat([torch.cat([side, torch.ones(16, 1)], 1),
                          torch.cat([-torch.ones(16, 1), side], 1)])

    def train_step(interior, boundary):
        x = interior.clone().requires_grad_(True)
        u = model(x)
        (gu,) = torch.autograd.grad(u.sum(), x, create_graph=True)
        energy = (0.5 * gu.pow(2).sum(1, keepdim=True) - u).mean()
        loss = energy + 500 * model(boundary).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    hist = []
    for _ in range(6):
        hist.append(step(interior, boundary).item())
        sched.step()
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))


def kan_bspline(torch, env):
    """A Kolmogorov-Arnold network layer (efficient-KAN): a fixed uniform knot grid
    buffer, B-spline bases by the Cox-de Boor recursion ((x >= g[:-1]) & (x < g[1:]) as the
    order-0 basis, then k rounds of the two-term recursion), spline coefficients as a
    parameter contracted with einsum, plus a SiLU base branch; LBFGS-free, Adam."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class KANLinear(nn.Module):
        def __init__(self, n_in, n_out, grid_size=5, k=3):
            super().__init__()
            self.k = k
            h = 2.0 / grid_size
            grid = torch.arange(-k, grid_size + k + 1) * h - 1
            self.register_buffer("grid", grid.expand(n_in, -1).contiguous())
            self.base = nn.Linear(n_in, n_out, bias=False)
            self.coef = nn.Parameter(torch.randn(n_out, n_in, grid_size + k) * 0.1)

        def b_splines(self, x):
            g = self.grid
            x = x.unsqueeze(-1)
            bases = ((x >= g[:, :-1]) & (x < g[:, 1:])).to(x.dtype)
            for j in range(1, self.k + 1):
                bases = ((x - g[:, :-(j + 1)]) / (g[:, j:-1] - g[:, :-(j + 1)]) * bases[..., :-1]
                         + (g[:, j + 1:] - x) / (g[:, j + 1:] - g[:, 1:-j]) * bases[..., 1:])
            return bases

        def forward(self, x):
            return self.base(F.silu(x)) + torch.einsum("bik,oik->bo", self.b_splines(x),
                                                       self.coef)

    model = nn.Sequential(KANLinear(2, 5), KANLinear(5, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.rand(50, 2) * 1.8 - 0.9
    y = torch.exp(torch.sin(3.14159 * x[:, :1]) + x[:, 1:] ** 2)

    def train_step(x, y):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(6)])
    env.rec("params", list(model.parameters()))


def random_fourier_krr(torch, env):
    """Random Fourier features for an RBF kernel with a learned log lengthscale: phi(x) =
    sqrt(2/D) cos(x W / ell + b), the ridge solution alpha = solve(Phi^T Phi + lam I, Phi^T
    y) by torch.linalg.solve inside the step, the lengthscale and log lambda fitted by
    gradient descent on a held-out MSE (the gradient through the solve)."""
    nn, F = torch.nn, torch.nn.functional
    import math
    torch.manual_seed(0)
    D = 24
    W, b = torch.randn(1, D), torch.rand(D) * 2 * math.pi
    log_ell = nn.Parameter(torch.tensor(0.0))
    log_lam = nn.Parameter(torch.tensor(-2.0))
    opt = torch.optim.SGD([log_ell, log_lam], lr=0.1, momentum=0.5)
    xt, xv = torch.rand(40, 1) * 6 - 3, torch.rand(20, 1) * 6 - 3
    f = lambda x: torch.sin(2 * x) + 0.1 * x ** 2        # noqa: E731
    yt, yv = f(xt) + 0.05 * torch.randn(40, 1), f(xv)

    def features(x):
        return math.sqrt(2.0 / D) * torch.cos(x @ W / log_ell.exp() + b)

    def train_step(xt, yt, xv, yv):
        P = features(xt)
        A = P.t() @ P + log_lam.exp() * torch.eye(D)
        alpha = torch.linalg.solve(A, P.t() @ yt)
        loss = F.mse_loss(features(xv) @ alpha, yv)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(xt, yt, xv, yv).item() for _ in range(5)], )
    env.rec("params", [log_ell, log_lam], )


def rbm_contrastive_divergence(torch, env):
    """A Bernoulli RBM trained by CD-k without autograd: hidden and visible samples with
    torch.bernoulli, the positive and negative phase statistics (v^T h), the weights and
    biases updated in place (W += lr * (pos - neg) / batch) under torch.no_grad; the free
    energy difference as the monitored loss."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    nv, nh = 12, 6
    W = torch.randn(nv, nh) * 0.1
    vb, hb = torch.zeros(nv), torch.zeros(nh)
    data = (torch.rand(20, nv) < 0.3).float()

    def free_energy(v):
        return -(v @ vb) - F.softplus(v @ W + hb).sum(1)

    @torch.no_grad()
    def cd_step(v0, lr, k):
        ph0 = torch.sigmoid(v0 @ W + hb)
        h = torch.bernoulli(ph0)
        for _ in range(k):
            pv = torch.sigmoid(h @ W.t() + vb)
            v = torch.bernoulli(pv)
            ph = torch.sigmoid(v @ W + hb)
            h = torch.bernoulli(ph)
        n = v0.shape[0]
        W.add_((v0.t() @ ph0 - v.t() @ ph) * (lr / n))
        vb.add_((v0 - v).mean(0) * lr)
        hb.add_((ph0 - ph).mean(0) * lr)
        return (free_energy(v0) - free_energy(v)).mean()

    step = env.step(cd_step)
    env.rec("hist", [step(data, 0.1, 2).item() for _ in range(6)])
    env.rec("params", [W, vb, hb])


def modern_hopfield(torch, env):
    """Ramsauer et al.'s Hopfield layer as a pooling / retrieval module: stored patterns
    Y, state patterns R, the update softmax(beta R W_q (Y W_k)^T) Y W_v iterated twice
    (new state = retrieved), a learned log beta; multiple-instance classification of bags
    with a learned query (HopfieldPooling)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    D, H = 6, 12

    class HopfieldPooling(nn.Module):
        def __init__(self):
            super().__init__()
            self.query = nn.Parameter(torch.randn(1, 1, H))
            self.wk, self.wv = nn.Linear(D, H, bias=False), nn.Linear(D, H)   # (a key bias: zero grad)
            self.log_beta = nn.Parameter(torch.tensor(0.0))

        def forward(self, Y, mask):
            k, v = self.wk(Y), self.wv(Y)
            r = self.query.expand(Y.shape[0], -1, -1)
            for _ in range(2):
                s = self.log_beta.exp() * r @ k.transpose(1, 2)
                a = s.masked_fill(~mask.unsqueeze(1), float("-inf")).softmax(-1)
                r = a @ v
            return r.squeeze(1)

    pool, clf = HopfieldPooling(), nn.Linear(H, 2)
    params = list(pool.parameters()) + list(clf.parameters())
    opt = torch.optim.Adam(params, lr=1e-2)
    bags = torch.randn(6, 5, D)
    lengths = torch.tensor([5, 3, 4, 2, 5, 1])
    mask = torch.arange(5)[None] < lengths[:, None]
    y = (bags[:, :, 0].amax(1) > 1).long()

    def train_step(bags, mask, y):
        loss = F.cross_entropy(clf(pool(bags, mask)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(bags, mask, y).item() for _ in range(5)])
    env.rec("params", params)


def koopman_autoencoder(torch, env):
    """A Koopman autoencoder for a damped pendulum: encoder to a latent space where the
    dynamics are one linear map K (nn.Linear without bias), the losses reconstruction +
    multi-step latent prediction (K applied repeatedly in a Python loop) + prediction in
    state space; torch.linalg.eigvals-free, the spectral radius from torch.linalg.matrix_norm
    (ord=2) penalised."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    enc = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 4))
    dec = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
    K = nn.Linear(4, 4, bias=False)
    params = [p for m in (enc, dec, K) for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=3e-3)
    x0 = torch.randn(8, 2)
    traj = [x0]
    for _ in range(5):
        th, om = traj[-1][:, :1], traj[-1][:, 1:]
        traj.append(torch.cat([th + 0.1 * om, om - 0.1 * torch.sin(th) - 0.02 * om], 1))
    traj = torch.stack(traj, 1)

    def train_step(traj):
        z = enc(traj)
        recon = F.mse_loss(dec(z), traj)
        zk, lin, pred = z[:, 0], 0.0, 0.0
        for t in range(1, traj.shape[1]):
            zk = K(zk)
            lin = lin + F.mse_loss(zk, z[:, t])
            pred = pred + F.mse_loss(dec(zk), traj[:, t])
        spec = torch.linalg.matrix_norm(K.weight, ord=2)
        loss = recon + lin + pred + 0.01 * F.relu(spec - 1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(traj).item() for _ in range(5)])
    env.rec("params", params)


def deq_implicit_hook(torch, env):
    """A deep equilibrium layer (the DEQ tutorial's recipe): the fixed point z* = f(z*, x)
    found by iteration under no_grad, one f application with grad re-attached, and a
    backward hook on z that solves g = grad + J^T g by fixed-point iteration with
    torch.autograd.grad(f0, z0, g, retain_graph=True); the hook removes its handle."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    D = 6
    lin = nn.Linear(D, D)
    inj = nn.Linear(4, D)
    head = nn.Linear(D, 2)
    with torch.no_grad():
        lin.weight.mul_(0.3)

    def f(z, x):
        return torch.tanh(lin(z) + inj(x))

    params = [p for m in (lin, inj, head) for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=0.2)
    x, y = torch.randn(10, 4), torch.randint(0, 2, (10,))

    def train_step(x, y):
        with torch.no_grad():
            z = torch.zeros(x.shape[0], D)
            for _ in range(15):
                z = f(z, x)
        z = f(z, x)
        z0 = z.clone().detach().requires_grad_()
        f0 = f(z0, x)

        def backward_hook(grad):
            g = grad
            for _ in range(15):
                g = torch.autograd.grad(f0, z0, g, retain_graph=True)[0] + grad
            return g

        z.register_hook(backward_hook)
        loss = F.cross_entropy(head(z), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(4)])
    env.rec("params", params)
