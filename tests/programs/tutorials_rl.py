"""Policy-gradient examples (pytorch/examples reinforcement_learning): REINFORCE and
actor-critic, on a small deterministic cart-pole-like environment. A Categorical over the
policy's softmax: sample, log_prob, entropy; returns normalised with (r - mean) / (std +
eps); the loss as torch.cat(...).sum() or torch.stack(...).sum(). sample=True draws the
actions from the library's generator (records cross=False: compared between llgrad's eager
and compiled runs); sample=False takes the most probable action (the same in every run).
Programs `f(torch, env)`, see tutorial_harness.py."""
from collections import deque, namedtuple
from types import SimpleNamespace

import numpy as np


class ToyCartPole:
    """Deterministic dynamics; reward 1 per step until the pole falls or 12 steps pass."""

    def __init__(self, rng):
        self.rng = rng

    def reset(self):
        self.state = self.rng.standard_normal(4) * 0.05
        self.t = 0
        return self.state, {}

    def step(self, action):
        x, v, th, w = self.state
        force = 1.0 if action == 1 else -1.0
        w = w + 0.05 * (9.8 * np.sin(th) - force * np.cos(th))
        v = v + 0.05 * force
        self.state = np.array([x + 0.05 * v, v, th + 0.05 * w, w])
        self.t += 1
        terminated = abs(self.state[2]) > 0.2
        return self.state, 1.0, terminated, self.t >= 12, {}


def reinforce(torch, env, sample=True):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    Categorical = torch.distributions.Categorical
    gamma, cross = 0.99, not sample

    class Policy(nn.Module):
        def __init__(self):
            super(Policy, self).__init__()
            self.affine1 = nn.Linear(4, 16)
            self.dropout = nn.Dropout(p=0.0)
            self.affine2 = nn.Linear(16, 2)

        def forward(self, x):
            x = self.affine1(x)
            x = self.dropout(x)
            x = F.relu(x)
            action_scores = self.affine2(x)
            return F.softmax(action_scores, dim=1)

    policy = env.init(Policy())
    optimizer = optim.Adam(policy.parameters(), lr=1e-2)
    eps = np.finfo(np.float32).eps.item()

    # (torch.compile(policy): the eager update backpropagates through the compiled forward
    # calls of the episode. The tutorial keeps the episode's lists on the module; llgrad's
    # guards would see them grow at every call, so they live beside it here.)
    net = env.step(policy)
    episode = SimpleNamespace(saved_log_probs=[], rewards=[])

    def select_action(state):
        state = torch.from_numpy(state).float().unsqueeze(0)
        probs = net(state)
        m = Categorical(probs)
        action = m.sample() if sample else probs.argmax(1)
        episode.saved_log_probs.append(m.log_prob(action))
        return action.item()

    def finish_episode():
        R = 0
        policy_loss = []
        returns = deque()
        for r in episode.rewards[::-1]:
            R = r + gamma * R
            returns.appendleft(R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        for log_prob, R in zip(episode.saved_log_probs, returns):
            policy_loss.append(-log_prob * R)
        optimizer.zero_grad()
        policy_loss = torch.cat(policy_loss).sum()
        policy_loss.backward()
        optimizer.step()
        del episode.rewards[:]
        del episode.saved_log_probs[:]
        return policy_loss

    cartpole = ToyCartPole(np.random.default_rng(1))
    running_reward = 10
    for i_episode in range(4):
        state, _ = cartpole.reset()
        ep_reward = 0
        for t in range(1, 100):
            action = select_action(state)
            state, reward, terminated, truncated, _ = cartpole.step(action)
            episode.rewards.append(reward)
            ep_reward += reward
            if terminated or truncated:
                break
        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
        env.rec(f"episode {i_episode}", (ep_reward, finish_episode()), cross)
    env.rec("running_reward", running_reward, cross)
    env.rec("state", policy.state_dict(), cross)


def reinforce_greedy(torch, env):
    reinforce(torch, env, sample=False)


def actor_critic(torch, env, sample=True):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    Categorical = torch.distributions.Categorical
    gamma, cross = 0.99, not sample
    SavedAction = namedtuple('SavedAction', ['log_prob', 'value'])

    class Policy(nn.Module):
        def __init__(self):
            super(Policy, self).__init__()
            self.affine1 = nn.Linear(4, 16)
            self.action_head = nn.Linear(16, 2)
            self.value_head = nn.Linear(16, 1)

        def forward(self, x):
            x = F.relu(self.affine1(x))
            action_prob = F.softmax(self.action_head(x), dim=-1)
            state_values = self.value_head(x)
            return action_prob, state_values

    model = env.init(Policy())
    optimizer = optim.Adam(model.parameters(), lr=3e-2)
    eps = np.finfo(np.float32).eps.item()
    entropies = []

    net = env.step(model)
    episode = SimpleNamespace(saved_actions=[], rewards=[])       # (see reinforce)

    def select_action(state):
        state = torch.from_numpy(state).float()
        probs, state_value = net(state)
        m = Categorical(probs)
        action = m.sample() if sample else torch.argmax(probs)
        episode.saved_actions.append(SavedAction(m.log_prob(action), state_value))
        entropies.append(m.entropy())
        return action.item()

    def finish_episode():
        R = 0
        saved_actions = episode.saved_actions
        policy_losses = []
        value_losses = []
        returns = []
        for r in episode.rewards[::-1]:
            R = r + gamma * R
            returns.insert(0, R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        for (log_prob, value), R in zip(saved_actions, returns):
            advantage = R - value.item()
            policy_losses.append(-log_prob * advantage)
            value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
        optimizer.zero_grad()
        loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
        loss.backward()
        optimizer.step()
        del episode.rewards[:]
        del episode.saved_actions[:]
        return loss

    cartpole = ToyCartPole(np.random.default_rng(2))
    for i_episode in range(4):
        state, _ = cartpole.reset()
        ep_reward = 0
        for t in range(1, 100):
            action = select_action(state)
            state, reward, done, truncated, _ = cartpole.step(action)
            episode.rewards.append(reward)
            ep_reward += reward
            if done or truncated:
                break
        env.rec(f"episode {i_episode}", (ep_reward, finish_episode()), cross)
    env.rec("entropy", torch.stack(entropies[:5]), cross)
    env.rec("state", model.state_dict(), cross)
    m = Categorical(probs=torch.tensor([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]]))
    env.rec("categorical", (m.log_prob(torch.tensor([2, 0])), m.entropy(), m.probs,
                            m.logits, m.param_shape, m.batch_shape, m.event_shape))
    m = Categorical(logits=torch.tensor([1.0, -1.0, 0.5]))
    env.rec("categorical logits", (m.probs, m.logits, m.log_prob(torch.tensor(1)),
                                   m.sample().shape, m.sample((2, 3)).shape, m.mean.shape
                                   if hasattr(m, "_mean") else 0))


def actor_critic_greedy(torch, env):
    actor_critic(torch, env, sample=False)
