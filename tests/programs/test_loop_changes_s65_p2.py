"""Sweep 65 (p2), what changes between or inside compiled training steps, run with
PyTorch, with llgrad eagerly and with llgrad compiling the step (tutorial_harness.py):
a cosine lr passed as a Python float and written into param_groups, a returned dict, a
Python list of loss tensors and a float total kept by the step; freezing then unfreezing
(requires_grad_, add_param_group); an input normalised in place; a parameter replaced and
scaled between calls; KL annealing by a global and a temperature attribute; a checkpoint
saved and resumed (model, optimizer, scheduler); a grad hook added after two steps; a
curriculum of growing sequence lengths; model.apply re-initialising."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def manual_warmup_lr_arg(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2)))
    opt = torch.optim.AdamW(model.parameters(), lr=1.0)
    history = []
    total = [0.0]
    def train_step(x, y, lr):
        for g in opt.param_groups:
            g["lr"] = lr
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        history.append(loss)
        total[0] += loss.item()
        return {"loss": loss.detach(), "norm": norm}
    step = env.step(train_step)
    for it in range(6):
        lr = 0.01 * 0.5 * (1 + math.cos(math.pi * it / 6))
        env.rec(f"out {it}", step(env.randn(5, 4), env.randint(0, 2, (5,)), lr))
    env.rec("hist", [h.detach() for h in history])
    env.rec("hist_grad", [h.requires_grad for h in history])
    env.rec("total", total[0])
    env.rec("params", dict(model.state_dict()))


def freeze_unfreeze(torch, env):
    nn, F = torch.nn, torch.nn.functional
    body = env.init(nn.Sequential(nn.Linear(4, 6), nn.ReLU()))
    head = env.init(nn.Linear(6, 2))
    opt = torch.optim.SGD(head.parameters(), lr=0.1, momentum=0.9)
    def train_step(x, y):
        loss = F.cross_entropy(head(body(x)), y)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    step = env.step(train_step)
    for p in body.parameters(): p.requires_grad_(False)
    for it in range(6):
        if it == 3:
            for p in body.parameters(): p.requires_grad_(True)
            opt.add_param_group({"params": body.parameters(), "lr": 0.05})
        env.rec(f"loss {it}", step(env.randn(5, 4), env.randint(0, 2, (5,))))
        env.rec(f"grad {it}", body[0].weight.grad is None)
    env.rec("params", (dict(body.state_dict()), dict(head.state_dict())))


def inplace_input(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Linear(3, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    def train_step(x, y):
        x.sub_(x.mean(0)).div_(x.std(0) + 1e-5)
        loss = F.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    step = env.step(train_step)
    for it in range(3):
        x = env.randn(6, 3)
        env.rec(f"loss {it}", step(x, env.randn(6, 1)))
        env.rec(f"x {it}", x)


def replace_param(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Linear(3, 2))
    def loss_fn(x):
        return model(x).pow(2).sum()
    step = env.step(loss_fn)
    x = env.randn(4, 3)
    env.rec("a", step(x))
    model.weight = nn.Parameter(torch.ones(2, 3))
    env.rec("b", step(x))
    model.weight.data.mul_(2)
    env.rec("c", step(x))
    with torch.no_grad():
        model.bias.zero_()
    env.rec("d", step(x))


BETA = {"v": 0.0}


def kl_anneal_global(torch, env):
    nn, F = torch.nn, torch.nn.functional
    enc = env.init(nn.Linear(4, 4)); dec = env.init(nn.Linear(2, 4))
    opt = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=1e-2)
    class Cfg: tau = 1.0
    cfg = Cfg()
    def train_step(x, eps):
        mu, logvar = enc(x).chunk(2, 1)
        z = mu + eps * (0.5 * logvar).exp()
        rec = F.mse_loss(dec(z), x, reduction="sum")
        kl = -0.5 * (1 + logvar - mu ** 2 - logvar.exp()).sum()
        soft = F.softmax(enc(x) / cfg.tau, 1)
        loss = rec + BETA["v"] * kl + soft.max(1).values.sum()
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    step = env.step(train_step)
    for it in range(6):
        BETA["v"] = min(1.0, it / 4)
        cfg.tau = max(0.5, 1.0 - 0.1 * it)
        env.rec(f"loss {it}", step(env.randn(6, 4), env.randn(6, 2)))


def checkpoint_resume(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, 2, 0.5)
    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step(); sched.step()
        return loss.detach()
    step = env.step(train_step)
    data = [(env.randn(5, 4), env.randint(0, 2, (5,))) for _ in range(6)]
    for it in range(3):
        env.rec(f"loss {it}", step(*data[it]))
    torch.save({"m": model.state_dict(), "o": opt.state_dict(), "s": sched.state_dict()},
               env.path("ck.pt"))
    for it in range(3, 5):
        env.rec(f"loss {it}", step(*data[it]))
    ck = torch.load(env.path("ck.pt"))
    model.load_state_dict(ck["m"]); opt.load_state_dict(ck["o"]); sched.load_state_dict(ck["s"])
    for it in range(3, 6):
        env.rec(f"resumed {it}", step(*data[it]))
    env.rec("params", dict(model.state_dict()))
    env.rec("lr", sched.get_last_lr())


def grad_hook_added(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    def train_step(x, y):
        loss = F.cross_entropy(model(x), y) * 10
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    step = env.step(train_step)
    for it in range(4):
        if it == 2:
            for p in model.parameters():
                p.register_hook(lambda g: g.clamp(-0.05, 0.05))
        env.rec(f"loss {it}", step(env.randn(5, 4), env.randint(0, 2, (5,))))
    env.rec("p", dict(model.state_dict()))


def curriculum_len(torch, env):
    nn, F = torch.nn, torch.nn.functional
    rnn = env.init(nn.LSTM(3, 5, batch_first=True)); head = env.init(nn.Linear(5, 1))
    opt = torch.optim.Adam([*rnn.parameters(), *head.parameters()], lr=1e-2)
    def train_step(x, y):
        loss = F.mse_loss(head(rnn(x)[0][:, -1]).squeeze(1), y)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    step = env.step(train_step)
    for it, L in enumerate([3, 4, 5, 3, 6, 7]):
        env.rec(f"loss {it}", step(env.randn(4, L, 3), env.randn(4)))


def apply_reinit(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    def train_step(x, y):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    step = env.step(train_step)
    x, y = env.randn(5, 3), env.randn(5, 1)
    env.rec("a", step(x, y))
    def init(m):
        if isinstance(m, nn.Linear):
            nn.init.constant_(m.weight, 0.1); nn.init.zeros_(m.bias)
    model.apply(init)
    env.rec("b", step(x, y))
    env.rec("c", step(x, y))


PROGRAMS = {"manual_warmup_lr_arg": manual_warmup_lr_arg, "freeze_unfreeze":
            freeze_unfreeze, "inplace_input": inplace_input, "replace_param":
            replace_param, "kl_anneal_global": kl_anneal_global, "checkpoint_resume":
            checkpoint_resume, "grad_hook_added": grad_hook_added, "curriculum_len":
            curriculum_len, "apply_reinit": apply_reinit}

# (the default run keeps the quickest; the others are marked slow)
FAST = ("replace_param",)


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
