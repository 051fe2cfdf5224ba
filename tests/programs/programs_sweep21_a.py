"""Reinforcement-learning programs the other files leave out: C51 distributional DQN (the
categorical projection with floor / ceil and index_add_, a target network synced with
load_state_dict every few steps); random network distillation (a running mean / variance
module whose buffers are updated inside forward); implicit Q-learning (expectile value loss,
twin Q heads, polyak targets with torch.no_grad + lerp_, advantage-weighted regression with
exp().clamp); a decision transformer (return / state / action tokens interleaved by
stack + reshape, a causal mask, per-timestep embeddings); a Dreamer-style RSSM (GRUCell,
Independent(Normal) posteriors and priors, KL balancing with detach and free nats).
Programs `f(torch, env)`, see tutorial_harness.py."""


def c51_dqn(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_atoms, v_min, v_max, n_act, obs = 11, -5.0, 5.0, 3, 6
    support = torch.linspace(v_min, v_max, n_atoms)
    delta_z = (v_max - v_min) / (n_atoms - 1)

    class C51(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(obs, 32), nn.ReLU(), nn.Linear(32, n_act * n_atoms))

        def forward(self, x):
            return F.softmax(self.net(x).view(-1, n_act, n_atoms), dim=-1)

    online = env.init(C51())
    target = env.init(C51())
    target.load_state_dict(online.state_dict())
    opt = torch.optim.Adam(online.parameters(), lr=1e-3)
    gamma = 0.9

    def projection(next_dist, rewards, dones):
        b = rewards.size(0)
        Tz = rewards.unsqueeze(1) + (1 - dones).unsqueeze(1) * gamma * support.unsqueeze(0)
        Tz = Tz.clamp(v_min, v_max)
        bj = (Tz - v_min) / delta_z
        l, u = bj.floor().long(), bj.ceil().long()
        l[(u > 0) * (l == u)] -= 1
        u[(l < (n_atoms - 1)) * (l == u)] += 1
        offset = (torch.arange(b) * n_atoms).unsqueeze(1).expand(b, n_atoms)
        proj = torch.zeros(b * n_atoms)
        proj.index_add_(0, (l + offset).view(-1), (next_dist * (u.float() - bj)).view(-1))
        proj.index_add_(0, (u + offset).view(-1), (next_dist * (bj - l.float())).view(-1))
        return proj.view(b, n_atoms)

    def train_step(s, a, r, s2, d):
        with torch.no_grad():
            next_dist = target(s2)
            next_q = (next_dist * support).sum(-1)
            next_a = next_q.argmax(1)
            next_dist = next_dist[torch.arange(s.size(0)), next_a]
            target_dist = projection(next_dist, r, d)
        dist = online(s)[torch.arange(s.size(0)), a]
        loss = -(target_dist * dist.clamp(min=1e-6).log()).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), target_dist.sum(1)

    step = env.step(train_step)
    s, s2 = env.randn(8, obs), env.randn(8, obs)
    a, r = env.randint(0, n_act, (8,)), env.randn(8, scale=2.0)
    d = (env.rand(8) > 0.7).float()
    for it in range(6):
        env.rec(f"it{it}", step(s, a, r, s2, d))
        if it % 2 == 1:
            target.load_state_dict(online.state_dict())
    env.rec("q", (online(s) * support).sum(-1))


def rnd_exploration(torch, env):
    nn = torch.nn

    class RunningMeanStd(nn.Module):
        def __init__(self, shape, epsilon=1e-4):
            super().__init__()
            self.register_buffer("mean", torch.zeros(shape))
            self.register_buffer("var", torch.ones(shape))
            self.count = epsilon

        def forward(self, x):
            if self.training:
                batch_mean, batch_var, n = x.mean(0), x.var(0, unbiased=False), x.shape[0]
                delta = batch_mean - self.mean
                tot = self.count + n
                self.mean += delta * n / tot
                m2 = self.var * self.count + batch_var * n + delta ** 2 * self.count * n / tot
                self.var.copy_(m2 / tot)
                self.count = tot
            return ((x - self.mean) / torch.sqrt(self.var + 1e-8)).clamp(-5, 5)

    def mlp():
        return nn.Sequential(nn.Linear(5, 16), nn.LeakyReLU(), nn.Linear(16, 8))

    target, predictor = env.init(mlp()), env.init(mlp())
    for p in target.parameters():
        p.requires_grad_(False)
    obs_rms, rew_rms = RunningMeanStd((5,)), RunningMeanStd(())
    opt = torch.optim.Adam(predictor.parameters(), lr=1e-3)

    def train_step(obs):
        o = obs_rms(obs)
        err = (predictor(o) - target(o)).pow(2).mean(-1)
        intrinsic = rew_rms(err.detach())
        opt.zero_grad()
        err.mean().backward()
        opt.step()
        return intrinsic, err.mean()

    step = env.step(train_step)
    for it in range(5):
        obs = env.randn(6, 5, scale=1.0 + it)
        env.rec(f"it{it}", step(obs))
        env.rec(f"count{it}", obs_rms.count)
    env.rec("rms", (obs_rms.mean, obs_rms.var, rew_rms.mean, rew_rms.var))


