"""Tutorial programs on reinforcement learning, recommenders and tabular data, written as
blog posts write them (seeded with torch.manual_seed, modules built by their
constructors; see tutorial_harness.py): a Double DQN with NoisyLinear exploration and a
tensor replay buffer, an advantage actor-critic with GAE on a toy chain environment,
neural collaborative filtering (NeuMF) with sampled negatives and hit rate, a Deep &
Cross network on mixed categorical / numeric columns, a Wide & Deep model over
EmbeddingBag with offsets and per-sample weights, an imbalanced classifier drawn with a
WeightedRandomSampler."""
import copy
import math


def noisy_double_dqn(torch, env):
    """Double DQN with NoisyNet layers: NoisyLinear with factorised Gaussian noise buffers
    (sign(x) sqrt|x| of randn, outer product) redrawn by reset_noise() each step; a
    circular replay buffer of preallocated tensors sampled with torch.randint; the online
    net picks argmax a', the target net (a deepcopy, synced by load_state_dict every 3
    steps) evaluates it via gather; smooth_l1_loss; clip_grad_value_."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class NoisyLinear(nn.Module):
        def __init__(self, n_in, n_out, sigma0=0.5):
            super().__init__()
            self.n_in, self.n_out = n_in, n_out
            self.w_mu = nn.Parameter(torch.empty(n_out, n_in).uniform_(-1, 1) / math.sqrt(n_in))
            self.w_sigma = nn.Parameter(torch.full((n_out, n_in), sigma0 / math.sqrt(n_in)))
            self.b_mu = nn.Parameter(torch.empty(n_out).uniform_(-1, 1) / math.sqrt(n_in))
            self.b_sigma = nn.Parameter(torch.full((n_out,), sigma0 / math.sqrt(n_in)))
            self.register_buffer("w_eps", torch.zeros(n_out, n_in))
            self.register_buffer("b_eps", torch.zeros(n_out))
            self.reset_noise()

        @staticmethod
        def _f(x):
            return x.sign() * x.abs().sqrt()

        def reset_noise(self):
            e_in, e_out = self._f(torch.randn(self.n_in)), self._f(torch.randn(self.n_out))
            self.w_eps.copy_(torch.outer(e_out, e_in))
            self.b_eps.copy_(e_out)

        def forward(self, x):
            if self.training:
                return F.linear(x, self.w_mu + self.w_sigma * self.w_eps,
                                self.b_mu + self.b_sigma * self.b_eps)
            return F.linear(x, self.w_mu, self.b_mu)

    class QNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 16)
            self.noisy = NoisyLinear(16, 3)

        def forward(self, s):
            return self.noisy(F.relu(self.fc(s)))

    online = QNet()
    target = copy.deepcopy(online)
    opt = torch.optim.Adam(online.parameters(), lr=1e-3)
    cap, gamma = 32, 0.9
    buf = {"s": torch.zeros(cap, 4), "a": torch.zeros(cap, dtype=torch.long),
           "r": torch.zeros(cap), "s2": torch.zeros(cap, 4), "done": torch.zeros(cap)}
    s = torch.randn(cap, 4)
    for i in range(cap):
        a = online(s[i:i + 1]).argmax(1)
        buf["s"][i], buf["a"][i] = s[i], a.item()
        buf["r"][i] = float(s[i, 0] > 0) - 0.1 * a.item()
        buf["s2"][i] = s[i] * 0.9 + 0.1
        buf["done"][i] = float(i % 7 == 6)

    def train_step(idx):
        online.train()
        online.noisy.reset_noise()
        target.noisy.reset_noise()
        s, a, r, s2, d = (buf[k][idx] for k in ("s", "a", "r", "s2", "done"))
        q = online(s).gather(1, a.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            a2 = online(s2).argmax(1, keepdim=True)
            q2 = target(s2).gather(1, a2).squeeze(1)
            y = r + gamma * (1 - d) * q2
        loss = F.smooth_l1_loss(q, y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(online.parameters(), 1.0)
        opt.step()
        return loss.item()

    step = env.step(train_step)
    hist = []
    for it in range(6):
        hist.append(step(torch.randint(0, cap, (8,))))
        if it % 3 == 2:
            target.load_state_dict(online.state_dict())
    env.rec("hist", hist)
    online.eval()
    with torch.no_grad():
        env.rec("greedy", online(s[:6]).argmax(1))
    env.rec("params", list(online.parameters()))
    env.rec("target", list(target.parameters()))


def a2c_gae(torch, env):
    """Advantage actor-critic on a 5-state chain (move left / right, reward at the right
    end): a shared body with policy and value heads, actions drawn by the Gumbel-max trick
    from torch.rand, rollouts of fixed length, generalised advantage estimation computed
    by a reversed Python loop over tensors, advantages normalised, a policy loss with an
    entropy bonus from torch.distributions.Categorical, the value loss by mse."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    n_states, T, gamma, lam = 5, 6, 0.95, 0.9

    class ActorCritic(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(n_states, 16), nn.Tanh())
            self.pi = nn.Linear(16, 2)
            self.v = nn.Linear(16, 1)

        def forward(self, s):
            h = self.body(s)
            return self.pi(h), self.v(h).squeeze(-1)

    model = ActorCritic()
    opt = torch.optim.RMSprop(model.parameters(), lr=7e-3, alpha=0.99, eps=1e-5)

    def rollout():
        pos, states, actions, rewards, dones = 0, [], [], [], []
        for _ in range(T):
            s = F.one_hot(torch.tensor(pos), n_states).float()
            with torch.no_grad():
                logits, _ = model(s)
            g = -torch.log(-torch.log(torch.rand(2)))
            a = int((logits + g).argmax())
            pos = max(0, min(n_states - 1, pos + (1 if a == 1 else -1)))
            done = pos == n_states - 1
            states.append(s)
            actions.append(a)
            rewards.append(1.0 if done else -0.05)
            dones.append(float(done))
            if done:
                pos = 0
        last = F.one_hot(torch.tensor(pos), n_states).float()
        return (torch.stack(states), torch.tensor(actions), torch.tensor(rewards),
                torch.tensor(dones), last)

    def train_step(states, actions, rewards, dones, last):
        logits, values = model(states)
        with torch.no_grad():
            _, last_v = model(last.unsqueeze(0))
            adv = torch.zeros_like(rewards)
            gae = torch.zeros(())
            next_v = last_v[0]
            for t in reversed(range(rewards.shape[0])):
                delta = rewards[t] + gamma * next_v * (1 - dones[t]) - values[t]
                gae = delta + gamma * lam * (1 - dones[t]) * gae
                adv[t] = gae
                next_v = values[t]
            returns = adv + values
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        dist = torch.distributions.Categorical(logits=logits)
        policy_loss = -(dist.log_prob(actions) * adv).mean()
        value_loss = F.mse_loss(values, returns)
        entropy = dist.entropy().mean()
        loss = policy_loss + 0.5 * value_loss - 0.01 * entropy
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        return policy_loss.item(), value_loss.item(), entropy.item()

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        batch = rollout()
        hist.append((batch[1].tolist(), step(*batch)))
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))


