"""Sweep 20 (C), part 8: physics and sequence convolutions. A PINN for the 1-D heat equation
u_t = k u_xx: collocation points cloned with requires_grad_(True) inside the step, u_x and
u_t from one autograd.grad(u, xt, torch.ones_like(u), create_graph=True), u_xx from a
second grad of u_x, a boundary and an initial-condition loss, Adam, and a learnable
diffusivity k (log-parametrised) recovered from data; all inside the compiled step. Then a
TCN: causal dilated Conv1d (padding (k-1)*d then chomped with [:, :, :-pad]) wrapped in
weight_norm, residual blocks with a 1x1 downsample, ReLU and Dropout(0) and the last time
step read for a sequence label, trained with gradient clipping by value
(clip_grad_value_) and StepLR. Run with PyTorch, with llgrad eagerly and with
llgrad.compile (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def heat_pinn(torch, env):
    nn = torch.nn
    net = env.init(nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1)))
    log_k = nn.Parameter(torch.tensor(-1.0))
    opt = torch.optim.Adam(list(net.parameters()) + [log_k], lr=5e-3)
    mse = nn.MSELoss()
    pi = 3.141592653589793

    def pde_residual(xt):
        xt = xt.clone().requires_grad_(True)
        u = net(xt)
        du = torch.autograd.grad(u, xt, torch.ones_like(u), create_graph=True)[0]
        u_x, u_t = du[:, 0:1], du[:, 1:2]
        u_xx = torch.autograd.grad(u_x, xt, torch.ones_like(u_x), create_graph=True)[0][:, 0:1]
        return u_t - log_k.exp() * u_xx

    def train_step(colloc, x0, xb, xd, ud):
        opt.zero_grad()
        f = pde_residual(colloc)
        loss_pde = mse(f, torch.zeros_like(f))
        u0 = net(torch.cat([x0, torch.zeros_like(x0)], dim=1))
        loss_ic = mse(u0, torch.sin(pi * x0))
        ub = net(xb)
        loss_bc = (ub ** 2).mean()
        loss_data = mse(net(xd), ud)
        loss = loss_pde + loss_ic + loss_bc + loss_data
        loss.backward()
        opt.step()
        return loss, loss_pde.item()
    train_step = env.step(train_step)
    colloc = torch.cat([env.rand(24, 1), env.rand(24, 1) * 0.5], dim=1)
    x0 = env.rand(10, 1)
    tb = env.rand(6, 1) * 0.5
    xb = torch.cat([torch.cat([torch.zeros(6, 1), tb], 1), torch.cat([torch.ones(6, 1), tb], 1)])
    xd = torch.cat([env.rand(8, 1), env.rand(8, 1) * 0.5], 1)
    ud = torch.exp(-0.3 * pi ** 2 * xd[:, 1:2]) * torch.sin(pi * xd[:, 0:1])
    for i in range(5):
        env.rec(f"step{i}", train_step(colloc, x0, xb, xd, ud))
    env.rec("k", log_k.exp())
    env.rec("net", net.state_dict())


def tcn(torch, env):
    nn, F = torch.nn, torch.nn.functional
    from importlib import import_module
    weight_norm = import_module(torch.__name__ + ".nn.utils.parametrizations").weight_norm

    class Chomp1d(nn.Module):
        def __init__(self, chomp_size):
            super().__init__()
            self.chomp_size = chomp_size

        def forward(self, x):
            return x[:, :, :-self.chomp_size].contiguous()

    class TemporalBlock(nn.Module):
        def __init__(self, n_in, n_out, k, dilation):
            super().__init__()
            pad = (k - 1) * dilation
            self.net = nn.Sequential(
                weight_norm(nn.Conv1d(n_in, n_out, k, padding=pad, dilation=dilation)), Chomp1d(pad),
                nn.ReLU(), nn.Dropout(0.0),
                weight_norm(nn.Conv1d(n_out, n_out, k, padding=pad, dilation=dilation)), Chomp1d(pad),
                nn.ReLU(), nn.Dropout(0.0))
            self.downsample = nn.Conv1d(n_in, n_out, 1) if n_in != n_out else None
            self.relu = nn.ReLU()

        def forward(self, x):
            out = self.net(x)
            res = x if self.downsample is None else self.downsample(x)
            return self.relu(out + res)

    class TCN(nn.Module):
        def __init__(self, n_in, channels, n_out, k=2):
            super().__init__()
            layers = []
            for i, ch in enumerate(channels):
                layers.append(TemporalBlock(n_in if i == 0 else channels[i - 1], ch, k, 2 ** i))
            self.network = nn.Sequential(*layers)
            self.linear = nn.Linear(channels[-1], n_out)

        def forward(self, x):
            y = self.network(x)
            return self.linear(y[:, :, -1])

    model = env.init(TCN(2, [6, 6, 6], 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    X, y = env.randn(5, 2, 12), env.randint(0, 4, (5,))

    def train_step(x, y):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.1)
        opt.step()
        return loss
    train_step = env.step(train_step)
    for i in range(5):
        env.rec(f"loss{i}", (train_step(X, y), sched.get_last_lr()))
        sched.step()
    env.rec("state", model.state_dict())
    # causality: changing the last input step leaves earlier outputs of the stack alone
    model.eval()
    with torch.no_grad():
        a = model.network(X)
        Xb = X.clone()
        Xb[:, :, -1] += 1.0
        b = model.network(Xb)
    env.rec("causal", bool(torch.equal(a[:, :, :-1], b[:, :, :-1])))


@pytest.mark.parametrize("program", [heat_pinn, tcn])
def test_pinn_tcn(program):
    run_tutorial(program)
