"""Sweep 16 (D), part 2: programs of the pytorch/examples repository at small sizes:
reinforcement_learning/actor_critic.py (Categorical, smooth_l1_loss, normalised returns) on a
tiny hand-written environment with the action drawn from the policy's probabilities by a
shared uniform stream, fast_neural_style's TransformerNet (ReflectionPad2d, InstanceNorm2d,
nearest upsampling, gram matrices) and mnist_rnn (LSTM, StepLR). See tutorial_harness.py."""
import numpy as np
import pytest

pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


class LineWorld:
    """A cart on a line: action 0 pushes left, 1 right; done when it leaves [-1, 1]."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def reset(self):
        self.s = self.rng.uniform(-0.3, 0.3, 4)
        return self.s.copy()

    def step(self, action):
        self.s = self.s + 0.1 * np.array([self.s[1], 1.0 if action else -1.0, self.s[3], self.s[0]])
        done = bool(abs(self.s[0]) > 1 or abs(self.s[2]) > 1)
        return self.s.copy(), 1.0, done


def actor_critic(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    from collections import namedtuple
    Categorical = torch.distributions.Categorical
    SavedAction = namedtuple('SavedAction', ['log_prob', 'value'])
    gamma = 0.99
    eps = np.finfo(np.float32).eps.item()
    uniforms = np.random.default_rng(7)

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.affine1 = nn.Linear(4, 32)
            self.action_head = nn.Linear(32, 2)
            self.value_head = nn.Linear(32, 1)
            self.saved_actions = []
            self.rewards = []

        def forward(self, x):
            x = F.relu(self.affine1(x))
            action_prob = F.softmax(self.action_head(x), dim=-1)
            state_values = self.value_head(x)
            return action_prob, state_values

    model = env.init(Policy())
    optimizer = optim.Adam(model.parameters(), lr=3e-2)

    def select_action(state):
        state = torch.from_numpy(state).float()
        probs, state_value = model(state)
        m = Categorical(probs)
        action = torch.tensor(int(uniforms.random() > probs[0].item()))
        model.saved_actions.append(SavedAction(m.log_prob(action), state_value))
        env.rec("entropy", m.entropy())
        return action.item()

    def finish_episode():
        R = 0
        saved_actions = model.saved_actions
        policy_losses = []
        value_losses = []
        returns = []
        for r in model.rewards[::-1]:
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
        del model.rewards[:]
        del model.saved_actions[:]
        return loss

    world = LineWorld(1)
    running_reward = 10
    for i_episode in range(3):
        state, ep_reward = world.reset(), 0
        for t in range(1, 12):
            action = select_action(state)
            state, reward, done = world.step(action)
            model.rewards.append(reward)
            ep_reward += reward
            if done:
                break
        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
        env.rec(f"loss {i_episode}", finish_episode())
        env.rec(f"running {i_episode}", running_reward)
    env.rec("params", list(model.parameters()))

    # the compiled part: one batched actor-critic update of the same shape every call
    def update(states, actions, returns):
        probs, values = model(states)
        m = Categorical(probs)
        advantage = returns - values.squeeze(1).detach()
        loss = (-m.log_prob(actions) * advantage).sum() \
            + F.smooth_l1_loss(values.squeeze(1), returns, reduction="sum")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss, m.entropy().mean()

    update = env.step(update)
    for k in range(3):
        out = update(env.randn(8, 4), env.randint(0, 2, (8,)), env.randn(8))
        env.rec(f"batched {k}", out)


def test_actor_critic():
    run_tutorial(actor_critic, rtol=1e-5, atol=1e-6)


def fast_neural_style(torch, env):
    """fast_neural_style/neural_style/transformer_net.py with utils.gram_matrix and the
    content + style loss of one training step (the VGG features replaced by a small net)."""
    nn, optim = torch.nn, torch.optim

    class ConvLayer(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, stride):
            super().__init__()
            reflection_padding = kernel_size // 2
            self.reflection_pad = nn.ReflectionPad2d(reflection_padding)
            self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)

        def forward(self, x):
            return self.conv2d(self.reflection_pad(x))

    class ResidualBlock(nn.Module):
        def __init__(self, channels):
            super().__init__()
            self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
            self.in1 = nn.InstanceNorm2d(channels, affine=True)
            self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
            self.in2 = nn.InstanceNorm2d(channels, affine=True)
            self.relu = nn.ReLU()

        def forward(self, x):
            residual = x
            out = self.relu(self.in1(self.conv1(x)))
            out = self.in2(self.conv2(out))
            return out + residual

    class UpsampleConvLayer(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
            super().__init__()
            self.upsample = upsample
            reflection_padding = kernel_size // 2
            self.reflection_pad = nn.ReflectionPad2d(reflection_padding)
            self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)

        def forward(self, x):
            x_in = x
            if self.upsample:
                x_in = nn.functional.interpolate(x_in, mode='nearest', scale_factor=self.upsample)
            return self.conv2d(self.reflection_pad(x_in))

    class TransformerNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = ConvLayer(3, 4, kernel_size=5, stride=1)
            self.in1 = nn.InstanceNorm2d(4, affine=True)
            self.conv2 = ConvLayer(4, 8, kernel_size=3, stride=2)
            self.in2 = nn.InstanceNorm2d(8, affine=True)
            self.res1 = ResidualBlock(8)
            self.deconv1 = UpsampleConvLayer(8, 4, kernel_size=3, stride=1, upsample=2)
            self.in4 = nn.InstanceNorm2d(4, affine=True)
            self.deconv3 = ConvLayer(4, 3, kernel_size=5, stride=1)
            self.relu = nn.ReLU()

        def forward(self, X):
            y = self.relu(self.in1(self.conv1(X)))
            y = self.relu(self.in2(self.conv2(y)))
            y = self.res1(y)
            y = self.relu(self.in4(self.deconv1(y)))
            return self.deconv3(y)

    def gram_matrix(y):
        (b, ch, h, w) = y.size()
        features = y.view(b, ch, w * h)
        features_t = features.transpose(1, 2)
        return features.bmm(features_t) / (ch * h * w)

    def normalize_batch(batch):
        mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
        std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
        batch = batch.div_(255.0)
        return (batch - mean) / std

    transformer = env.init(TransformerNet())
    features = env.init(nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(),
                                      nn.MaxPool2d(2), nn.Conv2d(6, 6, 3, padding=1)))
    for p in features.parameters():
        p.requires_grad_(False)
    optimizer = optim.Adam(transformer.parameters(), 1e-2)
    mse_loss = torch.nn.MSELoss()
    style = normalize_batch(env.rand(1, 3, 12, 12) * 255)
    gram_style = gram_matrix(features(style))
    env.rec("gram style", gram_style)

    def train(x):
        optimizer.zero_grad()
        y = transformer(x)
        y = normalize_batch(y)
        x = normalize_batch(x.clone())
        features_y, features_x = features(y), features(x)
        content_loss = 1e1 * mse_loss(features_y, features_x)
        gm_y = gram_matrix(features_y)
        style_loss = 1e3 * mse_loss(gm_y, gram_style[:len(x), :, :].expand_as(gm_y))
        total_loss = content_loss + style_loss
        total_loss.backward()
        optimizer.step()
        return content_loss, style_loss

    train = env.step(train)
    for k in range(3):
        env.rec(f"losses {k}", train(env.rand(2, 3, 12, 12) * 255))
    # (a per-channel shift that an InstanceNorm removes -- a convolution's bias right before
    # one, and the residual block's last bias -- has a zero gradient up to rounding, which
    # Adam turns into whole steps: those biases are left out)
    invisible = ("res1.in2.bias",) + tuple(n + ".conv2d.bias" for n in (
        "conv1", "conv2", "res1.conv1", "res1.conv2", "deconv1"))
    env.rec("params", {n: p for n, p in transformer.named_parameters() if n not in invisible})
    with torch.no_grad():
        env.rec("stylized", transformer(env.rand(1, 3, 10, 10) * 255).clamp(0, 255))


def test_fast_neural_style():
    run_tutorial(fast_neural_style, rtol=1e-4, atol=1e-5)


def mnist_rnn(torch, env):
    """mnist_rnn/main.py: an LSTM over the image rows, the last step through
    Linear/log_softmax, nll_loss, Adadelta with StepLR."""
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    StepLR = torch.optim.lr_scheduler.StepLR

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(input_size=8, hidden_size=16, batch_first=True)
            self.batchnorm = nn.BatchNorm1d(16)
            self.dropout1 = nn.Dropout2d(0.25)
            self.dropout2 = nn.Dropout2d(0.5)
            self.fc1 = nn.Linear(16, 12)
            self.fc2 = nn.Linear(12, 10)

        def forward(self, input):
            input = input.reshape(-1, 8, 8)
            output, hidden = self.rnn(input)
            output = output[:, -1, :]
            output = self.batchnorm(output)
            output = self.dropout1(output)
            output = self.fc1(output)
            output = F.relu(output)
            output = self.dropout2(output)
            output = self.fc2(output)
            return F.log_softmax(output, dim=1)

    model = env.init(Net())
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)

    def train_step(data, target):
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        return loss

    train_step = env.step(train_step)
    data, target = env.rand(12, 1, 8, 8), env.randint(0, 10, (12,))
    for epoch in range(3):
        model.eval()    # (dropout draws differ between the libraries; eval keeps BatchNorm
        loss = train_step(data, target)   # on running stats, a deterministic step)
        env.rec(f"loss {epoch}", loss)
        scheduler.step()
        env.rec(f"lr {epoch}", optimizer.param_groups[0]["lr"])
    model.train()
    loss = train_step(data, target)
    env.rec("train-mode loss", loss, cross=False)
    model.eval()
    with torch.no_grad():
        output = model(data)
        test_loss = F.nll_loss(output, target, reduction='sum').item()
        pred = output.argmax(dim=1, keepdim=True)
        correct = pred.eq(target.view_as(pred)).sum().item()
    env.rec("test", (test_loss, correct))
    env.rec("bn", dict(model.batchnorm.state_dict()))


def test_mnist_rnn():
    run_tutorial(mnist_rnn, rtol=1e-5, atol=1e-6)


def _instance_norm_load(lib, tmp_path):
    """neural_style.py's stylize(): an old checkpoint's InstanceNorm running stats make
    load_state_dict fail (with strict=False too) until the example's regex drops them."""
    import re
    nn = lib.nn
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.InstanceNorm2d(4, affine=True))
    old = {k: v.clone() for k, v in model.state_dict().items()}     # (no _metadata)
    old["1.running_mean"], old["1.running_var"] = lib.zeros(4), lib.ones(4)
    path = str(tmp_path / f"{lib.__name__}.model")
    lib.save(old, path)
    out = []
    for strict in (True, False):
        try:
            model.load_state_dict(lib.load(path), strict=strict)
            out.append("loaded")
        except RuntimeError as e:
            out.append(str(e))
    state_dict = lib.load(path)
    for k in list(state_dict.keys()):
        if re.search(r'in\d+\.running_(mean|var)$', k) or re.search(r'\d+\.running_(mean|var)$', k):
            del state_dict[k]
    out.append(tuple(model.load_state_dict(state_dict)))
    out.append(tuple(model.load_state_dict(model.state_dict())))   # (version 2 metadata)
    tracked = nn.InstanceNorm2d(4, track_running_stats=True)
    out.append(tuple(tracked.load_state_dict(old_stats(lib))))
    return out


def old_stats(lib):
    return {"running_mean": lib.zeros(4), "running_var": lib.ones(4)}


def test_instance_norm_old_checkpoint(tmp_path):
    import torch

    import llgrad
    assert _instance_norm_load(llgrad, tmp_path) == _instance_norm_load(torch, tmp_path)
