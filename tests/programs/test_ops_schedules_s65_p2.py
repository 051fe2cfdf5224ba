"""Sweep 65 (p2), less common ops and schedules in compiled training steps, run with
PyTorch, with llgrad eagerly and with llgrad compiling the step (tutorial_harness.py):
a time series with NaNs (nanmean, nanmedian, nan_to_num, quantile, bucketize,
searchsorted, a pinball loss); linear / nearest interpolate, cummax, kthvalue, histc;
F.unfold / F.fold patches; autograd.functional.hessian / jacobian, an RK4 neural ODE, a
gradient penalty through a GRU, torch.func hessian / jacrev under vmap; OneCycleLR cycling
Adam's betas with a tensor lr, CyclicLR cycling RMSprop's momentum, SequentialLR of
LinearLR and PolynomialLR."""

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def ts_missing_quantile(torch, env):
    nn, F = torch.nn, torch.nn.functional
    qs = torch.tensor([0.1, 0.5, 0.9])
    model = env.init(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2 * 3)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    def train_step(x, y):
        observed = ~torch.isnan(x)
        loc = torch.nanmean(x, dim=1, keepdim=True)
        med = torch.nanmedian(x, dim=1, keepdim=True).values
        scale = (x - loc).abs().nan_to_num(0.0).sum(1, keepdim=True) / \
            observed.sum(1, keepdim=True) + 1e-3
        xs = torch.nan_to_num((x - loc) / scale, nan=0.0)
        pred = model(xs).view(-1, 2, 3) * scale[:, :, None] + loc[:, :, None]
        err = y[:, :, None] - pred
        pinball = torch.maximum(qs * err, (qs - 1) * err).mean()
        q_emp = torch.quantile(y, qs, dim=1).T
        bins = torch.bucketize(y, torch.tensor([-1.0, 0.0, 1.0]))
        rank = torch.searchsorted(torch.sort(y, 1).values, pred[:, :, 1].detach().contiguous())
        opt.zero_grad(); pinball.backward(); opt.step()
        return pinball.detach(), q_emp, bins, rank, med, x.masked_select(observed).sum()
    step = env.step(train_step)
    for it in range(3):
        x = env.randn(5, 8)
        x[env.rand(5, 8) < 0.2] = float("nan")
        x[:, 0] = 1.0
        env.rec(f"out {it}", step(x, env.randn(5, 2)))


def interp_unet(torch, env):
    nn, F = torch.nn, torch.nn.functional
    c1 = env.init(nn.Conv1d(2, 4, 3, padding=1)); c2 = env.init(nn.Conv1d(6, 2, 3, padding=1))
    opt = torch.optim.Adam([*c1.parameters(), *c2.parameters()], lr=1e-2)
    def train_step(x):
        d = F.avg_pool1d(F.relu(c1(x)), 2)
        u = F.interpolate(d, scale_factor=2, mode="linear", align_corners=False)
        u2 = F.interpolate(d, size=x.shape[-1], mode="nearest")
        y = c2(torch.cat([u + u2, x], 1))
        loss = F.l1_loss(y, x.flip(-1)) + y.cummax(-1).values.mean() * 0.01 + \
            y.kthvalue(3, dim=-1).values.mean() * 0.01
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach(), torch.histc(y.detach(), 5, -2, 2)
    step = env.step(train_step)
    for it in range(3):
        env.rec(f"out {it}", step(env.randn(3, 2, 12)))
    env.rec("p", dict(c2.state_dict()))


def fold_patches(torch, env):
    nn, F = torch.nn, torch.nn.functional
    lin = env.init(nn.Linear(2 * 4, 2 * 4))
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    def train_step(img):
        p = F.unfold(img, 2, stride=1)                    # (B, C*4, L)
        p = lin(p.transpose(1, 2)).transpose(1, 2)
        out = F.fold(p, img.shape[-2:], 2, stride=1)
        norm = F.fold(torch.ones_like(p), img.shape[-2:], 2, stride=1)
        loss = F.mse_loss(out / norm, img)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    step = env.step(train_step)
    for it in range(3):
        env.rec(f"loss {it}", step(env.randn(2, 2, 5, 5)))
    env.rec("p", dict(lin.state_dict()))


def hnn_functional(torch, env):
    nn, F = torch.nn, torch.nn.functional
    H = env.init(nn.Sequential(nn.Linear(2, 12), nn.Tanh(), nn.Linear(12, 1)))
    opt = torch.optim.Adam(H.parameters(), lr=1e-2)
    def energy(qp):
        return H(qp).sum()
    def train_step(qp):
        hess = torch.autograd.functional.hessian(energy, qp[0], create_graph=True)
        jac = torch.autograd.functional.jacobian(lambda z: H(z), qp, create_graph=True)
        loss = (hess - torch.eye(2)).pow(2).sum() + jac.pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    step = env.step(train_step)
    for it in range(3):
        env.rec(f"loss {it}", step(env.randn(3, 2)))


