"""More tutorial programs whose training step changes Python numbers in the state it reaches
(see programs_counters_stop50.py): gradient accumulation on a micro-step counter, an EMA of
the weights with a warm-up decay, a Lightning-like Trainer keeping global_step and running
sums of detached tensors, a WGAN alternating critic and generator on a step counter, and
two whose number is read as a Python value each call: DQN's epsilon-greedy action
selection (math.exp of steps_done) and a curriculum slicing its batches to a growing
length."""
import math
import random


def grad_accumulation_micro_step(torch, env):
    """Gradient accumulation as the course notebooks write it: the loss divided by
    accum_steps, a micro-step counter on the trainer, the optimiser stepped and the
    gradients zeroed when micro_step % accum_steps == 0 (after clip_grad_norm_)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Trainer:
        def __init__(self, model, accum_steps=3):
            self.model, self.accum_steps, self.micro_step, self.updates = model, accum_steps, 0, 0
            self.opt = torch.optim.Adam(model.parameters(), lr=1e-2)

        def training_step(self, x, y):
            loss = F.cross_entropy(self.model(x), y) / self.accum_steps
            loss.backward()
            self.micro_step += 1
            if self.micro_step % self.accum_steps == 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.opt.step()
                self.opt.zero_grad()
                self.updates += 1
            return loss.detach() * self.accum_steps

    trainer = Trainer(nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3)))
    batches = [(env.randn(4, 5), env.randint(0, 3, (4,))) for _ in range(3)]
    step = env.step(trainer.training_step)
    env.rec("hist", [step(*batches[i % 3]) for i in range(10)])
    env.rec("counts", (trainer.micro_step, trainer.updates))
    env.rec("grads", [p.grad for p in trainer.model.parameters()])
    env.rec("params", list(trainer.model.parameters()))


def ema_warmup_decay(torch, env):
    """TensorFlow's ExponentialMovingAverage with num_updates, as PyTorch ports write it:
    decay = min(decay, (1 + num_updates) / (10 + num_updates)), shadow copies by name,
    shadow -= (1 - decay) * (shadow - param), updated inside the training step."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class EMA:
        def __init__(self, model, decay=0.999):
            self.decay, self.num_updates = decay, 0
            self.shadow = {n: p.detach().clone() for n, p in model.named_parameters()}

        @torch.no_grad()
        def update(self, model):
            self.num_updates += 1
            decay = min(self.decay, (1 + self.num_updates) / (10 + self.num_updates))
            for name, param in model.named_parameters():
                self.shadow[name].sub_((1.0 - decay) * (self.shadow[name] - param))

    model = nn.Sequential(nn.Linear(4, 10), nn.GELU(), nn.Linear(10, 2))
    ema = EMA(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = env.randn(8, 4), env.randn(8, 2)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.smooth_l1_loss(model(x), y)
        loss.backward()
        opt.step()
        ema.update(model)
        return loss.detach()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(8)])
    env.rec("num_updates", ema.num_updates)
    env.rec("shadow", ema.shadow)
    env.rec("params", list(model.parameters()))


