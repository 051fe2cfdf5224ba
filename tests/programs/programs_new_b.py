"""Programs of common kinds: PPO (clipped objective, GAE, entropy bonus, a Categorical
policy, minibatch epochs); a tabular model (categorical embeddings, BatchNorm1d, Dropout,
BCEWithLogitsLoss with pos_weight, ReduceLROnPlateau, precision/recall from torch ops); a
neural ODE fitted through a fixed-step RK4 solver loop (torchdiffeq's ode_demo; the variant
whose ODE function counts its evaluations, as odenet_mnist's does). Programs
`f(torch, env)`, see tutorial_harness.py."""
import numpy as np


class ToyCorridor:
    """Walk left/right on a line of 7 cells from the middle; +1 at the right end, -0.05 a
    step, 10 steps at most."""

    def reset(self):
        self.pos, self.t = 3, 0
        return self._obs()

    def _obs(self):
        obs = np.zeros(7, dtype=np.float32)
        obs[self.pos] = 1.0
        return obs

    def step(self, action):
        self.pos = max(0, min(6, self.pos + (1 if action == 1 else -1)))
        self.t += 1
        done = self.pos == 6 or self.t >= 10
        return self._obs(), (1.0 if self.pos == 6 else -0.05), done


def ppo(torch, env, sample=True):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    Categorical = torch.distributions.Categorical
    gamma, gae_lambda, clip_eps, cross = 0.99, 0.95, 0.2, not sample

    class ActorCritic(nn.Module):
        def __init__(self, obs_dim, n_actions, hidden=32):
            super().__init__()
            self.shared = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh())
            self.actor = nn.Linear(hidden, n_actions)
            self.critic = nn.Linear(hidden, 1)

        def forward(self, x):
            h = self.shared(x)
            return self.actor(h), self.critic(h).squeeze(-1)

    model = env.init(ActorCritic(7, 2))
    optimizer = optim.Adam(model.parameters(), lr=3e-3, eps=1e-5)
    corridor = ToyCorridor()

    def collect(n_steps):
        states, actions, log_probs, values, rewards, dones = [], [], [], [], [], []
        obs = corridor.reset()
        for _ in range(n_steps):
            state = torch.from_numpy(obs)
            with torch.no_grad():
                logits, value = model(state.unsqueeze(0))
            dist = Categorical(logits=logits)
            action = dist.sample() if sample else logits.argmax(-1)
            obs, reward, done = corridor.step(action.item())
            states.append(state)
            actions.append(action)
            log_probs.append(dist.log_prob(action))
            values.append(value)
            rewards.append(reward)
            dones.append(float(done))
            if done:
                obs = corridor.reset()
        with torch.no_grad():
            _, next_value = model(torch.from_numpy(obs).unsqueeze(0))
        return (torch.stack(states), torch.cat(actions), torch.cat(log_probs), torch.cat(values),
                torch.tensor(rewards), torch.tensor(dones), next_value)

    def compute_gae(rewards, values, dones, next_value):
        advantages = torch.zeros_like(rewards)
        last_gae = 0.0
        for t in reversed(range(len(rewards))):
            next_v = next_value if t == len(rewards) - 1 else values[t + 1]
            next_non_terminal = 1.0 - dones[t]
            delta = rewards[t] + gamma * next_v * next_non_terminal - values[t]
            last_gae = delta + gamma * gae_lambda * next_non_terminal * last_gae
            advantages[t] = last_gae
        return advantages, advantages + values

    def ppo_update(states, actions, old_log_probs, returns, advantages):
        logits, values = model(states)
        dist = Categorical(logits=logits)
        new_log_probs = dist.log_prob(actions)
        entropy = dist.entropy().mean()
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        ratio = torch.exp(new_log_probs - old_log_probs)
        surr1 = ratio * advantages
        surr2 = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
        policy_loss = -torch.min(surr1, surr2).mean()
        value_loss = F.mse_loss(values, returns)
        loss = policy_loss + 0.5 * value_loss - 0.01 * entropy
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        with torch.no_grad():
            approx_kl = (old_log_probs - new_log_probs).mean()
            clip_frac = ((ratio - 1.0).abs() > clip_eps).float().mean()
        return policy_loss.item(), value_loss.item(), entropy.item(), approx_kl.item(), \
            clip_frac.item()

    ppo_update = env.step(ppo_update)
    n_steps, minibatch = 24, 8
    for iteration in range(3):
        states, actions, log_probs, values, rewards, dones, next_value = collect(n_steps)
        advantages, returns = compute_gae(rewards, values, dones, next_value)
        env.rec(f"rollout {iteration}", (rewards.sum(), advantages, returns), cross)
        for epoch in range(2):
            perm = torch.from_numpy(env.np.permutation(n_steps))
            for start in range(0, n_steps, minibatch):
                idx = perm[start:start + minibatch]
                env.rec(f"update {iteration} {epoch} {start}",
                        ppo_update(states[idx], actions[idx], log_probs[idx], returns[idx],
                                   advantages[idx]), cross)
    env.rec("state", model.state_dict(), cross)


