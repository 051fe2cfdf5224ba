"""Sweep 15 (D), part 2: vision and RL tutorials with the library's own generator (default
inits, dropout masks and data drawn by torch.manual_seed / randn in both libraries):
the spatial transformer network (affine_grid + grid_sample, Dropout2d), the DQN
tutorial's networks and optimisation step (AdamW amsgrad, smooth L1, gradient value
clipping, soft target updates). See tutorial_harness.py."""
import itertools
import math
import random
from collections import deque, namedtuple

import pytest

pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def spatial_transformer(torch, env):
    """intermediate/spatial_transformer_tutorial, on 28x28 one-channel noise."""
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
            self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
            self.conv2_drop = nn.Dropout2d()
            self.fc1 = nn.Linear(320, 50)
            self.fc2 = nn.Linear(50, 10)
            self.localization = nn.Sequential(
                nn.Conv2d(1, 8, kernel_size=7), nn.MaxPool2d(2, stride=2), nn.ReLU(True),
                nn.Conv2d(8, 10, kernel_size=5), nn.MaxPool2d(2, stride=2), nn.ReLU(True))
            self.fc_loc = nn.Sequential(nn.Linear(10 * 3 * 3, 32), nn.ReLU(True),
                                        nn.Linear(32, 3 * 2))
            self.fc_loc[2].weight.data.zero_()
            self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

        def stn(self, x):
            xs = self.localization(x)
            xs = xs.view(-1, 10 * 3 * 3)
            theta = self.fc_loc(xs)
            theta = theta.view(-1, 2, 3)
            grid = F.affine_grid(theta, x.size(), align_corners=False)
            return F.grid_sample(x, grid, align_corners=False)

        def forward(self, x):
            x = self.stn(x)
            x = F.relu(F.max_pool2d(self.conv1(x), 2))
            x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
            x = x.view(-1, 320)
            x = F.relu(self.fc1(x))
            x = F.dropout(x, training=self.training)
            x = self.fc2(x)
            return F.log_softmax(x, dim=1)

    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.randn(4, 1, 28, 28)
    target = torch.randint(0, 10, (4,))

    def train_step(data, target):
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        return loss

    train_step = env.step(train_step)
    model.train()
    for i in range(3):
        env.rec(f"loss {i}", train_step(data, target))
    env.rec("theta weight", model.fc_loc[2].weight)
    env.rec("grads", [p.grad for p in model.parameters()])
    model.eval()
    with torch.no_grad():
        output = model(data)
        test_loss = F.nll_loss(output, target, reduction="sum").item()
        pred = output.max(1, keepdim=True)[1]
        correct = pred.eq(target.view_as(pred)).sum().item()
        env.rec("test", (test_loss, correct))
        env.rec("stn", model.stn(data))


@pytest.mark.slow       # (~2-5 s: builds of its compiled steps)
def test_spatial_transformer():
    run_tutorial(spatial_transformer, rtol=1e-4, atol=1e-5)


Transition = namedtuple("Transition", ("state", "action", "next_state", "reward"))


class _ToyCartPole:
    """A 4-number state, 2 actions, deterministic given Python's random (gym's stand-in)."""

    def __init__(self, rng):
        self.rng = rng

    def reset(self):
        self.t = 0
        self.s = [self.rng.uniform(-0.05, 0.05) for _ in range(4)]
        return list(self.s)

    def step(self, action):
        self.t += 1
        push = 0.1 if action == 1 else -0.1
        self.s = [self.s[0] + 0.02 * self.s[1], self.s[1] + push, self.s[2] + 0.02 * self.s[3],
                  self.s[3] - push + 0.05 * self.s[2]]
        terminated = abs(self.s[2]) > 0.2 or self.t >= 12
        return list(self.s), 1.0, terminated, False


