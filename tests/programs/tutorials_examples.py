""""Learning PyTorch with Examples": a third-order polynomial fit of sin(x), written with raw
tensors, with autograd, with a custom autograd.Function, with nn, with optim, with a custom
Module and with a Module of dynamic control flow. Programs `f(torch, env)`, see
tutorial_harness.py; a few steps each instead of 2000."""
import math
import random

STEPS = 30


def _data(torch):
    x = torch.linspace(-math.pi, math.pi, 2000, dtype=torch.float)
    return x, torch.sin(x)


def raw_tensors(torch, env):
    x, y = _data(torch)
    a, b, c, d = (env.randn() for _ in range(4))
    learning_rate = 1e-6

    def step(x, y, a, b, c, d):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum().item()
        grad_y_pred = 2.0 * (y_pred - y)
        grad_a = grad_y_pred.sum()
        grad_b = (grad_y_pred * x).sum()
        grad_c = (grad_y_pred * x ** 2).sum()
        grad_d = (grad_y_pred * x ** 3).sum()
        a -= learning_rate * grad_a
        b -= learning_rate * grad_b
        c -= learning_rate * grad_c
        d -= learning_rate * grad_d
        return loss

    step = env.step(step)
    for t in range(STEPS):
        loss = step(x, y, a, b, c, d)
        if t % 10 == 9:
            env.rec(f"loss {t}", loss)
    env.rec("result", [a, b, c, d])


def autograd(torch, env):
    dtype = torch.float
    x, y = _data(torch)
    a, b, c, d = (env.randn().to(dtype).requires_grad_() for _ in range(4))
    learning_rate = 1e-6

    def step(x, y, a, b, c, d):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum()
        loss.backward()
        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad
            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None
        return loss.item()

    step = env.step(step)
    for t in range(STEPS):
        env.rec(f"loss {t}", step(x, y, a, b, c, d))
    env.rec("result", [a, b, c, d])
    env.rec("requires_grad", [a.requires_grad, a.is_leaf, a.grad is None])


def custom_function(torch, env):
    class LegendrePolynomial3(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input ** 2 - 1)

    x, y = _data(torch)
    a = torch.full((), 0.0, requires_grad=True)
    b = torch.full((), -1.0, requires_grad=True)
    c = torch.full((), 0.0, requires_grad=True)
    d = torch.full((), 0.3, requires_grad=True)
    learning_rate = 5e-6

    def step(x, y, a, b, c, d):
        P3 = LegendrePolynomial3.apply
        y_pred = a + b * P3(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        loss.backward()
        with torch.no_grad():
            for p in (a, b, c, d):
                p -= learning_rate * p.grad
                p.grad = None
        return loss.detach(), y_pred.grad_fn is not None

    step = env.step(step)
    for t in range(STEPS):
        loss, has_fn = step(x, y, a, b, c, d)
        env.rec(f"loss {t}", loss)
    env.rec("grad_fn", has_fn)
    env.rec("result", [a, b, c, d])


def nn_manual_update(torch, env):
    x, y = _data(torch)
    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)
    env.rec("xx", xx)
    model = env.init(torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1)))
    loss_fn = torch.nn.MSELoss(reduction="sum")
    learning_rate = 1e-6

    def step(model, xx, y):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= learning_rate * param.grad
        return loss.item()

    step = env.step(step)
    for t in range(STEPS):
        env.rec(f"loss {t}", step(model, xx, y))
    linear_layer = model[0]
    env.rec("result", [linear_layer.bias, linear_layer.weight[:, 0], linear_layer.weight[:, 1],
                       linear_layer.weight[:, 2]])
    env.rec("grads", [q.grad for q in model.parameters()])


def nn_optim(torch, env):
    x, y = _data(torch)
    xx = x.unsqueeze(-1).pow(torch.tensor([1, 2, 3]))
    model = env.init(torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1)))
    loss_fn = torch.nn.MSELoss(reduction="sum")
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)

    def step(model, optimizer, xx, y):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    step = env.step(step)
    for t in range(STEPS):
        env.rec(f"loss {t}", step(model, optimizer, xx, y))
    env.rec("params", list(model.parameters()))
    env.rec("square_avg", [optimizer.state[q]["square_avg"] for q in model.parameters()])


def custom_module(torch, env):
    class Polynomial3(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.randn(()))
            self.b = torch.nn.Parameter(torch.randn(()))
            self.c = torch.nn.Parameter(torch.randn(()))
            self.d = torch.nn.Parameter(torch.randn(()))

        def forward(self, x):
            return self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3

        def string(self):
            return f"y = {self.a.item()} + {self.b.item()} x + {self.c.item()} x^2 + " \
                   f"{self.d.item()} x^3"

    x, y = _data(torch)
    model = env.init(Polynomial3())
    criterion = torch.nn.MSELoss(reduction="sum")
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)

    def step(model, x, y):
        y_pred = model(x)
        loss = criterion(y_pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    step = env.step(step)
    for t in range(STEPS):
        loss = step(model, x, y)
        env.rec(f"loss {t}", loss.item())
    env.rec("loss grad_fn", loss.grad_fn is not None and loss.requires_grad)
    env.rec("string", len(model.string()) > 0)
    env.rec("params", dict(model.named_parameters()))


def dynamic_net(torch, env):
    """The tutorial draws the number of repeated layers in forward (random.randint); the
    compiled step gets the draw as an argument (a Python-int guard: one trace per count)."""
    class DynamicNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.randn(()))
            self.b = torch.nn.Parameter(torch.randn(()))
            self.c = torch.nn.Parameter(torch.randn(()))
            self.d = torch.nn.Parameter(torch.randn(()))
            self.e = torch.nn.Parameter(torch.randn(()))

        def forward(self, x, n=None):
            y = self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3
            for exp in range(4, random.randint(4, 6) if n is None else n):
                y = y + self.e * x ** exp
            return y

    x, y = _data(torch)
    model = env.init(DynamicNet())
    criterion = torch.nn.MSELoss(reduction="sum")
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-8, momentum=0.9)

    def step(model, x, y, n):
        y_pred = model(x, n)
        loss = criterion(y_pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    compiled = env.step(step)
    random.seed(0)
    for t in range(STEPS):
        if t % 2:       # the tutorial's own forward: its draw from Python's random
            loss = step(model, x, y, None)
        else:
            loss = compiled(model, x, y, random.randint(4, 6))
        env.rec(f"loss {t}", loss)
    env.rec("params", dict(model.named_parameters()))
    env.rec("momentum", [optimizer.state[p]["momentum_buffer"] for p in model.parameters()])
