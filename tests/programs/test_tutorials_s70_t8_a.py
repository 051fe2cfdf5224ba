"""Stop 70 (t8), file a: blog-post and Kaggle-notebook programs run with PyTorch, with llgrad
eagerly and with llgrad compiling the training step through tutorial_harness.py.

- an "optimizers compared" notebook: one base model deep-copied per optimizer (Rprop,
  ASGD, Adamax, Adagrad with lr_decay, NAdam with momentum_decay), full-batch training in a
  compiled closure-free step, the loss curves and the optimizers' state_dicts compared;
- a SegNet-style autoencoder: MaxPool2d(return_indices=True) feeding MaxUnpool2d with the
  encoder's indices and output_size, a per-pixel cross-entropy on the decoded map;
- a Highway network (Srivastava et al. blog re-implementations): a transform gate with its
  bias filled with -2 by nn.init.constant_, `H * T + x * (1 - T)` stacked in a ModuleList;
- an activation-function zoo (a "which activation?" notebook): one MLP per activation from
  a dict of shrink/threshold modules (Hardshrink, Softshrink, Tanhshrink,
  Threshold, CELU, LogSigmoid, Hardtanh, ReLU6, Softsign), trained and compared."""
import copy

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def optimizer_zoo(torch, env):
    nn, F = torch.nn, torch.nn.functional
    base = env.init(nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1)))
    X, y = env.randn(48, 6), env.randn(48, 1)
    makers = {
        "Rprop": lambda p: torch.optim.Rprop(p, lr=0.01, etas=(0.4, 1.3), step_sizes=(1e-5, 1)),
        "ASGD": lambda p: torch.optim.ASGD(p, lr=0.05, t0=3, lambd=1e-3),
        "Adamax": lambda p: torch.optim.Adamax(p, lr=0.02, weight_decay=1e-3),
        "Adagrad": lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.01,
                                                 initial_accumulator_value=0.1),
        "NAdam": lambda p: torch.optim.NAdam(p, lr=0.01, momentum_decay=3e-3),
    }
    for name, make in makers.items():
        model = copy.deepcopy(base)
        opt = make(model.parameters())

        def train_step(x, t):
            opt.zero_grad()
            loss = F.mse_loss(model(x), t)
            loss.backward()
            opt.step()
            return loss

        step = env.step(train_step)
        history = [step(X, y).item() for _ in range(8)]
        env.rec(f"{name} losses", history)
        env.rec(f"{name} params", dict(model.state_dict()))
        state = opt.state_dict()["state"]
        env.rec(f"{name} state", {f"{i}.{k}": v for i, s in state.items() for k, v in s.items()
                                  if k != "step" or not isinstance(v, (int, float))})
        if env.compiled:
            assert step.n_traces <= 2, (name, step.n_traces)


def segnet_autoencoder(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class SegNetMini(nn.Module):
        def __init__(self, n_classes=3):
            super().__init__()
            # (no bias before BatchNorm: its gradient is zero up to rounding, which Adam
            # turns into steps of either sign)
            self.enc1 = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1, bias=False),
                                      nn.BatchNorm2d(6), nn.ReLU())
            self.enc2 = nn.Sequential(nn.Conv2d(6, 8, 3, padding=1, bias=False),
                                      nn.BatchNorm2d(8), nn.ReLU())
            self.pool = nn.MaxPool2d(2, 2, return_indices=True)
            self.unpool = nn.MaxUnpool2d(2, 2)
            self.dec2 = nn.Sequential(nn.Conv2d(8, 6, 3, padding=1), nn.ReLU())
            self.dec1 = nn.Conv2d(6, n_classes, 3, padding=1)

        def forward(self, x):
            x = self.enc1(x)
            size1 = x.size()
            x, idx1 = self.pool(x)
            x = self.enc2(x)
            size2 = x.size()
            x, idx2 = self.pool(x)
            x = self.unpool(x, idx2, output_size=size2)
            x = self.dec2(x)
            x = self.unpool(x, idx1, output_size=size1)
            return self.dec1(x)

    model = env.init(SegNetMini())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    images, masks = env.randn(8, 1, 8, 8), env.randint(0, 3, (8, 8, 8))

    def train_step(x, m):
        model.train()
        opt.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out, m)
        loss.backward()
        opt.step()
        return loss, out.argmax(1)

    step = env.step(train_step)
    losses = []
    for epoch in range(3):
        for i in range(0, 8, 4):
            loss, pred = step(images[i:i + 4], masks[i:i + 4])
            losses.append(loss.item())
    env.rec("losses", losses)
    env.rec("pixel acc", (pred == masks[4:]).float().mean().item())
    env.rec("params", dict(model.state_dict()))


