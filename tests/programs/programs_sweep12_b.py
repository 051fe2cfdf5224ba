"""Tutorial vision and generative programs (see tutorial_harness.py): slot attention, a
VQ-VAE whose codebook is an exponential moving average updated in place, Gatys style
transfer optimising the image with L-BFGS, PGD adversarial training, InfoGAN's
categorical code, a point-cloud autoencoder on the Chamfer distance, batch
renormalisation written as a module and concrete dropout."""


def slot_attention(torch, env):
    """Locatello et al.'s slot attention: slots sampled from a learned Gaussian (mu +
    exp(log_sigma) * noise), 3 iterations of softmax over the slots (not the inputs), a
    weighted mean with epsilon, nn.GRUCell update and a residual MLP, LayerNorms; a
    spatial-broadcast decoder reconstructs with per-slot alpha masks softmaxed over slots."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    N, D, K, B = 12, 16, 3, 4

    class SlotAttention(nn.Module):
        def __init__(self, iters=3):
            super().__init__()
            self.iters, self.scale = iters, D ** -0.5
            self.mu = nn.Parameter(torch.randn(1, 1, D))
            self.log_sigma = nn.Parameter(torch.zeros(1, 1, D))
            self.q, self.k, self.v = (nn.Linear(D, D, bias=False) for _ in range(3))
            self.gru = nn.GRUCell(D, D)
            self.mlp = nn.Sequential(nn.Linear(D, 32), nn.ReLU(), nn.Linear(32, D))
            self.norm_in, self.norm_mlp = nn.LayerNorm(D), nn.LayerNorm(D)
            self.norm_slots = nn.LayerNorm(D, bias=False)   # (a bias there has zero grad)

        def forward(self, x, noise):
            x = self.norm_in(x)
            k, v = self.k(x), self.v(x)
            slots = self.mu + self.log_sigma.exp() * noise
            for _ in range(self.iters):
                prev = slots
                q = self.q(self.norm_slots(slots))
                attn = torch.einsum("bid,bjd->bij", q, k).mul(self.scale).softmax(dim=1) + 1e-8
                attn = attn / attn.sum(dim=-1, keepdim=True)
                updates = torch.einsum("bjd,bij->bid", v, attn)
                slots = self.gru(updates.reshape(-1, D), prev.reshape(-1, D)).reshape(B, K, D)
                slots = slots + self.mlp(self.norm_mlp(slots))
            return slots

    sa = SlotAttention()
    enc = nn.Sequential(nn.Linear(5, D), nn.ReLU(), nn.Linear(D, D))
    # (no bias on the last layer: a bias on the mask logit, softmaxed over slots, has zero grad)
    dec = nn.Sequential(nn.Linear(D + 2, 32), nn.ReLU(), nn.Linear(32, 5 + 1, bias=False))
    params = [p for m in (sa, enc, dec) for p in m.parameters()]
    opt = torch.optim.Adam(params, lr=4e-4)
    x = torch.randn(B, N, 5)
    grid = torch.linspace(-1, 1, N).unsqueeze(-1).repeat(1, 2)

    def train_step(x, noise):
        slots = sa(enc(x), noise)
        z = torch.cat([slots.unsqueeze(2).expand(-1, -1, N, -1),
                       grid.expand(B, K, N, 2)], -1)
        out = dec(z)
        recons, masks = out[..., :5], out[..., 5:].softmax(dim=1)
        recon = (recons * masks).sum(1)
        loss = F.mse_loss(recon, x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, masks.detach()

    step = env.step(train_step)
    hist = []
    for _ in range(4):
        loss, masks = step(x, torch.randn(B, K, D))
        hist.append(loss.item())
    env.rec("hist", hist)
    env.rec("masks", masks)
    env.rec("params", params)


def vq_ema_codebook(torch, env):
    """VQ-VAE with the EMA codebook (van den Oord et al., appendix): nearest codes by
    squared distance (torch.cdist-free expansion), one-hot assignments, the cluster sizes
    and summed embeddings as buffers updated in place under no_grad inside the training
    step (mul_().add_(), Laplace smoothing), the codebook copy_'d from them, the
    straight-through estimator and the commitment loss; perplexity as a metric."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    K, D = 8, 4

    class VQEMA(nn.Module):
        def __init__(self, decay=0.9, eps=1e-5):
            super().__init__()
            self.decay, self.eps = decay, eps
            self.register_buffer("embed", torch.randn(K, D))
            self.register_buffer("cluster_size", torch.zeros(K))
            self.register_buffer("embed_avg", self.embed.clone())

        def forward(self, z):
            flat = z.reshape(-1, D)
            dist = (flat.pow(2).sum(1, keepdim=True) - 2 * flat @ self.embed.t()
                    + self.embed.pow(2).sum(1))
            idx = dist.argmin(1)
            onehot = F.one_hot(idx, K).type(flat.dtype)
            q = F.embedding(idx, self.embed).view_as(z)
            if self.training:
                with torch.no_grad():
                    self.cluster_size.mul_(self.decay).add_(onehot.sum(0), alpha=1 - self.decay)
                    self.embed_avg.mul_(self.decay).add_(onehot.t() @ flat,
                                                         alpha=1 - self.decay)
                    n = self.cluster_size.sum()
                    size = (self.cluster_size + self.eps) / (n + K * self.eps) * n
                    self.embed.copy_(self.embed_avg / size.unsqueeze(1))
            commit = F.mse_loss(z, q.detach())
            avg = onehot.mean(0)
            perplexity = torch.exp(-(avg * torch.log(avg + 1e-10)).sum())
            return z + (q - z).detach(), commit, perplexity

    enc = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2 * D))
    dec = nn.Sequential(nn.Linear(2 * D, 16), nn.ReLU(), nn.Linear(16, 6))
    vq = VQEMA()
    params = list(enc.parameters()) + list(dec.parameters())
    opt = torch.optim.Adam(params, lr=3e-3)
    x = torch.randn(32, 6)

    def train_step(x):
        z = enc(x).view(-1, 2, D)
        q, commit, ppl = vq(z)
        loss = F.mse_loss(dec(q.view(-1, 2 * D)), x) + 0.25 * commit
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, ppl

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        loss, ppl = step(x)
        hist.append((loss.item(), ppl.item()))
    env.rec("hist", hist)
    env.rec("buffers", list(vq.buffers()))
    env.rec("params", params)


