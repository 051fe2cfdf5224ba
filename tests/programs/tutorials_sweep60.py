"""Sweep 60 (H1): tutorial programs of kinds the earlier sweeps had not written: a siamese
embedding net with batch-hard triplet mining, WGAN-GP (a gradient penalty through
autograd.grad(create_graph=True), two optimisers, a frozen critic in the generator step),
a small U-Net with Dice + BCE, mixup with label smoothing under a warmup SequentialLR, and
a focal loss with a per-class alpha buffer, a LambdaLR warmup and a confusion matrix.
Synthetic data; the library's own seeded RNG (llgrad's streams are torch's). Programs
`f(torch, env)`, see tutorial_harness.py."""


def _blobs(env, n, d, k, spread=1.5):
    """n points of k Gaussian blobs in d dims, and their labels"""
    y = env.randint(0, k, (n,))
    centres = env.randn(k, d, scale=spread)
    return centres[y] + env.randn(n, d), y


def siamese_triplet(torch, env):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(10)
    X, y = _blobs(env, 40, 8, 4)

    class EmbeddingNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(8, 32), nn.PReLU(), nn.Linear(32, 6))

        def forward(self, x):
            return F.normalize(self.net(x), p=2, dim=1)

    model = EmbeddingNet()
    criterion = nn.TripletMarginLoss(margin=0.4, p=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(xb, yb):
        model.train()
        emb = model(xb)
        with torch.no_grad():                       # batch-hard mining
            dist = torch.cdist(emb, emb)
            same = yb.unsqueeze(0) == yb.unsqueeze(1)
            hardest_pos = (dist * same.float()).argmax(dim=1)
            hardest_neg = dist.masked_fill(same, float("inf")).argmin(dim=1)
        loss = criterion(emb, emb[hardest_pos], emb[hardest_neg])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    def evaluate(xq, yq, xs, ys):
        model.eval()
        with torch.no_grad():
            sim = F.cosine_similarity(model(xq).unsqueeze(1), model(xs).unsqueeze(0), dim=2)
            nearest = sim.argmax(dim=1)
            return (ys[nearest] == yq).float().mean().item(), sim

    step, evaluate = env.step(train_step), env.step(evaluate)
    for epoch in range(3):
        for s in range(0, 30, 10):
            env.rec(f"e{epoch} s{s}", step(X[s:s + 10], y[s:s + 10]))
        acc, sim = evaluate(X[30:], y[30:], X[:30], y[:30])
        env.rec(f"acc {epoch}", (acc, sim))
    env.rec("params", dict(model.state_dict()))


def wgan_gp(torch, env):
    nn = torch.nn
    torch.manual_seed(11)
    real_data = env.randn(48, 2) * torch.tensor([0.5, 1.5]) + torch.tensor([2.0, -1.0])
    latent = 3
    G = nn.Sequential(nn.Linear(latent, 16), nn.LeakyReLU(0.2), nn.Linear(16, 2))
    D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 16),
                      nn.LeakyReLU(0.2), nn.Linear(16, 1))
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-3, betas=(0.5, 0.9))
    opt_d = torch.optim.Adam(D.parameters(), lr=1e-3, betas=(0.5, 0.9))
    lambda_gp, n_critic = 10.0, 3

    def gradient_penalty(real, fake):
        alpha = torch.rand(real.size(0), 1)
        interp = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
        out = D(interp)
        grads = torch.autograd.grad(outputs=out, inputs=interp,
                                    grad_outputs=torch.ones_like(out),
                                    create_graph=True, retain_graph=True)[0]
        return ((grads.norm(2, dim=1) - 1) ** 2).mean()

    def critic_step(real):
        z = torch.randn(real.size(0), latent)
        fake = G(z).detach()
        gp = gradient_penalty(real, fake)
        loss_d = D(fake).mean() - D(real).mean() + lambda_gp * gp
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        return loss_d.item(), gp.item()

    def generator_step(n):
        for p in D.parameters():
            p.requires_grad_(False)
        z = torch.randn(n, latent)
        loss_g = -D(G(z)).mean()
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        for p in D.parameters():
            p.requires_grad_(True)
        return loss_g.item()

    critic_step, generator_step = env.step(critic_step), env.step(generator_step)
    for it in range(4):
        for c in range(n_critic):
            s = ((it * n_critic + c) * 12) % 48
            env.rec(f"d {it} {c}", critic_step(real_data[s:s + 12]))
        env.rec(f"g {it}", generator_step(12))
        env.rec(f"D grads kept {it}", [p.grad is None for p in D.parameters()])
    with torch.no_grad():
        samples = G(torch.randn(6, latent))
    env.rec("samples", samples)
    env.rec("G", dict(G.state_dict()))
    env.rec("D", dict(D.state_dict()))


