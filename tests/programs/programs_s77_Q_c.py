"""Programs (s77, Q), part 3: per-parameter optimizers stepped from post-accumulate-grad
hooks with tensor and module backward hooks; lazy modules materialized by a dry run; a pruned
module (prune's forward pre-hook sets module.weight) inside checkpoint and
checkpoint_sequential segments; a frozen body unfrozen mid-run by add_param_group;
ModuleDict/ParameterList/ParameterDict heads picked by a string argument; model.double()
mid-run; a custom autograd.Function (setup_context, generate_vmap_rule) under vmap; a whole
checkpoint (model with a persistent=False buffer, optimizer, OneCycleLR) saved and loaded
mid-run into a new model stepped by a new compiled step."""
import importlib

import numpy as np


def post_accumulate_hooks(torch, env):
    nn, F = torch.nn, torch.nn.functional
    m = env.init(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)))
    opts = {p: torch.optim.SGD([p], lr=0.1, momentum=0.5) for p in m.parameters()}

    def hook(p):
        opts[p].step()
        opts[p].zero_grad()
    for p in m.parameters():
        p.register_post_accumulate_grad_hook(hook)
    seen = []
    m[0].register_full_backward_hook(lambda mod, gi, go: seen.append(1))
    m[2].register_forward_pre_hook(lambda mod, args: (args[0] * 2,))

    def train_step(x, y):
        h = m[0](x)
        h.register_hook(lambda g: g.clamp(-0.1, 0.1))
        loss = F.cross_entropy(m[2](m[1](h)), y)
        loss.backward()
        return loss.detach()
    step = env.step(train_step)
    x, y = env.randn(6, 4), env.randint(0, 2, (6,))
    for t in range(3):
        env.rec(f"loss {t}", step(x, y))
    env.rec("params", dict(m.named_parameters()))
    env.rec("grads none", [p.grad is None for p in m.parameters()])


def lazy_modules(torch, env):
    nn, F = torch.nn, torch.nn.functional
    m = nn.Sequential(nn.LazyConv2d(4, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(3))
    x = env.randn(2, 2, 5, 5)
    m(x)                                           # (dry run: materializes)
    env.init(m)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)

    def train_step(x, y):
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    y = env.randint(0, 3, (2,))
    for t in range(3):
        env.rec(f"loss {t}", step(x, y))
    env.rec("types", [type(l).__name__ for l in m])


