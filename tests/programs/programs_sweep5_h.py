"""Programs of common kinds: a dueling double DQN with prioritised replay (importance-sampling
weights, per-sample smooth L1, priorities updated from the TD errors); Deep SVDD anomaly
detection (a bias-free network, a centre from the first pass, a soft-boundary radius from
torch.quantile); a spiking network of leaky integrate-and-fire neurons trained through a
surrogate-gradient autograd.Function over time steps; Monte Carlo dropout (dropout kept on
at evaluation, the spread of stochastic passes); the original WGAN (RMSprop, several critic
steps per generator step, weights clipped in place). Programs `f(torch, env)`, see
tutorial_harness.py."""
import copy


def dueling_dqn_per(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    n_states, n_actions, gamma, alpha, beta = 6, 3, 0.9, 0.6, 0.4

    class DuelingQ(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(n_states, 24), nn.ReLU())
            self.value = nn.Linear(24, 1)
            self.advantage = nn.Linear(24, n_actions)

        def forward(self, x):
            h = self.body(x)
            adv = self.advantage(h)
            return self.value(h) + adv - adv.mean(dim=1, keepdim=True)

    online = env.init(DuelingQ())
    target = copy.deepcopy(online)
    optimizer = optim.Adam(online.parameters(), lr=5e-3)

    # a chain of 6 states: action 0 left, 1 stay, 2 right; reward 1 at the right end
    transitions = []
    for k in range(40):
        s, a = env.choice(n_states), env.choice(n_actions)
        s2 = min(max(s + a - 1, 0), n_states - 1)
        transitions.append((s, a, float(s2 == n_states - 1), s2, float(s2 == n_states - 1)))
    eye = torch.eye(n_states)
    states = eye[torch.tensor([t[0] for t in transitions])]
    actions = torch.tensor([t[1] for t in transitions])
    rewards = torch.tensor([t[2] for t in transitions])
    next_states = eye[torch.tensor([t[3] for t in transitions])]
    dones = torch.tensor([t[4] for t in transitions])
    priorities = torch.ones(len(transitions))

    def learn(s, a, r, s2, d, weights):
        q = online(s).gather(1, a[:, None]).squeeze(1)
        with torch.no_grad():
            best = online(s2).argmax(dim=1, keepdim=True)          # double DQN
            q_next = target(s2).gather(1, best).squeeze(1)
            y = r + gamma * (1 - d) * q_next
        td = y - q
        loss = (weights * F.smooth_l1_loss(q, y, reduction="none")).mean()
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(online.parameters(), 1.0)
        optimizer.step()
        return loss.item(), td.detach().abs()

    learn = env.step(learn)
    for it in range(6):
        probs = priorities ** alpha
        probs = probs / probs.sum()
        idx = torch.tensor(env.np.choice(len(transitions), 12, replace=False,
                                         p=probs.double().numpy() / probs.double().sum().item()))
        weights = (len(transitions) * probs[idx]) ** -beta
        weights = weights / weights.max()
        loss, td = learn(states[idx], actions[idx], rewards[idx], next_states[idx],
                         dones[idx], weights)
        priorities[idx] = td + 1e-3
        if it % 3 == 2:
            target.load_state_dict(online.state_dict())
        env.rec(f"learn {it}", (loss, td))
    with torch.no_grad():
        env.rec("q table", online(eye))


def deep_svdd(torch, env):
    nn, optim = torch.nn, torch.optim
    nu = 0.1

    net = env.init(nn.Sequential(nn.Linear(5, 16, bias=False), nn.LeakyReLU(),
                                 nn.Linear(16, 4, bias=False)))
    normal = env.randn(32, 5) * 0.5
    anomalies = env.randn(6, 5) * 0.5 + 2.0
    with torch.no_grad():
        c = net(normal).mean(dim=0)
        c[(c.abs() < 0.1) & (c < 0)] = -0.1
        c[(c.abs() < 0.1) & (c >= 0)] = 0.1
    R = torch.tensor(0.0)
    optimizer = optim.Adam(net.parameters(), lr=1e-3, weight_decay=1e-6, amsgrad=True)

    def train_step(x, R):
        optimizer.zero_grad()
        dist = torch.sum((net(x) - c) ** 2, dim=1)
        scores = dist - R ** 2
        loss = R ** 2 + (1 / nu) * torch.mean(torch.max(torch.zeros_like(scores), scores))
        loss.backward()
        optimizer.step()
        return loss.item(), dist.detach()

    train_step = env.step(train_step)
    for epoch in range(5):
        loss, dist = train_step(normal, R)
        if epoch >= 2:
            R = torch.quantile(torch.sqrt(dist), 1 - nu)
        env.rec(f"epoch {epoch}", (loss, R))
    with torch.no_grad():
        score = lambda x: torch.sum((net(x) - c) ** 2, dim=1) - R ** 2
        env.rec("scores", (score(normal), score(anomalies)))
        env.rec("quantiles", torch.quantile(score(normal), torch.tensor([0.1, 0.5, 0.9]),
                                            interpolation="midpoint"))


def spiking_surrogate(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    T, beta, threshold = 6, 0.8, 1.0

    class SpikeFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, mem):
            ctx.save_for_backward(mem)
            return (mem > 0).float()

        @staticmethod
        def backward(ctx, grad_output):
            (mem,) = ctx.saved_tensors
            return grad_output / (1 + 10 * mem.abs()) ** 2      # fast-sigmoid surrogate

    spike = SpikeFn.apply

    class SNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(8, 20)
            self.fc2 = nn.Linear(20, 3)

        def forward(self, x):
            mem1 = torch.zeros(x.size(1), 20)
            mem2 = torch.zeros(x.size(1), 3)
            spikes_out, mems = [], []
            for t in range(T):
                mem1 = beta * mem1 + self.fc1(x[t])
                s1 = spike(mem1 - threshold)
                mem1 = mem1 - s1.detach() * threshold               # reset by subtraction
                mem2 = beta * mem2 + self.fc2(s1)
                s2 = spike(mem2 - threshold)
                mem2 = mem2 - s2.detach() * threshold
                spikes_out.append(s2)
                mems.append(mem2)
            return torch.stack(spikes_out), torch.stack(mems)

    model = env.init(SNN())
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    rates = env.rand(10, 8)
    labels = env.randint(0, 3, (10,))
    inputs = (env.rand(T, 10, 8) < rates).float()                  # Poisson-like spike trains

    def train_step(x, y):
        optimizer.zero_grad()
        spk, mem = model(x)
        loss = sum(F.cross_entropy(mem[t], y) for t in range(T)) / T
        loss.backward()
        optimizer.step()
        acc = (spk.sum(0).argmax(1) == y).float().mean()
        return loss.item(), acc, spk.sum().item()

    train_step = env.step(train_step)
    for it in range(5):
        env.rec(f"step {it}", train_step(inputs, labels))


def mc_dropout(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    model = env.init(nn.Sequential(nn.Linear(1, 32), nn.ReLU(), nn.Dropout(0.2),
                                   nn.Linear(32, 32), nn.ReLU(), nn.Dropout(0.2),
                                   nn.Linear(32, 1)))
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    x = torch.linspace(-2, 2, 24)[:, None]
    y = torch.sin(2 * x) + 0.1 * env.randn(24, 1)

    def train_step(x, y):
        model.train()
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    def predict(x, n_samples):
        model.eval()
        for m in model.modules():           # dropout stays on at evaluation
            if isinstance(m, nn.Dropout):
                m.train()
        with torch.no_grad():
            preds = torch.stack([model(x) for _ in range(n_samples)])
        return preds.mean(0), preds.std(0)

    train_step = env.step(train_step)
    predict = env.step(predict)
    for it in range(5):
        env.rec(f"step {it}", train_step(x, y), cross=False)
    for k in range(2):
        env.rec(f"predict {k}", predict(torch.linspace(-3, 3, 7)[:, None], 5), cross=False)
    env.rec("modes", [m.training for m in model.modules()])


def wgan_clip(torch, env):
    nn, optim = torch.nn, torch.optim
    clip, n_critic = 0.05, 3

    G = env.init(nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2)))
    D = env.init(nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1)))
    opt_g = optim.RMSprop(G.parameters(), lr=5e-3)
    opt_d = optim.RMSprop(D.parameters(), lr=5e-3)

    def critic_step(real, z):
        opt_d.zero_grad()
        fake = G(z).detach()
        loss_d = -(D(real).mean() - D(fake).mean())
        loss_d.backward()
        opt_d.step()
        for p in D.parameters():
            p.data.clamp_(-clip, clip)
        return loss_d.item()

    def generator_step(z):
        opt_g.zero_grad()
        loss_g = -D(G(z)).mean()
        loss_g.backward()
        opt_g.step()
        return loss_g.item()

    critic_step, generator_step = env.step(critic_step), env.step(generator_step)
    for it in range(3):
        for k in range(n_critic):
            real = env.randn(16, 2) * 0.3 + torch.tensor([1.0, -1.0])
            env.rec(f"critic {it} {k}", critic_step(real, env.randn(16, 2)))
        env.rec(f"generator {it}", generator_step(env.randn(16, 2)))
    env.rec("critic weights", D.state_dict())
    env.rec("samples", G(env.randn(5, 2)))
