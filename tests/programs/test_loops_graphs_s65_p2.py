"""Sweep 65 (p2), trickier training-loop and model idioms, run with PyTorch, with llgrad
eagerly and with llgrad compiling the training step (tutorial_harness.py):

- gradient accumulation decided inside the compiled step by a Python counter (backward
  every call, opt.step() and zero_grad() every third), with torch.amp.GradScaler on CPU;
- early stopping inside the step: the best state_dict cloned when the loss improves, and
  restored by load_state_dict at the end;
- a graph attention layer: an edge softmax by scatter_reduce("amax"), exp, index_add_
  of the denominators, and index_add_ of the weighted messages;
- a speech model: a BiGRU with log_softmax trained by F.ctc_loss (blank 0, per-utterance
  lengths), with CosineAnnealingWarmRestarts stepped by a fractional epoch in the step;
- DeepAR-style count data: NegativeBinomial(total_count, logits) and StudentT heads;
- interpretable N-BEATS: polynomial trend and Fourier seasonality bases as buffers;
- knowledge distillation: KLDivLoss(log_target=True, reduction="batchmean") at a
  temperature with an index_put_(accumulate=True) class-count side statistic;
- REINFORCE for a pointer policy: torch.multinomial picks (eager vs compiled only),
  Categorical(logits).log_prob and entropy, a moving-average baseline."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def accumulate_gradscaler(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(5, 10), nn.SiLU(), nn.Linear(10, 3)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", init_scale=256.0, growth_interval=2)
    counter = {"n": 0}

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y) / 3
        scaler.scale(loss).backward()
        counter["n"] += 1
        if counter["n"] % 3 == 0:
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
        return loss.detach()

    step = env.step(train_step)
    for it in range(9):
        env.rec(f"loss {it}", step(env.randn(6, 5), env.randint(0, 3, (6,))))
    env.rec("scale", scaler.get_scale())
    env.rec("params", dict(model.state_dict()))


def early_stopping_state(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    tracker = {"best": float("inf"), "state": None, "bad": 0}

    def train_step(x, y):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        value = loss.item()
        if value < tracker["best"]:
            tracker["best"] = value
            tracker["state"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
            tracker["bad"] = 0
        else:
            tracker["bad"] += 1
        return value

    step = env.step(train_step)
    x = env.randn(8, 4)
    y = env.randn(8, 1)
    for it in range(6):
        env.rec(f"loss {it}", step(x, y))
        if tracker["bad"] >= 2:
            break
    model.load_state_dict(tracker["state"])
    env.rec("best", tracker["best"])
    env.rec("restored", dict(model.state_dict()))


def graph_attention(torch, env):
    nn, F = torch.nn, torch.nn.functional
    N, Fin, H = 6, 4, 8
    src = torch.tensor([0, 1, 2, 3, 4, 5, 0, 2, 1, 3, 0, 1, 2, 3, 4, 5])
    dst = torch.tensor([1, 2, 3, 4, 5, 0, 3, 5, 0, 1, 0, 1, 2, 3, 4, 5])

    class GATLayer(nn.Module):
        def __init__(self, i, o):
            super().__init__()
            self.W = nn.Linear(i, o, bias=False)
            self.a_src = nn.Parameter(torch.zeros(o))
            self.a_dst = nn.Parameter(torch.zeros(o))

        def forward(self, x):
            h = self.W(x)
            e = F.leaky_relu((h * self.a_src).sum(-1)[src] + (h * self.a_dst).sum(-1)[dst], 0.2)
            e_max = torch.full((x.shape[0],), float("-inf")).scatter_reduce(
                0, dst, e, reduce="amax", include_self=True)
            w = torch.exp(e - e_max[dst])
            denom = torch.zeros(x.shape[0]).index_add_(0, dst, w)
            alpha = w / denom[dst]
            return torch.zeros_like(h).index_add_(0, dst, alpha[:, None] * h[src])

    gat = env.init(GATLayer(Fin, H))
    with torch.no_grad():
        gat.a_src.copy_(env.randn(H, scale=0.5))
        gat.a_dst.copy_(env.randn(H, scale=0.5))
    head = env.init(nn.Linear(H, 2))
    # (SGD: a_dst's gradient is nearly zero in some components, as its term is constant
    # within a node's softmax up to leaky_relu, and Adam would blow rounding up to lr)
    opt = torch.optim.SGD(list(gat.parameters()) + list(head.parameters()), lr=0.1,
                          momentum=0.9)

    def train_step(x, y):
        loss = F.cross_entropy(head(F.elu(gat(x))), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    y = env.randint(0, 2, (N,))
    for it in range(4):
        env.rec(f"loss {it}", step(env.randn(N, Fin), y))
    env.rec("gat", dict(gat.state_dict()))


def ctc_speech(torch, env):
    nn, F = torch.nn, torch.nn.functional
    C, T, B = 5, 12, 3

    class Acoustic(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(4, 8, bidirectional=True)
            self.out = nn.Linear(16, C)

        def forward(self, x):
            return F.log_softmax(self.out(self.rnn(x)[0]), dim=-1)     # (T, B, C)

    model = env.init(Acoustic())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2)
    batches_per_epoch = 2
    count = [0]

    def train_step(x, targets, in_lens, tgt_lens):
        loss = F.ctc_loss(model(x), targets, in_lens, tgt_lens, blank=0, zero_infinity=True)
        opt.zero_grad()
        loss.backward()
        opt.step()
        count[0] += 1
        sched.step(count[0] / batches_per_epoch)
        return loss.detach()

    step = env.step(train_step)
    in_lens = torch.tensor([12, 10, 9])
    tgt_lens = torch.tensor([4, 3, 2])
    for it in range(4):
        env.rec(f"loss {it}", step(env.randn(T, B, 4), env.randint(1, C, (B, 4)),
                                   in_lens, tgt_lens))
        env.rec(f"lr {it}", sched.get_last_lr())
    env.rec("params", dict(model.state_dict()))


def count_distributions(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    net = env.init(nn.Sequential(nn.Linear(3, 12), nn.ReLU(), nn.Linear(12, 5)))
    opt = torch.optim.Adam(net.parameters(), lr=5e-3)

    def train_step(x, counts, y):
        out = net(x)
        nb = D.NegativeBinomial(total_count=F.softplus(out[:, 0]) + 0.1, logits=out[:, 1])
        st = D.StudentT(df=2.0 + F.softplus(out[:, 2]), loc=out[:, 3],
                        scale=F.softplus(out[:, 4]) + 1e-3)
        loss = -(nb.log_prob(counts).mean() + st.log_prob(y).mean())
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), nb.mean.detach(), st.variance.detach()

    step = env.step(train_step)
    for it in range(4):
        loss, m, v = step(env.randn(6, 3), env.randint(0, 7, (6,)).float(), env.randn(6))
        env.rec(f"loss {it}", loss)
        env.rec(f"nb mean {it}", m)
        env.rec(f"t var {it}", v)


def nbeats_interpretable(torch, env):
    nn, F = torch.nn, torch.nn.functional
    back, fore, deg, harm = 8, 4, 3, 2

    class Basis(nn.Module):
        def __init__(self, kind):
            super().__init__()
            t = torch.arange(back + fore, dtype=torch.float32) / (back + fore)
            if kind == "trend":
                basis = torch.stack([t ** p for p in range(deg)])
            else:
                k = torch.arange(1, harm + 1, dtype=torch.float32)[:, None]
                basis = torch.cat([torch.cos(2 * torch.pi * k * t),
                                   torch.sin(2 * torch.pi * k * t)])
            self.register_buffer("basis", basis)
            self.fc = nn.Sequential(nn.Linear(back, 16), nn.ReLU(), nn.Linear(16, basis.shape[0]))

        def forward(self, x):
            y = self.fc(x) @ self.basis
            return y[:, :back], y[:, back:]

    blocks = env.init(nn.ModuleList([Basis("trend"), Basis("season")]))
    opt = torch.optim.Adam(blocks.parameters(), lr=3e-3)

    def train_step(x, y):
        res, out, parts = x, 0, []
        for b in blocks:
            bc, fc = b(res)
            res, out = res - bc, out + fc
            parts.append(fc.detach())
        loss = F.mse_loss(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), parts

    step = env.step(train_step)
    t = torch.arange(60, dtype=torch.float32)
    series = 0.05 * t + torch.sin(t * 0.8)
    w = series.unfold(0, back + fore, 3)
    for it in range(4):
        loss, parts = step(w[:, :back], w[:, back:])
        env.rec(f"loss {it}", loss)
        env.rec(f"parts {it}", parts)


def distillation(torch, env):
    nn, F = torch.nn, torch.nn.functional
    teacher = env.init(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4))).eval()
    student = env.init(nn.Sequential(nn.Linear(6, 4)))
    opt = torch.optim.SGD(student.parameters(), lr=0.2)
    kl = nn.KLDivLoss(reduction="batchmean", log_target=True)
    counts = torch.zeros(4)
    T = 3.0

    def train_step(x, y):
        with torch.no_grad():
            t_logp = F.log_softmax(teacher(x) / T, dim=1)
        s_logits = student(x)
        loss = kl(F.log_softmax(s_logits / T, dim=1), t_logp) * T * T + \
            0.5 * F.cross_entropy(s_logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        counts.index_put_((y,), torch.ones(len(y)), accumulate=True)
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"loss {it}", step(env.randn(8, 6), env.randint(0, 4, (8,))))
    env.rec("counts", counts)
    env.rec("student", dict(student.state_dict()))


def reinforce_pointer(torch, env):
    nn = torch.nn
    D = torch.distributions
    # (no last bias: a softmax ignores it, its gradient is rounding that Adam would blow up)
    policy = env.init(nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1, bias=False)))
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    baseline = {"b": 0.0}

    def train_step(points):
        B, N, _ = points.shape
        scores = policy(points).squeeze(-1)                     # (B, N)
        visited = torch.zeros(B, N, dtype=torch.bool)
        logps, ents, picks = [], [], []
        for _ in range(N):
            dist = D.Categorical(logits=scores.masked_fill(visited, -1e9))
            a = torch.multinomial(dist.probs, 1).squeeze(1)
            logps.append(dist.log_prob(a))
            ents.append(dist.entropy())
            picks.append(a)
            visited = visited | nn.functional.one_hot(a, N).bool()
        tour = points[torch.arange(B)[:, None], torch.stack(picks, 1)]
        length = (tour[:, 1:] - tour[:, :-1]).norm(dim=-1).sum(1)
        adv = length - baseline["b"]
        loss = (adv.detach() * torch.stack(logps, 1).sum(1)).mean() - \
            0.01 * torch.stack(ents).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        baseline["b"] = 0.9 * baseline["b"] + 0.1 * length.mean().item()
        return length.mean().detach()

    step = env.step(train_step)
    for it in range(3):
        env.rec(f"length {it}", step(env.rand(4, 5, 2)), cross=False)
    env.rec("baseline", baseline["b"], cross=False)
    env.rec("policy", dict(policy.state_dict()), cross=False)


PROGRAMS = {"accumulate_gradscaler": accumulate_gradscaler,
            "early_stopping_state": early_stopping_state, "graph_attention": graph_attention,
            "ctc_speech": ctc_speech, "count_distributions": count_distributions,
            "nbeats_interpretable": nbeats_interpretable, "distillation": distillation,
            "reinforce_pointer": reinforce_pointer}

# (the default run keeps the quickest; the others are marked slow)
FAST = ("graph_attention",)


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
