"""Programs of common kinds: PyTorch's pruning tutorial on a small LeNet (l1_unstructured,
ln_structured, global_unstructured, training the pruned model through the masks'
forward pre-hooks, prune.remove); k-means clustering with torch ops (cdist, argmin,
index_add_, bincount) and a compiled, gradient-free update; DDPG (actor-critic for
continuous actions, target networks with Polyak averaging, a replay buffer). Programs
`f(torch, env)`, see tutorial_harness.py."""
import copy
import importlib


def pruning(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    prune = importlib.import_module(torch.__name__ + ".nn.utils.prune")   # (import ... as prune)

    class LeNet(nn.Module):
        def __init__(self):
            super(LeNet, self).__init__()
            self.conv1 = nn.Conv2d(1, 4, 3)
            self.conv2 = nn.Conv2d(4, 8, 3)
            self.fc1 = nn.Linear(8 * 2 * 2, 16)
            self.fc2 = nn.Linear(16, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = x.view(-1, int(x.nelement() / x.shape[0]))
            x = F.relu(self.fc1(x))
            return self.fc2(x)

    model = env.init(LeNet())
    prune.l1_unstructured(model.conv1, name="weight", amount=0.3)
    prune.l1_unstructured(model.conv1, name="bias", amount=3)
    prune.ln_structured(model.conv2, name="weight", amount=0.5, n=2, dim=0)
    parameters_to_prune = ((model.fc1, "weight"), (model.fc2, "weight"))
    prune.global_unstructured(parameters_to_prune, pruning_method=prune.L1Unstructured,
                              amount=0.2)
    env.rec("buffers", [name for name, _ in model.named_buffers()])
    env.rec("sparsity", [float(torch.sum(m.weight == 0)) / float(m.weight.nelement())
                         for m in (model.conv1, model.conv2, model.fc1, model.fc2)])

    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    images, labels = env.randn(16, 1, 14, 14), env.randint(0, 10, (16,))

    def train_step(x, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for epoch in range(3):
        env.rec(f"loss {epoch}", train_step(images[:8], labels[:8]))
        env.rec(f"loss {epoch} b", train_step(images[8:], labels[8:]))
    env.rec("pruned stay zero", [bool(((m.weight_mask == 0) <= (m.weight == 0)).all())
                                 for m in (model.conv1, model.conv2, model.fc1, model.fc2)])
    for module, name in ((model.conv1, "weight"), (model.conv1, "bias"),
                         (model.conv2, "weight")) + parameters_to_prune:
        prune.remove(module, name)
    env.rec("after remove", ([name for name, _ in model.named_parameters()],
                             list(model.state_dict().keys())))
    with torch.no_grad():
        env.rec("logits", model(images[:4]))
    env.rec("state", model.state_dict())


def kmeans(torch, env):
    k, n, d = 4, 64, 2
    centers_true = torch.tensor([[2.0, 2.0], [-2.0, 2.0], [2.0, -2.0], [-2.0, -2.0]])
    x = centers_true[env.randint(0, k, (n,))] + 0.6 * env.randn(n, d)

    def kmeans_step(x, centroids):
        dist = torch.cdist(x, centroids)                    # (N, K)
        assignment = dist.argmin(dim=1)
        sums = torch.zeros_like(centroids).index_add_(0, assignment, x)
        counts = torch.bincount(assignment, minlength=centroids.size(0)).float()
        empty = counts == 0
        new_centroids = torch.where(empty[:, None], centroids,
                                    sums / counts.clamp(min=1)[:, None])
        inertia = dist.gather(1, assignment[:, None]).pow(2).sum()
        shift = (new_centroids - centroids).norm(dim=1).max()
        return new_centroids, assignment, inertia, shift

    kmeans_step = env.step(kmeans_step)
    # k-means++ seeding with the program's own draws
    centroids = x[env.choice(n)].unsqueeze(0)
    for _ in range(1, k):
        d2 = torch.cdist(x, centroids).min(dim=1).values.pow(2)
        probs = d2 / d2.sum()
        u = env.rand(1)
        centroids = torch.cat([centroids, x[(probs.cumsum(0) < u).sum().clamp(max=n - 1)][None]])
    env.rec("seeds", centroids)
    with torch.no_grad():
        for it in range(10):
            centroids, assignment, inertia, shift = kmeans_step(x, centroids)
            env.rec(f"iteration {it}", (inertia, shift))
            if shift < 1e-4:
                break
    order = centroids[:, 0].argsort()
    env.rec("result", (centroids[order], torch.bincount(assignment, minlength=k)[order]))


def ddpg(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    gamma, tau, batch_size = 0.99, 0.05, 16

    class Actor(nn.Module):
        def __init__(self, state_dim, action_dim, max_action):
            super(Actor, self).__init__()
            self.l1 = nn.Linear(state_dim, 32)
            self.l2 = nn.Linear(32, 32)
            self.l3 = nn.Linear(32, action_dim)
            self.max_action = max_action

        def forward(self, state):
            a = F.relu(self.l1(state))
            a = F.relu(self.l2(a))
            return self.max_action * torch.tanh(self.l3(a))

    class Critic(nn.Module):
        def __init__(self, state_dim, action_dim):
            super(Critic, self).__init__()
            self.l1 = nn.Linear(state_dim + action_dim, 32)
            self.l2 = nn.Linear(32, 32)
            self.l3 = nn.Linear(32, 1)

        def forward(self, state, action):
            q = F.relu(self.l1(torch.cat([state, action], 1)))
            q = F.relu(self.l2(q))
            return self.l3(q)

    actor, critic = env.init(Actor(3, 1, 2.0)), env.init(Critic(3, 1))
    actor_target, critic_target = copy.deepcopy(actor), copy.deepcopy(critic)
    actor_optimizer = optim.Adam(actor.parameters(), lr=1e-3)
    critic_optimizer = optim.Adam(critic.parameters(), weight_decay=1e-2)

    def train(state, action, next_state, reward, not_done):
        target_Q = critic_target(next_state, actor_target(next_state))
        target_Q = reward + (not_done * gamma * target_Q).detach()
        current_Q = critic(state, action)
        critic_loss = F.mse_loss(current_Q, target_Q)
        critic_optimizer.zero_grad()
        critic_loss.backward()
        critic_optimizer.step()
        actor_loss = -critic(state, actor(state)).mean()
        actor_optimizer.zero_grad()
        actor_loss.backward()
        actor_optimizer.step()
        for param, target_param in zip(critic.parameters(), critic_target.parameters()):
            target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)
        for param, target_param in zip(actor.parameters(), actor_target.parameters()):
            target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)
        return critic_loss.item(), actor_loss.item()

    train = env.step(train)
    # a pendulum-like system: state (cos th, sin th, th_dot), reward -(th^2 + 0.1 th_dot^2)
    buffer = []
    th, th_dot = 1.0, 0.0
    for t in range(48):
        state = torch.tensor([[torch.cos(torch.tensor(th)).item(), float(torch.sin(
            torch.tensor(th))), th_dot]])
        with torch.no_grad():
            action = (actor(state) + 0.3 * env.randn(1, 1)).clamp(-2.0, 2.0)
        th_dot = th_dot + 0.05 * (-9.8 * float(torch.sin(torch.tensor(th))) + action.item())
        th = th + 0.05 * th_dot
        next_state = torch.tensor([[float(torch.cos(torch.tensor(th))),
                                    float(torch.sin(torch.tensor(th))), th_dot]])
        reward = torch.tensor([[-(th ** 2 + 0.1 * th_dot ** 2)]])
        done = float(t % 16 == 15)
        buffer.append((state, action, next_state, reward, torch.tensor([[1.0 - done]])))
        if done:
            th, th_dot = 1.0, 0.0
    for it in range(5):
        idx = env.np.integers(0, len(buffer), batch_size)
        batch = [torch.cat(items) for items in zip(*[buffer[i] for i in idx])]
        env.rec(f"train {it}", train(*batch))
    env.rec("actors", (actor.state_dict(), actor_target.state_dict()))
    env.rec("critic target", critic_target.state_dict())
