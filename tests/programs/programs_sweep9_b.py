"""Tutorial programs on generative models, detection losses and reinforcement learning,
written as blog posts write them (seeded with torch.manual_seed, modules built by their
constructors; see tutorial_harness.py): pix2pix with a PatchGAN discriminator, a
contractive autoencoder (a Jacobian penalty by autograd.grad with create_graph), RetinaNet's
sigmoid focal loss with smooth-L1 box regression on the positive anchors, PPO with a Beta
policy for bounded actions, AdaIN style statistics, TD3 with delayed policy updates."""
import copy
import math


def pix2pix_patchgan(torch, env):
    """pix2pix: a small U-Net-ish generator (Conv2d stride 2, InstanceNorm2d,
    ConvTranspose2d, skip by cat, Tanh) and a PatchGAN discriminator on (input, output)
    pairs; BCEWithLogits on patches plus lambda * L1; Adam(betas=(0.5, 0.999)) for both;
    the discriminator step sees fake.detach(). (No bias before an InstanceNorm, as pix2pix:
    its gradient is rounding noise that Adam would amplify.)"""
    nn = torch.nn
    torch.manual_seed(0)

    class Gen(nn.Module):
        def __init__(self):
            super().__init__()
            self.down = nn.Sequential(nn.Conv2d(3, 8, 4, 2, 1), nn.LeakyReLU(0.2))
            self.mid = nn.Sequential(nn.Conv2d(8, 16, 4, 2, 1, bias=False), nn.InstanceNorm2d(16),
                                     nn.ReLU())
            self.up1 = nn.Sequential(nn.ConvTranspose2d(16, 8, 4, 2, 1, bias=False),
                                     nn.InstanceNorm2d(8), nn.ReLU())
            self.up2 = nn.Sequential(nn.ConvTranspose2d(16, 3, 4, 2, 1), nn.Tanh())

        def forward(self, x):
            d = self.down(x)
            u = self.up1(self.mid(d))
            return self.up2(torch.cat([u, d], dim=1))

    class PatchD(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(
                nn.Conv2d(6, 8, 4, 2, 1), nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(8, 16, 4, 1, 1, bias=False), nn.InstanceNorm2d(16, affine=True),
                nn.LeakyReLU(0.2, inplace=True), nn.Conv2d(16, 1, 3, 1, 1))

        def forward(self, a, b):
            return self.net(torch.cat([a, b], 1))

    G, D = Gen(), PatchD()
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce, l1 = nn.BCEWithLogitsLoss(), nn.L1Loss()
    src, tgt = torch.rand(2, 3, 8, 8) * 2 - 1, torch.rand(2, 3, 8, 8) * 2 - 1

    def train_step(src, tgt):
        fake = G(src)
        opt_d.zero_grad()
        real_logit = D(src, tgt)
        fake_logit = D(src, fake.detach())
        loss_d = 0.5 * (bce(real_logit, torch.ones_like(real_logit))
                        + bce(fake_logit, torch.zeros_like(fake_logit)))
        loss_d.backward()
        opt_d.step()
        opt_g.zero_grad()
        logit = D(src, fake)
        loss_g = bce(logit, torch.ones_like(logit)) + 100.0 * l1(fake, tgt)
        loss_g.backward()
        opt_g.step()
        return loss_d.item(), loss_g.item()

    step = env.step(train_step)
    env.rec("hist", [step(src, tgt) for _ in range(4)])
    env.rec("G", list(G.parameters()))
    env.rec("D", list(D.parameters()))


def contractive_autoencoder(torch, env):
    """A contractive autoencoder: the penalty is the squared Frobenius norm of the
    encoder's Jacobian, taken with torch.autograd.grad(create_graph=True) of each code unit
    (a Python loop) inside the training step, then backward through it."""
    nn = torch.nn
    torch.manual_seed(0)
    enc = nn.Sequential(nn.Linear(6, 4), nn.Sigmoid())
    dec = nn.Linear(4, 6)
    opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=0.01)
    x = torch.rand(10, 6)

    def train_step(x, lam):
        opt.zero_grad()
        x = x.clone().requires_grad_(True)
        h = enc(x)
        recon = dec(h)
        jac_sq = 0.0
        for j in range(h.shape[1]):
            (g,) = torch.autograd.grad(h[:, j].sum(), x, create_graph=True)
            jac_sq = jac_sq + g.pow(2).sum()
        loss = nn.functional.mse_loss(recon, x.detach()) + lam * jac_sq / x.shape[0]
        loss.backward()
        opt.step()
        return loss.item(), float(jac_sq)

    step = env.step(train_step)
    env.rec("hist", [step(x, 1e-2) for _ in range(5)])
    env.rec("params", list(enc.parameters()) + list(dec.parameters()))


