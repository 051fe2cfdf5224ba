"""Models of the examples and tutorials: DCGAN (tiny: 16x16 one-channel images), the VAE
of pytorch/examples (small layers) and the DQN tutorial (a synthetic environment instead of
gym's CartPole). Programs `f(torch, env)`, see tutorial_harness.py."""
import math
import random
from collections import deque, namedtuple


def dcgan(torch, env):
    nn, optim = torch.nn, torch.optim
    nc, nz, ngf, ndf, lr, beta1 = 1, 8, 4, 4, 0.0002, 0.5

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            nn.init.normal_(m.weight.data, 0.0, 0.02)
        elif classname.find("BatchNorm") != -1:
            nn.init.normal_(m.weight.data, 1.0, 0.02)
            nn.init.constant_(m.bias.data, 0)

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False),
                nn.BatchNorm2d(ngf * 4),
                nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ngf * 2),
                nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),
                nn.Tanh())

        def forward(self, input):
            return self.main(input)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ndf * 2),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),
                nn.Sigmoid())

        def forward(self, input):
            return self.main(input)

    netG = Generator()
    netG.apply(weights_init)
    w = netG.main[0].weight
    env.rec("weights_init", (abs(w.std().item() - 0.02) < 0.005, w.shape))   # (its own draw)
    netG = env.init(netG)
    netD = env.init(Discriminator().apply(weights_init))
    criterion = nn.BCELoss()
    real_label, fake_label = 1., 0.
    optimizerD = optim.Adam(netD.parameters(), lr=lr, betas=(beta1, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=lr, betas=(beta1, 0.999))

    def train_iteration(real_cpu, noise, netD, netG):
        netD.zero_grad()
        b_size = real_cpu.size(0)
        label = torch.full((b_size,), real_label, dtype=torch.float)
        output = netD(real_cpu).view(-1)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach()).view(-1)
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()
        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake).view(-1)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()
        return errD.item(), errG.item(), D_x, D_G_z1, D_G_z2

    step = env.step(train_iteration)
    for i in range(4):
        real = env.rand(6, nc, 16, 16) * 2 - 1
        env.rec(f"iteration {i}", step(real, env.randn(6, nz, 1, 1), netD, netG))
    env.rec("netG", netG.state_dict())
    env.rec("netD", netD.state_dict())
    netG.eval()
    with torch.no_grad():
        env.rec("fake", netG(env.randn(2, nz, 1, 1)))


def vae(torch, env, fixed_eps=True):
    """fixed_eps=False: reparameterize draws randn_like from the library's generator (the
    records are compared between llgrad's runs only)."""
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    cross = fixed_eps

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(64, 32)
            self.fc21 = nn.Linear(32, 8)
            self.fc22 = nn.Linear(32, 8)
            self.fc3 = nn.Linear(8, 32)
            self.fc4 = nn.Linear(32, 64)
            self.eps = None

        def encode(self, x):
            h1 = F.relu(self.fc1(x))
            return self.fc21(h1), self.fc22(h1)

        def reparameterize(self, mu, logvar):
            std = torch.exp(0.5 * logvar)
            eps = torch.randn_like(std) if self.eps is None else self.eps
            return mu + eps * std

        def decode(self, z):
            h3 = F.relu(self.fc3(z))
            return torch.sigmoid(self.fc4(h3))

        def forward(self, x):
            mu, logvar = self.encode(x.view(-1, 64))
            z = self.reparameterize(mu, logvar)
            return self.decode(z), mu, logvar

    def loss_function(recon_x, x, mu, logvar):
        BCE = F.binary_cross_entropy(recon_x, x.view(-1, 64), reduction="sum")
        KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return BCE + KLD

    model = env.init(VAE())
    optimizer = optim.Adam(model.parameters(), lr=1e-3)

    def train_batch(model, data):
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        optimizer.step()
        return loss.item()

    step = env.step(train_batch)
    model.train()
    train_loss = 0
    for batch_idx in range(4):
        data = env.rand(16, 1, 8, 8)
        model.eps = env.randn(16, 8) if fixed_eps else None
        loss = step(model, data)
        train_loss += loss
        env.rec(f"loss {batch_idx}", loss / len(data), cross)
    env.rec("train_loss", train_loss, cross)
    model.eval()
    with torch.no_grad():
        data = env.rand(8, 1, 8, 8)
        model.eps = env.randn(8, 8) if fixed_eps else None
        recon_batch, mu, logvar = model(data)
        env.rec("test", loss_function(recon_batch, data, mu, logvar).item(), cross)
        comparison = torch.cat([data[:4], recon_batch.view(8, 1, 8, 8)[:4]])
        env.rec("comparison", comparison, cross)
        sample = model.decode(env.randn(4, 8)).cpu()
        env.rec("sample", sample.view(4, 1, 8, 8), cross)
    env.rec("state", model.state_dict(), cross)