def neumf_negative_sampling(torch, env):
    """Neural collaborative filtering (NeuMF): a GMF branch (elementwise product of user /
    item embeddings) and an MLP branch (concatenated embeddings) fused by a final linear;
    each positive interaction paired with 2 negatives drawn by torch.randint;
    BCEWithLogitsLoss; hit rate @ 3 with topk after masking the training positives by
    index_put with -inf."""
    nn = torch.nn
    torch.manual_seed(0)
    n_users, n_items, d = 6, 12, 4

    class NeuMF(nn.Module):
        def __init__(self):
            super().__init__()
            self.u_gmf, self.i_gmf = nn.Embedding(n_users, d), nn.Embedding(n_items, d)
            self.u_mlp, self.i_mlp = nn.Embedding(n_users, d), nn.Embedding(n_items, d)
            self.mlp = nn.Sequential(nn.Linear(2 * d, 8), nn.ReLU(), nn.Linear(8, 4), nn.ReLU())
            self.out = nn.Linear(d + 4, 1)
            for emb in (self.u_gmf, self.i_gmf, self.u_mlp, self.i_mlp):
                nn.init.normal_(emb.weight, std=0.1)

        def forward(self, u, i):
            gmf = self.u_gmf(u) * self.i_gmf(i)
            mlp = self.mlp(torch.cat([self.u_mlp(u), self.i_mlp(i)], -1))
            return self.out(torch.cat([gmf, mlp], -1)).squeeze(-1)

    model = NeuMF()
    pos_u = torch.arange(n_users).repeat_interleave(3)
    pos_i = (pos_u * 2 + torch.tensor([0, 1, 3]).repeat(n_users)) % n_items
    held_out = (torch.arange(n_users) * 2 + 2) % n_items
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    crit = nn.BCEWithLogitsLoss()

    def train_step(u, i, labels):
        model.train()
        opt.zero_grad()
        loss = crit(model(u, i), labels)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        neg_i = torch.randint(0, n_items, (pos_u.shape[0] * 2,))
        u = torch.cat([pos_u, pos_u.repeat(2)])
        i = torch.cat([pos_i, neg_i])
        labels = torch.cat([torch.ones(pos_u.shape[0]), torch.zeros(neg_i.shape[0])])
        hist.append(step(u, i, labels))
    env.rec("hist", hist)
    model.eval()
    with torch.no_grad():
        users = torch.arange(n_users).repeat_interleave(n_items)
        items = torch.arange(n_items).repeat(n_users)
        scores = model(users, items).view(n_users, n_items)
        scores = scores.index_put((pos_u, pos_i), torch.tensor(float("-inf")))
        top = scores.topk(3, dim=1).indices
        hits = (top == held_out[:, None]).any(1).float().mean()
    env.rec("top", top)
    env.rec("hr@3", hits.item())
    env.rec("params", list(model.parameters()))


