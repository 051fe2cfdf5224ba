"""Sweep 15 (D), part 6: the recipes around a training loop, with the library's own
generator: "Defining a neural network" (Conv2d, Dropout2d, Dropout, max_pool2d, flatten),
"Zeroing out gradients", "What is a state_dict", "Saving and loading a general
checkpoint", "Saving multiple models in one file" and "Warmstarting a model using
parameters from a different model" (strict=False). See tutorial_harness.py."""
import pytest

pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _net(torch):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 8, 3, 1)
            self.conv2 = nn.Conv2d(8, 16, 3, 1)
            self.dropout1 = nn.Dropout2d(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(16 * 5 * 5, 32)
            self.fc2 = nn.Linear(32, 10)

        def forward(self, x):
            x = self.conv1(x)
            x = F.relu(x)
            x = self.conv2(x)
            x = F.relu(x)
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = self.fc1(x)
            x = F.relu(x)
            x = self.dropout2(x)
            x = self.fc2(x)
            return F.log_softmax(x, dim=1)
    return Net


def defining_and_zeroing(torch, env):
    """recipes/defining_a_neural_network and recipes/zeroing_out_gradients: the MNIST net
    with its dropouts (masks drawn by the library's generator), SGD with momentum, and the
    gradients zeroed (set to None) between steps."""
    nn, optim = torch.nn, torch.optim
    torch.manual_seed(0)
    my_nn = _net(torch)()
    random_data = torch.rand((1, 1, 14, 14))
    env.rec("output", my_nn(random_data))
    criterion = nn.NLLLoss()
    optimizer = optim.SGD(my_nn.parameters(), lr=0.01, momentum=0.9)
    inputs = torch.rand(6, 1, 14, 14)
    labels = torch.randint(0, 10, (6,))

    def train_step(inputs, labels):
        optimizer.zero_grad()
        outputs = my_nn(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        return loss

    train_step = env.step(train_step)
    for epoch in range(3):
        env.rec(f"loss {epoch}", train_step(inputs, labels))
    env.rec("grads", [p.grad for p in my_nn.parameters()])
    optimizer.zero_grad()
    env.rec("zeroed", [p.grad is None for p in my_nn.parameters()])
    optimizer.zero_grad(set_to_none=False)
    env.rec("params", my_nn.state_dict())
    my_nn.eval()
    env.rec("eval", my_nn(inputs))


@pytest.mark.slow       # (~2-5 s: builds of its compiled steps)
def test_defining_and_zeroing():
    run_tutorial(defining_and_zeroing, rtol=1e-4, atol=1e-5)


def checkpoints(torch, env):
    """The state_dict, checkpoint, several-models and warm-start recipes."""
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class NetA(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 6, 5)
            self.pool = nn.MaxPool2d(2, 2)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1 = nn.Linear(16 * 1 * 1, 12)
            self.fc2 = nn.Linear(12, 10)

        def forward(self, x):
            x = self.pool(F.relu(self.conv1(x)))
            x = F.relu(self.conv2(x)).flatten(1)
            x = F.relu(self.fc1(x))
            return self.fc2(x)

    class NetB(NetA):
        def __init__(self):
            super().__init__()
            self.fc3 = nn.Linear(10, 4)

    torch.manual_seed(0)
    net = NetA()
    optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
    env.rec("state_dict", [(k, tuple(v.size())) for k, v in net.state_dict().items()])
    x = torch.randn(4, 3, 14, 14)
    y = torch.randint(0, 10, (4,))

    def step(x, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        optimizer.step()
        return loss

    step = env.step(step)
    for i in range(2):
        env.rec(f"loss {i}", step(x, y))
    sd = optimizer.state_dict()
    env.rec("optimizer state_dict", (sorted(sd["param_groups"][0]), sd["param_groups"][0]["params"],
                                     sorted(sd["state"]), [s["momentum_buffer"] for s in
                                                            sd["state"].values()]))
    path = env.path("model.pt")
    torch.save({"epoch": 5, "model_state_dict": net.state_dict(),
                "optimizer_state_dict": optimizer.state_dict(), "loss": 0.4}, path)
    model = NetA()
    optimizer2 = optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    checkpoint = torch.load(path, weights_only=True)
    model.load_state_dict(checkpoint["model_state_dict"])
    optimizer2.load_state_dict(checkpoint["optimizer_state_dict"])
    env.rec("checkpoint", (checkpoint["epoch"], checkpoint["loss"]))
    model.train()

    def step2(x, y):
        optimizer2.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer2.step()
        return loss

    step2 = env.step(step2)
    env.rec("resumed", (step2(x, y), step(x, y)))
    env.rec("resumed params", [a - b for a, b in zip(model.parameters(), net.parameters())])

    netB = NetB()
    optimizerB = optim.SGD(netB.parameters(), lr=0.001, momentum=0.9)
    path2 = env.path("models.pt")
    torch.save({"modelA_state_dict": net.state_dict(), "modelB_state_dict": netB.state_dict(),
                "optimizerA_state_dict": optimizer.state_dict(),
                "optimizerB_state_dict": optimizerB.state_dict()}, path2)
    both = torch.load(path2, weights_only=True)
    env.rec("both", sorted(both))

    warm = NetB()
    result = warm.load_state_dict(both["modelA_state_dict"], strict=False)
    env.rec("warm", (list(result.missing_keys), list(result.unexpected_keys),
                     warm.fc1.weight, warm.fc3.weight))
    try:
        NetA().load_state_dict(both["modelB_state_dict"])
    except RuntimeError as e:
        env.rec("strict", str(e).splitlines()[0])
    renamed = {k.replace("fc2", "fc2_renamed"): v for k, v in both["modelA_state_dict"].items()}
    result = NetA().load_state_dict(renamed, strict=False)
    env.rec("renamed", (list(result.missing_keys), list(result.unexpected_keys)))


@pytest.mark.slow       # (~2-5 s: builds of its compiled steps)
def test_checkpoints():
    run_tutorial(checkpoints, rtol=1e-5, atol=1e-6)


def visualizing_gradients(torch, env):
    """advanced/visualizing_gradients_tutorial: leaf and non-leaf tensors, requires_grad,
    retain_grad / retains_grad (in a compiled step too), the error of retain_grad without
    requires_grad, and gradient norms per layer from full backward hooks."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(42)
    x = torch.randn(1, 5)
    y = torch.randn(1, 3)
    W = torch.randn(5, 3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    z = (x @ W) + b
    y_pred = F.relu(z)
    loss = F.mse_loss(y_pred, y)
    env.rec("leaf", [t.is_leaf for t in (x, W, b, y, z, y_pred, loss)])
    env.rec("requires_grad", [t.requires_grad for t in (x, W, b, y, z, y_pred, loss)])
    with torch.no_grad():
        z2 = (x @ W) + b
    env.rec("no_grad", z2.requires_grad)
    loss.backward()
    env.rec("grads", (W.grad, b.grad, x.grad is None, y.grad is None))
    env.rec("retains", [t.retains_grad for t in (z, y_pred, loss, x, W)])
    W.retain_grad()
    env.rec("leaf retain is a no-op", W.retains_grad)
    try:
        x.retain_grad()
    except RuntimeError as e:
        env.rec("retain error", str(e))

    def step(x, y):
        z = (x @ W) + b
        y_pred = F.relu(z)
        loss = F.mse_loss(y_pred, y)
        z.retain_grad()
        y_pred.retain_grad()
        loss.retain_grad()
        W.grad = None
        b.grad = None
        loss.backward()
        return z.grad, y_pred.grad, loss.grad, W.grad, b.grad

    step = env.step(step)    # (retain_grad inside a compiled step: compile/retained.py)
    for i in range(2):
        env.rec(f"retained {i}", step(x + i, y))

    def plain_step(x, y):
        W.grad = None
        b.grad = None
        F.mse_loss(F.relu((x @ W) + b), y).backward()
        return W.grad, b.grad

    plain_step = env.step(plain_step)
    for i in range(2):
        env.rec(f"compiled {i}", plain_step(x + i, y))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3)
            self.bn = nn.BatchNorm2d(4)
            self.conv2 = nn.Conv2d(4, 4, 3)

        def forward(self, x):
            x = F.relu(self.bn(self.conv1(x)))
            return F.relu(self.conv2(x))

    m = Model()
    env.rec("named", [(n, p.requires_grad) for n, p in m.named_parameters()])
    norms = {}

    def hook_fn(module, grad_input, grad_output):
        norms[type(module).__name__ + str(len(norms))] = grad_output[0].norm()

    for layer in (m.conv1, m.bn, m.conv2):
        layer.register_full_backward_hook(hook_fn)
    m(torch.randn(2, 1, 8, 8)).sum().backward()
    env.rec("hook norms", norms)
    env.rec("bn stats", (m.bn.running_mean, m.bn.running_var, m.bn.num_batches_tracked))


def test_visualizing_gradients():
    run_tutorial(visualizing_gradients)
