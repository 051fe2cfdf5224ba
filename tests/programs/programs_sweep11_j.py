"""Tutorial programs on training-loop idioms around the step (see tutorial_harness.py):
DINO's per-iteration weight-decay and momentum schedules with its per-parameter gradient
clipping and last-layer freezing, gradient accumulation decided by the step index inside
the step, a step returning a dict and a namedtuple of metrics, Welford running statistics
updated in place in tensors passed to the step, a learning-rate warmup written into the
param groups inside the step, and a teacher under @torch.no_grad() with an
@torch.enable_grad() helper."""
import collections
import math


def dino_schedules(torch, env):
    """DINO's main loop: before each iteration param_groups[i]["lr"] and ["weight_decay"]
    (regularised group only) set from cosine schedules; in the step clip_grad_norm_,
    cancel_gradients_last_layer (p.grad = None while epoch < 1: the last layer's Adam state
    is made at epoch 1), and the teacher's momentum update param_k.data.mul_(m).add_((1 - m)
    * param_q.detach().data) with m from a schedule passed as a float."""
    _dino(torch, env, per_parameter_clip=False)


def dino_clip_gradients(torch, env):
    """dino_schedules with DINO's own utils.clip_gradients: per parameter, clip_coef = clip
    / (p.grad.data.norm(2) + 1e-6) and `if clip_coef < 1: p.grad.data.mul_(clip_coef)`."""
    _dino(torch, env, per_parameter_clip=True)