def gatys_style_lbfgs(torch, env):
    """Neural style transfer as the PyTorch tutorial writes it: a frozen conv feature
    extractor, content loss on one layer and Gram-matrix style losses on two (features /
    (c*h*w)), the input image itself the only parameter (requires_grad_), optim.LBFGS with a
    closure that clamps the image in place under no_grad before each evaluation."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    convs = nn.ModuleList([nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(4, 6, 3, padding=1)])
    convs.requires_grad_(False)

    def features(x):
        f1 = F.relu(convs[0](x))
        f2 = F.relu(convs[1](F.avg_pool2d(f1, 2)))
        return f1, f2

    def gram(f):
        b, c, h, w = f.shape
        m = f.view(b * c, h * w)
        return m @ m.t() / (b * c * h * w)

    content, style = torch.rand(1, 3, 8, 8), torch.rand(1, 3, 8, 8)
    with torch.no_grad():
        c_target = features(content)[1]
        s_targets = [gram(f) for f in features(style)]
    img = content.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([img], lr=0.5, max_iter=4, history_size=5)

    def closure_body(img):
        with torch.no_grad():
            img.clamp_(0, 1)
        opt.zero_grad()
        f1, f2 = features(img)
        s_loss = sum(F.mse_loss(gram(f), t) for f, t in zip((f1, f2), s_targets))
        loss = 1e4 * s_loss + F.mse_loss(f2, c_target)
        loss.backward()
        return loss

    body = env.step(closure_body)
    hist = []
    for _ in range(3):
        hist.append(opt.step(lambda: body(img)).item())
    with torch.no_grad():
        img.clamp_(0, 1)
    env.rec("hist", hist)
    env.rec("img", img)


def pgd_adversarial_training(torch, env):
    """Madry et al.'s PGD adversarial training: a random start in the eps-ball, k steps of
    x_adv + alpha * sign(grad) from torch.autograd.grad of the loss w.r.t. the input,
    projection with torch.max(torch.min(x_adv, x + eps), x - eps) and clamp to [0, 1], the
    model in eval() during the attack and train() for the update; robust accuracy."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 24), nn.BatchNorm1d(24), nn.ReLU(), nn.Linear(24, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    x = torch.rand(16, 10)
    y = torch.randint(0, 3, (16,))
    eps, alpha = 0.1, 0.04

    def attack(x, y, start):
        model.eval()
        x_adv = (x + start).clamp(0, 1)
        for _ in range(3):
            x_adv.requires_grad_(True)
            loss = F.cross_entropy(model(x_adv), y)
            (g,) = torch.autograd.grad(loss, x_adv)
            x_adv = x_adv.detach() + alpha * g.sign()
            x_adv = torch.max(torch.min(x_adv, x + eps), x - eps).clamp(0, 1)
        model.train()
        return x_adv.detach()

    def train_step(x, y, start):
        x_adv = attack(x, y, start)
        logits = model(x_adv)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, (logits.argmax(1) == y).float().mean(), x_adv

    step = env.step(train_step)
    hist = []
    for _ in range(4):
        start = torch.empty_like(x).uniform_(-eps, eps)
        loss, acc, x_adv = step(x, y, start)
        hist.append((loss.item(), acc.item()))
    env.rec("hist", hist)
    env.rec("x_adv", x_adv)
    env.rec("params", list(model.parameters()))
    env.rec("buffers", list(model.buffers()))


