"""Sweep 24 (H2, D): well-known courses at toy sizes, nearly verbatim: fast.ai lesson 4's
"MNIST basics" from scratch (init_params with requires_grad_, mnist_loss by torch.where,
calc_grad / train_epoch with p.data -= p.grad * lr and p.grad.zero_(), a BasicOptim class,
then nn.Linear + SGD, batch_accuracy); fast.ai lesson 8's collaborative filtering
(DotProductBias from create_params' normal_(0, 0.01), sigmoid_range, weight decay added
to the loss by hand); Spinning Up's simplest policy gradient with reward-to-go (a
hand-written corridor environment, Categorical(logits=...).sample(), -(logp *
weights).mean()). Raschka's GPT is in tutorials_sweep24_d2.py. Synthetic data. Programs
`f(torch, env)`, see tutorial_harness.py."""
import numpy as np


def fastai_mnist_basics(torch, env):
    nn = torch.nn
    torch.manual_seed(42)
    train_x = env.rand(24, 28 * 28)
    train_y = (train_x[:, :392].sum(1) > train_x[:, 392:].sum(1)).float().unsqueeze(1)
    valid_x = env.rand(8, 28 * 28)
    valid_y = (valid_x[:, :392].sum(1) > valid_x[:, 392:].sum(1)).float().unsqueeze(1)
    dset = list(zip(train_x, train_y))
    dl = torch.utils.data.DataLoader(dset, batch_size=8)
    valid_dl = torch.utils.data.DataLoader(list(zip(valid_x, valid_y)), batch_size=8)

    def init_params(size, std=1.0):
        return (torch.randn(size) * std).requires_grad_()

    weights = init_params((28 * 28, 1))
    bias = init_params(1)
    env.rec("init", (weights, bias))

    def linear1(xb):
        return xb @ weights + bias

    def mnist_loss(predictions, targets):
        predictions = predictions.sigmoid()
        return torch.where(targets == 1, 1 - predictions, predictions).mean()

    def calc_grad(xb, yb, model):
        preds = model(xb)
        loss = mnist_loss(preds, yb)
        loss.backward()
        return loss

    def train_epoch(model, lr, params):
        for xb, yb in dl:
            step(xb, yb, model, lr, params)

    def _step(xb, yb, model, lr, params):
        calc_grad(xb, yb, model)
        for p in params:
            p.data -= p.grad * lr
            p.grad.zero_()

    step = env.step(_step)

    def batch_accuracy(xb, yb):
        preds = xb.sigmoid()
        correct = (preds > 0.5) == yb
        return correct.float().mean()

    def validate_epoch(model):
        accs = [batch_accuracy(model(xb), yb) for xb, yb in valid_dl]
        return round(torch.stack(accs).mean().item(), 4)

    lr = 1.
    params = weights, bias
    for i in range(3):
        train_epoch(linear1, lr, params)
        env.rec(f"from scratch {i}", (validate_epoch(linear1), weights, bias))

    linear_model = nn.Linear(28 * 28, 1)
    env.rec("linear init", dict(linear_model.state_dict()))

    class BasicOptim:
        def __init__(self, params, lr):
            self.params, self.lr = list(params), lr

        def step(self, *args, **kwargs):
            for p in self.params:
                p.data -= p.grad.data * self.lr

        def zero_grad(self, *args, **kwargs):
            for p in self.params:
                p.grad = None

    opt = BasicOptim(linear_model.parameters(), lr)

    def train_epoch2(model):
        for xb, yb in dl:
            step2(xb, yb, model)

    def _step2(xb, yb, model):
        loss = calc_grad(xb, yb, model)
        opt.step()
        opt.zero_grad()
        return loss

    step2 = env.step(_step2)
    for i in range(3):
        train_epoch2(linear_model)
        env.rec(f"BasicOptim {i}", (validate_epoch(linear_model), dict(linear_model.state_dict())))

    simple_net = nn.Sequential(nn.Linear(28 * 28, 30), nn.ReLU(), nn.Linear(30, 1))
    env.rec("simple_net init", dict(simple_net.state_dict()))
    opt = torch.optim.SGD(simple_net.parameters(), lr=0.1)
    for i in range(3):
        train_epoch2(simple_net)
        env.rec(f"simple_net {i}", (validate_epoch(simple_net), dict(simple_net.state_dict())))