def iql(torch, env):
    nn, F = torch.nn, torch.nn.functional
    obs, act = 4, 2

    def mlp(i, o):
        return nn.Sequential(nn.Linear(i, 16), nn.ReLU(), nn.Linear(16, o))

    class TwinQ(nn.Module):
        def __init__(self):
            super().__init__()
            self.q1, self.q2 = mlp(obs + act, 1), mlp(obs + act, 1)

        def both(self, s, a):
            sa = torch.cat([s, a], 1)
            return self.q1(sa).squeeze(-1), self.q2(sa).squeeze(-1)

        def forward(self, s, a):
            return torch.min(*self.both(s, a))

    qf = env.init(TwinQ())
    q_target = env.init(TwinQ())
    q_target.load_state_dict(qf.state_dict())
    q_target.requires_grad_(False)
    vf, policy = env.init(mlp(obs, 1)), env.init(mlp(obs, act))
    q_opt = torch.optim.Adam(qf.parameters(), lr=3e-3)
    v_opt = torch.optim.Adam(vf.parameters(), lr=3e-3)
    p_opt = torch.optim.Adam(policy.parameters(), lr=3e-3)
    p_sched = torch.optim.lr_scheduler.CosineAnnealingLR(p_opt, T_max=6)
    tau, beta, discount, alpha = 0.7, 3.0, 0.99, 0.1

    def asymmetric_l2_loss(u, tau):
        return torch.mean(torch.abs(tau - (u < 0).float()) * u ** 2)

    def update(s, a, r, s2, d):
        with torch.no_grad():
            target_q = q_target(s, a)
            next_v = vf(s2).squeeze(-1)
        v = vf(s).squeeze(-1)
        adv = target_q - v
        v_loss = asymmetric_l2_loss(adv, tau)
        v_opt.zero_grad(set_to_none=True)
        v_loss.backward()
        v_opt.step()
        targets = r + (1.0 - d) * discount * next_v
        qs = qf.both(s, a)
        q_loss = sum(F.mse_loss(q, targets) for q in qs) / len(qs)
        q_opt.zero_grad(set_to_none=True)
        q_loss.backward()
        q_opt.step()
        with torch.no_grad():
            for p, tp in zip(qf.parameters(), q_target.parameters()):
                tp.lerp_(p, alpha)
        exp_adv = torch.exp(beta * adv.detach()).clamp(max=100.0)
        bc_losses = torch.sum((policy(s) - a) ** 2, dim=1)
        policy_loss = torch.mean(exp_adv * bc_losses)
        p_opt.zero_grad(set_to_none=True)
        policy_loss.backward()
        p_opt.step()
        p_sched.step()
        return v_loss, q_loss.item(), policy_loss

    step = env.step(update)
    s, a, r, s2 = env.randn(10, obs), env.rand(10, act) * 2 - 1, env.randn(10), env.randn(10, obs)
    d = (env.rand(10) > 0.8).float()
    for it in range(6):
        env.rec(f"it{it}", step(s, a, r, s2, d))
    env.rec("lr", p_sched.get_last_lr())
    env.rec("target", q_target.state_dict())


