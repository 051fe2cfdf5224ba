"""Tutorial programs on custom autograd, probabilistic regression and set / pair models,
written as blog posts write them (seeded with torch.manual_seed, modules built by their
constructors; see tutorial_harness.py): a LayerNorm written as a torch.autograd.Function
with a hand-written backward, a relation classifier with nn.Bilinear and the distance
modules, a Poisson GLM with an exposure offset, a deep ensemble trained with
GaussianNLLLoss, in-graph data augmentation from the RNG (random crops and flips),
Deep Sets over padded sets with masks."""


def custom_function_layernorm(torch, env):
    """A LayerNorm as torch.autograd.Function: forward saves x_hat and rstd with
    ctx.save_for_backward, backward writes the classic formula
    rstd * (g - mean(g) - x_hat * mean(g * x_hat)) and returns None for the eps argument,
    honouring ctx.needs_input_grad for weight and bias; a model using it trains like the
    same model with nn.LayerNorm."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class LayerNormFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, bias, eps):
            mean = x.mean(-1, keepdim=True)
            var = x.var(-1, unbiased=False, keepdim=True)
            rstd = torch.rsqrt(var + eps)
            x_hat = (x - mean) * rstd
            ctx.save_for_backward(x_hat, rstd, weight)
            return x_hat * weight + bias

        @staticmethod
        def backward(ctx, grad_out):
            x_hat, rstd, weight = ctx.saved_tensors
            gw = gb = None
            if ctx.needs_input_grad[1]:
                gw = (grad_out * x_hat).reshape(-1, x_hat.shape[-1]).sum(0)
            if ctx.needs_input_grad[2]:
                gb = grad_out.reshape(-1, x_hat.shape[-1]).sum(0)
            g = grad_out * weight
            gx = rstd * (g - g.mean(-1, keepdim=True)
                         - x_hat * (g * x_hat).mean(-1, keepdim=True))
            return gx, gw, gb, None

    class MyLayerNorm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))
            self.bias = nn.Parameter(torch.zeros(d))

        def forward(self, x):
            return LayerNormFn.apply(x, self.weight, self.bias, 1e-5)

    def make(norm):
        torch.manual_seed(1)
        return nn.Sequential(nn.Linear(5, 12), norm(12), nn.GELU(), nn.Linear(12, 3))

    custom, ref = make(MyLayerNorm), make(nn.LayerNorm)
    opts = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in (custom, ref)]
    x, y = torch.randn(10, 5), torch.randint(0, 3, (10,))

    def train_step(x, y):
        out = []
        for m, opt in zip((custom, ref), opts):
            opt.zero_grad()
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            out.append(loss.detach())
        return [v.item() for v in out]

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(5)])
    env.rec("grad_fn", type(custom[1](torch.zeros(2, 12)).grad_fn).__name__)
    env.rec("same", all(torch.allclose(a, b, atol=1e-5)
                        for a, b in zip(custom.parameters(), ref.parameters())))
    env.rec("params", list(custom.parameters()))


def bilinear_relation(torch, env):
    """A relation classifier over entity pairs: shared entity encoder, nn.Bilinear(d, d, k)
    scoring the pair, plus nn.CosineSimilarity and nn.PairwiseDistance features; a
    TripletMarginWithDistanceLoss with a cosine distance function as an auxiliary
    loss; Adam with amsgrad."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class RelNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
            self.bil = nn.Bilinear(8, 8, 3)
            self.cos = nn.CosineSimilarity(dim=1)
            self.dist = nn.PairwiseDistance(p=2)
            self.out = nn.Linear(5, 3)

        def forward(self, a, b):
            ha, hb = self.enc(a), self.enc(b)
            feats = torch.stack([self.cos(ha, hb), self.dist(ha, hb)], 1)
            return self.bil(ha, hb) + self.out(torch.cat([self.bil(ha, hb), feats], 1)), ha, hb

    model = RelNet()
    a, b = torch.randn(12, 4), torch.randn(12, 4)
    rel = torch.randint(0, 3, (12,))
    neg = torch.randn(12, 4)
    triplet = nn.TripletMarginWithDistanceLoss(
        distance_function=lambda u, v: 1 - F.cosine_similarity(u, v), margin=0.5)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3, amsgrad=True)

    def train_step(a, b, neg, rel):
        opt.zero_grad()
        logits, ha, hb = model(a, b)
        loss = F.cross_entropy(logits, rel) + 0.1 * triplet(ha, hb, model.enc(neg))
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(a, b, neg, rel) for _ in range(5)])
    env.rec("params", list(model.parameters()))