def deep_cross_network(torch, env):
    """Deep & Cross Network (DCN): categorical columns embedded (one nn.Embedding per column
    in a ModuleList) and concatenated with BatchNorm1d-normalised numeric columns; cross
    layers x_{l+1} = x0 * (w . x_l) + b + x_l next to a deep MLP; BCE on sigmoid outputs;
    AUC from ranks (argsort twice) under eval()."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    cards, n_num, n = [4, 7, 3], 3, 48
    cats = torch.stack([torch.randint(0, c, (n,)) for c in cards], 1)
    nums = torch.randn(n, n_num) * torch.tensor([1.0, 10.0, 0.1]) + torch.tensor([0.0, 5.0, 1.0])
    logit = (cats[:, 0] == 1).float() + nums[:, 0] * 0.8 - (cats[:, 1] > 3).float()
    y = (logit + 0.3 * torch.randn(n) > 0.2).float()

    class CrossLayer(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.w = nn.Linear(d, 1, bias=False)
            self.b = nn.Parameter(torch.zeros(d))

        def forward(self, x0, x):
            return x0 * self.w(x) + self.b + x

    class DCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embs = nn.ModuleList([nn.Embedding(c, 3) for c in cards])
            self.bn = nn.BatchNorm1d(n_num)
            d = 3 * len(cards) + n_num
            self.cross = nn.ModuleList([CrossLayer(d) for _ in range(2)])
            self.deep = nn.Sequential(nn.Linear(d, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU())
            self.out = nn.Linear(d + 8, 1)

        def forward(self, cats, nums):
            x0 = torch.cat([e(cats[:, j]) for j, e in enumerate(self.embs)] + [self.bn(nums)], 1)
            x = x0
            for layer in self.cross:
                x = layer(x0, x)
            return self.out(torch.cat([x, self.deep(x0)], 1)).squeeze(1)

    model = DCN()
    ds = torch.utils.data.TensorDataset(cats, nums, y)
    loader = torch.utils.data.DataLoader(ds, batch_size=16, shuffle=True, drop_last=True)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(c, x, y):
        model.train()
        opt.zero_grad()
        loss = F.binary_cross_entropy(torch.sigmoid(model(c, x)), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(c, x, t) for _ in range(3) for c, x, t in loader])
    model.eval()
    with torch.no_grad():
        p = torch.sigmoid(model(cats, nums))
        ranks = p.argsort().argsort().float() + 1
        n_pos = y.sum()
        auc = (ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * (n - n_pos))
    env.rec("auc", auc.item())
    env.rec("bn", [model.bn.running_mean, model.bn.running_var, model.bn.num_batches_tracked])
    env.rec("params", list(model.parameters()))


def wide_deep_embeddingbag(torch, env):
    """Wide & Deep over variable-length tag lists: nn.EmbeddingBag(mode="sum") with a flat
    index tensor, offsets and per_sample_weights (tag confidences) for the deep part, a
    second EmbeddingBag(mode="max") for a max-pooled view, a wide linear over a multi-hot
    vector built by scatter_; Adagrad for the wide part and Adam for the deep part (two
    optimizers stepped together)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    n_tags, B = 10, 6
    lengths = [3, 1, 4, 2, 2, 3]
    flat = torch.randint(0, n_tags, (sum(lengths),))
    offsets = torch.tensor([0] + lengths[:-1]).cumsum(0)
    weights = torch.rand(sum(lengths))
    y = torch.randint(0, 2, (B,)).float()
    bag_ids = torch.repeat_interleave(torch.arange(B), torch.tensor(lengths))
    multi_hot = torch.zeros(B, n_tags).index_put_((bag_ids, flat), torch.tensor(1.0))

    class WideDeep(nn.Module):
        def __init__(self):
            super().__init__()
            self.wide = nn.Linear(n_tags, 1)
            self.bag_sum = nn.EmbeddingBag(n_tags, 4, mode="sum")
            self.bag_max = nn.EmbeddingBag(n_tags, 4, mode="max")
            self.deep = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))

        def forward(self, flat, offsets, weights, multi_hot):
            h = torch.cat([self.bag_sum(flat, offsets, per_sample_weights=weights),
                           self.bag_max(flat, offsets)], -1)
            return (self.wide(multi_hot) + self.deep(h)).squeeze(-1)

    model = WideDeep()
    opt_wide = torch.optim.Adagrad(model.wide.parameters(), lr=0.1)
    deep_params = [p for n, p in model.named_parameters() if not n.startswith("wide")]
    opt_deep = torch.optim.Adam(deep_params, lr=0.01)

    def train_step(flat, offsets, weights, multi_hot, y):
        opt_wide.zero_grad()
        opt_deep.zero_grad()
        loss = F.binary_cross_entropy_with_logits(model(flat, offsets, weights, multi_hot), y)
        loss.backward()
        opt_wide.step()
        opt_deep.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("multi hot", multi_hot)
    env.rec("hist", [step(flat, offsets, weights, multi_hot, y) for _ in range(6)])
    env.rec("params", list(model.parameters()))