def _dino(torch, env, per_parameter_clip):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    student = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 8))
    teacher = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 8))
    teacher.load_state_dict(student.state_dict())
    for p in teacher.parameters():
        p.requires_grad = False
    reg = [p for n, p in student.named_parameters() if not n.endswith(".bias")]
    not_reg = [p for n, p in student.named_parameters() if n.endswith(".bias")]
    opt = torch.optim.AdamW([{"params": reg}, {"params": not_reg, "weight_decay": 0.0}])
    iters = 8
    lr_sched = [5e-3 * 0.5 * (1 + math.cos(math.pi * i / iters)) for i in range(iters)]
    wd_sched = [0.04 + 0.5 * (0.4 - 0.04) * (1 - math.cos(math.pi * i / iters))
                for i in range(iters)]
    m_sched = [1 - 0.1 * 0.5 * (1 + math.cos(math.pi * i / iters)) for i in range(iters)]
    x = torch.randn(12, 6)
    noise = env.randn(iters, 12, 6, scale=0.2)

    def train_step(x1, x2, epoch, m):
        s = F.log_softmax(student(x1) / 0.1, dim=-1)
        with torch.no_grad():
            t = F.softmax(teacher(x2) / 0.04, dim=-1)
        loss = -(t * s).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        if per_parameter_clip:
            for p in student.parameters():
                if p.grad is not None:
                    clip_coef = 3.0 / (p.grad.data.norm(2) + 1e-6)
                    if clip_coef < 1:
                        p.grad.data.mul_(clip_coef)
        else:
            nn.utils.clip_grad_norm_(student.parameters(), 3.0)
        if epoch < 1:
            for p in student[2].parameters():
                p.grad = None
        opt.step()
        with torch.no_grad():
            for param_q, param_k in zip(student.parameters(), teacher.parameters()):
                param_k.data.mul_(m).add_((1 - m) * param_q.detach().data)
        return loss

    step = env.step(train_step)
    hist = []
    for it in range(iters):
        for i, g in enumerate(opt.param_groups):
            g["lr"] = lr_sched[it]
            if i == 0:
                g["weight_decay"] = wd_sched[it]
        hist.append(step(x + noise[it], x - noise[it], it // 4, m_sched[it]).item())
    env.rec("hist", hist)
    env.rec("student", list(student.parameters()))
    env.rec("teacher", list(teacher.parameters()))


def accumulation_in_step(torch, env):
    """Gradient accumulation written inside the step: (loss / accum_steps).backward() every
    call, `if (i + 1) % accum_steps == 0:` clip, opt.step() and opt.zero_grad() — the
    iteration index is an argument of the compiled step."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 12), nn.ReLU(), nn.Linear(12, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    accum_steps = 3
    xs, ys = torch.randn(9, 6, 4), torch.randint(0, 2, (9, 6))

    def train_step(x, y, i):
        loss = F.cross_entropy(model(x), y)
        (loss / accum_steps).backward()
        if (i + 1) % accum_steps == 0:
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
        return loss.detach()

    step = env.step(train_step)
    hist = [step(xs[i], ys[i], i).item() for i in range(9)]
    env.rec("hist", hist)
    env.rec("grads", [p.grad for p in model.parameters()])
    env.rec("params", list(model.parameters()))


def metrics_dict_namedtuple(torch, env):
    """A step returning {"loss": loss.detach(), "acc": ..., "lr": opt.param_groups[0]["lr"]}
    and a namedtuple Stats(grad_norm, weight_norm), as trainer frameworks log them; a
    StepLR changes the lr the dict reports."""
    nn, F = torch.nn, torch.nn.functional
    Stats = collections.namedtuple("Stats", ["grad_norm", "weight_norm"])
    torch.manual_seed(0)
    model = nn.Linear(5, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    x, y = torch.randn(20, 5), torch.randint(0, 3, (20,))

    def train_step(x, y):
        opt.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        gn = torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters()))
        opt.step()
        wn = torch.sqrt(sum((p.detach() ** 2).sum() for p in model.parameters()))
        return {"loss": loss.detach(), "acc": (logits.argmax(1) == y).float().mean(),
                "lr": opt.param_groups[0]["lr"]}, Stats(gn, wn)

    step = env.step(train_step)
    logs = []
    for _ in range(5):
        m, s = step(x, y)
        sched.step()
        logs.append((m["loss"].item(), m["acc"].item(), m["lr"], s.grad_norm.item(),
                     s.weight_norm.item(), type(s).__name__))
    env.rec("logs", logs)
    env.rec("params", list(model.parameters()))


def welford_inplace_stats(torch, env):
    """Observation normalisation as RL libraries write it: a running count, mean and M2
    (Welford / Chan's parallel update) held in tensors the step updates in place
    (count.add_, mean.add_, m2.add_), the batch normalised by the updated statistics and
    clamped, then a value regression step."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    count, mean, m2 = torch.tensor(1e-4), torch.zeros(3), torch.ones(3)
    obs = env.randn(6, 10, 3, scale=2.0) + torch.tensor([1.0, -2.0, 0.5])
    rets = env.randn(6, 10, 1)

    def train_step(x, ret, count, mean, m2):
        with torch.no_grad():
            b_mean, b_var, n = x.mean(0), x.var(0, unbiased=False), x.shape[0]
            delta = b_mean - mean
            tot = count + n
            mean.add_(delta * n / tot)
            m2.add_(b_var * n + delta ** 2 * count * n / tot)
            count.add_(n)
        xn = ((x - mean) / torch.sqrt(m2 / count + 1e-8)).clamp(-5, 5)
        opt.zero_grad()
        loss = F.mse_loss(model(xn), ret)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(obs[i], rets[i], count, mean, m2).item() for i in range(6)])
    env.rec("stats", (count, mean, m2))
    env.rec("params", list(model.parameters()))


def warmup_in_param_groups(torch, env):
    """A linear warmup written by hand inside the step, as many scripts do:
    `for g in opt.param_groups: g["lr"] = base_lr * min(1.0, (it + 1) / warmup)` with the
    iteration an argument, then the usual Adam step."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(12, 4), torch.randn(12, 1)

    def train_step(x, y, it):
        for g in opt.param_groups:
            g["lr"] = 1e-2 * min(1.0, (it + 1) / 4)
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y, it).item() for it in range(7)])
    env.rec("lr", opt.param_groups[0]["lr"])
    env.rec("params", list(model.parameters()))


def no_grad_teacher_enable_grad(torch, env):
    """Knowledge distillation with decorated helpers: the teacher's logits from a function
    under @torch.no_grad(), the student's loss computed by a function decorated
    @torch.enable_grad() called from inside a torch.no_grad() block of the step (grad mode
    re-enabled there), soft targets with temperature and KLDivLoss(reduction="batchmean")
    times T^2."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    teacher = nn.Sequential(nn.Linear(5, 20), nn.ReLU(), nn.Linear(20, 4))
    student = nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 4))
    opt = torch.optim.SGD(student.parameters(), lr=0.1, momentum=0.9)
    kl = nn.KLDivLoss(reduction="batchmean")
    T = 3.0
    x, y = torch.randn(16, 5), torch.randint(0, 4, (16,))

    @torch.no_grad()
    def teacher_logits(x):
        return teacher(x)

    @torch.enable_grad()
    def student_loss(x, y, t_logits):
        s = student(x)
        soft = kl(F.log_softmax(s / T, -1), F.softmax(t_logits / T, -1)) * T * T
        return 0.7 * soft + 0.3 * F.cross_entropy(s, y)

    def train_step(x, y):
        t_logits = teacher_logits(x)
        opt.zero_grad()
        with torch.no_grad():
            loss = student_loss(x, y, t_logits)
        loss.backward()
        opt.step()
        return loss, t_logits.requires_grad

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        loss, rg = step(x, y)
        hist.append((loss.item(), rg))
    env.rec("hist", hist)
    env.rec("params", list(student.parameters()))