def decision_transformer(torch, env):
    nn, F = torch.nn, torch.nn.functional
    state_dim, act_dim, h, max_ep_len, K = 3, 2, 16, 20, 4

    class DecisionTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_timestep = nn.Embedding(max_ep_len, h)
            self.embed_return = nn.Linear(1, h)
            self.embed_state = nn.Linear(state_dim, h)
            self.embed_action = nn.Linear(act_dim, h)
            self.embed_ln = nn.LayerNorm(h)
            layer = nn.TransformerEncoderLayer(h, 2, 32, dropout=0.0, batch_first=True)
            self.transformer = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
            self.predict_action = nn.Sequential(nn.Linear(h, act_dim), nn.Tanh())

        def forward(self, states, actions, returns_to_go, timesteps):
            B, T = states.shape[0], states.shape[1]
            time_embeddings = self.embed_timestep(timesteps)
            s = self.embed_state(states) + time_embeddings
            a = self.embed_action(actions) + time_embeddings
            r = self.embed_return(returns_to_go) + time_embeddings
            stacked = torch.stack((r, s, a), dim=1).permute(0, 2, 1, 3).reshape(B, 3 * T, h)
            stacked = self.embed_ln(stacked)
            mask = nn.Transformer.generate_square_subsequent_mask(3 * T)
            x = self.transformer(stacked, mask=mask, is_causal=True)
            x = x.reshape(B, T, 3, h).permute(0, 2, 1, 3)
            return self.predict_action(x[:, 1])

    model = env.init(DecisionTransformer())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda steps: min((steps + 1) / 3, 1))

    def train_step(states, actions, rtg, timesteps):
        action_preds = model(states, actions, rtg, timesteps)
        loss = torch.mean((action_preds - actions) ** 2)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        sched.step()
        return loss.detach().cpu().item()

    step = env.step(train_step)
    states, actions = env.randn(3, K, state_dim), env.rand(3, K, act_dim) * 2 - 1
    rtg = env.randn(3, K, 1)
    timesteps = env.randint(0, max_ep_len - K, (3, 1)) + torch.arange(K)
    for it in range(5):
        env.rec(f"it{it}", step(states, actions, rtg, timesteps))
    model.eval()
    with torch.no_grad():     # (acting: the last action of the context)
        env.rec("act", model(states[:1], actions[:1], rtg[:1], timesteps[:1])[0, -1])


def rssm_world_model(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    obs_dim, act_dim, deter, stoch, T, B = 6, 2, 12, 4, 4, 3

    class RSSM(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.GRUCell(stoch + act_dim, deter)
            self.prior_net = nn.Linear(deter, 2 * stoch)
            self.post_net = nn.Linear(deter + obs_dim, 2 * stoch)
            self.decoder = nn.Linear(deter + stoch, obs_dim)

        @staticmethod
        def dist(stats):
            mean, std = stats.chunk(2, -1)
            std = F.softplus(std) + 0.1
            return D.Independent(D.Normal(mean, std), 1)

        def forward(self, obs, actions, eps):
            h = obs.new_zeros(obs.size(1), deter)
            z = obs.new_zeros(obs.size(1), stoch)
            priors, posts, feats = [], [], []
            for t in range(obs.size(0)):
                h = self.cell(torch.cat([z, actions[t]], -1), h)
                prior_stats = self.prior_net(h)
                post_stats = self.post_net(torch.cat([h, obs[t]], -1))
                post = self.dist(post_stats)
                z = post.mean + post.stddev * eps[t]
                priors.append(prior_stats)
                posts.append(post_stats)
                feats.append(torch.cat([h, z], -1))
            return torch.stack(priors), torch.stack(posts), torch.stack(feats)

    model = env.init(RSSM())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, eps=1e-5)
    free_nats, balance = 1.0, 0.8

    def train_step(obs, actions, eps):
        prior_stats, post_stats, feats = model(obs, actions, eps)
        recon = D.Independent(D.Normal(model.decoder(feats), 1.0), 1)
        recon_loss = -recon.log_prob(obs).mean()
        dist = model.dist
        kl_lhs = D.kl_divergence(dist(post_stats.detach()), dist(prior_stats)).mean()
        kl_rhs = D.kl_divergence(dist(post_stats), dist(prior_stats.detach())).mean()
        kl_lhs, kl_rhs = torch.clamp(kl_lhs, min=free_nats), torch.clamp(kl_rhs, min=free_nats)
        kl = balance * kl_lhs + (1 - balance) * kl_rhs
        loss = recon_loss + kl
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 100.0)
        opt.step()
        return recon_loss.item(), kl.item()

    step = env.step(train_step)
    obs, actions = env.randn(T, B, obs_dim), env.rand(T, B, act_dim)
    for it in range(5):
        env.rec(f"it{it}", step(obs, actions, env.randn(T, B, stoch)))
    env.rec("model", model.state_dict())