def retinanet_focal_loss(torch, env):
    """RetinaNet's losses as torchvision.ops.sigmoid_focal_loss writes them: one-hot targets
    by scatter_, p_t and alpha_t, the sum normalised by the number of positive anchors;
    smooth-L1 box regression over positive anchors only (boolean mask selection, a count
    that changes between batches)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    A, C = 12, 4       # anchors, classes

    def sigmoid_focal_loss(inputs, targets, alpha=0.25, gamma=2.0, reduction="sum"):
        p = torch.sigmoid(inputs)
        ce_loss = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
        p_t = p * targets + (1 - p) * (1 - targets)
        loss = ce_loss * ((1 - p_t) ** gamma)
        if alpha >= 0:
            alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
            loss = alpha_t * loss
        return loss.sum() if reduction == "sum" else loss.mean()

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(nn.Conv1d(5, 8, 3, padding=1), nn.ReLU())
            self.cls = nn.Conv1d(8, C, 1)
            self.box = nn.Conv1d(8, 4, 1)
            nn.init.constant_(self.cls.bias, -math.log((1 - 0.01) / 0.01))

        def forward(self, x):
            h = self.trunk(x)
            return self.cls(h).transpose(1, 2), self.box(h).transpose(1, 2)

    model = Head()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    batches = []
    for i in range(3):
        x = torch.randn(2, 5, A)
        labels = torch.randint(-1, C, (2, A))           # -1: background
        boxes = torch.randn(2, A, 4)
        batches.append((x, labels, boxes))

    def train_step(x, labels, boxes):
        opt.zero_grad()
        cls_out, box_out = model(x)
        pos = labels >= 0
        num_pos = pos.sum().clamp(min=1)
        onehot = torch.zeros_like(cls_out)
        onehot.scatter_(2, labels.clamp(min=0).unsqueeze(-1), 1.0)
        onehot = onehot * pos.unsqueeze(-1)
        loss_cls = sigmoid_focal_loss(cls_out, onehot) / num_pos
        loss_box = F.smooth_l1_loss(box_out[pos], boxes[pos], beta=1 / 9,
                                    reduction="sum") / num_pos
        loss = loss_cls + loss_box
        loss.backward()
        opt.step()
        return loss_cls.item(), loss_box.item(), int(num_pos)

    step = env.step(train_step)
    env.rec("hist", [step(*batches[i % 3]) for i in range(6)])
    env.rec("params", list(model.parameters()))


def ppo_beta_policy(torch, env):
    """PPO for a bounded action space with a Beta policy (softplus(.) + 1 concentrations):
    log_prob of the stored actions, the clipped surrogate, the entropy bonus, a value
    loss; GAE advantages by a reversed Python loop; several epochs over minibatches."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    torch.manual_seed(0)

    class ActorCritic(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 16), nn.Tanh())
            self.alpha = nn.Linear(16, 2)
            self.beta = nn.Linear(16, 2)
            self.v = nn.Linear(16, 1)

        def forward(self, s):
            h = self.body(s)
            a = F.softplus(self.alpha(h)) + 1.0
            b = F.softplus(self.beta(h)) + 1.0
            return D.Beta(a, b), self.v(h).squeeze(-1)

    ac = ActorCritic()
    opt = torch.optim.Adam(ac.parameters(), lr=3e-4, eps=1e-5)
    T = 8
    states = torch.randn(T, 4)
    actions = torch.rand(T, 2) * 0.98 + 0.01
    rewards = torch.randn(T).tolist()
    with torch.no_grad():
        dist, values = ac(states)
        old_logp = dist.log_prob(actions).sum(-1)
    vals = values.tolist() + [0.0]
    adv, gae = [0.0] * T, 0.0
    for t in reversed(range(T)):
        delta = rewards[t] + 0.99 * vals[t + 1] - vals[t]
        gae = delta + 0.99 * 0.95 * gae
        adv[t] = gae
    adv = torch.tensor(adv)
    returns = adv + values
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)

    def update(s, a, old_lp, adv, ret):
        dist, v = ac(s)
        logp = dist.log_prob(a).sum(-1)
        ratio = torch.exp(logp - old_lp)
        surr = torch.min(ratio * adv, torch.clamp(ratio, 0.8, 1.2) * adv)
        loss = -surr.mean() + 0.5 * F.mse_loss(v, ret) - 0.01 * dist.entropy().sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(ac.parameters(), 0.5)
        opt.step()
        return loss.item()

    step = env.step(update)
    hist = []
    for epoch in range(3):
        for idx in ([0, 2, 4, 6], [1, 3, 5, 7]):
            i = torch.tensor(idx)
            hist.append(step(states[i], actions[i], old_logp[i], adv[i], returns[i]))
    env.rec("hist", hist)
    env.rec("params", list(ac.parameters()))