def highway_network(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Highway(nn.Module):
        def __init__(self, size, num_layers, f=F.relu):
            super().__init__()
            self.num_layers = num_layers
            self.nonlinear = nn.ModuleList([nn.Linear(size, size) for _ in range(num_layers)])
            self.gate = nn.ModuleList([nn.Linear(size, size) for _ in range(num_layers)])
            self.f = f
            for g in self.gate:
                nn.init.constant_(g.bias, -2.0)

        def forward(self, x):
            for layer in range(self.num_layers):
                gate = torch.sigmoid(self.gate[layer](x))
                nonlinear = self.f(self.nonlinear[layer](x))
                x = gate * nonlinear + (1 - gate) * x
            return x

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(10, 12)
            self.highway = Highway(12, 4)
            self.out = nn.Linear(12, 3)

        def forward(self, x):
            return self.out(self.highway(F.elu(self.inp(x))))

    model = env.init(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    X, y = env.randn(30, 10), env.randint(0, 3, (30,))

    def train_step(x, t):
        opt.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, t)
        loss.backward()
        gate_grad = model.highway.gate[0].bias.grad.abs().mean()
        opt.step()
        return loss, gate_grad

    step = env.step(train_step)
    losses, gate_grads = [], []
    for epoch in range(4):
        for i in range(0, 30, 10):
            loss, g = step(X[i:i + 10], y[i:i + 10])
            losses.append(loss.item())
            gate_grads.append(g.item())
    env.rec("losses", losses)
    env.rec("gate grads", gate_grads)
    env.rec("params", dict(model.state_dict()))
    with torch.no_grad():
        env.rec("mean gate", torch.sigmoid(model.highway.gate[0](F.elu(model.inp(X)))).mean())


def activation_zoo(torch, env):
    nn, F = torch.nn, torch.nn.functional
    activations = {
        "hardshrink": nn.Hardshrink(0.3), "softshrink": nn.Softshrink(0.2),
        "tanhshrink": nn.Tanhshrink(), "threshold": nn.Threshold(0.1, -0.5),
        "celu": nn.CELU(alpha=0.7), "logsigmoid": nn.LogSigmoid(),
        "hardtanh": nn.Hardtanh(-0.5, 0.8), "relu6": nn.ReLU6(), "softsign": nn.Softsign(),
    }
    X = env.randn(40, 5, scale=1.5)
    y = (X[:, :1] * X[:, 1:2] - X[:, 2:3]).tanh()
    results = {}
    for name, act in activations.items():
        model = env.init(nn.Sequential(nn.Linear(5, 12), act, nn.Linear(12, 12), act,
                                       nn.Linear(12, 1)))
        # (SGD: Adam's first step turns a gradient that is zero up to rounding into a
        # full step of either sign)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

        def train_step(x, t):
            opt.zero_grad(set_to_none=True)
            loss = F.mse_loss(model(x), t)
            loss.backward()
            opt.step()
            return loss.detach()

        step = env.step(train_step)
        curve = [step(X, y).item() for _ in range(6)]
        results[name] = curve[-1]
        env.rec(f"{name} curve", curve)
        env.rec(f"{name} grad", model[0].weight.grad)
    best = min(results, key=results.get)
    env.rec("best", best)


PROGRAMS = {"optimizer_zoo": optimizer_zoo, "segnet_autoencoder": segnet_autoencoder,
            "highway_network": highway_network, "activation_zoo": activation_zoo}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-5, atol=1e-6)