def infogan_categorical_code(torch, env):
    """InfoGAN: the generator input is noise, a one-hot categorical code and a continuous
    code; the discriminator shares a body with the Q head; the mutual-information term
    (cross-entropy of the categorical code + Gaussian NLL of the continuous one) trains G
    and Q together with one optimiser over chained parameters (itertools.chain)."""
    nn, F = torch.nn, torch.nn.functional
    import itertools
    torch.manual_seed(0)
    Z, C, B = 4, 3, 16
    G = nn.Sequential(nn.Linear(Z + C + 1, 16), nn.LeakyReLU(0.2), nn.Linear(16, 2))
    body = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2))
    d_head, q_head = nn.Linear(16, 1), nn.Linear(16, C + 2)
    opt_d = torch.optim.Adam(itertools.chain(body.parameters(), d_head.parameters()),
                             lr=2e-3, betas=(0.5, 0.999))
    opt_gq = torch.optim.Adam(itertools.chain(G.parameters(), q_head.parameters()),
                              lr=1e-3, betas=(0.5, 0.999))
    real = torch.randn(B, 2) * 0.5 + 1

    def train_step(real, z, c_idx, c_cont):
        code = torch.cat([z, F.one_hot(c_idx, C).float(), c_cont], 1)
        fake = G(code)
        ones, zeros = torch.ones(B, 1), torch.zeros(B, 1)
        d_loss = (F.binary_cross_entropy_with_logits(d_head(body(real)), ones)
                  + F.binary_cross_entropy_with_logits(d_head(body(fake.detach())), zeros))
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        h = body(fake)
        q = q_head(h)
        mu, log_var = q[:, C:C + 1], q[:, C + 1:]
        info = (F.cross_entropy(q[:, :C], c_idx)
                + F.gaussian_nll_loss(mu, c_cont, log_var.exp()))
        g_loss = F.binary_cross_entropy_with_logits(d_head(h), ones) + info
        opt_gq.zero_grad()
        g_loss.backward()
        opt_gq.step()
        return d_loss.detach(), g_loss.detach()

    step = env.step(train_step)
    hist = []
    for _ in range(4):
        d, g = step(real, torch.randn(B, Z), torch.randint(0, C, (B,)),
                    torch.rand(B, 1) * 2 - 1)
        hist.append((d.item(), g.item()))
    env.rec("hist", hist)
    env.rec("params", [p for m in (G, body, d_head, q_head) for p in m.parameters()])


