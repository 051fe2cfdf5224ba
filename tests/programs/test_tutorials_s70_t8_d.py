"""Stop 70 (t8), file d: meta-learning, inverse-problem and ODE-fitting programs from paper
re-implementations and blog posts, run with PyTorch, with llgrad eagerly and with llgrad
compiling the step through tutorial_harness.py.

- "Learning to learn by gradient descent by gradient descent" (Andrychowicz et al. blog
  re-implementations): a coordinatewise LSTM optimizer trained on random quadratics, the
  optimizee's gradient taken by torch.autograd.grad and detached (second derivatives
  dropped, as the paper does), the optimizee updated functionally over an unroll, the
  meta-loss summed over the unroll and the LSTM trained by Adam;
- Deep Image Prior (Ulyanov et al., the inpainting notebook): a fixed noise input kept as
  a module buffer, noise regularisation `z + z.clone().normal_() * sigma` every step, a
  masked reconstruction loss, the output's exponential average kept outside the step;
- Lotka-Volterra parameter fitting through a differentiable RK4 integrator (a "neural ODE
  without the network" blog post): four positive rates as exp of Parameters, an unrolled
  integration stacked into a trajectory, Adam on the log-MSE to observations."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def learning_to_learn(torch, env):
    nn, F = torch.nn, torch.nn.functional
    dim, hidden, unroll = 6, 12, 5

    class LSTMOptimizer(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTMCell(1, hidden)
            self.out = nn.Linear(hidden, 1)
            self.out.weight.data.mul_(0.1)

        def forward(self, grad, state):
            h, c = self.lstm(grad.view(-1, 1), state)
            return self.out(h).view(-1) * 0.1, (h, c)

    meta = env.init(LSTMOptimizer())
    meta_opt = torch.optim.Adam(meta.parameters(), lr=3e-3)

    def quadratic(W, y, theta):
        return ((W @ theta - y) ** 2).sum()

    def meta_step(W, y, theta0):
        theta = theta0.clone().requires_grad_(True)
        state = (torch.zeros(dim, hidden), torch.zeros(dim, hidden))
        meta_loss = 0
        for t in range(unroll):
            loss = quadratic(W, y, theta)
            meta_loss = meta_loss + loss
            grad, = torch.autograd.grad(loss, theta, retain_graph=True)
            update, state = meta(grad.detach(), state)
            theta = theta + update
        final = quadratic(W, y, theta)
        meta_opt.zero_grad()
        (meta_loss + final).backward()
        meta_opt.step()
        return meta_loss.detach() / unroll, final.detach()

    step = env.step(meta_step)
    hist = []
    for it in range(6):
        W, y, theta0 = env.randn(dim, dim) * 0.5, env.randn(dim), env.randn(dim)
        m, f = step(W, y, theta0)
        hist.append((m.item(), f.item()))
    env.rec("history", hist)
    env.rec("params", dict(meta.state_dict()))
    env.rec("grads", [p.grad for p in meta.parameters()])
    if env.compiled:
        assert step.n_traces <= 2, step.n_traces


def deep_image_prior(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Skip(nn.Module):
        # (convolutions before BatchNorm without bias: a bias there has a gradient that is
        # zero up to rounding, which Adam turns into steps of either sign)
        def __init__(self, c_in=4, c=8):
            super().__init__()
            self.down = nn.Sequential(nn.Conv2d(c_in, c, 3, stride=2, padding=1, bias=False),
                                      nn.BatchNorm2d(c), nn.LeakyReLU(0.2))
            self.mid = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, padding_mode="reflect",
                                               bias=False),
                                     nn.BatchNorm2d(c), nn.LeakyReLU(0.2))
            self.skip = nn.Sequential(nn.Conv2d(c_in, 2, 1, bias=False), nn.BatchNorm2d(2),
                                      nn.LeakyReLU(0.2))
            self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
            self.out = nn.Conv2d(c + 2, 1, 1)

        def forward(self, z):
            d = self.mid(self.down(z))
            return torch.sigmoid(self.out(torch.cat([self.up(d), self.skip(z)], dim=1)))

    class DIP(nn.Module):
        def __init__(self, z):
            super().__init__()
            self.net = Skip()
            self.register_buffer("net_input", z)

        def forward(self, sigma):
            z = self.net_input + self.net_input.clone().normal_() * sigma
            return self.net(z)

    image = env.rand(1, 1, 8, 8)
    mask = (env.rand(1, 1, 8, 8) > 0.3).float()
    dip = DIP(env.rand(1, 4, 8, 8) * 0.1)
    env.init(dip.net)
    opt = torch.optim.Adam(dip.parameters(), lr=1e-2)

    def closure_step(target, m, sigma):
        opt.zero_grad()
        out = dip(sigma)
        loss = F.mse_loss(out * m, target * m)
        loss.backward()
        opt.step()
        return loss, out.detach()

    step = env.step(closure_step)
    out_avg, losses = None, []
    for it in range(8):
        loss, out = step(image, mask, 1. / 30)
        out_avg = out if out_avg is None else out_avg * 0.9 + out * 0.1
        losses.append(loss.item())
    # (the noise draws come from the library's generator: torch's stream in both)
    env.rec("losses", losses)
    env.rec("out_avg", out_avg)
    env.rec("psnr", (-10 * torch.log10(F.mse_loss(out_avg, image))).item())
    env.rec("params", dict(dip.state_dict()))


def lotka_volterra_fit(torch, env):
    nn = torch.nn

    class LotkaVolterra(nn.Module):
        def __init__(self):
            super().__init__()
            self.log_rates = nn.Parameter(torch.log(torch.tensor([0.8, 0.5, 0.9, 0.4])))

        def forward(self, state):
            alpha, beta, gamma, delta = self.log_rates.exp()
            x, y = state[..., 0], state[..., 1]
            return torch.stack([alpha * x - beta * x * y, delta * x * y - gamma * y], dim=-1)

    def rk4(f, y0, dt, n_steps):
        ys = [y0]
        y = y0
        for _ in range(n_steps):
            k1 = f(y)
            k2 = f(y + dt / 2 * k1)
            k3 = f(y + dt / 2 * k2)
            k4 = f(y + dt * k3)
            y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            ys.append(y)
        return torch.stack(ys, dim=1)

    true = LotkaVolterra()
    with torch.no_grad():
        true.log_rates.copy_(torch.log(torch.tensor([1.1, 0.4, 1.0, 0.3])))
        y0 = torch.tensor([[1.0, 1.0], [2.0, 0.5], [0.5, 1.5]])
        observed = rk4(true, y0, 0.15, 12) * (1 + 0.01 * env.randn(3, 13, 2))

    model = LotkaVolterra()
    opt = torch.optim.Adam(model.parameters(), lr=5e-2)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.95)

    def train_step(y0, obs):
        opt.zero_grad()
        traj = rk4(model, y0, 0.15, 12)
        loss = ((traj.clamp_min(1e-3).log() - obs.log()) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    losses, rates = [], []
    for it in range(8):
        losses.append(step(y0, observed).item())
        sched.step()
        rates.append(model.log_rates.detach().exp().clone())
    env.rec("losses", losses)
    env.rec("rates", rates)
    env.rec("lr", sched.get_last_lr())
    env.rec("grad", model.log_rates.grad)


PROGRAMS = {"learning_to_learn": learning_to_learn, "deep_image_prior": deep_image_prior,
            "lotka_volterra_fit": lotka_volterra_fit}


# (slow: 10-25 s with a cold kernel cache on a loaded 2-core machine)
@pytest.mark.parametrize("name, program",
                         program_params(PROGRAMS, slow=("lotka_volterra_fit",)))
def test_program(name, program):
    run_tutorial(program, rtol=1e-5, atol=1e-6)
