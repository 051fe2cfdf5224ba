"""Tutorial programs written as the tutorials write them, now that llgrad's random stream is
PyTorch's: `torch.manual_seed(0)`, modules initialised by their own constructors, data from
torch.randn / rand / randint, DataLoader(shuffle=True). Each runs with torch, with llgrad
eagerly and with its step compiled (tutorial_harness.py), and every record is compared
with torch's. Here: the quickstart, "what is torch.nn really", the autograd and
optimisation-loop tutorials, saving and loading, regression and logistic regression."""
import io

import numpy as np

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def quickstart_fake_fashion(torch, env):
    """The quickstart: a flatten + MLP on 28x28 fake images, train loop and test loop."""
    nn = torch.nn
    DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset
    torch.manual_seed(0)
    train = TensorDataset(torch.rand(48, 1, 28, 28), torch.randint(0, 10, (48,)))
    test = TensorDataset(torch.rand(16, 1, 28, 28), torch.randint(0, 10, (16,)))
    train_dataloader = DataLoader(train, batch_size=16, shuffle=True)
    test_dataloader = DataLoader(test, batch_size=8)

    class NeuralNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.flatten = nn.Flatten()
            self.linear_relu_stack = nn.Sequential(
                nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                nn.Linear(64, 10))

        def forward(self, x):
            return self.linear_relu_stack(self.flatten(x))

    model = NeuralNetwork()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)

    def train_step(X, y):
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss.item()

    train_step = env.step(train_step)
    for t in range(3):
        model.train()
        env.rec(f"epoch {t} losses", [train_step(X, y) for X, y in train_dataloader])
        model.eval()
        test_loss, correct = 0, 0
        with torch.no_grad():
            for X, y in test_dataloader:
                pred = model(X)
                test_loss += loss_fn(pred, y).item()
                correct += (pred.argmax(1) == y).type(torch.float).sum().item()
        env.rec(f"epoch {t} test", (test_loss / len(test_dataloader), correct / len(test)))
    env.rec("weights", list(model.parameters()))