def chamfer_pointcloud_ae(torch, env):
    """A PointNet-style autoencoder trained on the Chamfer distance: a shared per-point
    MLP (Conv1d with kernel 1), max pooling over points (values and indices), a decoder to
    a fixed number of points, pairwise squared distances with torch.cdist, min over each
    axis; the critical point indices as a metric."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    B, N, M = 3, 20, 16
    enc = nn.Sequential(nn.Conv1d(3, 16, 1), nn.ReLU(), nn.Conv1d(16, 24, 1))
    dec = nn.Sequential(nn.Linear(24, 32), nn.ReLU(), nn.Linear(32, M * 3))
    params = list(enc.parameters()) + list(dec.parameters())
    opt = torch.optim.Adam(params, lr=1e-3)
    pts = torch.randn(B, N, 3)
    pts = pts / pts.norm(dim=-1, keepdim=True)

    def train_step(pts):
        feat, crit = enc(pts.transpose(1, 2)).max(dim=2)
        recon = dec(feat).view(B, M, 3)
        d = torch.cdist(pts, recon).pow(2)
        loss = d.min(dim=2).values.mean() + d.min(dim=1).values.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, crit

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        loss, crit = step(pts)
        hist.append(loss.item())
    env.rec("hist", hist)
    env.rec("critical", crit)
    env.rec("params", params)


def batch_renorm(torch, env):
    """Batch renormalisation (Ioffe 2017) as a module: batch statistics, r = sigma_B /
    sigma and d = (mu_B - mu) / sigma clamped to [1/rmax, rmax] and [-dmax, dmax] and
    detached, running statistics updated in place with lerp_ under no_grad, rmax / dmax
    scheduled by a Python step counter kept in a buffer (num_batches_tracked, read with
    .item() outside the step), eval() using the running statistics."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class BatchRenorm1d(nn.Module):
        def __init__(self, n, momentum=0.1, eps=1e-5):
            super().__init__()
            self.momentum, self.eps = momentum, eps
            self.weight = nn.Parameter(torch.ones(n))
            self.bias = nn.Parameter(torch.zeros(n))
            self.register_buffer("running_mean", torch.zeros(n))
            self.register_buffer("running_std", torch.ones(n))

        def forward(self, x, rmax=1.0, dmax=0.0):
            if self.training:
                mean = x.mean(0)
                std = (x.var(0, unbiased=False) + self.eps).sqrt()
                r = (std.detach() / self.running_std).clamp(1 / rmax, rmax)
                d = ((mean.detach() - self.running_mean) / self.running_std).clamp(-dmax, dmax)
                xh = (x - mean) / std * r + d
                with torch.no_grad():
                    self.running_mean.lerp_(mean, self.momentum)
                    self.running_std.lerp_(std, self.momentum)
            else:
                xh = (x - self.running_mean) / self.running_std
            return self.weight * xh + self.bias

    lin1, brn, lin2 = nn.Linear(6, 10), BatchRenorm1d(10), nn.Linear(10, 2)
    params = [p for m in (lin1, brn, lin2) for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=0.05, momentum=0.9)
    x, y = torch.randn(12, 6) * 2 + 1, torch.randint(0, 2, (12,))

    def train_step(x, y, rmax, dmax):
        loss = F.cross_entropy(lin2(F.relu(brn(lin1(x), rmax, dmax))), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    hist = []
    for k in range(6):
        rmax = 1.0 + min(k, 3) * 0.5
        dmax = min(k, 3) * 1.0
        hist.append(step(x, y, rmax, dmax).item())
    brn.eval()
    with torch.no_grad():
        env.rec("eval", lin2(F.relu(brn(lin1(x)))))
    env.rec("hist", hist)
    env.rec("params", params)
    env.rec("buffers", list(brn.buffers()))


def concrete_dropout(torch, env):
    """Gal et al.'s concrete dropout: a learnable dropout probability p = sigmoid(logit),
    a relaxed Bernoulli mask from uniform noise (log p - log(1-p) + log u - log(1-u)) /
    temperature through a sigmoid, inputs scaled by 1/(1-p), and the regulariser
    weight_regularizer * ||W||^2 / (1-p) + dropout_regularizer * (p log p + (1-p) log(1-p))
    * input_dim."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class ConcreteDropout(nn.Module):
        def __init__(self, layer, wr=1e-3, dr=1e-2):
            super().__init__()
            self.layer, self.wr, self.dr = layer, wr, dr
            self.p_logit = nn.Parameter(torch.tensor([-2.0]))

        def forward(self, x, u):
            p = torch.sigmoid(self.p_logit)
            eps, temp = 1e-7, 0.1
            drop = torch.sigmoid((torch.log(p + eps) - torch.log(1 - p + eps)
                                  + torch.log(u + eps) - torch.log(1 - u + eps)) / temp)
            out = self.layer(x * (1 - drop) / (1 - p))
            sq = sum(w.pow(2).sum() for w in self.layer.parameters())
            reg = self.wr * sq / (1 - p) + self.dr * x.shape[1] * (
                p * torch.log(p) + (1 - p) * torch.log(1 - p))
            return out, reg.sum()

    l1 = ConcreteDropout(nn.Linear(4, 16))
    l2 = ConcreteDropout(nn.Linear(16, 1))
    params = list(l1.parameters()) + list(l2.parameters())
    opt = torch.optim.Adam(params, lr=1e-2)
    x = torch.randn(24, 4)
    y = x.sum(1, keepdim=True).sin()

    def train_step(x, y, u1, u2):
        h, r1 = l1(x, u1)
        out, r2 = l2(F.relu(h), u2)
        loss = F.mse_loss(out, y) + r1 + r2
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    hist = [step(x, y, torch.rand(24, 4), torch.rand(24, 16)).item() for _ in range(5)]
    env.rec("hist", hist)
    env.rec("p", [torch.sigmoid(l.p_logit) for l in (l1, l2)])
    env.rec("params", params)