def poisson_glm_offset(torch, env):
    """Count regression: a Poisson GLM whose log-rate is x @ w + b + log(exposure) (an
    offset), nn.PoissonNLLLoss(log_input=True, full=True) with the Stirling term,
    Adagrad with lr_decay and initial_accumulator_value, an ExponentialLR; the deviance
    and a predicted-vs-observed table at the end."""
    nn = torch.nn
    torch.manual_seed(0)
    n = 40
    x = torch.randn(n, 3)
    exposure = torch.rand(n) * 2 + 0.5
    rate = torch.exp(0.3 + x @ torch.tensor([0.5, -0.4, 0.0]))
    counts = torch.round(rate * exposure)
    model = nn.Linear(3, 1)
    crit = nn.PoissonNLLLoss(log_input=True, full=True)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.3, lr_decay=0.01,
                              initial_accumulator_value=0.1)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)

    def train_step(x, counts, offset):
        opt.zero_grad()
        log_rate = model(x).squeeze(-1) + offset
        loss = crit(log_rate, counts)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    hist = []
    for _ in range(8):
        hist.append(step(x, counts, exposure.log()))
        sched.step()
    env.rec("hist", hist)
    with torch.no_grad():
        mu = torch.exp(model(x).squeeze(-1)) * exposure
        term = torch.where(counts > 0, counts * torch.log(counts / mu), torch.zeros(()))
        deviance = 2 * (term - (counts - mu)).sum()
    env.rec("deviance", deviance)
    env.rec("params", list(model.parameters()))