def trainer_running_sums(torch, env):
    """A Lightning-like Trainer: training_step increments self.global_step, adds the
    detached loss and the batch accuracy (tensors, no .item()) and the sample count into a
    dict of running sums, which the loop reads and resets every few steps, and returns a
    dict of the loss and the step."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Trainer:
        def __init__(self, model):
            self.model, self.global_step = model, 0
            self.opt = torch.optim.Adam(model.parameters(), lr=5e-3)
            self.running = {"loss": 0.0, "correct": 0.0, "seen": 0}

        def training_step(self, x, y):
            logits = self.model(x)
            loss = F.cross_entropy(logits, y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            self.global_step += 1
            self.running["loss"] += loss.detach() * x.shape[0]
            self.running["correct"] += (logits.argmax(dim=1) == y).sum()
            self.running["seen"] += x.shape[0]
            return {"loss": loss.detach(), "step": self.global_step}

    trainer = Trainer(nn.Sequential(nn.Linear(6, 10), nn.ReLU(), nn.Linear(10, 3)))
    x, y = env.randn(12, 6), env.randint(0, 3, (12,))
    step = env.step(trainer.training_step)
    hist, logs = [], []
    for i in range(9):
        hist.append(step(x, y))
        if trainer.global_step % 4 == 0:
            r = trainer.running
            logs.append((trainer.global_step, r["loss"] / r["seen"], r["correct"], r["seen"]))
            trainer.running = {"loss": 0.0, "correct": 0.0, "seen": 0}
    env.rec("hist", hist)
    env.rec("logs", logs)
    env.rec("running", (trainer.global_step, trainer.running["loss"],
                        trainer.running["correct"], trainer.running["seen"]))
    env.rec("params", list(trainer.model.parameters()))


def wgan_n_critic(torch, env):
    """WGAN as the tutorials write it: a GAN object counting self.step, the critic trained
    every call (RMSprop, weights clipped), the generator when self.step % n_critic == 0."""
    nn = torch.nn
    torch.manual_seed(0)

    class WGAN:
        def __init__(self, nz=3, n_critic=3, clip=0.05):
            self.G = nn.Sequential(nn.Linear(nz, 8), nn.ReLU(), nn.Linear(8, 2))
            self.D = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
            self.opt_g = torch.optim.RMSprop(self.G.parameters(), lr=5e-3)
            self.opt_d = torch.optim.RMSprop(self.D.parameters(), lr=5e-3)
            self.n_critic, self.clip, self.step = n_critic, clip, 0
            self.g_losses = 0

        def train_step(self, real, z):
            self.step += 1
            self.opt_d.zero_grad()
            fake = self.G(z).detach()
            loss_d = -self.D(real).mean() + self.D(fake).mean()
            loss_d.backward()
            self.opt_d.step()
            for p in self.D.parameters():
                p.data.clamp_(-self.clip, self.clip)
            loss_g = None
            if self.step % self.n_critic == 0:
                self.opt_g.zero_grad()
                loss_g = -self.D(self.G(z)).mean()
                loss_g.backward()
                self.opt_g.step()
                self.g_losses += 1
            return loss_d.detach(), loss_g.detach() if loss_g is not None else 0.0

    gan = WGAN()
    data = [(env.randn(6, 2, scale=0.5), env.randn(6, 3)) for _ in range(2)]
    step = env.step(gan.train_step)
    env.rec("hist", [step(*data[i % 2]) for i in range(9)])
    env.rec("counts", (gan.step, gan.g_losses))
    env.rec("params", list(gan.G.parameters()) + list(gan.D.parameters()))


def dqn_epsilon_greedy(torch, env):
    """The PyTorch DQN tutorial's select_action (eps_threshold from math.exp(-steps_done /
    EPS_DECAY), steps_done += 1, a Python random draw against it) and optimize_model (a
    Huber loss on Q(s, a) against r + gamma * max Q_target(s'), gradient value clipping)
    in one compiled step. Reading steps_done through math.exp guards it by value: the step
    is eager's, falling back to eager at the recompile limit."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    EPS_START, EPS_END, EPS_DECAY, GAMMA, n_actions = 0.9, 0.05, 5, 0.99, 3
    policy_net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, n_actions))
    target_net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, n_actions))
    target_net.load_state_dict(policy_net.state_dict())
    optimizer = torch.optim.AdamW(policy_net.parameters(), lr=1e-3, amsgrad=True)
    rng = random.Random(0)

    class Agent:
        steps_done = 0

    agent = Agent()

    def select_action(state):
        sample = rng.random()
        eps_threshold = EPS_END + (EPS_START - EPS_END) * math.exp(-1. * agent.steps_done
                                                                   / EPS_DECAY)
        agent.steps_done += 1
        if sample > eps_threshold:
            with torch.no_grad():
                return policy_net(state).max(1).indices.view(1, 1)
        return torch.tensor([[rng.randrange(n_actions)]], dtype=torch.long)

    def train_step(state, s, a, r, s2):
        action = select_action(state)
        q = policy_net(s).gather(1, a)
        with torch.no_grad():
            next_q = target_net(s2).max(1).values
        expected = r + GAMMA * next_q
        loss = F.smooth_l1_loss(q, expected.unsqueeze(1))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
        optimizer.step()
        return action, loss.detach()

    state = env.randn(1, 4)
    batch = (env.randn(8, 4), env.randint(0, n_actions, (8, 1)), env.randn(8), env.randn(8, 4))
    step = env.step(train_step)
    env.rec("hist", [step(state, *batch) for _ in range(12)])
    env.rec("steps_done", agent.steps_done)
    env.rec("params", list(policy_net.parameters()))


def curriculum_seq_len(torch, env):
    """Curriculum learning on sequence length: seq_len = min(max_len, 4 + self.step // 3)
    slices each batch before an embedding-GRU classifier; the length is read as a Python
    value (a guard per value), the step is eager's."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 6)
            self.rnn = nn.GRU(6, 8, batch_first=True)
            self.fc = nn.Linear(8, 2)

        def forward(self, x):
            out, h = self.rnn(self.emb(x))
            return self.fc(h[-1])

    class Curriculum:
        def __init__(self, model, max_len=7):
            self.model, self.max_len, self.step = model, max_len, 0
            self.opt = torch.optim.Adam(model.parameters(), lr=1e-2)

        def train_step(self, x, y):
            seq_len = min(self.max_len, 4 + self.step // 3)
            self.step += 1
            self.opt.zero_grad()
            loss = F.cross_entropy(self.model(x[:, :seq_len]), y)
            loss.backward()
            self.opt.step()
            return loss.detach()

    cur = Curriculum(Model())
    x, y = env.randint(0, 10, (5, 10)), env.randint(0, 2, (5,))
    step = env.step(cur.train_step)
    env.rec("hist", [step(x, y) for _ in range(13)])
    env.rec("step", cur.step)
    env.rec("params", list(cur.model.parameters()))
