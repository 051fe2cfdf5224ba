"""Programs of common kinds: soft actor-critic (a tanh-squashed Normal policy with
rsample-style noise, twin critics, Polyak-averaged targets, a learned temperature); Reptile
meta-learning (parameters_to_vector / vector_to_parameters); continual learning with elastic
weight consolidation (a diagonal Fisher from squared gradients); domain-adversarial training
with a gradient-reversal autograd.Function. Programs `f(torch, env)`, see
tutorial_harness.py."""
import copy
import math
import random
from collections import deque


def soft_actor_critic(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    Normal = torch.distributions.Normal
    gamma, tau, batch_size, obs_dim, act_dim = 0.95, 0.1, 16, 2, 1

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(obs_dim, 32), nn.ReLU())
            self.mu = nn.Linear(32, act_dim)
            self.log_std = nn.Linear(32, act_dim)

        def forward(self, obs, eps):
            h = self.net(obs)
            mu, log_std = self.mu(h), self.log_std(h).clamp(-5, 2)
            std = log_std.exp()
            pre_tanh = mu + std * eps          # rsample with the program's own noise
            action = torch.tanh(pre_tanh)
            log_prob = Normal(mu, std).log_prob(pre_tanh)
            log_prob = log_prob - torch.log(1 - action.pow(2) + 1e-6)
            return action, log_prob.sum(-1, keepdim=True)

    class TwinQ(nn.Module):
        def __init__(self):
            super().__init__()
            self.q1 = nn.Sequential(nn.Linear(obs_dim + act_dim, 32), nn.ReLU(),
                                    nn.Linear(32, 1))
            self.q2 = nn.Sequential(nn.Linear(obs_dim + act_dim, 32), nn.ReLU(),
                                    nn.Linear(32, 1))

        def forward(self, obs, act):
            x = torch.cat([obs, act], dim=-1)
            return self.q1(x), self.q2(x)

    actor, critic = env.init(Actor()), env.init(TwinQ())
    critic_target = copy.deepcopy(critic)
    for p in critic_target.parameters():
        p.requires_grad = False
    log_alpha = torch.zeros(1, requires_grad=True)
    target_entropy = -float(act_dim)
    actor_opt = optim.Adam(actor.parameters(), lr=3e-3)
    critic_opt = optim.Adam(critic.parameters(), lr=3e-3)
    alpha_opt = optim.Adam([log_alpha], lr=3e-3)

    def update(obs, act, rew, next_obs, done, eps_next, eps_pi):
        alpha = log_alpha.exp().detach()
        with torch.no_grad():
            next_act, next_logp = actor(next_obs, eps_next)
            q1_t, q2_t = critic_target(next_obs, next_act)
            target = rew + gamma * (1 - done) * (torch.min(q1_t, q2_t) - alpha * next_logp)
        q1, q2 = critic(obs, act)
        critic_loss = F.mse_loss(q1, target) + F.mse_loss(q2, target)
        critic_opt.zero_grad()
        critic_loss.backward()
        critic_opt.step()

        for p in critic.parameters():
            p.requires_grad_(False)
        pi, logp = actor(obs, eps_pi)
        q_pi = torch.min(*critic(obs, pi))
        actor_loss = (alpha * logp - q_pi).mean()
        actor_opt.zero_grad()
        actor_loss.backward()
        actor_opt.step()
        for p in critic.parameters():
            p.requires_grad_(True)

        alpha_loss = -(log_alpha * (logp.detach() + target_entropy)).mean()
        alpha_opt.zero_grad()
        alpha_loss.backward()
        alpha_opt.step()

        with torch.no_grad():
            for p, p_t in zip(critic.parameters(), critic_target.parameters()):
                p_t.mul_(1 - tau)
                p_t.add_(tau * p)
        return critic_loss.item(), actor_loss.item(), alpha.item()

    update = env.step(update)
    rng = random.Random(0)
    buffer = deque(maxlen=64)
    obs = torch.tensor([0.5, -0.3])
    for t in range(40):
        with torch.no_grad():
            act, _ = actor(obs[None], env.randn(1, act_dim))
        act = act[0]
        next_obs = (obs + 0.2 * torch.cat([act, -act])).clamp(-1, 1)
        rew = -(next_obs.pow(2).sum())
        done = float(t % 10 == 9)
        buffer.append((obs, act, rew.reshape(1), next_obs, torch.tensor([done])))
        obs = torch.tensor([0.5, -0.3]) if done else next_obs
        if len(buffer) >= batch_size and t % 4 == 3:
            batch = [torch.stack(x) for x in zip(*rng.sample(list(buffer), batch_size))]
            env.rec(f"update {t}", update(*batch, env.randn(batch_size, act_dim),
                                         env.randn(batch_size, act_dim)))
    env.rec("log_alpha", log_alpha)
    env.rec("target", critic_target.state_dict())
    env.rec("actor", actor.state_dict())


