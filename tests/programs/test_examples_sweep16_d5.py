"""Sweep 16 (D), part 5: pytorch/examples' siamese_network (twin towers from a backbone's
children, the pair's features concatenated, sigmoid + BCELoss, apply(init_weights) with
xavier_uniform_ and bias.data.fill_, Adadelta + StepLR, where(outputs > 0.5, 1, 0)) with a
small CNN in place of resnet18, and reinforcement_learning/reinforce.py (per-step
Categorical log-probs cat-ed and summed, dropout in the policy, returns normalised).
See tutorial_harness.py."""
import numpy as np
import pytest

pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def siamese(torch, env):
    nn, optim = torch.nn, torch.optim
    StepLR = torch.optim.lr_scheduler.StepLR

    class SiameseNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            backbone = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(inplace=True),
                                     nn.AdaptiveAvgPool2d((1, 1)), nn.Linear(1, 1))
            self.fc_in_features = 4
            # (the example drops resnet's last child, its fc layer, the same way)
            self.resnet = torch.nn.Sequential(*(list(backbone.children())[:-1]))
            self.fc = nn.Sequential(nn.Linear(self.fc_in_features * 2, 8), nn.ReLU(inplace=True),
                                    nn.Linear(8, 1))
            self.sigmoid = nn.Sigmoid()
            self.resnet.apply(self.init_weights)
            self.fc.apply(self.init_weights)

        def init_weights(self, m):
            if isinstance(m, nn.Linear):
                torch.nn.init.xavier_uniform_(m.weight)
                m.bias.data.fill_(0.01)

        def forward_once(self, x):
            output = self.resnet(x)
            return output.view(output.size()[0], -1)

        def forward(self, input1, input2):
            output1 = self.forward_once(input1)
            output2 = self.forward_once(input2)
            output = torch.cat((output1, output2), 1)
            output = self.fc(output)
            return self.sigmoid(output)

    model = env.init(SiameseNetwork())
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    criterion = nn.BCELoss()

    def train_step(images_1, images_2, targets):
        optimizer.zero_grad()
        outputs = model(images_1, images_2).squeeze()
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        return loss

    train_step = env.step(train_step)
    rng = np.random.default_rng(2)
    pairs = [(env.rand(6, 1, 8, 8), env.rand(6, 1, 8, 8),
              torch.from_numpy(rng.integers(0, 2, 6).astype(np.float32))) for _ in range(2)]
    for epoch in range(3):
        model.train()
        for batch_idx, (images_1, images_2, targets) in enumerate(pairs):
            env.rec(f"loss {epoch} {batch_idx}", train_step(images_1, images_2, targets))
        scheduler.step()
        model.eval()
        test_loss, correct = 0, 0
        with torch.no_grad():
            for (images_1, images_2, targets) in pairs:
                outputs = model(images_1, images_2).squeeze()
                test_loss += criterion(outputs, targets).sum().item()
                pred = torch.where(outputs > 0.5, 1, 0)
                correct += pred.eq(targets.view_as(pred)).sum().item()
        env.rec(f"test {epoch}", (test_loss / 2, correct))
        env.rec(f"pred {epoch}", pred)
    env.rec("state", dict(model.state_dict()))


def test_siamese_network():
    run_tutorial(siamese, rtol=1e-5, atol=1e-6)


