"""Tutorial RL and training-recipe programs (see tutorial_harness.py): REINFORCE with a
learned baseline and reward-to-go, conservative Q-learning, advantage-weighted
regression with a tanh-squashed Gaussian, the cross-entropy method over a learned
dynamics model, FixMatch pseudo-labels, gradient centralisation, a LARS optimiser
subclass and a factored (Adafactor-style) optimiser subclass with lazily made state."""


def reinforce_baseline(torch, env):
    """REINFORCE on a batch of recorded episodes: reward-to-go as flip(cumsum(flip(r *
    discount^t))) / discount^t, a value baseline trained with MSE, advantages normalised,
    -(log pi(a|s) * adv.detach()).sum() / n plus an entropy bonus, masked for episodes that
    ended early; actions sampled with Categorical under no_grad before the update."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    policy = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
    value = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = torch.optim.Adam(list(policy.parameters()) + list(value.parameters()), lr=1e-2)
    B, T, gamma = 5, 6, 0.9
    disc = gamma ** torch.arange(T, dtype=torch.float32)

    def rollout(obs):
        with torch.no_grad():
            dist = torch.distributions.Categorical(logits=policy(obs))
            return dist.sample()

    def train_step(obs, actions, rewards, mask):
        dist = torch.distributions.Categorical(logits=policy(obs))
        logp = dist.log_prob(actions)
        rtg = torch.flip(torch.cumsum(torch.flip(rewards * disc * mask, [1]), 1), [1]) / disc
        v = value(obs).squeeze(-1)
        adv = (rtg - v).detach()
        adv = (adv - adv[mask.bool()].mean()) / (adv[mask.bool()].std() + 1e-8)
        n = mask.sum()
        pg = -(logp * adv * mask).sum() / n
        ent = (dist.entropy() * mask).sum() / n
        v_loss = ((v - rtg) ** 2 * mask).sum() / n
        loss = pg - 0.01 * ent + 0.5 * v_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, rtg

    step = env.step(train_step)
    hist = []
    for it in range(4):
        obs = torch.randn(B, T, 4)
        actions = rollout(obs)
        rewards = (actions == (obs[..., 0] > 0).long() * 2).float()
        lengths = torch.randint(3, T + 1, (B,))
        mask = (torch.arange(T)[None] < lengths[:, None]).float()
        loss, rtg = step(obs, actions, rewards, mask)
        hist.append(loss.item())
    env.rec("hist", hist)
    env.rec("rtg", rtg)
    env.rec("params", list(policy.parameters()) + list(value.parameters()))


def cql_conservative_q(torch, env):
    """Offline conservative Q-learning (discrete CQL): the double-DQN target with a target
    network (gather of argmax actions), SmoothL1 TD loss, the CQL regulariser
    logsumexp(Q(s, .)) - Q(s, a_data), a Polyak update of the target with lerp_ under
    no_grad inside the step, clip_grad_norm_."""
    nn, F = torch.nn, torch.nn.functional
    import copy
    torch.manual_seed(0)
    q = nn.Sequential(nn.Linear(5, 24), nn.ReLU(), nn.Linear(24, 4))
    q_target = copy.deepcopy(q)
    for p in q_target.parameters():
        p.requires_grad = False
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    N = 32
    s, s2 = torch.randn(N, 5), torch.randn(N, 5)
    a, r = torch.randint(0, 4, (N,)), torch.randn(N)
    done = (torch.rand(N) < 0.2).float()

    def train_step(s, a, r, s2, done, alpha, tau):
        with torch.no_grad():
            a2 = q(s2).argmax(1, keepdim=True)
            target = r + 0.99 * (1 - done) * q_target(s2).gather(1, a2).squeeze(1)
        qs = q(s)
        q_sa = qs.gather(1, a.unsqueeze(1)).squeeze(1)
        td = F.smooth_l1_loss(q_sa, target)
        cql = (torch.logsumexp(qs, 1) - q_sa).mean()
        loss = td + alpha * cql
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(q.parameters(), 10.0)
        opt.step()
        with torch.no_grad():
            for p, pt in zip(q.parameters(), q_target.parameters()):
                pt.lerp_(p, tau)
        return td.detach(), cql.detach()

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        td, cql = step(s, a, r, s2, done, 0.5, 0.05)
        hist.append((td.item(), cql.item()))
    env.rec("hist", hist)
    env.rec("params", list(q.parameters()) + list(q_target.parameters()))


def awr_tanh_gaussian(torch, env):
    """Advantage-weighted regression / IQL-style policy extraction: a squashed Gaussian
    policy as TransformedDistribution(Normal, TanhTransform(cache_size=1)), the dataset's
    actions clamped inside (-1, 1) before log_prob, weights exp(adv / beta) clamped at 100,
    the log-std clamped with a tanh rescale; Adam with a CosineAnnealingLR."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    torch.manual_seed(0)

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(3, 32), nn.ReLU())
            self.mu, self.log_std = nn.Linear(32, 2), nn.Linear(32, 2)

        def forward(self, s):
            h = self.body(s)
            log_std = -5 + 0.5 * (2 + 5) * (torch.tanh(self.log_std(h)) + 1)
            base = D.Normal(self.mu(h), log_std.exp())
            return D.TransformedDistribution(base, [D.TanhTransform(cache_size=1)])

    actor = Actor()
    opt = torch.optim.Adam(actor.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5)
    s, a = torch.randn(24, 3), torch.rand(24, 2) * 2 - 1
    adv = torch.randn(24)

    def train_step(s, a, adv, beta):
        w = torch.exp(adv / beta).clamp(max=100.0)
        logp = actor(s).log_prob(a.clamp(-1 + 1e-5, 1 - 1e-5)).sum(-1)
        loss = -(w * logp).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        hist.append(step(s, a, adv, 3.0).item())
        sched.step()
    env.rec("hist", hist)
    env.rec("params", list(actor.parameters()))