def reptile(torch, env):
    nn, F = torch.nn, torch.nn.functional
    from_vec = torch.nn.utils.vector_to_parameters
    to_vec = torch.nn.utils.parameters_to_vector
    inner_steps, inner_lr, outer_lr = 4, 0.02, 0.5

    model = env.init(nn.Sequential(nn.Linear(1, 24), nn.Tanh(), nn.Linear(24, 24), nn.Tanh(),
                                   nn.Linear(24, 1)))
    inner_opt = torch.optim.SGD(model.parameters(), lr=inner_lr)

    def inner_step(x, y):
        inner_opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        inner_opt.step()
        return loss.detach()

    inner_step = env.step(inner_step)
    x = torch.linspace(-3, 3, 20)[:, None]
    for it in range(5):
        amp, phase = 0.5 + env.rand(1) * 2, env.rand(1) * math.pi
        y = amp * torch.sin(x + phase)
        before = to_vec(model.parameters()).detach().clone()
        losses = [inner_step(x, y) for _ in range(inner_steps)]
        after = to_vec(model.parameters()).detach()
        # outer update: move the initialisation towards the adapted weights
        from_vec(before + outer_lr * (after - before), model.parameters())
        env.rec(f"task {it}", (torch.stack(losses), after.norm()))
    env.rec("meta weights", to_vec(model.parameters()))
    env.rec("n params", to_vec(model.parameters()).numel())


def ewc(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    lam = 50.0

    model = env.init(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2)))
    optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    task_a = (env.randn(32, 4), env.randint(0, 2, (32,)))
    task_b = (env.randn(32, 4) + 1.0, env.randint(0, 2, (32,)))

    def step(x, y, fisher, anchor):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        penalty = torch.tensor(0.0)
        if fisher is not None:
            for n, p in model.named_parameters():
                penalty = penalty + (fisher[n] * (p - anchor[n]).pow(2)).sum()
        total = loss + lam / 2 * penalty
        total.backward()
        optimizer.step()
        return loss.item(), penalty.item()

    step = env.step(step)
    for it in range(5):
        env.rec(f"task a {it}", step(*task_a, None, None))
    # the diagonal Fisher: mean squared per-sample gradients of the log-likelihood
    fisher = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
    x, y = task_a
    for i in range(8):
        model.zero_grad()
        log_probs = F.log_softmax(model(x[i:i + 1]), dim=1)
        log_probs[0, y[i]].backward()
        for n, p in model.named_parameters():
            fisher[n] += p.grad.detach() ** 2 / 8
    anchor = {n: p.detach().clone() for n, p in model.named_parameters()}
    env.rec("fisher", fisher)
    for it in range(5):
        env.rec(f"task b {it}", step(*task_b, fisher, anchor))
    with torch.no_grad():
        acc_a = (model(task_a[0]).argmax(1) == task_a[1]).float().mean()
    env.rec("acc a", acc_a)


def dann(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class GradReverse(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, alpha):
            ctx.alpha = alpha
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output.neg() * ctx.alpha, None

    class DANN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 16),
                                          nn.ReLU())
            self.label_head = nn.Linear(16, 3)
            self.domain_head = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))

        def forward(self, x, alpha):
            f = self.features(x)
            return self.label_head(f), self.domain_head(GradReverse.apply(f, alpha))

    model = env.init(DANN())
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    src_x, src_y = env.randn(24, 6), env.randint(0, 3, (24,))
    tgt_x = env.randn(24, 6) * 1.5 + 0.5

    def train_step(src_x, src_y, tgt_x, alpha):
        optimizer.zero_grad()
        cls_out, src_dom = model(src_x, alpha)
        _, tgt_dom = model(tgt_x, alpha)
        cls_loss = F.cross_entropy(cls_out, src_y)
        dom_logits = torch.cat([src_dom, tgt_dom]).squeeze(1)
        dom_labels = torch.cat([torch.zeros(len(src_dom)), torch.ones(len(tgt_dom))])
        dom_loss = F.binary_cross_entropy_with_logits(dom_logits, dom_labels)
        (cls_loss + dom_loss).backward()
        optimizer.step()
        return cls_loss.item(), dom_loss.item(), cls_out.grad_fn.name()

    train_step = env.step(train_step)
    n_steps = 6
    for it in range(n_steps):
        p = it / n_steps
        alpha = 2.0 / (1.0 + math.exp(-10 * p)) - 1
        env.rec(f"step {it}", train_step(src_x, src_y, tgt_x, alpha))
    f = model.features(src_x).detach().requires_grad_()
    out = GradReverse.apply(f, 0.5)
    out.sum().backward()
    env.rec("reversed grad", (f.grad, out.grad_fn.__class__.__name__))