def dqn(torch, env):
    """intermediate/reinforcement_q_learning: DQN with a replay memory, epsilon-greedy
    actions, AdamW(amsgrad), smooth L1 on gathered Q values, gradient value clipping and
    the soft update of the target network through state_dicts."""
    nn, optim, F = torch.nn, torch.optim, torch.nn.functional
    rng = random.Random(0)

    class ReplayMemory:
        def __init__(self, capacity):
            self.memory = deque([], maxlen=capacity)

        def push(self, *args):
            self.memory.append(Transition(*args))

        def sample(self, batch_size):
            return rng.sample(self.memory, batch_size)

        def __len__(self):
            return len(self.memory)

    class DQN(nn.Module):
        def __init__(self, n_observations, n_actions):
            super().__init__()
            self.layer1 = nn.Linear(n_observations, 32)
            self.layer2 = nn.Linear(32, 32)
            self.layer3 = nn.Linear(32, n_actions)

        def forward(self, x):
            x = F.relu(self.layer1(x))
            x = F.relu(self.layer2(x))
            return self.layer3(x)

    BATCH_SIZE, GAMMA, EPS_START, EPS_END, EPS_DECAY, TAU, LR = 8, 0.99, 0.9, 0.05, 50, 0.005, 1e-3
    torch.manual_seed(0)
    game = _ToyCartPole(rng)
    n_actions, n_observations = 2, 4
    policy_net = DQN(n_observations, n_actions)
    target_net = DQN(n_observations, n_actions)
    target_net.load_state_dict(policy_net.state_dict())
    optimizer = optim.AdamW(policy_net.parameters(), lr=LR, amsgrad=True)
    memory = ReplayMemory(1000)
    steps_done = 0

    def select_action(state):
        nonlocal steps_done
        sample = rng.random()
        eps_threshold = EPS_END + (EPS_START - EPS_END) * math.exp(-1. * steps_done / EPS_DECAY)
        steps_done += 1
        if sample > eps_threshold:
            with torch.no_grad():
                return policy_net(state).max(1).indices.view(1, 1)
        return torch.tensor([[rng.randrange(n_actions)]], dtype=torch.long)

    def learn(state_batch, action_batch, reward_batch, non_final_mask, non_final_next_states):
        state_action_values = policy_net(state_batch).gather(1, action_batch)
        next_state_values = torch.zeros(BATCH_SIZE)
        with torch.no_grad():
            next_state_values[non_final_mask] = target_net(non_final_next_states).max(1).values
        expected_state_action_values = (next_state_values * GAMMA) + reward_batch
        criterion = nn.SmoothL1Loss()
        loss = criterion(state_action_values, expected_state_action_values.unsqueeze(1))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
        optimizer.step()
        return loss

    learn = env.step(learn)

    def optimize_model():
        if len(memory) < BATCH_SIZE:
            return None
        transitions = memory.sample(BATCH_SIZE)
        batch = Transition(*zip(*transitions))
        non_final_mask = torch.tensor(tuple(map(lambda s: s is not None, batch.next_state)),
                                      dtype=torch.bool)
        non_final_next_states = torch.cat([s for s in batch.next_state if s is not None])
        return learn(torch.cat(batch.state), torch.cat(batch.action), torch.cat(batch.reward),
                     non_final_mask, non_final_next_states)

    for i_episode in range(2):
        state = torch.tensor(game.reset(), dtype=torch.float32).unsqueeze(0)
        for t in itertools.count():
            action = select_action(state)
            observation, reward, terminated, truncated = game.step(action.item())
            reward = torch.tensor([reward])
            next_state = None if terminated else \
                torch.tensor(observation, dtype=torch.float32).unsqueeze(0)
            memory.push(state, action, next_state, reward)
            state = next_state
            loss = optimize_model()
            if loss is not None:
                env.rec(f"loss {i_episode} {t}", loss)
            target_net_state_dict = target_net.state_dict()
            policy_net_state_dict = policy_net.state_dict()
            for key in policy_net_state_dict:
                target_net_state_dict[key] = policy_net_state_dict[key] * TAU + \
                    target_net_state_dict[key] * (1 - TAU)
            target_net.load_state_dict(target_net_state_dict)
            if terminated or truncated:
                env.rec(f"duration {i_episode}", t + 1)
                break
    env.rec("policy", policy_net.state_dict())
    env.rec("target", target_net.state_dict())
    env.rec("amsgrad state", [s["max_exp_avg_sq"] for s in optimizer.state.values()])


@pytest.mark.slow       # (~2-5 s: builds of its compiled steps)
def test_dqn():
    run_tutorial(dqn, rtol=1e-4, atol=1e-5)