def deep_ensemble_gaussian_nll(torch, env):
    """A deep ensemble (Lakshminarayanan et al.): five small nets, each predicting a mean
    and a variance (softplus + 1e-6), trained with nn.GaussianNLLLoss(full=True) on
    heteroscedastic data, each with its own Adam but one compiled step for all; the
    mixture's mean and variance (mean of variances + variance of means) with
    torch.stack, and the NLL of held-out points."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class MeanVar(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 2))

        def forward(self, x):
            mu, raw = self.body(x).unbind(-1)
            return mu, F.softplus(raw) + 1e-6

    members = nn.ModuleList([MeanVar() for _ in range(5)])
    opts = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in members]
    crit = nn.GaussianNLLLoss(full=True)
    x = torch.linspace(-2, 2, 48).unsqueeze(1)
    y = x.squeeze(1) ** 3 / 4 + (0.1 + 0.2 * x.squeeze(1).abs()) * torch.randn(48)

    def train_step(x, y):
        losses = []
        for m, opt in zip(members, opts):
            opt.zero_grad()
            mu, var = m(x)
            loss = crit(mu, y, var)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        return torch.stack(losses)

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(6)])
    with torch.no_grad():
        xt = torch.tensor([[-2.5], [0.0], [2.5]])
        mus, vars_ = zip(*(m(xt) for m in members))
        mus, vars_ = torch.stack(mus), torch.stack(vars_)
        mean = mus.mean(0)
        var = (vars_ + mus ** 2).mean(0) - mean ** 2
        nll = F.gaussian_nll_loss(mean, xt.squeeze(1) ** 3 / 4, var, full=True,
                                  reduction="none")
    env.rec("mixture", [mean, var, nll])
    env.rec("params", list(members.parameters()))


def in_graph_augmentation(torch, env):
    """Data augmentation inside the training step from the global RNG: a per-sample random
    crop of a zero-padded batch (offsets from torch.randint, gathered with advanced
    indexing of arange grids), a random horizontal flip by torch.where on a
    torch.rand(B) < 0.5 mask, random erasing of a patch; a CNN trained on the augmented
    batch."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    B, H, W, pad = 8, 6, 6, 1

    def augment(x):
        xp = F.pad(x, (pad, pad, pad, pad))
        oy = torch.randint(0, 2 * pad + 1, (B,))
        ox = torch.randint(0, 2 * pad + 1, (B,))
        rows = (oy[:, None] + torch.arange(H)[None])[:, None, :, None]
        cols = (ox[:, None] + torch.arange(W)[None])[:, None, None, :]
        bidx = torch.arange(B)[:, None, None, None]
        cidx = torch.arange(x.shape[1])[None, :, None, None]
        crop = xp[bidx, cidx, rows, cols]
        flip = torch.rand(B) < 0.5
        crop = torch.where(flip[:, None, None, None], crop.flip(-1), crop)
        erase = (torch.rand(B) < 0.3)[:, None, None, None]
        ey, ex = torch.randint(0, H - 2, (B,)), torch.randint(0, W - 2, (B,))
        in_y = (torch.arange(H)[None] >= ey[:, None]) & (torch.arange(H)[None] < ey[:, None] + 2)
        in_x = (torch.arange(W)[None] >= ex[:, None]) & (torch.arange(W)[None] < ex[:, None] + 2)
        patch = (in_y[:, :, None] & in_x[:, None, :])[:, None]
        return crop.masked_fill(erase & patch, 0.0)

    model = nn.Sequential(nn.Conv2d(2, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(6 * 9, 3))
    x = torch.randn(B, 2, H, W)
    y = torch.randint(0, 3, (B,))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def train_step(x, y):
        model.train()
        xa = augment(x)
        opt.zero_grad()
        loss = F.cross_entropy(model(xa), y)
        loss.backward()
        opt.step()
        return loss.item(), xa.sum().item()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(5)])
    env.rec("sample", augment(x))
    env.rec("params", list(model.parameters()))


def deep_sets_masked(torch, env):
    """Deep Sets on sets of different sizes padded with pad_sequence (batch_first, a
    padding value), a boolean mask from the lengths, phi on every element, masked sum and
    masked max pooling (masked_fill with -inf), rho on the pooled vector; the task is the
    set's max minus its mean; permutation invariance checked with randperm."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    pad_sequence = nn.utils.rnn.pad_sequence
    lengths = [3, 5, 2, 4, 1, 5]
    sets = [torch.randn(n, 2) for n in lengths]
    target = torch.stack([s[:, 0].max() - s[:, 0].mean() for s in sets])
    padded = pad_sequence(sets, batch_first=True, padding_value=7.0)
    mask = torch.arange(padded.shape[1])[None] < torch.tensor(lengths)[:, None]

    class DeepSets(nn.Module):
        def __init__(self):
            super().__init__()
            self.phi = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 16))
            self.rho = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 1))

        def forward(self, x, mask):
            h = self.phi(x)
            m = mask.unsqueeze(-1)
            summed = (h * m).sum(1) / m.sum(1)
            maxed = h.masked_fill(~m, float("-inf")).amax(1)
            return self.rho(torch.cat([summed, maxed], -1)).squeeze(-1)

    model = DeepSets()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, mask, t):
        opt.zero_grad()
        loss = F.mse_loss(model(x, mask), t)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("padded", padded)
    env.rec("hist", [step(padded, mask, target) for _ in range(6)])
    with torch.no_grad():
        perm = torch.randperm(lengths[1])
        shuffled = padded.clone()
        shuffled[1, :lengths[1]] = padded[1, perm]
        env.rec("invariant", torch.allclose(model(padded, mask), model(shuffled, mask),
                                            atol=1e-6))
    env.rec("params", list(model.parameters()))
