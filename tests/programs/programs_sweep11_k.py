"""Tutorial programs whose compiled step takes scheduled Python numbers (see
tutorial_harness.py): Stable-Baselines3's PPO update with a linearly annealed clip range
for the ratio and the value function and an annealed entropy coefficient, and a curriculum
whose auxiliary-loss weight and warmup switch depend on the progress passed as a float."""


def ppo_clip_range_schedule(torch, env):
    """SB3's PPO train(): clip_range = self.clip_range(progress_remaining) each update (a
    float argument of the step), th.clamp(ratio, 1 - clip_range, 1 + clip_range), the value
    prediction clipped around the rollout values with clamp(-clip_vf, clip_vf), the
    entropy of a Categorical, ent_coef annealed too; clip_grad_norm_ 0.5 and Adam(eps=1e-5)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class ActorCritic(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 16), nn.Tanh())
            self.pi, self.v = nn.Linear(16, 3), nn.Linear(16, 1)

        def forward(self, obs):
            h = self.body(obs)
            return self.pi(h), self.v(h).squeeze(-1)

    model = ActorCritic()
    opt = torch.optim.Adam(model.parameters(), lr=3e-4, eps=1e-5)
    obs, actions = torch.randn(32, 4), torch.randint(0, 3, (32,))
    with torch.no_grad():
        logits, old_values = model(obs)
        old_logp = torch.distributions.Categorical(logits=logits).log_prob(actions)
    returns = old_values + torch.randn(32)
    adv = returns - old_values
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)

    def train_step(obs, actions, old_logp, adv, returns, old_values, clip_range, ent_coef):
        logits, values = model(obs)
        dist = torch.distributions.Categorical(logits=logits)
        ratio = torch.exp(dist.log_prob(actions) - old_logp)
        policy_loss = -torch.min(adv * ratio,
                                 adv * torch.clamp(ratio, 1 - clip_range, 1 + clip_range)).mean()
        values_pred = old_values + torch.clamp(values - old_values, -clip_range, clip_range)
        value_loss = F.mse_loss(returns, values_pred)
        loss = policy_loss + ent_coef * -dist.entropy().mean() + 0.5 * value_loss
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        clip_fraction = ((ratio - 1).abs() > clip_range).float().mean()
        return loss.detach(), clip_fraction

    step = env.step(train_step)
    hist = []
    for k in range(10):
        progress_remaining = 1 - k / 10
        loss, frac = step(obs, actions, old_logp, adv, returns, old_values,
                          0.2 * progress_remaining, 0.01 * progress_remaining)
        hist.append((loss.item(), frac.item()))
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))


def curriculum_progress_float(torch, env):
    """A curriculum step taking progress in [0, 1] as a float: an auxiliary reconstruction
    weight max(0, 1 - 2 * progress) (a Python max on the number), `if progress < 0.3:` a
    warmup that freezes the classifier head's gradient, label smoothing 0.1 only after
    half-way (`0.1 if progress > 0.5 else 0.0`)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    enc = nn.Sequential(nn.Linear(6, 12), nn.ReLU())
    dec, head = nn.Linear(12, 6), nn.Linear(12, 3)
    params = [p for m in (enc, dec, head) for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    x, y = torch.randn(20, 6), torch.randint(0, 3, (20,))

    def train_step(x, y, progress):
        opt.zero_grad()
        h = enc(x)
        smoothing = 0.1 if progress > 0.5 else 0.0
        cls = F.cross_entropy(head(h), y, label_smoothing=smoothing)
        aux = F.mse_loss(dec(h), x)
        loss = cls + max(0.0, 1 - 2 * progress) * aux
        loss.backward()
        if progress < 0.3:
            for p in head.parameters():
                p.grad.zero_()
        opt.step()
        return cls.detach(), aux.detach()

    step = env.step(train_step)
    hist = []
    for k in range(10):
        cls, aux = step(x, y, k / 9)
        hist.append((cls.item(), aux.item()))
    env.rec("hist", hist)
    env.rec("params", params)
