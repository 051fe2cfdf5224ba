"""The Quickstart (FashionMNIST-shaped synthetic data) and "Autograd mechanics" / "Automatic
differentiation with torch.autograd". Programs `f(torch, env)`, see tutorial_harness.py."""


def quickstart(torch, env):
    nn = torch.nn
    data = __import__(torch.__name__ + ".utils.data", fromlist=["DataLoader"])
    DataLoader, TensorDataset = data.DataLoader, data.TensorDataset
    training_data = TensorDataset(env.rand(96, 1, 28, 28), env.randint(0, 10, (96,)))
    test_data = TensorDataset(env.rand(40, 1, 28, 28), env.randint(0, 10, (40,)))
    batch_size = 32
    train_dataloader = DataLoader(training_data, batch_size=batch_size)
    test_dataloader = DataLoader(test_data, batch_size=batch_size)
    for X, y in test_dataloader:
        env.rec("shapes", (tuple(X.shape), tuple(y.shape), y.dtype))
        break
    device = "cpu"

    class NeuralNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.flatten = nn.Flatten()
            self.linear_relu_stack = nn.Sequential(
                nn.Linear(28 * 28, 64), nn.ReLU(),
                nn.Linear(64, 64), nn.ReLU(),
                nn.Linear(64, 10))

        def forward(self, x):
            x = self.flatten(x)
            logits = self.linear_relu_stack(x)
            return logits

    model = env.init(NeuralNetwork().to(device))
    env.rec("repr", repr(model))
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-1)

    def train_step(X, y, model, loss_fn, optimizer):
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    def test_step(X, y, model, loss_fn):
        pred = model(X)
        return loss_fn(pred, y).item(), (pred.argmax(1) == y).type(torch.float).sum().item()

    train_step, test_step = env.step(train_step), env.step(test_step)

    def train(dataloader, model, loss_fn, optimizer):
        size = len(dataloader.dataset)
        model.train()
        for batch, (X, y) in enumerate(dataloader):
            X, y = X.to(device), y.to(device)
            loss = train_step(X, y, model, loss_fn, optimizer)
            loss, current = loss.item(), (batch + 1) * len(X)
            env.rec(f"loss [{current}/{size}]", loss)

    def test(dataloader, model, loss_fn):
        size = len(dataloader.dataset)
        num_batches = len(dataloader)
        model.eval()
        test_loss, correct = 0, 0
        with torch.no_grad():
            for X, y in dataloader:
                X, y = X.to(device), y.to(device)
                loss, right = test_step(X, y, model, loss_fn)
                test_loss += loss
                correct += right
        test_loss /= num_batches
        correct /= size
        env.rec("test", (test_loss, correct))

    for t in range(2):
        train(train_dataloader, model, loss_fn, optimizer)
        test(test_dataloader, model, loss_fn)

    torch.save(model.state_dict(), env.path("model.pth"))
    model2 = NeuralNetwork().to(device)
    model2.load_state_dict(torch.load(env.path("model.pth"), weights_only=True))
    model2.eval()
    x, y = test_data[0][0], test_data[0][1]
    with torch.no_grad():
        x = x.to(device)
        pred = model2(x)
        env.rec("predicted", (pred[0].argmax(0).item(), y.item()))
    env.rec("loaded", model2.state_dict())
    env.rec("same", all(torch.equal(a, b) for a, b in
                        zip(model.state_dict().values(), model2.state_dict().values())))


def autograd_basics(torch, env):
    x = torch.ones(5)
    y = torch.zeros(3)
    w = env.randn(5, 3).requires_grad_(True)
    b = env.randn(3)
    b.requires_grad_()

    def forward(x, y, w, b):
        z = torch.matmul(x, w) + b
        loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
        return z, loss

    env.rec("grad_fn names", [type(t.grad_fn).__name__ for t in forward(x, y, w, b)])
    z, loss = env.step(forward)(x, y, w, b)
    loss.backward()
    env.rec("grads", (w.grad, b.grad))
    env.rec("requires_grad", z.requires_grad)
    with torch.no_grad():
        z = torch.matmul(x, w) + b
    env.rec("no_grad", z.requires_grad)
    z_det = (torch.matmul(x, w) + b).detach()
    env.rec("detach", z_det.requires_grad)

    inp = torch.eye(4, 5, requires_grad=True)
    out = (inp + 1).pow(2).t()
    out.backward(torch.ones_like(out), retain_graph=True)
    env.rec("first call", inp.grad)
    out.backward(torch.ones_like(out), retain_graph=True)
    env.rec("second call", inp.grad)
    inp.grad.zero_()
    out.backward(torch.ones_like(out), retain_graph=True)
    env.rec("call after zeroing", inp.grad)

    def third(inp):
        out = (inp + 1).pow(2).t()
        out.backward(torch.ones_like(out))
        return out.detach()

    inp.grad = None
    env.step(third)(inp)
    env.rec("compiled ones_like backward", inp.grad)
    try:
        out2 = (inp * inp).sum()
        out2.backward()
        out2.backward()
    except RuntimeError as e:
        env.rec("retain error", str(e).replace("torch", "LIB").replace("llgrad", "LIB"))


def autograd_higher_order(torch, env):
    x = env.randn(6).requires_grad_()

    def derivatives(x):
        y = (x ** 3 + x.sin() * x).sum()
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        (h,) = torch.autograd.grad(g.sum(), x)
        return y.detach(), g.detach(), h

    for f in (derivatives, env.step(derivatives)):
        env.rec("derivatives", f(x))

    a = env.randn(3, 4)
    b = a.requires_grad_()
    env.rec("requires_grad_", (b is a, a.requires_grad, a.is_leaf))
    frozen = env.randn(4, 2)
    out = (a @ frozen).tanh().sum()
    out.backward()
    env.rec("frozen", (frozen.grad is None, a.grad))

    seen = []
    w = env.randn(4).requires_grad_()
    v = w * 2
    handle = v.register_hook(lambda g: seen.append(g.clone()) or g * 3)
    w_hook = w.register_hook(lambda g: g + 1)
    (v * v).sum().backward()
    env.rec("hooks", (seen, w.grad))
    handle.remove()
    w_hook.remove()
    w.grad = None
    (w * 2 * w * 2).sum().backward()
    env.rec("removed", w.grad)

    v = w.exp()
    v.retain_grad()
    (v * w).sum().backward()
    env.rec("retain_grad", (v.grad, v.retains_grad, w.grad))


def module_hooks(torch, env):
    """Forward hooks and pre-hooks that change what flows (run inside the compiled step)
    and a hook that keeps activations in a dict (feature extraction, eagerly: a compiled
    call cannot replay a write into a Python dict, so a step with it would run eagerly)."""
    nn = torch.nn
    model = env.init(nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 2)))
    activation = {}

    def get_activation(name):
        def hook(model, input, output):
            activation[name] = output.detach()
        return hook

    def scale_output(module, inputs, output):
        return output * 0.5

    def pre(module, inputs):
        return (inputs[0] + 1,)

    handles = [model[1].register_forward_hook(scale_output),
               model[2].register_forward_pre_hook(pre)]
    x = env.randn(3, 5)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(model, x):
        out = model(x)
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(step)
    for i in range(3):
        env.rec(f"loss {i}", step(model, x))
        saving = model[0].register_forward_hook(get_activation("fc1"))
        with torch.no_grad():
            env.rec(f"output {i}", model(x))
        saving.remove()
        env.rec(f"fc1 {i}", activation["fc1"])
    for h in handles:
        h.remove()
    env.rec("after remove", model(x))
    env.rec("params", dict(model.named_parameters()))