def cem_model_planning(torch, env):
    """Model-based RL with the cross-entropy method: an MLP dynamics model fitted on
    transitions (delta prediction), then planning under no_grad: sample action sequences
    mean + std * noise, clamp, roll the model forward in a Python loop, the cost of each
    sequence, topk elites, the mean and std refitted (std + 1e-3) for 3 iterations."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 32), nn.SiLU(), nn.Linear(32, 2))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    s, a = torch.randn(40, 2), torch.rand(40, 1) * 2 - 1
    s2 = s + 0.1 * torch.cat([s[:, 1:], a - 0.1 * s[:, :1]], 1)

    def fit_step(s, a, s2):
        loss = F.mse_loss(model(torch.cat([s, a], 1)), s2 - s)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    @torch.no_grad()
    def plan(s0, goal, mean, std, noise):
        for it in range(3):
            acts = (mean + std * noise[it]).clamp(-1, 1)          # (P, H, 1)
            st = s0.expand(acts.shape[0], -1)
            cost = torch.zeros(acts.shape[0])
            for t in range(acts.shape[1]):
                st = st + model(torch.cat([st, acts[:, t]], 1))
                cost = cost + (st - goal).pow(2).sum(1)
            elite = acts[cost.topk(5, largest=False).indices]
            mean, std = elite.mean(0), elite.std(0) + 1e-3
        return mean, cost.min()

    fit, planner = env.step(fit_step), env.step(plan)
    env.rec("fit", [fit(s, a, s2).item() for _ in range(5)])
    mean, std = torch.zeros(4, 1), torch.ones(4, 1)
    res = [planner(torch.zeros(1, 2), torch.tensor([0.3, -0.2]), mean, std,
                   torch.randn(3, 20, 4, 1)) for _ in range(2)]
    env.rec("plan", res)


def fixmatch_pseudo_labels(torch, env):
    """FixMatch: weakly augmented unlabeled inputs give pseudo-labels (softmax max >=
    threshold as a float mask, argmax under no_grad), the strongly augmented ones are
    trained toward them with cross_entropy(reduction="none") * mask; the labeled and
    unlabeled batches interleaved through one forward (torch.cat then split); the mask
    rate as a metric."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Dropout(0.0), nn.Linear(32, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    xl, yl = torch.randn(8, 6), torch.randint(0, 3, (8,))
    xu = torch.randn(24, 6) * 2

    def train_step(xl, yl, xu_weak, xu_strong, threshold):
        logits = model(torch.cat([xl, xu_weak, xu_strong]))
        l_x, l_w, l_s = logits.split([xl.shape[0], xu_weak.shape[0], xu_strong.shape[0]])
        sup = F.cross_entropy(l_x, yl)
        probs = torch.softmax(l_w.detach(), -1)
        conf, pseudo = probs.max(-1)
        mask = conf.ge(threshold).float()
        unsup = (F.cross_entropy(l_s, pseudo, reduction="none") * mask).mean()
        loss = sup + unsup
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, mask.mean()

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        weak = xu + 0.05 * torch.randn(24, 6)
        strong = xu * (torch.rand(24, 6) > 0.3).float() + 0.5 * torch.randn(24, 6)
        loss, rate = step(xl, yl, weak, strong, 0.6)
        hist.append((loss.item(), rate.item()))
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))