def vae_random(torch, env):
    vae(torch, env, fixed_eps=False)


Transition = namedtuple("Transition", ("state", "action", "next_state", "reward"))


class ReplayMemory:
    def __init__(self, capacity, rng):
        self.memory = deque([], maxlen=capacity)
        self.rng = rng

    def push(self, *args):
        self.memory.append(Transition(*args))

    def sample(self, batch_size):
        return self.rng.sample(list(self.memory), batch_size)

    def __len__(self):
        return len(self.memory)


def dqn(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    BATCH_SIZE, GAMMA, EPS_START, EPS_END, EPS_DECAY, TAU, LR = 8, 0.99, 0.9, 0.05, 50, 0.005, 1e-3
    n_observations, n_actions = 4, 2

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

    policy_net = env.init(DQN(n_observations, n_actions))
    target_net = DQN(n_observations, n_actions)
    target_net.load_state_dict(policy_net.state_dict())
    optimizer = optim.AdamW(policy_net.parameters(), lr=LR, amsgrad=True)
    rng = random.Random(0)
    memory = ReplayMemory(100, rng)
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

    def optimize(policy_net, target_net, state_batch, action_batch, reward_batch,
                 non_final_mask, non_final_next_states):
        state_action_values = policy_net(state_batch).gather(1, action_batch)
        next_state_values = torch.zeros(BATCH_SIZE)
        with torch.no_grad():
            next_state_values[non_final_mask] = target_net(non_final_next_states).max(1)[0]
        expected_state_action_values = (next_state_values * GAMMA) + reward_batch
        criterion = nn.SmoothL1Loss()
        loss = criterion(state_action_values, expected_state_action_values.unsqueeze(1))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
        optimizer.step()
        return loss.item()

    step = env.step(optimize)

    def optimize_model():
        if len(memory) < BATCH_SIZE:
            return None
        transitions = memory.sample(BATCH_SIZE)
        batch = Transition(*zip(*transitions))
        non_final_mask = torch.tensor(tuple(map(lambda s: s is not None, batch.next_state)),
                                      dtype=torch.bool)
        non_final_next_states = torch.cat([s for s in batch.next_state if s is not None])
        state_batch = torch.cat(batch.state)
        action_batch = torch.cat(batch.action)
        reward_batch = torch.cat(batch.reward)
        return step(policy_net, target_net, state_batch, action_batch, reward_batch,
                    non_final_mask, non_final_next_states)

    for i_episode in range(2):
        state = env.randn(1, n_observations)
        for t in range(10):
            action = select_action(state)
            reward = torch.tensor([1.0 if action.item() == t % 2 else 0.0])
            terminated = t == 9
            next_state = None if terminated else state * 0.9 + env.randn(1, n_observations) * 0.1
            memory.push(state, action, next_state, reward)
            state = next_state
            env.rec(f"loss {i_episode} {t}", optimize_model())
            target_net_state_dict = target_net.state_dict()
            policy_net_state_dict = policy_net.state_dict()
            for key in policy_net_state_dict:
                target_net_state_dict[key] = policy_net_state_dict[key] * TAU + \
                    target_net_state_dict[key] * (1 - TAU)
            target_net.load_state_dict(target_net_state_dict)
            if terminated:
                break
    env.rec("policy", policy_net.state_dict())
    env.rec("target", target_net.state_dict())
    env.rec("max", (policy_net(state_batch := env.randn(3, 4)).max(1).values,
                    policy_net(state_batch).max(1)[1]))
    env.rec("amsgrad", [optimizer.state[p]["max_exp_avg_sq"] for p in policy_net.parameters()])
