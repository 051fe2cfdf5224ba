""""What is torch.nn really?": MNIST-shaped synthetic data (28x28 images, 10 classes, a few
batches), logistic regression by hand, then refactored step by step onto nn.Module,
nn.Linear, optim, TensorDataset / DataLoader, a CNN and nn.Sequential with a Lambda
module. Programs `f(torch, env)`, see tutorial_harness.py."""
import math

import numpy as np

N, BS, LR = 96, 32, 0.5


def _mnist(env, n=N):
    x = env.rand(n, 784)
    y = env.randint(0, 10, (n,))
    return x, y


def by_hand(torch, env):
    x_train, y_train = _mnist(env)
    weights = env.randn(784, 10) / math.sqrt(784)
    weights.requires_grad_()
    bias = torch.zeros(10, requires_grad=True)

    def log_softmax(x):
        return x - x.exp().sum(-1).log().unsqueeze(-1)

    def model(xb):
        return log_softmax(xb @ weights + bias)

    def nll(input, target):
        return -input[range(target.shape[0]), target].mean()

    loss_func = nll

    def accuracy(out, yb):
        preds = torch.argmax(out, dim=1)
        return (preds == yb).float().mean()

    def train_batch(xb, yb, weights, bias):
        pred = model(xb)
        loss = loss_func(pred, yb)
        loss.backward()
        with torch.no_grad():
            weights -= weights.grad * LR
            bias -= bias.grad * LR
            weights.grad.zero_()
            bias.grad.zero_()
        return loss.detach()

    preds = model(x_train[0:BS])
    env.rec("preds[0]", preds[0])
    env.rec("preds.shape", tuple(preds.shape))
    env.rec("first loss", loss_func(preds, y_train[0:BS]))
    env.rec("first accuracy", accuracy(preds, y_train[0:BS]))
    step = env.step(train_batch)
    for epoch in range(2):
        for i in range((N - 1) // BS + 1):
            start_i = i * BS
            end_i = start_i + BS
            xb = x_train[start_i:end_i]
            yb = y_train[start_i:end_i]
            env.rec(f"loss {epoch} {i}", step(xb, yb, weights, bias))
    env.rec("weights", weights)
    env.rec("bias", bias)
    env.rec("grad", weights.grad)
    env.rec("final", (loss_func(model(x_train), y_train), accuracy(model(x_train), y_train)))


def _fit_batches(torch, env, model, opt, loss_func, x_train, y_train, epochs=2):
    def step(model, opt, xb, yb):
        pred = model(xb)
        loss = loss_func(pred, yb)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    step = env.step(step)
    for epoch in range(epochs):
        for i in range((N - 1) // BS + 1):
            xb, yb = x_train[i * BS:i * BS + BS], y_train[i * BS:i * BS + BS]
            env.rec(f"loss {epoch} {i}", step(model, opt, xb, yb))


def module_and_linear(torch, env):
    nn, F = torch.nn, torch.nn.functional
    x_train, y_train = _mnist(env)

    class Mnist_Logistic(nn.Module):
        def __init__(self):
            super().__init__()
            self.weights = nn.Parameter(torch.randn(784, 10) / math.sqrt(784))
            self.bias = nn.Parameter(torch.zeros(10))

        def forward(self, xb):
            return xb @ self.weights + self.bias

    class Mnist_Linear(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(784, 10)

        def forward(self, xb):
            return self.lin(xb)

    loss_func = F.cross_entropy
    for cls in (Mnist_Logistic, Mnist_Linear):
        model = env.init(cls())
        env.rec(f"{cls.__name__} initial loss", loss_func(model(x_train[:BS]), y_train[:BS]))
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        _fit_batches(torch, env, model, opt, loss_func, x_train, y_train)
        env.rec(f"{cls.__name__} state", model.state_dict())


def dataset_and_loader(torch, env):
    from_lib = __import__(torch.__name__ + ".utils.data", fromlist=["TensorDataset"])
    TensorDataset, DataLoader = from_lib.TensorDataset, from_lib.DataLoader
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    x_train, y_train = _mnist(env)
    x_valid, y_valid = _mnist(env, 64)
    train_ds = TensorDataset(x_train, y_train)
    valid_ds = TensorDataset(x_valid, y_valid)
    env.rec("ds item", train_ds[3])
    env.rec("len", len(train_ds))

    def get_data(train_ds, valid_ds, bs, shuffle):
        return (DataLoader(train_ds, batch_size=bs, shuffle=shuffle),
                DataLoader(valid_ds, batch_size=bs * 2))

    def get_model():
        model = env.init(nn.Linear(784, 10))
        return model, optim.SGD(model.parameters(), lr=LR, momentum=0.9)

    def loss_batch(model, loss_func, xb, yb, opt=None):
        loss = loss_func(model(xb), yb)
        if opt is not None:
            loss.backward()
            opt.step()
            opt.zero_grad()
        return loss.item(), len(xb)

    train_step = env.step(loss_batch)
    for shuffle in (False, True):       # a shuffle draws from the library's generator
        torch.manual_seed(0)
        train_dl, valid_dl = get_data(train_ds, valid_ds, BS, shuffle)
        model, opt = get_model()
        for epoch in range(2):
            model.train()
            for xb, yb in train_dl:
                env.rec("train", train_step(model, F.cross_entropy, xb, yb, opt), not shuffle)
            model.eval()
            with torch.no_grad():
                losses, nums = zip(*[loss_batch(model, F.cross_entropy, xb, yb)
                                     for xb, yb in valid_dl])
            val_loss = np.sum(np.multiply(losses, nums)) / np.sum(nums)
            env.rec(f"val loss {shuffle} {epoch}", float(val_loss), not shuffle)
        env.rec(f"weight {shuffle}", model.weight, not shuffle)


def cnn(torch, env):
    nn, F = torch.nn, torch.nn.functional
    x_train, y_train = _mnist(env)

    class Mnist_CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1)
            self.conv2 = nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1)
            self.conv3 = nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1)

        def forward(self, xb):
            xb = xb.view(-1, 1, 28, 28)
            xb = F.relu(self.conv1(xb))
            xb = F.relu(self.conv2(xb))
            xb = F.relu(self.conv3(xb))
            xb = F.avg_pool2d(xb, 4)
            return xb.view(-1, xb.size(1))

    model = env.init(Mnist_CNN())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    _fit_batches(torch, env, model, opt, F.cross_entropy, x_train, y_train, epochs=1)
    env.rec("state", model.state_dict())


def sequential_lambda(torch, env):
    nn, F = torch.nn, torch.nn.functional
    DataLoader = __import__(torch.__name__ + ".utils.data", fromlist=["x"]).DataLoader
    TensorDataset = __import__(torch.__name__ + ".utils.data", fromlist=["x"]).TensorDataset
    x_train, y_train = _mnist(env, 64)

    class Lambda(nn.Module):
        def __init__(self, func):
            super().__init__()
            self.func = func

        def forward(self, x):
            return self.func(x)

    def preprocess(x, y):
        return x.view(-1, 1, 28, 28), y

    class WrappedDataLoader:
        def __init__(self, dl, func):
            self.dl = dl
            self.func = func

        def __len__(self):
            return len(self.dl)

        def __iter__(self):
            for b in self.dl:
                yield (self.func(*b))

    model = env.init(nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        Lambda(lambda x: x.view(x.size(0), -1)),
    ))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train_dl = WrappedDataLoader(DataLoader(TensorDataset(x_train, y_train), batch_size=BS),
                                 preprocess)

    def step(model, xb, yb):
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.item()

    step = env.step(step)
    for epoch in range(2):
        for xb, yb in train_dl:
            env.rec("loss", step(model, xb, yb))
    env.rec("state", model.state_dict())