def gradient_centralization(torch, env):
    """Gradient centralisation (Yong et al.): after backward, for every weight with more
    than one dimension, p.grad.sub_(p.grad.mean(dim=tuple(range(1, p.dim())), keepdim=True))
    in place, then AdamW; a conv net so 4-d weights are centralised over (1, 2, 3)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 6, 3), nn.ReLU(), nn.Conv2d(6, 4, 3), nn.ReLU(),
                          nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    x, y = torch.randn(6, 2, 8, 8), torch.randint(0, 3, (6,))

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        for p in model.parameters():
            if p.grad is not None and p.dim() > 1:
                p.grad.sub_(p.grad.mean(dim=tuple(range(1, p.dim())), keepdim=True))
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(4)])
    env.rec("grads", [p.grad for p in model.parameters()])
    env.rec("params", list(model.parameters()))


def lars_optimizer(torch, env):
    """A LARS optimiser written as a torch.optim.Optimizer subclass (the SimCLR / BYOL
    recipe): per parameter trust ratio eta * ||w|| / (||g|| + wd ||w||) with torch.where
    guarding zero norms, biases and norms excluded by a param-group flag, momentum buffers
    made lazily in self.state[p] on the first step."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class LARS(torch.optim.Optimizer):
        def __init__(self, params, lr, momentum=0.9, weight_decay=1e-4, eta=1e-3):
            super().__init__(params, dict(lr=lr, momentum=momentum,
                                          weight_decay=weight_decay, eta=eta, lars=True))

        @torch.no_grad()
        def step(self):
            for g in self.param_groups:
                for p in g["params"]:
                    if p.grad is None:
                        continue
                    dp = p.grad
                    if g["lars"]:
                        dp = dp.add(p, alpha=g["weight_decay"])
                        pn, un = torch.norm(p), torch.norm(dp)
                        q = torch.where(pn > 0.0, torch.where(un > 0, g["eta"] * pn / un,
                                                              torch.ones_like(pn)),
                                        torch.ones_like(pn))
                        dp = dp.mul(q)
                    st = self.state[p]
                    if "mu" not in st:
                        st["mu"] = torch.zeros_like(p)
                    mu = st["mu"]
                    mu.mul_(g["momentum"]).add_(dp)
                    p.add_(mu, alpha=-g["lr"])

    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
    decay = [p for n, p in model.named_parameters() if p.dim() > 1]
    no_decay = [p for n, p in model.named_parameters() if p.dim() == 1]
    opt = LARS([{"params": decay}, {"params": no_decay, "lars": False, "weight_decay": 0.0}],
               lr=0.5)
    x, y = torch.randn(16, 8), torch.randint(0, 4, (16,))

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(5)])
    env.rec("params", list(model.parameters()))
    env.rec("mu", [opt.state[p]["mu"] for p in model.parameters()])


def factored_optimizer(torch, env):
    """A factored second-moment optimiser (Adafactor's core, written as a subclass): for
    2-d parameters row and column EMAs of grad^2 + eps (mean over each axis), the
    estimate outer(row, col) / row.mean(), for 1-d ones a full EMA; the step count kept in
    state as a Python int, the decay 1 - step ** -0.8 from it, update clipping by RMS."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Factored(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-2, eps=1e-30, clip=1.0):
            super().__init__(params, dict(lr=lr, eps=eps, clip=clip))

        @torch.no_grad()
        def step(self):
            for g in self.param_groups:
                for p in g["params"]:
                    st = self.state[p]
                    if not st:
                        st["step"] = 0
                        if p.dim() == 2:
                            st["row"] = torch.zeros(p.shape[0])
                            st["col"] = torch.zeros(p.shape[1])
                        else:
                            st["v"] = torch.zeros_like(p)
                    st["step"] += 1
                    beta = 1.0 - st["step"] ** -0.8
                    g2 = p.grad.pow(2) + g["eps"]
                    if p.dim() == 2:
                        st["row"].mul_(beta).add_(g2.mean(1), alpha=1 - beta)
                        st["col"].mul_(beta).add_(g2.mean(0), alpha=1 - beta)
                        v = torch.outer(st["row"], st["col"]) / st["row"].mean()
                    else:
                        st["v"].mul_(beta).add_(g2, alpha=1 - beta)
                        v = st["v"]
                    u = p.grad * v.rsqrt()
                    u.div_((u.pow(2).mean().sqrt() / g["clip"]).clamp(min=1.0))
                    p.sub_(u, alpha=g["lr"])

    model = nn.Sequential(nn.Linear(6, 12), nn.GELU(), nn.Linear(12, 2))
    opt = Factored(model.parameters())
    x, y = torch.randn(20, 6), torch.randn(20, 2)

    def train_step(x, y):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(5)])
    env.rec("params", list(model.parameters()))
    env.rec("steps", [opt.state[p]["step"] for p in model.parameters()])
