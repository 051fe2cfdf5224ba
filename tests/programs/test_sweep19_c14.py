"""Sweep 19 (C), part 14: a neural ODE trained through an adaptive Dormand-Prince solver
written out as tutorials write it (the Butcher tableau as Python lists, the error ratio of
the embedded 4th/5th order solutions, steps accepted or rejected by `if err <= 1` and the
step size grown or shrunk by max(err.item(), 1e-10) ** -0.2, a while loop over t until the end
time), backpropagating through every accepted step; the number of function evaluations is
recorded. Run with PyTorch, with llgrad eagerly and with llgrad.compile
(tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

C = [0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0]
A = [[], [1 / 5], [3 / 40, 9 / 40], [44 / 45, -56 / 15, 32 / 9],
     [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
     [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
     [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84]]
B5 = [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0]
B4 = [5179 / 57600, 0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40]


def adaptive_neural_ode(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class ODEFunc(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 2))
            self.nfe = 0

        def forward(self, t, y):
            self.nfe += 1
            tt = torch.ones_like(y[:, :1]) * t
            return self.net(torch.cat([tt, y], 1))

    def dopri5(func, y0, t0, t1, rtol=1e-6, atol=1e-7, h=1.0):
        t, y = t0, y0
        n_accept = n_reject = 0
        while t < t1 - 1e-9:
            h = min(h, t1 - t)
            ks = []
            for i in range(7):
                yi = y
                for j, a in enumerate(A[i]):
                    if a != 0:
                        yi = yi + h * a * ks[j]
                ks.append(func(t + C[i] * h, yi))
            y5 = y + h * sum(b * k for b, k in zip(B5, ks) if b != 0)
            y4 = y + h * sum(b * k for b, k in zip(B4, ks) if b != 0)
            scale = atol + rtol * torch.max(y.abs(), y5.abs())
            err = ((y5 - y4) / scale).pow(2).mean().sqrt()
            if err <= 1:
                t, y = t + h, y5
                n_accept += 1
            else:
                n_reject += 1
            h = h * min(5.0, max(0.2, 0.9 * max(err.item(), 1e-10) ** -0.2))
        return y, n_accept, n_reject

    func = env.init(ODEFunc())
    opt = torch.optim.Adam(func.parameters(), lr=1e-2)
    y0 = env.randn(16, 2)
    theta = 0.6
    rot = torch.tensor([[torch.cos(torch.tensor(theta)), -torch.sin(torch.tensor(theta))],
                        [torch.sin(torch.tensor(theta)), torch.cos(torch.tensor(theta))]])
    target = y0 @ rot.T * 0.8

    def train_step(y0, target):
        func.nfe = 0
        opt.zero_grad()
        pred, n_acc, n_rej = dopri5(func, y0, 0.0, 1.0)
        loss = F.mse_loss(pred, target)
        loss.backward()
        opt.step()
        return loss, n_acc, n_rej, func.nfe
    train_step = env.step(train_step)
    for i in range(4):
        env.rec(f"step{i}", train_step(y0, target))
    # other batches, larger: the solver's accepted and rejected steps change
    for i in range(3):
        y = env.randn(16, 2) * (1 + 4 * i)
        env.rec(f"batch{i}", train_step(y, y @ rot.T * 0.8))
    env.rec("params", list(func.parameters()))


def test_adaptive_neural_ode():
    run_tutorial(adaptive_neural_ode)
