"""Sweep 64 (p1), training mechanics as course notebooks write them, run with PyTorch, with
llgrad eagerly and with llgrad compiling the step (tutorial_harness.py):

- knowledge distillation (Hinton et al.): a teacher in eval mode (BatchNorm running stats,
  Dropout off) under no_grad, KLDivLoss(reduction="batchmean") of temperature-softened
  log-probabilities times T**2, mixed with the hard-label loss;
- a tied-embedding language model trained with gradient accumulation (the micro-step
  compiled, the optimizer step every 3 micro-steps outside it), clip_grad_norm_, weight
  decay only on matrices (two parameter groups), and linear warmup then cosine decay by
  SequentialLR(LinearLR, CosineAnnealingLR);
- SimCLR's NT-Xent loss: two augmented views, F.normalize, a 2N x 2N similarity matrix with
  its diagonal masked, positives at i +- N, cross_entropy over rows;
- a neural ODE fitted to a spiral with a hand-written fixed-step RK4 integrator;
- a two-layer GCN whose message passing is index_add_ over an edge list with symmetric
  degree normalisation, trained on the labelled nodes only."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def distillation(torch, env):
    nn, F = torch.nn, torch.nn.functional
    T, alpha = 4.0, 0.7

    teacher = env.init(nn.Sequential(nn.Linear(12, 48), nn.BatchNorm1d(48), nn.ReLU(),
                                     nn.Dropout(0.5), nn.Linear(48, 5)))
    student = env.init(nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5)))
    with torch.no_grad():          # (a "trained" teacher: running stats not the defaults)
        teacher[1].running_mean.copy_(env.randn(48, scale=0.1))
        teacher[1].running_var.copy_(env.rand(48) + 0.5)
    teacher.eval()
    kl = nn.KLDivLoss(reduction="batchmean")
    opt = torch.optim.SGD(student.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)

    def train_step(x, y):
        with torch.no_grad():
            teacher_logits = teacher(x)
        logits = student(x)
        soft = kl(F.log_softmax(logits / T, dim=1), F.softmax(teacher_logits / T, dim=1))
        hard = F.cross_entropy(logits, y)
        loss = alpha * soft * T * T + (1 - alpha) * hard
        opt.zero_grad()
        loss.backward()
        opt.step()
        agree = (logits.argmax(1) == teacher_logits.argmax(1)).sum().item()
        return loss.detach(), soft.detach(), agree

    step = env.step(train_step)
    for it in range(5):
        env.rec(f"step {it}", step(env.randn(16, 12), env.randint(0, 5, (16,))))
    env.rec("params", dict(student.state_dict()))
    env.rec("teacher", dict(teacher.state_dict()))


def tied_lm_accumulation(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, E, accum = 16, 12, 3

    class TiedLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, E)
            self.rnn = nn.LSTM(E, E, batch_first=True)
            self.norm = nn.LayerNorm(E)
            self.decoder = nn.Linear(E, V)
            self.decoder.weight = self.embed.weight          # (weight tying)

        def forward(self, idx):
            h, _ = self.rnn(self.embed(idx))
            return self.decoder(self.norm(h))

    model = env.init(TiedLM())
    decay, no_decay = [], []
    for n, p in model.named_parameters():                     # (tied weight listed once)
        (decay if p.ndim == 2 else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-2,
                            betas=(0.9, 0.95))
    warmup = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=2)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=1e-4)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warmup, cosine], milestones=[2])

    def micro_step(idx):
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), idx[:, 1:].reshape(-1))
        (loss / accum).backward()
        return loss.detach()

    step = env.step(micro_step)
    opt.zero_grad()
    for it in range(12):
        env.rec(f"loss {it}", step(env.randint(0, V, (2, 7))))
        if (it + 1) % accum == 0:
            norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            env.rec(f"update {it}", (norm, [g["lr"] for g in opt.param_groups]))
    env.rec("tied", model.decoder.weight is model.embed.weight)
    env.rec("params", dict(model.state_dict()))


def simclr_nt_xent(torch, env):
    nn, F = torch.nn, torch.nn.functional
    tau = 0.5

    # (no bias before BatchNorm: its gradient would be rounding noise that Adam scales up)
    encoder = env.init(nn.Sequential(nn.Linear(10, 32, bias=False), nn.BatchNorm1d(32),
                                     nn.ReLU(), nn.Linear(32, 16)))
    projector = env.init(nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 8)))
    opt = torch.optim.Adam(list(encoder.parameters()) + list(projector.parameters()), lr=1e-3)

    def nt_xent(z1, z2):
        n = z1.shape[0]
        z = F.normalize(torch.cat([z1, z2], dim=0), dim=1)
        sim = z @ z.T / tau
        sim.fill_diagonal_(float("-inf"))
        targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
        return F.cross_entropy(sim, targets)

    def train_step(x, noise1, noise2):
        v1 = x + 0.1 * noise1                          # ("augmentations")
        v2 = x * (1 + 0.1 * noise2)
        loss = nt_xent(projector(encoder(v1)), projector(encoder(v2)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        env.rec(f"loss {it}", step(env.randn(8, 10), env.randn(8, 10), env.randn(8, 10)))
    env.rec("params", {**encoder.state_dict(), **projector.state_dict()})


def neural_ode_rk4(torch, env):
    nn = torch.nn

    class ODEFunc(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 2))

        def forward(self, t, y):
            return self.net(y ** 3)

    def odeint_rk4(func, y0, t):
        ys = [y0]
        y = y0
        for i in range(len(t) - 1):
            dt = t[i + 1] - t[i]
            k1 = func(t[i], y)
            k2 = func(t[i] + dt / 2, y + dt * k1 / 2)
            k3 = func(t[i] + dt / 2, y + dt * k2 / 2)
            k4 = func(t[i] + dt, y + dt * k3)
            y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            ys.append(y)
        return torch.stack(ys)

    true_A = torch.tensor([[-0.1, 2.0], [-2.0, -0.1]])
    t = torch.linspace(0.0, 1.0, 9)
    with torch.no_grad():
        true_y = odeint_rk4(lambda t, y: (y ** 3) @ true_A, torch.tensor([[2.0, 0.0]]), t)
    func = env.init(ODEFunc())
    opt = torch.optim.RMSprop(func.parameters(), lr=1e-3)

    def train_step(batch_y0, batch_t, batch_y):
        pred_y = odeint_rk4(func, batch_y0, batch_t)
        loss = torch.mean(torch.abs(pred_y - batch_y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        s = env.choice(4)                     # (a random window of the trajectory)
        env.rec(f"loss {it}", step(true_y[s], t[:5], true_y[s:s + 5]))
    env.rec("params", dict(func.state_dict()))


def gcn_index_add(torch, env, p_drop=0.5):
    nn, F = torch.nn, torch.nn.functional
    n_nodes, n_feat, n_cls = 10, 6, 3

    class GCNLayer(nn.Module):
        def __init__(self, c_in, c_out):
            super().__init__()
            self.linear = nn.Linear(c_in, c_out, bias=False)
            self.bias = nn.Parameter(torch.zeros(c_out))

        def forward(self, x, edge_index):
            loops = torch.arange(x.shape[0])
            src = torch.cat([edge_index[0], loops])
            dst = torch.cat([edge_index[1], loops])
            deg = torch.zeros(x.shape[0]).index_add_(0, dst, torch.ones(dst.shape[0]))
            norm = deg[src].rsqrt() * deg[dst].rsqrt()
            h = self.linear(x)
            out = torch.zeros_like(h).index_add_(0, dst, h[src] * norm.unsqueeze(1))
            return out + self.bias

    class GCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = GCNLayer(n_feat, 16), GCNLayer(16, n_cls)

        def forward(self, x, edge_index):
            x = F.relu(self.conv1(x, edge_index))
            x = F.dropout(x, p=p_drop, training=self.training)
            return self.conv2(x, edge_index)

    model = env.init(GCN())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=5e-4)
    src = env.randint(0, n_nodes, (20,))
    dst = (src + env.randint(1, n_nodes, (20,))) % n_nodes
    edge_index = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])  # undirected
    x, y = env.randn(n_nodes, n_feat), env.randint(0, n_cls, (n_nodes,))
    train_mask = torch.tensor([True, False] * 5)
    cross = p_drop == 0.0          # (dropout's draws are llgrad's own stream)

    def train_step(x, edge_index, y, mask):
        model.train()
        out = model(x, edge_index)
        loss = F.cross_entropy(out[mask], y[mask])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        env.rec(f"loss {it}", step(x, edge_index, y, train_mask), cross=cross)
    model.eval()
    with torch.no_grad():
        pred = model(x, edge_index).argmax(1)
    env.rec("acc", (pred[~train_mask] == y[~train_mask]).float().mean(), cross=cross)
    env.rec("params", dict(model.state_dict()), cross=cross)


def gcn_index_add_nodropout(torch, env):
    """gcn_index_add without dropout's draws, so every record compares with torch."""
    gcn_index_add(torch, env, p_drop=0.0)


PROGRAMS = {"distillation": distillation, "tied_lm_accumulation": tied_lm_accumulation,
            "simclr_nt_xent": simclr_nt_xent, "neural_ode_rk4": neural_ode_rk4,
            "gcn_index_add": gcn_index_add, "gcn_index_add_nodropout": gcn_index_add_nodropout}


# (the default run keeps the quickest; the others, 1.5-8 s each with a cold kernel
# cache, are marked slow)
FAST = ('distillation',)


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