def ppo_greedy(torch, env):
    ppo(torch, env, sample=False)


def tabular(torch, env, p=0.0):
    nn, optim = torch.nn, torch.optim
    cross = p == 0.0

    class TabularModel(nn.Module):
        def __init__(self, emb_szs, n_cont, out_sz, layers, p=0.5):
            super().__init__()
            self.embeds = nn.ModuleList([nn.Embedding(ni, nf) for ni, nf in emb_szs])
            self.emb_drop = nn.Dropout(p)
            self.bn_cont = nn.BatchNorm1d(n_cont)
            layerlist = []
            n_emb = sum(nf for ni, nf in emb_szs)
            n_in = n_emb + n_cont
            for i in layers:
                layerlist.append(nn.Linear(n_in, i))
                layerlist.append(nn.ReLU(inplace=True))
                layerlist.append(nn.BatchNorm1d(i))
                layerlist.append(nn.Dropout(p))
                n_in = i
            layerlist.append(nn.Linear(layers[-1], out_sz))
            self.layers = nn.Sequential(*layerlist)

        def forward(self, x_cat, x_cont):
            embeddings = []
            for i, e in enumerate(self.embeds):
                embeddings.append(e(x_cat[:, i]))
            x = torch.cat(embeddings, 1)
            x = self.emb_drop(x)
            x_cont = self.bn_cont(x_cont)
            x = torch.cat([x, x_cont], 1)
            return self.layers(x)

    cat_szs = [5, 3, 7]
    emb_szs = [(size, min(50, (size + 1) // 2)) for size in cat_szs]
    n = 96
    cats = torch.stack([env.randint(0, s, (n,)) for s in cat_szs], 1)
    conts = env.randn(n, 4) * torch.tensor([1.0, 10.0, 0.1, 3.0]) + torch.tensor([0, 50.0, 0, 5])
    score = conts[:, 0] + (conts[:, 1] - 50) / 10 + (cats[:, 0] == 2).float() * 2
    y = (score > 1.2).float().unsqueeze(1)            # imbalanced: few positives
    train_idx, test_idx = slice(0, 64), slice(64, n)
    pos_weight = (y[train_idx] == 0).sum() / (y[train_idx] == 1).sum()
    env.rec("class balance", (y.sum(), pos_weight))

    model = env.init(TabularModel(emb_szs, 4, 1, [16, 8], p=p))
    criterion = nn.BCEWithLogitsLoss(pos_weight=pos_weight.reshape(1))
    optimizer = optim.Adam(model.parameters(), lr=0.01)
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5,
                                                     patience=0)

    def train_step(x_cat, x_cont, y):
        model.train()
        optimizer.zero_grad()
        loss = criterion(model(x_cat, x_cont), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    def evaluate(x_cat, x_cont, y):
        model.eval()
        with torch.no_grad():
            logits = model(x_cat, x_cont)
            loss = criterion(logits, y)
            preds = (torch.sigmoid(logits) > 0.5).float()
            tp = ((preds == 1) & (y == 1)).sum().float()
            fp = ((preds == 1) & (y == 0)).sum().float()
            fn = ((preds == 0) & (y == 1)).sum().float()
            accuracy = (preds == y).float().mean()
            precision = tp / torch.clamp(tp + fp, min=1)
            recall = tp / torch.clamp(tp + fn, min=1)
            f1 = 2 * precision * recall / (precision + recall + 1e-8)
        return loss.item(), accuracy.item(), precision.item(), recall.item(), f1.item()

    train_step = env.step(train_step)
    for epoch in range(4):
        for start in range(0, 64, 32):
            batch = slice(start, start + 32)
            env.rec(f"loss {epoch} {start}", train_step(cats[batch], conts[batch], y[batch]),
                    cross)
        val = evaluate(cats[test_idx], conts[test_idx], y[test_idx])
        scheduler.step(val[0])
        env.rec(f"val {epoch}", (val, optimizer.param_groups[0]["lr"]), cross)
    env.rec("batchnorm", (model.bn_cont.running_mean, model.bn_cont.running_var,
                          model.bn_cont.num_batches_tracked), cross)
    env.rec("state", model.state_dict(), cross)


def tabular_dropout(torch, env):
    tabular(torch, env, p=0.2)


def neural_ode(torch, env, count_evaluations=False):
    nn, optim = torch.nn, torch.optim
    data_size, batch_time, batch_size = 20, 5, 6

    def rk4_step(func, t, dt, y):
        k1 = func(t, y)
        k2 = func(t + dt / 2, y + dt * k1 / 2)
        k3 = func(t + dt / 2, y + dt * k2 / 2)
        k4 = func(t + dt, y + dt * k3)
        return y + dt * (k1 + 2 * k2 + 2 * k3 + k4) / 6

    def odeint(func, y0, t):
        solution = [y0]
        y = y0
        for t0, t1 in zip(t[:-1], t[1:]):
            y = rk4_step(func, t0, t1 - t0, y)
            solution.append(y)
        return torch.stack(solution)

    true_y0 = torch.tensor([[2., 0.]])
    t = torch.linspace(0., 2., data_size)
    true_A = torch.tensor([[-0.1, 2.0], [-2.0, -0.1]])

    class Lambda(nn.Module):
        def forward(self, t, y):
            return torch.mm(y ** 3, true_A)

    with torch.no_grad():
        true_y = odeint(Lambda(), true_y0, t)           # (T, 1, 2)
    env.rec("true_y", true_y)

    def get_batch():
        s = torch.from_numpy(env.np.choice(np.arange(data_size - batch_time, dtype=np.int64),
                                           batch_size, replace=False))
        batch_y0 = true_y[s]                             # (M, 1, 2)
        batch_t = t[:batch_time]                         # (T)
        batch_y = torch.stack([true_y[s + i] for i in range(batch_time)], dim=0)
        return batch_y0, batch_t, batch_y

    class ODEFunc(nn.Module):
        def __init__(self):
            super(ODEFunc, self).__init__()
            self.net = nn.Sequential(nn.Linear(2, 24), nn.Tanh(), nn.Linear(24, 2))
            for m in self.net.modules():
                if isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, mean=0, std=0.1)
                    nn.init.constant_(m.bias, val=0)
            self.nfe = 0

        def forward(self, t, y):
            if count_evaluations:       # (torchdiffeq's odenet_mnist counts them so)
                self.nfe += 1
            return self.net(y ** 3)

    func = env.init(ODEFunc())
    optimizer = optim.RMSprop(func.parameters(), lr=1e-2)

    def train_step(batch_y0, batch_t, batch_y):
        optimizer.zero_grad()
        pred_y = odeint(func, batch_y0, batch_t)
        loss = torch.mean(torch.abs(pred_y - batch_y))
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for itr in range(1, 7):
        env.rec(f"loss {itr}", train_step(*get_batch()))
        if itr % 3 == 0:
            with torch.no_grad():
                pred_y = odeint(func, true_y0, t)
                env.rec(f"total loss {itr}", torch.mean(torch.abs(pred_y - true_y)))
    env.rec("state", func.state_dict())
    env.rec("function evaluations", func.nfe)


def neural_ode_nfe(torch, env):
    neural_ode(torch, env, count_evaluations=True)