def unet_dice(torch, env):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(12)
    n, size = 10, 16
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(),
                            indexing="ij")
    centres = env.rand(n, 2) * 8 + 4
    radii = env.rand(n) * 2 + 2.5
    dist2 = (yy - centres[:, 0, None, None]) ** 2 + (xx - centres[:, 1, None, None]) ** 2
    masks = (dist2 < radii[:, None, None] ** 2).float().unsqueeze(1)
    images = masks * 0.8 + 0.3 * env.randn(n, 1, size, size)

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                             nn.GroupNorm(2, cout), nn.ReLU(inplace=True))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc1, self.enc2 = block(1, 4), block(4, 8)
            self.pool = nn.MaxPool2d(2)
            self.bottleneck = block(8, 8)
            self.up2 = nn.ConvTranspose2d(8, 8, kernel_size=2, stride=2)
            self.dec2 = block(16, 4)
            self.dec1 = block(8, 4)
            self.head = nn.Conv2d(4, 1, kernel_size=1)

        def forward(self, x):
            e1 = self.enc1(x)
            e2 = self.enc2(self.pool(e1))
            b = self.bottleneck(self.pool(e2))
            d2 = self.dec2(torch.cat([self.up2(b), e2], dim=1))
            up1 = F.interpolate(d2, scale_factor=2, mode="bilinear", align_corners=False)
            d1 = self.dec1(torch.cat([up1, e1], dim=1))
            return self.head(d1)

    def dice_loss(logits, target, eps=1.0):
        probs = torch.sigmoid(logits)
        inter = (probs * target).sum(dim=(1, 2, 3))
        union = probs.sum(dim=(1, 2, 3)) + target.sum(dim=(1, 2, 3))
        return 1 - ((2 * inter + eps) / (union + eps)).mean()

    model = UNet()
    bce = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(xb, mb):
        optimizer.zero_grad()
        logits = model(xb)
        loss = bce(logits, mb) + dice_loss(logits, mb)
        loss.backward()
        optimizer.step()
        return loss.item()

    step = env.step(train_step)
    for epoch in range(3):
        for s in range(0, 8, 4):
            env.rec(f"e{epoch} s{s}", step(images[s:s + 4], masks[s:s + 4]))
    model.eval()
    with torch.no_grad():
        pred = (torch.sigmoid(model(images[8:])) > 0.5).float()
        inter = (pred * masks[8:]).sum()
        iou = inter / ((pred + masks[8:]).clamp(max=1).sum())
    env.rec("iou", iou)
    env.rec("params", dict(model.state_dict()))


def mixup_label_smoothing(torch, env):
    nn = torch.nn
    torch.manual_seed(13)
    X, y = _blobs(env, 36, 10, 5, spread=1.0)
    model = nn.Sequential(nn.Linear(10, 32), nn.GELU(), nn.Dropout(0.1), nn.Linear(32, 5))
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=3)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=6, eta_min=1e-3)
    scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup, cosine],
                                                      milestones=[3])

    def mixup_data(x, t, lam):
        index = torch.randperm(x.size(0))
        return lam * x + (1 - lam) * x[index], t, t[index]

    def train_step(xb, yb, lam):
        model.train()
        mixed, ya, yb2 = mixup_data(xb, yb, lam)
        out = model(mixed)
        loss = lam * criterion(out, ya) + (1 - lam) * criterion(out, yb2)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        # (the soft-target form of the same loss, logged)
        soft = lam * nn.functional.one_hot(ya, 5).float() + \
            (1 - lam) * nn.functional.one_hot(yb2, 5).float()
        soft_loss = nn.functional.cross_entropy(out.detach(), soft, label_smoothing=0.1)
        return loss.item(), soft_loss.item()

    step = env.step(train_step)
    for epoch in range(9):
        lam = float(env.np.beta(0.4, 0.4))
        env.rec(f"e{epoch}", (step(X[:12], y[:12], lam), scheduler.get_last_lr()))
        env.rec(f"e{epoch} b", step(X[12:24], y[12:24], lam))
        scheduler.step()
    model.eval()
    with torch.no_grad():
        out = model(X[24:])
        acc = (out.argmax(1) == y[24:]).float().mean()
    env.rec("val", (acc, criterion(out, y[24:])))
    env.rec("params", dict(model.state_dict()))


def focal_loss_warmup(torch, env):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(14)
    k = 3
    X, y = _blobs(env, 60, 6, k, spread=1.2)
    y = torch.where(env.rand(60) < 0.7, torch.zeros_like(y), y)   # (class 0 dominates)

    class FocalLoss(nn.Module):
        def __init__(self, alpha, gamma=2.0):
            super().__init__()
            self.gamma = gamma
            self.register_buffer("alpha", alpha)

        def forward(self, logits, target):
            logp = F.log_softmax(logits, dim=1)
            logpt = logp.gather(1, target.unsqueeze(1)).squeeze(1)
            pt = logpt.exp()
            at = self.alpha[target]
            return (-at * (1 - pt) ** self.gamma * logpt).mean()

    counts = torch.bincount(y, minlength=k).float()
    criterion = FocalLoss(alpha=(1.0 / counts) / (1.0 / counts).sum())
    model = nn.Sequential(nn.Linear(6, 24), nn.SiLU(), nn.Linear(24, k))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.02, weight_decay=0.01)
    warmup_steps = 4
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lr_lambda=lambda s: min(1.0, (s + 1) / warmup_steps) * 0.9 ** max(0, s - 4))

    def train_step(xb, yb):
        optimizer.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        optimizer.step()
        scheduler.step()
        return loss

    step = env.step(train_step)
    for epoch in range(4):
        for s in range(0, 45, 15):
            env.rec(f"e{epoch} s{s}", (step(X[s:s + 15], y[s:s + 15]),
                                       optimizer.param_groups[0]["lr"]))
    with torch.no_grad():
        pred = model(X[45:]).argmax(1)
    confusion = torch.bincount(y[45:] * k + pred, minlength=k * k).reshape(k, k)
    recall = confusion.diag().float() / confusion.sum(1).clamp(min=1).float()
    env.rec("confusion", (confusion, recall))
    env.rec("params", dict(model.state_dict()))