def checkpoint_prune(torch, env):
    nn, F = torch.nn, torch.nn.functional
    cp = torch.utils.checkpoint
    prune = importlib.import_module(torch.__name__ + '.nn.utils.prune')
    m = env.init(nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 8), nn.GELU(),
                               nn.Linear(8, 1)))
    prune.l1_unstructured(m[2], "weight", amount=0.5)
    prune.random_unstructured(m[0], "bias", amount=0.0)
    env.rec("names", sorted(dict(m.named_buffers())))
    opt = torch.optim.SGD(m.parameters(), lr=0.05)

    def train_step(x, y):
        h = cp.checkpoint(lambda t: m[1](m[0](t)), x, use_reentrant=False)
        h = cp.checkpoint_sequential(m[2:], 2, h, use_reentrant=False)
        loss = F.mse_loss(h.squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    x = env.randn(6, 4)
    y = x.prod(1)
    for t in range(3):
        env.rec(f"loss {t}", step(x, y))
    env.rec("pruned w", m[2].weight)
    prune.remove(m[2], "weight")
    env.rec("w", m[2].weight)
    env.rec("sd keys", sorted(m.state_dict()))


def add_param_group_midrun(torch, env):
    nn, F = torch.nn, torch.nn.functional
    body = env.init(nn.Linear(3, 4))
    head = env.init(nn.Linear(4, 1))
    for p in body.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(head.parameters(), lr=1e-2, foreach=False)

    def train_step(x, y):
        loss = F.mse_loss(head(torch.relu(body(x))).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    x = env.randn(8, 3)
    y = x.sum(1)
    for t in range(2):
        env.rec(f"a {t}", step(x, y))
    for p in body.parameters():
        p.requires_grad_(True)
    opt.add_param_group({"params": body.parameters(), "lr": 1e-3})
    for t in range(3):
        env.rec(f"b {t}", step(x, y))
    env.rec("p", (dict(body.named_parameters()), dict(head.named_parameters())))
    env.rec("groups", [g["lr"] for g in opt.param_groups])


def module_containers(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = nn.ModuleDict({"a": nn.Linear(3, 2), "b": nn.Linear(3, 2)})
            self.scales = nn.ParameterList([nn.Parameter(torch.ones(2)) for _ in range(2)])
            self.extra = nn.ParameterDict({"shift": nn.Parameter(torch.zeros(2))})

        def forward(self, x, which):
            out = self.heads[which](x) * self.scales[0 if which == "a" else 1]
            return out + self.extra["shift"]
    m = env.init(Net())
    groups = [{"params": [p for n, p in m.named_parameters() if "heads" in n]},
              {"params": [p for n, p in m.named_parameters() if "heads" not in n], "lr": 0.01}]
    opt = torch.optim.Adamax(groups, lr=0.05)

    def train_step(x, y, which):
        loss = F.cross_entropy(m(x, which), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    x, y = env.randn(5, 3), env.randint(0, 2, (5,))
    for t in range(4):
        env.rec(f"loss {t}", step(x, y, "ab"[t % 2]))
    env.rec("p", dict(m.named_parameters()))
    if env.compiled:
        # (Adamax's state of head b's params is made at its first step: one retrace)
        assert step.n_traces <= 3, step.n_traces


def double_midrun(torch, env):
    nn, F = torch.nn, torch.nn.functional
    m = env.init(nn.Sequential(nn.Linear(3, 5), nn.Softsign(), nn.Linear(5, 1)))
    m.register_buffer("offset", torch.tensor([0.5]))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)

    def train_step(x, y):
        loss = F.huber_loss(m(x).squeeze(1) + m.offset, y, delta=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    x = env.randn(6, 3)
    y = x[:, 0]
    for t in range(2):
        env.rec(f"a {t}", step(x, y))
    m.double()
    for t in range(2):
        env.rec(f"b {t}", step(x.double(), y.double()))
    env.rec("p", dict(m.named_parameters()))
    env.rec("dt", [p.dtype for p in m.parameters()] + [m.offset.dtype])


def custom_function_vmap(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Clip(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x, lo):
            return x.clamp(min=lo)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.lo = inputs[1]

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * (x > ctx.lo).to(g.dtype) + 0.1 * g * (x <= ctx.lo).to(g.dtype), None
    m = env.init(nn.Linear(3, 3))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)

    def train_step(x):
        h = Clip.apply(m(x), 0.0)
        v = torch.func.vmap(lambda r: Clip.apply(r, 0.2).sum())(h)
        loss = h.pow(2).mean() - v.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), v.detach()
    step = env.step(train_step)
    x = env.randn(4, 3)
    for t in range(3):
        env.rec(f"{t}", step(x))
    env.rec("p", dict(m.named_parameters()))


def checkpoint_resume(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.fc2 = nn.Linear(8, 2)
            self.register_buffer("scale", torch.tensor(2.0))
            self.register_buffer("calls", torch.zeros(()), persistent=False)

        def forward(self, x):
            self.calls += 1
            return self.fc2(F.leaky_relu(self.fc1(x * self.scale), 0.1))

    def build():
        m = Net()
        m.apply(lambda mod: nn.init.xavier_uniform_(mod.weight) if isinstance(mod, nn.Linear)
                else None)
        return m
    m = env.init(build())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2, amsgrad=True)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=8)

    def make_step(model, optim):
        def train_step(x, y):
            loss = F.cross_entropy(model(x), y)
            optim.zero_grad()
            loss.backward()
            optim.step()
            return loss.detach()
        return env.step(train_step)
    step = make_step(m, opt)
    x, y = env.randn(6, 4), env.randint(0, 2, (6,))
    for t in range(3):
        env.rec(f"loss {t}", step(x, y))
        sched.step()
    path = env.path("ckpt.pt")
    torch.save({"model": m.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                "epoch": 3}, path)
    ck = torch.load(path)
    env.rec("ckpt keys", sorted(ck["model"].keys()))
    m2 = env.init(build())
    opt2 = torch.optim.Adam(m2.parameters(), lr=1e-2, amsgrad=True)
    sched2 = torch.optim.lr_scheduler.OneCycleLR(opt2, max_lr=0.05, total_steps=8)
    m2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["opt"])
    sched2.load_state_dict(ck["sched"])
    step2 = make_step(m2, opt2)
    for t in range(ck["epoch"], 7):
        env.rec(f"loss {t}", step2(x, y))
        sched2.step()
        env.rec(f"lr {t}", opt2.param_groups[0]["lr"])
    env.rec("calls", (m.calls, m2.calls))
    env.rec("params", dict(m2.named_parameters()))
    env.rec("opt state", opt2.state_dict()["state"][0]["max_exp_avg_sq"])


PROGRAMS = {f.__name__: f for f in (
    post_accumulate_hooks, lazy_modules, checkpoint_prune, add_param_group_midrun,
    module_containers, double_midrun, custom_function_vmap, checkpoint_resume)}
