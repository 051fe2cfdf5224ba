"""Sweep 20 (C), part 19: float64 and memory-format programs. Exact GP regression in double
precision: an RBF kernel from torch.cdist with log-parametrised lengthscale, outputscale and
noise, the negative log marginal likelihood through torch.linalg.cholesky, cholesky_solve
and 2 * log(diag(L)).sum(), optimised by Adam, then the predictive mean and variance
(solve_triangular) under no_grad; compared at rtol 1e-9. Then a ResNet basic block run in
channels_last memory format (model.to(memory_format=torch.channels_last) and inputs
converted the same way), BatchNorm2d, `out += identity` in place and ReLU(inplace=True),
with the output's memory format checked. Run with PyTorch, with llgrad eagerly and with
llgrad.compile (tutorial_harness.py)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def gp_regression(torch, env):
    nn = torch.nn
    X = env.rand(12, 2).double() * 4
    y = (torch.sin(X[:, 0]) + 0.5 * torch.cos(2 * X[:, 1]) + 0.1 * env.randn(12).double())
    Xs = env.rand(5, 2).double() * 4

    class ExactGP(nn.Module):
        def __init__(self):
            super().__init__()
            self.log_ls = nn.Parameter(torch.tensor(0.0, dtype=torch.float64))
            self.log_os = nn.Parameter(torch.tensor(0.0, dtype=torch.float64))
            self.log_noise = nn.Parameter(torch.tensor(-2.0, dtype=torch.float64))

        def kernel(self, a, b):
            d = torch.cdist(a / self.log_ls.exp(), b / self.log_ls.exp())
            return self.log_os.exp() * torch.exp(-0.5 * d ** 2)

        def nll(self, X, y):
            n = X.shape[0]
            K = self.kernel(X, X) + (self.log_noise.exp() + 1e-6) * torch.eye(n, dtype=X.dtype)
            L = torch.linalg.cholesky(K)
            alpha = torch.cholesky_solve(y.unsqueeze(-1), L)
            return 0.5 * (y.unsqueeze(0) @ alpha).squeeze() + torch.log(torch.diagonal(L)).sum() \
                + 0.5 * n * math.log(2 * math.pi)

    gp = ExactGP()
    opt = torch.optim.Adam(gp.parameters(), lr=0.05)

    def train_step(X, y):
        opt.zero_grad()
        loss = gp.nll(X, y) / X.shape[0]
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    for i in range(6):
        env.rec(f"nll{i}", train_step(X, y))

    @torch.no_grad()
    def predict(X, y, Xs):
        n = X.shape[0]
        K = gp.kernel(X, X) + (gp.log_noise.exp() + 1e-6) * torch.eye(n, dtype=X.dtype)
        L = torch.linalg.cholesky(K)
        Ks = gp.kernel(X, Xs)
        alpha = torch.cholesky_solve(y.unsqueeze(-1), L)
        mean = (Ks.T @ alpha).squeeze(-1)
        v = torch.linalg.solve_triangular(L, Ks, upper=False)
        var = gp.log_os.exp() - (v ** 2).sum(0)
        return mean, var
    env.rec("predict", env.step(predict)(X, y, Xs))
    env.rec("hypers", [p.exp() for p in gp.parameters()])


def channels_last_resnet(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            return self.relu(out)

    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
                          BasicBlock(8, 8), BasicBlock(8, 12, stride=2),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(12, 4))
    env.init(model)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    X = env.randn(4, 3, 8, 8).to(memory_format=torch.channels_last)
    y = env.randint(0, 4, (4,))
    env.rec("weight format", model[0].weight.is_contiguous(memory_format=torch.channels_last))

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    for i in range(4):
        env.rec(f"loss{i}", train_step(X, y))
    feats = env.step(torch.no_grad()(lambda x: model[:4](x)))(X)
    env.rec("feats", (feats, feats.is_contiguous(memory_format=torch.channels_last)))
    env.rec("grad format", model[0].weight.grad.is_contiguous(memory_format=torch.channels_last))
    env.rec("state", model.state_dict())


@pytest.mark.parametrize("program", [gp_regression, channels_last_resnet])
def test_float64_channels_last(program):
    run_tutorial(program, rtol=1e-9 if program is gp_regression else 1e-5,
                 atol=1e-12 if program is gp_regression else 1e-6)
