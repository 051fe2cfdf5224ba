"""Official tutorials the other files leave out, nearly verbatim (sweep 21b, A): the ONNX
tutorial's SuperResolutionNet (PixelShuffle, orthogonal_ init with calculate_gain) trained a
few steps; the Mario DDQN agent (online/target MarioNet, NumPy-array indexing of Q values,
argmax(axis=1), SmoothL1Loss, target sync); the "Intro to PyTorch" (YouTube) series'
GarmentClassifier training loop with validation and best-model saving. Synthetic data replaces
torchvision's datasets. Programs `f(torch, env)`, see tutorial_harness.py."""
import numpy as np


def super_resolution(torch, env):
    nn = torch.nn
    init = torch.nn.init

    class SuperResolutionNet(nn.Module):
        def __init__(self, upscale_factor, inplace=False):
            super(SuperResolutionNet, self).__init__()

            self.relu = nn.ReLU(inplace=inplace)
            self.conv1 = nn.Conv2d(1, 16, (5, 5), (1, 1), (2, 2))
            self.conv2 = nn.Conv2d(16, 16, (3, 3), (1, 1), (1, 1))
            self.conv3 = nn.Conv2d(16, 8, (3, 3), (1, 1), (1, 1))
            self.conv4 = nn.Conv2d(8, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
            self.pixel_shuffle = nn.PixelShuffle(upscale_factor)

            self._initialize_weights()

        def forward(self, x):
            x = self.relu(self.conv1(x))
            x = self.relu(self.conv2(x))
            x = self.relu(self.conv3(x))
            x = self.pixel_shuffle(self.conv4(x))
            return x

        def _initialize_weights(self):
            init.orthogonal_(self.conv1.weight, init.calculate_gain('relu'))
            init.orthogonal_(self.conv2.weight, init.calculate_gain('relu'))
            init.orthogonal_(self.conv3.weight, init.calculate_gain('relu'))
            init.orthogonal_(self.conv4.weight)

    torch_model = SuperResolutionNet(upscale_factor=3, inplace=True)
    # (orthogonal rows, whatever the random stream: W W^T = gain^2 I)
    w = torch_model.conv4.weight.detach().flatten(1)
    env.rec("conv4 orthogonal", w @ w.T)
    w = torch_model.conv1.weight.detach().flatten(1)
    env.rec("conv1 orthogonal (gain relu)", w @ w.T)
    env.init(torch_model)

    lowres = env.rand(2, 1, 6, 6)
    highres = env.rand(2, 1, 18, 18)
    optimizer = torch.optim.Adam(torch_model.parameters(), lr=1e-3)

    def step(lowres, highres):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(torch_model(lowres), highres)
        loss.backward()
        optimizer.step()
        return loss.detach()

    step = env.step(step)
    for i in range(3):
        env.rec(f"loss {i}", step(lowres, highres))
    torch_model.eval()
    x = env.randn(1, 1, 7, 7)
    x.requires_grad_(True)
    torch_out = torch_model(x)
    env.rec("torch_out", torch_out)
    env.rec("out shape", tuple(torch_out.shape))


def mario_ddqn(torch, env):
    nn = torch.nn

    class MarioNet(nn.Module):
        """mini CNN structure
      input -> (conv2d + relu) x 3 -> flatten -> (dense + relu) x 2 -> output
      """

        def __init__(self, input_dim, output_dim):
            super().__init__()
            c, h, w = input_dim

            if h != 36:
                raise ValueError(f"Expecting input height: 36, got: {h}")
            if w != 36:
                raise ValueError(f"Expecting input width: 36, got: {w}")

            self.online = self.__build_cnn(c, output_dim)

            self.target = self.__build_cnn(c, output_dim)
            self.target.load_state_dict(self.online.state_dict())

            # Q_target parameters are frozen.
            for p in self.target.parameters():
                p.requires_grad = False

        def forward(self, input, model):
            if model == "online":
                return self.online(input)
            elif model == "target":
                return self.target(input)

        def __build_cnn(self, c, output_dim):
            return nn.Sequential(
                nn.Conv2d(in_channels=c, out_channels=32, kernel_size=8, stride=4),
                nn.ReLU(),
                nn.Conv2d(in_channels=32, out_channels=64, kernel_size=4, stride=2),
                nn.ReLU(),
                nn.Conv2d(in_channels=64, out_channels=64, kernel_size=3, stride=1),
                nn.ReLU(),
                nn.Flatten(),
                nn.Linear(64, 128),
                nn.ReLU(),
                nn.Linear(128, output_dim),
            )

    class Mario:
        def __init__(self, state_dim, action_dim):
            self.state_dim = state_dim
            self.action_dim = action_dim
            self.device = "cpu"
            self.net = env.init(MarioNet(self.state_dim, self.action_dim).float())
            self.net = self.net.to(device=self.device)
            self.exploration_rate = 1
            self.exploration_rate_decay = 0.9
            self.exploration_rate_min = 0.1
            self.curr_step = 0
            self.memory = []
            self.batch_size = 4
            self.gamma = 0.9
            self.optimizer = torch.optim.Adam(self.net.parameters(), lr=0.00025)
            self.loss_fn = torch.nn.SmoothL1Loss()
            self.burnin = 4
            self.learn_every = 1
            self.sync_every = 3

        def act(self, state):
            # EXPLORE
            if env.choice(1000) / 1000 < self.exploration_rate:
                action_idx = env.choice(self.action_dim)
            # EXPLOIT
            else:
                state = state[0].__array__() if isinstance(state, tuple) else state.__array__()
                state = torch.tensor(state, device=self.device).unsqueeze(0)
                action_values = self.net(state, model="online")
                action_idx = torch.argmax(action_values, axis=1).item()
            self.exploration_rate *= self.exploration_rate_decay
            self.exploration_rate = max(self.exploration_rate_min, self.exploration_rate)
            self.curr_step += 1
            return action_idx

        def cache(self, state, next_state, action, reward, done):
            def first_if_tuple(x):
                return x[0] if isinstance(x, tuple) else x
            state = first_if_tuple(state).__array__()
            next_state = first_if_tuple(next_state).__array__()
            state = torch.tensor(state)
            next_state = torch.tensor(next_state)
            action = torch.tensor([action])
            reward = torch.tensor([reward])
            done = torch.tensor([done])
            self.memory.append(dict(state=state, next_state=next_state, action=action,
                                    reward=reward, done=done))

        def recall(self):
            picks = [env.choice(len(self.memory)) for _ in range(self.batch_size)]
            batch = [self.memory[i] for i in picks]
            state, next_state, action, reward, done = (
                torch.stack([b[key] for b in batch])
                for key in ("state", "next_state", "action", "reward", "done"))
            return state, next_state, action.squeeze(), reward.squeeze(), done.squeeze()

        def td_estimate(self, state, action):
            current_Q = self.net(state, model="online")[
                np.arange(0, self.batch_size), action
            ]  # Q_online(s,a)
            return current_Q

        @torch.no_grad()
        def td_target(self, reward, next_state, done):
            next_state_Q = self.net(next_state, model="online")
            best_action = torch.argmax(next_state_Q, axis=1)
            next_Q = self.net(next_state, model="target")[
                np.arange(0, self.batch_size), best_action
            ]
            return (reward + (1 - done.float()) * self.gamma * next_Q).float()

        def update_Q_online(self, td_estimate, td_target):
            loss = self.loss_fn(td_estimate, td_target)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            return loss.item()

        def sync_Q_target(self):
            self.net.target.load_state_dict(self.net.online.state_dict())

        def learn_step(self, state, next_state, action, reward, done):
            td_est = self.td_estimate(state, action)
            td_tgt = self.td_target(reward, next_state, done)
            loss = self.update_Q_online(td_est, td_tgt)
            return (td_est.mean().item(), loss)

        def learn(self):
            if self.curr_step % self.sync_every == 0:
                self.sync_Q_target()
            if self.curr_step < self.burnin:
                return None, None
            if self.curr_step % self.learn_every != 0:
                return None, None
            state, next_state, action, reward, done = self.recall()
            return self.learn_step(state, next_state, action, reward, done)

    mario = Mario(state_dim=(4, 36, 36), action_dim=2)
    mario.learn_step = env.step(mario.learn_step)
    frames = env.rand(12, 4, 36, 36).numpy()
    state = frames[0]
    for e in range(10):
        action = mario.act(state)
        next_state = frames[e + 1]
        reward = float(env.choice(3)) - 1.0
        done = e % 5 == 4
        mario.cache(state, next_state, action, reward, done)
        q, loss = mario.learn()
        env.rec(f"act {e}", action)
        env.rec(f"learn {e}", (q, loss))
        state = frames[0] if done else next_state
    env.rec("online", list(mario.net.online.parameters()))
    env.rec("target", list(mario.net.target.parameters()))


def garment_classifier(torch, env):
    nn = torch.nn
    F = torch.nn.functional

    class GarmentClassifier(nn.Module):
        def __init__(self):
            super(GarmentClassifier, self).__init__()
            self.conv1 = nn.Conv2d(1, 6, 5)
            self.pool = nn.MaxPool2d(2, 2)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1 = nn.Linear(16 * 4 * 4, 120)
            self.fc2 = nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, x):
            x = self.pool(F.relu(self.conv1(x)))
            x = self.pool(F.relu(self.conv2(x)))
            x = x.view(-1, 16 * 4 * 4)
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            x = self.fc3(x)
            return x

    data = torch.utils.data
    training_set = data.TensorDataset(env.rand(16, 1, 28, 28), env.randint(0, 10, (16,)))
    validation_set = data.TensorDataset(env.rand(8, 1, 28, 28), env.randint(0, 10, (8,)))
    training_loader = data.DataLoader(training_set, batch_size=4, shuffle=False)
    validation_loader = data.DataLoader(validation_set, batch_size=4, shuffle=False)
    env.rec("training set size", len(training_set))

    model = env.init(GarmentClassifier())
    loss_fn = torch.nn.CrossEntropyLoss()

    # NB: Loss functions expect data in batches, so we're creating batches of 4
    dummy_outputs = env.rand(4, 10)
    dummy_labels = torch.tensor([1, 5, 3, 7])
    loss = loss_fn(dummy_outputs, dummy_labels)
    env.rec("Total loss for this batch", loss.item())

    optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)

    def train_batch(inputs, labels):
        # Zero your gradients for every batch!
        optimizer.zero_grad()
        # Make predictions for this batch
        outputs = model(inputs)
        # Compute the loss and its gradients
        loss = loss_fn(outputs, labels)
        loss.backward()
        # Adjust learning weights
        optimizer.step()
        return loss.item()

    train_batch = env.step(train_batch)

    def train_one_epoch(epoch_index):
        running_loss = 0.
        last_loss = 0.
        for i, data in enumerate(training_loader):
            inputs, labels = data
            running_loss += train_batch(inputs, labels)
            if i % 2 == 1:
                last_loss = running_loss / 2  # loss per batch
                running_loss = 0.
        return last_loss

    epoch_number = 0
    EPOCHS = 3
    best_vloss = 1_000_000.
    saved = []
    for epoch in range(EPOCHS):
        model.train(True)
        avg_loss = train_one_epoch(epoch_number)
        running_vloss = 0.0
        model.eval()
        with torch.no_grad():
            for i, vdata in enumerate(validation_loader):
                vinputs, vlabels = vdata
                voutputs = model(vinputs)
                vloss = loss_fn(voutputs, vlabels)
                running_vloss += vloss
        avg_vloss = running_vloss / (i + 1)
        env.rec(f"LOSS train {epoch}", avg_loss)
        env.rec(f"LOSS valid {epoch}", avg_vloss)
        if avg_vloss < best_vloss:
            best_vloss = avg_vloss
            model_path = env.path('model_{}'.format(epoch_number))
            torch.save(model.state_dict(), model_path)
            saved.append(epoch_number)
        epoch_number += 1
    env.rec("saved", saved)
    saved_model = GarmentClassifier()
    saved_model.load_state_dict(torch.load(model_path))
    env.rec("reloaded", saved_model(validation_set[0][0].unsqueeze(0)))