def neural_ode_rk4(torch, env):
    nn, F = torch.nn, torch.nn.functional
    f = env.init(nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2)))
    opt = torch.optim.Adam(f.parameters(), lr=5e-3)
    def rk4(y, dt, n):
        ys = [y]
        for _ in range(n):
            k1 = f(y); k2 = f(y + dt / 2 * k1); k3 = f(y + dt / 2 * k2); k4 = f(y + dt * k3)
            y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            ys.append(y)
        return torch.stack(ys)
    def train_step(y0, target):
        traj = rk4(y0, 0.1, 5)
        loss = (traj - target).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    step = env.step(train_step)
    t = torch.arange(6.0)[:, None, None] * 0.1
    for it in range(3):
        y0 = env.randn(4, 2)
        target = torch.stack([y0[:, 0] * torch.cos(t[:, :, 0]),
                              y0[:, 1] * torch.sin(t[:, :, 0] + 1)], -1)
        env.rec(f"loss {it}", step(y0, target))


def gp_through_gru(torch, env):
    nn, F = torch.nn, torch.nn.functional
    rnn = env.init(nn.GRU(2, 4, batch_first=True)); head = env.init(nn.Linear(4, 1))
    opt = torch.optim.Adam([*rnn.parameters(), *head.parameters()], lr=1e-2)
    def train_step(x):
        x = x.requires_grad_(True)
        out = head(rnn(x)[0][:, -1])
        g = torch.autograd.grad(out.sum(), x, create_graph=True)[0]
        loss = out.mean() + ((g.flatten(1).norm(dim=1) - 1) ** 2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    step = env.step(train_step)
    for it in range(3):
        env.rec(f"loss {it}", step(env.randn(3, 4, 2)))
    env.rec("p", dict(head.state_dict()))


def func_jacrev_pinn(torch, env):
    nn = torch.nn
    model = env.init(nn.Sequential(nn.Linear(2, 10), nn.Tanh(), nn.Linear(10, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    fc = torch.func.functional_call
    def train_step(xt):
        params = dict(model.named_parameters())
        u = lambda p, z: fc(model, p, (z,)).squeeze()
        hes = torch.func.vmap(torch.func.hessian(u, argnums=1), in_dims=(None, 0))(params, xt)
        jac = torch.func.vmap(torch.func.jacrev(u, argnums=1), in_dims=(None, 0))(params, xt)
        res = jac[:, 1] - 0.1 * hes[:, 0, 0]
        loss = res.pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    step = env.step(train_step)
    for it in range(3):
        env.rec(f"loss {it}", step(env.rand(6, 2)))


def onecycle_adam_betas(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=8, three_phase=True)
    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step(); sched.step()
        return loss.detach()
    step = env.step(train_step)
    for it in range(7):
        env.rec(f"loss {it}", step(env.randn(5, 4), env.randint(0, 2, (5,))))
        env.rec(f"betas {it}", opt.param_groups[0]["betas"])
    env.rec("p", dict(model.state_dict()))


def cyclic_rmsprop(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Linear(4, 2))
    opt = torch.optim.RMSprop(model.parameters(), lr=0.01, momentum=0.9)
    sched = torch.optim.lr_scheduler.CyclicLR(opt, 0.001, 0.05, step_size_up=2,
                                              mode="exp_range", gamma=0.9)
    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step(); sched.step()
        return loss.detach()
    step = env.step(train_step)
    for it in range(7):
        env.rec(f"loss {it}", step(env.randn(5, 4), env.randint(0, 2, (5,))))
        env.rec(f"m {it}", opt.param_groups[0]["momentum"])
    env.rec("p", dict(model.state_dict()))


def sequential_chained(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Linear(4, 2))
    opt = torch.optim.NAdam(model.parameters(), lr=0.02, decoupled_weight_decay=True,
                            weight_decay=0.1)
    s1 = torch.optim.lr_scheduler.LinearLR(opt, 0.1, 1.0, total_iters=3)
    s2 = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=6, power=2.0)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [s1, s2], milestones=[3])
    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step(); sched.step()
        return loss.detach()
    step = env.step(train_step)
    for it in range(8):
        env.rec(f"loss {it}", step(env.randn(5, 4), env.randint(0, 2, (5,))))
        env.rec(f"lr {it}", sched.get_last_lr())
    env.rec("p", dict(model.state_dict()))


PROGRAMS = {"ts_missing_quantile": ts_missing_quantile, "interp_unet": interp_unet,
            "fold_patches": fold_patches, "hnn_functional": hnn_functional,
            "neural_ode_rk4": neural_ode_rk4, "gp_through_gru": gp_through_gru,
            "func_jacrev_pinn": func_jacrev_pinn, "onecycle_adam_betas":
            onecycle_adam_betas, "cyclic_rmsprop": cyclic_rmsprop,
            "sequential_chained": sequential_chained}

# (the default run keeps the quickest; the others are marked slow)
FAST = ()


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