def adain_style(torch, env):
    """Adaptive instance normalisation (Huang & Belongie): content features re-normalised
    to the style features' per-channel mean and std (var over H, W with a small eps); a
    decoder trained with a content loss to the AdaIN target and a style loss on the
    feature statistics of the decoded image through a frozen encoder."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    def calc_mean_std(feat, eps=1e-5):
        N, C = feat.size()[:2]
        feat_var = feat.view(N, C, -1).var(dim=2) + eps
        feat_std = feat_var.sqrt().view(N, C, 1, 1)
        feat_mean = feat.view(N, C, -1).mean(dim=2).view(N, C, 1, 1)
        return feat_mean, feat_std

    def adain(content, style):
        size = content.size()
        s_mean, s_std = calc_mean_std(style)
        c_mean, c_std = calc_mean_std(content)
        normalized = (content - c_mean.expand(size)) / c_std.expand(size)
        return normalized * s_std.expand(size) + s_mean.expand(size)

    encoder = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(),
                            nn.Conv2d(6, 8, 3, padding=1, stride=2), nn.ReLU())
    for p in encoder.parameters():
        p.requires_grad = False
    decoder = nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"),
                            nn.ReflectionPad2d(1), nn.Conv2d(8, 3, 3))
    opt = torch.optim.Adam(decoder.parameters(), lr=1e-3)
    content, style = torch.rand(2, 3, 8, 8), torch.rand(2, 3, 8, 8)

    def train_step(content, style):
        with torch.no_grad():
            c_feat, s_feat = encoder(content), encoder(style)
        t = adain(c_feat, s_feat)
        out = decoder(t)
        o_feat = encoder(out)
        loss_c = F.mse_loss(o_feat, t)
        o_mean, o_std = calc_mean_std(o_feat)
        s_mean, s_std = calc_mean_std(s_feat)
        loss_s = F.mse_loss(o_mean, s_mean) + F.mse_loss(o_std, s_std)
        loss = loss_c + 10.0 * loss_s
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss_c.item(), loss_s.item()

    step = env.step(train_step)
    env.rec("hist", [step(content, style) for _ in range(4)])
    env.rec("decoder", list(decoder.parameters()))
    env.rec("encoder grads", [p.grad for p in encoder.parameters()])


def td3_delayed_policy(torch, env):
    """TD3: twin critics, the target policy smoothed with clamped noise, the minimum of the
    target critics, the actor and the targets (Polyak, mul_/add_ under no_grad) updated every
    second call only (the step's code path alternates between calls)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    sd, ad = 3, 2

    def mlp(i, o, out_act=None):
        layers = [nn.Linear(i, 16), nn.ReLU(), nn.Linear(16, o)]
        return nn.Sequential(*(layers + ([out_act] if out_act else [])))

    actor = mlp(sd, ad, nn.Tanh())
    q1, q2 = mlp(sd + ad, 1), mlp(sd + ad, 1)
    actor_t, q1_t, q2_t = copy.deepcopy(actor), copy.deepcopy(q1), copy.deepcopy(q2)
    a_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
    c_opt = torch.optim.Adam(list(q1.parameters()) + list(q2.parameters()), lr=1e-3)
    s, a, r = torch.randn(6, sd), torch.rand(6, ad) * 2 - 1, torch.randn(6, 1)
    s2, done = torch.randn(6, sd), (torch.rand(6, 1) < 0.2).float()
    tau = 0.05

    def train_step(s, a, r, s2, done, it):
        with torch.no_grad():
            noise = (torch.randn_like(a) * 0.2).clamp(-0.5, 0.5)
            a2 = (actor_t(s2) + noise).clamp(-1.0, 1.0)
            sa2 = torch.cat([s2, a2], 1)
            target = r + 0.99 * (1 - done) * torch.min(q1_t(sa2), q2_t(sa2))
        sa = torch.cat([s, a], 1)
        c_loss = F.mse_loss(q1(sa), target) + F.mse_loss(q2(sa), target)
        c_opt.zero_grad()
        c_loss.backward()
        c_opt.step()
        a_loss = None
        if it % 2 == 0:
            a_loss = -q1(torch.cat([s, actor(s)], 1)).mean()
            a_opt.zero_grad()
            a_loss.backward()
            a_opt.step()
            with torch.no_grad():
                for net, tgt in ((actor, actor_t), (q1, q1_t), (q2, q2_t)):
                    for p, tp in zip(net.parameters(), tgt.parameters()):
                        tp.mul_(1 - tau).add_(tau * p)
            a_loss = a_loss.item()
        return c_loss.item(), a_loss

    step = env.step(train_step)
    env.rec("hist", [step(s, a, r, s2, done, it) for it in range(6)])
    env.rec("actor_t", list(actor_t.parameters()))
    env.rec("q1", list(q1.parameters()))