def reinforce(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    Categorical = torch.distributions.Categorical
    gamma, eps = 0.99, np.finfo(np.float32).eps.item()
    uniforms = np.random.default_rng(11)

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.affine1 = nn.Linear(4, 16)
            self.dropout = nn.Dropout(p=0.6)
            self.affine2 = nn.Linear(16, 2)
            self.saved_log_probs = []
            self.rewards = []

        def forward(self, x):
            x = self.affine1(x)
            x = self.dropout(x)
            x = F.relu(x)
            return F.softmax(self.affine2(x), dim=1)

    policy = env.init(Policy())
    policy.eval()           # (dropout draws differ between the libraries)
    optimizer = optim.Adam(policy.parameters(), lr=1e-2)

    def select_action(state):
        state = torch.from_numpy(state).float().unsqueeze(0)
        probs = policy(state)
        m = Categorical(probs)
        action = torch.tensor([int(uniforms.random() > probs[0, 0].item())])
        policy.saved_log_probs.append(m.log_prob(action))
        return action.item()

    def finish_episode():
        R = 0
        policy_loss = []
        returns = []
        for r in policy.rewards[::-1]:
            R = r + gamma * R
            returns.insert(0, R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        for log_prob, R in zip(policy.saved_log_probs, returns):
            policy_loss.append(-log_prob * R)
        optimizer.zero_grad()
        policy_loss = torch.cat(policy_loss).sum()
        policy_loss.backward()
        optimizer.step()
        del policy.rewards[:]
        del policy.saved_log_probs[:]
        return policy_loss

    rng = np.random.default_rng(4)
    for i_episode in range(3):
        state = rng.uniform(-0.5, 0.5, 4)
        for t in range(1, 10):
            action = select_action(state)
            state = state + 0.2 * np.array([state[1], 2.0 * action - 1, -state[0], state[2]])
            policy.rewards.append(float(np.cos(state[0])))
            if abs(state[0]) > 1:
                break
        env.rec(f"loss {i_episode}", finish_episode())
    env.rec("params", list(policy.parameters()))

    def update(states, actions, returns):
        m = Categorical(policy(states))
        loss = (-m.log_prob(actions) * returns).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    update = env.step(update)
    for k in range(3):
        env.rec(f"batched {k}", update(env.randn(5, 4), env.randint(0, 2, (5,)), env.randn(5)))
    policy.train()
    torch.manual_seed(3)
    env.rec("train-mode probs", policy(env.randn(3, 4)), cross=False)


def test_reinforce():
    run_tutorial(reinforce, rtol=1e-5, atol=1e-6)


def mass_spring(torch, env):
    """differentiable_physics/mass_spring.py: particles on springs integrated by
    semi-implicit Euler, the forces accumulated by indexed in-place adds, particle 0 pinned
    by an indexed write every step; Adam on the initial positions."""
    nn, optim = torch.nn, torch.optim

    class MassSpringSystem(nn.Module):
        def __init__(self, num_particles, springs, mass=1.0, dt=0.01, gravity=9.81):
            super().__init__()
            self.mass, self.springs, self.dt, self.gravity = mass, springs, dt, gravity
            self.initial_position_0 = torch.tensor([0.0, 0.0])
            self.initial_positions_rest = nn.Parameter(torch.randn(num_particles - 1, 2))
            self.velocities = torch.zeros(num_particles, 2)

        def forward(self, steps):
            positions = torch.cat([self.initial_position_0.unsqueeze(0),
                                   self.initial_positions_rest], dim=0)
            velocities = self.velocities
            for _ in range(steps):
                forces = torch.zeros_like(positions)
                for (i, j, rest_length, stiffness) in self.springs:
                    xi, xj = positions[i], positions[j]
                    dir_vec = xj - xi
                    dist = dir_vec.norm()
                    force = stiffness * (dist - rest_length) * dir_vec / (dist + 1e-6)
                    forces[i] += force
                    forces[j] -= force
                forces[:, 1] -= self.gravity * self.mass
                acceleration = forces / self.mass
                velocities = velocities + acceleration * self.dt
                positions = positions + velocities * self.dt
                positions[0] = self.initial_position_0
                velocities[0] = torch.tensor([0.0, 0.0])
            return positions

    system = env.init(MassSpringSystem(3, [(0, 1, 1.0, 10.0), (1, 2, 0.5, 4.0)], dt=0.02))
    optimizer = optim.Adam(system.parameters(), lr=0.05)
    target_positions = torch.tensor([[0.0, 0.0], [1.0, 0.0], [1.5, -0.2]])

    def epoch(steps):
        optimizer.zero_grad()
        final_positions = system(steps)
        loss = (final_positions - target_positions).pow(2).mean()
        loss.backward()
        optimizer.step()
        return loss, final_positions.detach()   # (for the plot)

    epoch = env.step(epoch)
    for k in range(4):
        env.rec(f"epoch {k}", epoch(8))
    env.rec("velocities untouched", system.velocities)
    env.rec("params", system.initial_positions_rest)
    with torch.no_grad():
        env.rec("eval", system(12))


def test_mass_spring():
    run_tutorial(mass_spring, rtol=1e-5, atol=1e-6)