def nn_really_mnist(torch, env):
    """'What is torch.nn really?': from hand-written log_softmax to nn.Module, optim, DataLoader."""
    import math
    F, nn, optim = torch.nn.functional, torch.nn, torch.optim
    DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset
    torch.manual_seed(0)
    x_train, y_train = torch.randn(64, 784), torch.randint(0, 10, (64,))
    x_valid, y_valid = torch.randn(32, 784), torch.randint(0, 10, (32,))
    n, c = x_train.shape
    env.rec("shapes", (n, c, y_train.min().item(), y_train.max().item()))

    weights = torch.randn(784, 10) / math.sqrt(784)
    weights.requires_grad_()
    bias = torch.zeros(10, requires_grad=True)

    def log_softmax(x):
        return x - x.exp().sum(-1).log().unsqueeze(-1)

    def model(xb):
        return log_softmax(xb @ weights + bias)

    def nll(input, target):
        return -input[range(target.shape[0]), target].mean()

    def accuracy(out, yb):
        preds = torch.argmax(out, dim=1)
        return (preds == yb).float().mean()

    bs, lr = 16, 0.5
    for i in range((n - 1) // bs + 1):
        xb, yb = x_train[i * bs:i * bs + bs], y_train[i * bs:i * bs + bs]
        loss = nll(model(xb), yb)
        loss.backward()
        with torch.no_grad():
            weights -= weights.grad * lr
            bias -= bias.grad * lr
            weights.grad.zero_()
            bias.grad.zero_()
    env.rec("by hand", (loss, accuracy(model(x_valid), y_valid), weights, bias))

    class Mnist_Logistic(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(784, 10)

        def forward(self, xb):
            return self.lin(xb)

    def get_data(train_ds, valid_ds, bs):
        return (DataLoader(train_ds, batch_size=bs, shuffle=True),
                DataLoader(valid_ds, batch_size=bs * 2))

    def loss_batch(model, loss_func, xb, yb, opt=None):
        loss = loss_func(model(xb), yb)
        if opt is not None:
            loss.backward()
            opt.step()
            opt.zero_grad()
        return loss.item(), len(xb)

    model = Mnist_Logistic()
    opt = optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    train_dl, valid_dl = get_data(TensorDataset(x_train, y_train),
                                  TensorDataset(x_valid, y_valid), bs)
    train_batch = env.step(lambda xb, yb: loss_batch(model, F.cross_entropy, xb, yb, opt))
    for epoch in range(3):
        model.train()
        losses = [train_batch(xb, yb)[0] for xb, yb in train_dl]
        model.eval()
        with torch.no_grad():
            ls, nums = zip(*[loss_batch(model, F.cross_entropy, xb, yb) for xb, yb in valid_dl])
        env.rec(f"epoch {epoch}", (losses, float(np.sum(np.multiply(ls, nums)) / np.sum(nums))))
    env.rec("lin", (model.lin.weight, model.lin.bias))


def autograd_tutorial(torch, env):
    """The autograd tutorial: requires_grad, grad_fn names, backward, Jacobian products,
    detach, no_grad, retain_graph and accumulation."""
    torch.manual_seed(0)
    x = torch.ones(5)
    y = torch.zeros(3)
    w = torch.randn(5, 3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    z = torch.matmul(x, w) + b
    loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
    env.rec("grad_fn", (type(z.grad_fn).__name__, type(loss.grad_fn).__name__))
    loss.backward()
    env.rec("grads", (w.grad, b.grad, z.requires_grad))
    with torch.no_grad():
        z = torch.matmul(x, w) + b
    env.rec("no_grad", z.requires_grad)
    z_det = (torch.matmul(x, w) + b).detach()
    env.rec("detach", (z_det.requires_grad, z_det))
    inp = torch.eye(4, 5, requires_grad=True)
    out = (inp + 1).pow(2).t()
    out.backward(torch.ones_like(out), retain_graph=True)
    first = inp.grad.clone()
    out.backward(torch.ones_like(out), retain_graph=True)
    second = inp.grad.clone()
    inp.grad.zero_()
    out.backward(torch.ones_like(out), retain_graph=True)
    env.rec("accumulate", (first, second, inp.grad))
    a = torch.randn(3, requires_grad=True)
    q = a * 2
    while q.data.norm() < 1000:
        q = q * 2
    v = torch.tensor([0.1, 1.0, 0.0001], dtype=torch.float)
    q.backward(v)
    env.rec("vjp", (q, a.grad))

    params = [w, b]
    opt = torch.optim.SGD(params, lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y)
        loss.backward()
        opt.step()
        return loss

    step = env.step(step)
    xs, ys = torch.randn(10, 4, 5), torch.rand(10, 4, 3)
    env.rec("losses", [step(xs[i], ys[i]) for i in range(10)])
    env.rec("params", params)


def optimization_loop(torch, env):
    """The optimisation tutorial: hyperparameters, train_loop/test_loop, Adam then SGD."""
    nn = torch.nn
    DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset
    torch.manual_seed(0)
    learning_rate, batch_size, epochs = 1e-3, 8, 3
    data = TensorDataset(torch.randn(40, 20), torch.randint(0, 4, (40,)))
    train_dataloader = DataLoader(data, batch_size=batch_size, shuffle=True)
    test_dataloader = DataLoader(data, batch_size=batch_size)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 4))
    loss_fn = nn.CrossEntropyLoss()
    for opt_name in ("Adam", "SGD"):
        optimizer = getattr(torch.optim, opt_name)(model.parameters(), lr=learning_rate * 10)

        def train_step(X, y):
            pred = model(X)
            loss = loss_fn(pred, y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            return loss.item()

        train_step = env.step(train_step)
        for t in range(epochs):
            model.train()
            env.rec(f"{opt_name} {t}", [train_step(X, y) for X, y in train_dataloader])
            model.eval()
            size = len(test_dataloader.dataset)
            test_loss, correct = 0, 0
            with torch.no_grad():
                for X, y in test_dataloader:
                    pred = model(X)
                    test_loss += loss_fn(pred, y).item()
                    correct += (pred.argmax(1) == y).type(torch.float).sum().item()
            env.rec(f"{opt_name} test {t}", (test_loss / len(test_dataloader), correct / size))
    env.rec("final", model.state_dict())


def save_load_state_dict(torch, env):
    """Saving and loading: state_dict, torch.save / torch.load through BytesIO, the
    optimizer's state_dict, a checkpoint dict, load_state_dict(strict=False)."""
    nn = torch.nn
    torch.manual_seed(0)

    class TheModelClass(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3)
            self.pool = nn.MaxPool2d(2, 2)
            self.fc1 = nn.Linear(4 * 3 * 3, 10)

        def forward(self, x):
            x = self.pool(torch.relu(self.conv1(x)))
            return self.fc1(torch.flatten(x, 1))

    model = TheModelClass()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    env.rec("state keys", [(k, tuple(v.shape)) for k, v in model.state_dict().items()])
    X, y = torch.randn(8, 1, 8, 8), torch.randint(0, 10, (8,))

    def step(X, y):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(X), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    step = env.step(step)
    env.rec("first", [step(X, y) for _ in range(3)])
    env.rec("opt state", [(k, sorted(v)) for k, v in optimizer.state_dict()["state"].items()])
    env.rec("param_groups", [{k: v for k, v in g.items() if k in ("lr", "momentum", "params")}
                             for g in optimizer.state_dict()["param_groups"]])
    buf = io.BytesIO()
    torch.save({"epoch": 3, "model_state_dict": model.state_dict(),
                "optimizer_state_dict": optimizer.state_dict(), "loss": 0.5}, buf)
    buf.seek(0)
    checkpoint = torch.load(buf, weights_only=True)
    model2 = TheModelClass()
    optimizer2 = torch.optim.SGD(model2.parameters(), lr=0.01, momentum=0.9)
    model2.load_state_dict(checkpoint["model_state_dict"])
    optimizer2.load_state_dict(checkpoint["optimizer_state_dict"])
    env.rec("checkpoint", (checkpoint["epoch"], checkpoint["loss"]))
    model2.train()

    def step2(X, y):
        optimizer2.zero_grad()
        loss = nn.functional.cross_entropy(model2(X), y)
        loss.backward()
        optimizer2.step()
        return loss.item()

    step2 = env.step(step2)
    resumed = [step2(X, y) for _ in range(3)]
    cont = [step(X, y) for _ in range(3)]
    env.rec("resumed", resumed)
    env.rec("continued", cont)
    env.rec("same", all(abs(a - b) < 1e-6 for a, b in zip(resumed, cont)))
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf)
    del sd["fc1.bias"]
    other = nn.Sequential()
    fresh = TheModelClass()
    res = fresh.load_state_dict(sd, strict=False)
    env.rec("strict=False", (list(res.missing_keys), list(res.unexpected_keys)))
    env.rec("loaded", (fresh.conv1.weight, fresh.fc1.bias, len(other.state_dict())))
    try:
        fresh.load_state_dict(sd)
        env.rec("strict error", None)
    except RuntimeError as e:
        env.rec("strict error", str(e).splitlines()[0])


def linear_regression_mse(torch, env):
    """Regression with nn.Linear and MSELoss, on y = 3x - 2 + noise; SGD for 50 steps."""
    nn = torch.nn
    torch.manual_seed(0)
    X = torch.rand(100, 1) * 10
    y = 3 * X - 2 + torch.randn(100, 1) * 0.5
    model = nn.Linear(1, 1)
    criterion = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(X, y):
        outputs = model(X)
        loss = criterion(outputs, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    step = env.step(step)
    losses = [step(X, y) for _ in range(50)]
    env.rec("losses", losses[::5])
    [w, b] = model.parameters()
    env.rec("fit", (w.item(), b.item()))
    with torch.no_grad():
        env.rec("predicted", model(torch.tensor([[4.0]])))


def logistic_regression(torch, env):
    """Logistic regression: sigmoid + BCELoss on two Gaussian blobs, accuracy by threshold."""
    nn = torch.nn
    torch.manual_seed(0)
    n = 60
    x0 = torch.randn(n, 2) + torch.tensor([2.0, 2.0])
    x1 = torch.randn(n, 2) - torch.tensor([2.0, 2.0])
    X = torch.cat([x0, x1])
    y = torch.cat([torch.zeros(n), torch.ones(n)]).unsqueeze(1)

    class LogisticRegression(nn.Module):
        def __init__(self, input_dim):
            super().__init__()
            self.linear = nn.Linear(input_dim, 1)

        def forward(self, x):
            return torch.sigmoid(self.linear(x))

    model = LogisticRegression(2)
    criterion = nn.BCELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    perm = torch.randperm(2 * n)
    X, y = X[perm], y[perm]

    def step(xb, yb):
        optimizer.zero_grad()
        out = model(xb)
        loss = criterion(out, yb)
        loss.backward()
        optimizer.step()
        acc = ((out > 0.5).float() == yb).float().mean()
        return loss.item(), acc.item()

    step = env.step(step)
    hist = []
    for epoch in range(5):
        for i in range(0, 2 * n, 30):
            hist.append(step(X[i:i + 30], y[i:i + 30]))
    env.rec("hist", hist)
    env.rec("weights", (model.linear.weight, model.linear.bias))


PROGRAMS = {f.__name__: f for f in [
    quickstart_fake_fashion, nn_really_mnist, autograd_tutorial, optimization_loop,
    save_load_state_dict, linear_regression_mse, logistic_regression]}


# (over ~1.5 s each with their builds, on a machine the suite shares: in the slow run)
SLOW = {"nn_really_mnist", "optimization_loop", "quickstart_fake_fashion",
        "save_load_state_dict"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], rtol=1e-4, atol=1e-6)