def fastai_collab(torch, env):
    nn = torch.nn
    torch.manual_seed(0)

    def create_params(size):
        return nn.Parameter(torch.zeros(*size).normal_(0, 0.01))

    def sigmoid_range(x, low, high):
        return torch.sigmoid(x) * (high - low) + low

    class DotProductBias(nn.Module):
        def __init__(self, n_users, n_movies, n_factors, y_range=(0, 5.5)):
            super().__init__()
            self.user_factors = create_params([n_users, n_factors])
            self.user_bias = create_params([n_users])
            self.movie_factors = create_params([n_movies, n_factors])
            self.movie_bias = create_params([n_movies])
            self.y_range = y_range

        def forward(self, x):
            users = self.user_factors[x[:, 0]]
            movies = self.movie_factors[x[:, 1]]
            res = (users * movies).sum(dim=1)
            res += self.user_bias[x[:, 0]] + self.movie_bias[x[:, 1]]
            return sigmoid_range(res, *self.y_range)

    n_users, n_movies = 10, 12
    model = DotProductBias(n_users, n_movies, 5)
    env.rec("init", dict(model.state_dict()))
    wd = 0.1
    opt = torch.optim.Adam(model.parameters(), lr=5e-3, betas=(0.9, 0.99), eps=1e-5)

    def train_step(x, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss_wd = loss + wd * sum((p ** 2).sum() for p in model.parameters())
        loss_wd.backward()
        opt.step()
        return loss

    train_step = env.step(train_step)
    ratings = [(torch.stack([env.randint(0, n_users, (16,)), env.randint(0, n_movies, (16,))],
                            1), env.randint(1, 6, (16,)).float()) for _ in range(3)]
    for epoch in range(3):
        for i, (x, y) in enumerate(ratings):
            env.rec(f"epoch {epoch} batch {i}", train_step(x, y))
    env.rec("params", dict(model.state_dict()))
    # interpretation: the movies with the lowest / highest biases, the closest movies
    movie_bias = model.movie_bias.squeeze()
    idxs = movie_bias.argsort()[:3]
    env.rec("lowest bias", idxs)
    movie_factors = model.movie_factors
    distances = nn.CosineSimilarity(dim=1)(movie_factors, movie_factors[3][None])
    env.rec("similar", distances.argsort(descending=True)[1])


class Corridor:
    """A tiny episodic environment: positions 0..4, actions left / right, reward 1 at 4,
    -0.1 a step, 8 steps at most. Observations one-hot positions (NumPy)."""
    def __init__(self):
        self.pos, self.t = 0, 0

    def reset(self):
        self.pos, self.t = 0, 0
        return self._obs()

    def _obs(self):
        o = np.zeros(5, dtype=np.float32)
        o[self.pos] = 1.0
        return o

    def step(self, a):
        self.pos = max(0, min(4, self.pos + (1 if a == 1 else -1)))
        self.t += 1
        done = self.pos == 4 or self.t >= 8
        return self._obs(), (1.0 if self.pos == 4 else -0.1), done, {}


def spinning_up_vpg(torch, env):
    """Spinning Up's 1_simple_pg.py with reward-to-go (2_rtg_pg.py): mlp(sizes), the
    policy's Categorical(logits), get_action by .sample().item(), compute_loss over a batch
    of episodes, Adam; the whole batch update compiled."""
    nn = torch.nn
    Categorical = torch.distributions.categorical.Categorical

    def mlp(sizes, activation=nn.Tanh, output_activation=nn.Identity):
        layers = []
        for j in range(len(sizes) - 1):
            act = activation if j < len(sizes) - 2 else output_activation
            layers += [nn.Linear(sizes[j], sizes[j + 1]), act()]
        return nn.Sequential(*layers)

    def reward_to_go(rews):
        n = len(rews)
        rtgs = np.zeros_like(rews)
        for i in reversed(range(n)):
            rtgs[i] = rews[i] + (rtgs[i + 1] if i + 1 < n else 0)
        return rtgs

    torch.manual_seed(0)
    e = Corridor()
    obs_dim, n_acts = 5, 2
    logits_net = mlp(sizes=[obs_dim, 16, n_acts])
    env.rec("init", dict(logits_net.state_dict()))

    def get_policy(obs):
        logits = logits_net(obs)
        return Categorical(logits=logits)

    def get_action(obs):
        return get_policy(obs).sample().item()

    def compute_loss(obs, act, weights):
        logp = get_policy(obs).log_prob(act)
        return -(logp * weights).mean()

    optimizer = torch.optim.Adam(logits_net.parameters(), lr=1e-2)

    def update(obs, act, weights):
        optimizer.zero_grad()
        batch_loss = compute_loss(obs=obs, act=act, weights=weights)
        batch_loss.backward()
        optimizer.step()
        return batch_loss

    update = env.step(update)

    def train_one_epoch(batch_size=24):
        batch_obs, batch_acts, batch_weights, batch_rets, batch_lens = [], [], [], [], []
        obs = e.reset()
        done = False
        ep_rews = []
        while True:
            batch_obs.append(obs.copy())
            act = get_action(torch.as_tensor(obs, dtype=torch.float32))
            obs, rew, done, _ = e.step(act)
            batch_acts.append(act)
            ep_rews.append(rew)
            if done:
                ep_ret, ep_len = sum(ep_rews), len(ep_rews)
                batch_rets.append(ep_ret)
                batch_lens.append(ep_len)
                batch_weights += list(reward_to_go(np.array(ep_rews, dtype=np.float32)))
                obs, done, ep_rews = e.reset(), False, []
                if len(batch_obs) > batch_size:
                    break
        batch_loss = update(torch.as_tensor(np.array(batch_obs), dtype=torch.float32),
                            torch.as_tensor(batch_acts, dtype=torch.int32),
                            torch.as_tensor(np.array(batch_weights), dtype=torch.float32))
        return batch_loss, batch_rets, batch_lens

    for i in range(4):
        batch_loss, batch_rets, batch_lens = train_one_epoch()
        env.rec(f"epoch {i}", (batch_loss, batch_rets, batch_lens))
    env.rec("params", dict(logits_net.state_dict()))