def weighted_sampler_imbalance(torch, env):
    """A 9:1 imbalanced binary problem: a WeightedRandomSampler with per-example weights
    1 / class_count (torch.bincount), num_samples = len(dataset), replacement; a class
    weighted CrossEntropyLoss for comparison; the balanced batches' class counts are
    logged; precision / recall / F1 from confusion counts at eval."""
    nn = torch.nn
    torch.manual_seed(0)
    n = 60
    y = (torch.arange(n) % 10 == 0).long()
    x = torch.randn(n, 3) + y[:, None].float() * 1.5
    counts = torch.bincount(y)
    sample_w = (1.0 / counts.float())[y]
    sampler = torch.utils.data.WeightedRandomSampler(sample_w, num_samples=n, replacement=True)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=12,
                                         sampler=sampler)
    model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))
    crit = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0]))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)

    def train_step(xb, yb):
        model.train()
        opt.zero_grad()
        loss = crit(model(xb), yb)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    hist = []
    for _ in range(2):
        for xb, yb in loader:
            hist.append((step(xb, yb), torch.bincount(yb, minlength=2).tolist()))
    env.rec("hist", hist)
    model.eval()
    with torch.no_grad():
        pred = model(x).argmax(1)
    tp = ((pred == 1) & (y == 1)).sum().item()
    fp = ((pred == 1) & (y == 0)).sum().item()
    fn = ((pred == 0) & (y == 1)).sum().item()
    precision = tp / max(tp + fp, 1)
    recall = tp / max(tp + fn, 1)
    env.rec("prf", (precision, recall, 2 * precision * recall / max(precision + recall, 1e-8)))
    env.rec("params", list(model.parameters()))
