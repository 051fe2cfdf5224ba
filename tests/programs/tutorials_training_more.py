"""Training-loop recipes: learning-rate schedulers (ReduceLROnPlateau, LambdaLR, MultiStepLR,
ExponentialLR, read back through optimizer.param_groups), gradient accumulation over
micro-batches, and "Saving and loading a general checkpoint" (torch.save of a dict of
state_dicts and the epoch, torch.load, load_state_dict; resumed training equals training
straight through). Programs `f(torch, env)`, see tutorial_harness.py."""


def _net(torch):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.fc1 = nn.Linear(6, 12, bias=False)     # (BatchNorm takes away a bias)
            self.bn = nn.BatchNorm1d(12)
            self.fc2 = nn.Linear(12, 3)

        def forward(self, x):
            return self.fc2(torch.relu(self.bn(self.fc1(x))))

    return Net()


def lr_schedulers(torch, env):
    nn, optim = torch.nn, torch.optim
    lr_scheduler = optim.lr_scheduler
    x, y = env.randn(16, 6), env.randint(0, 3, (16,))
    val_x, val_y = env.randn(8, 6), env.randint(0, 3, (8,))
    criterion = nn.CrossEntropyLoss()

    def make(name):
        model = env.init(_net(torch))
        if name == "plateau":
            optimizer = optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
            scheduler = lr_scheduler.ReduceLROnPlateau(optimizer, 'min', factor=0.5,
                                                       patience=0, threshold=0.1)
        elif name == "lambda":
            optimizer = optim.SGD(model.parameters(), lr=0.1)
            lambda1 = lambda epoch: 0.65 ** epoch  # noqa: E731
            scheduler = lr_scheduler.LambdaLR(optimizer, lr_lambda=lambda1)
        elif name == "multistep":
            optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
            scheduler = lr_scheduler.MultiStepLR(optimizer, milestones=[1, 3], gamma=0.1)
        else:
            optimizer = optim.Adam(model.parameters(), lr=0.05)
            scheduler = lr_scheduler.ExponentialLR(optimizer, gamma=0.9)
        return model, optimizer, scheduler

    for name in ("plateau", "lambda", "multistep", "exponential"):
        model, optimizer, scheduler = make(name)

        def train_step(x, y):
            model.train()
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            return loss

        train_step = env.step(train_step)
        for epoch in range(5):
            loss = train_step(x, y)
            model.eval()
            with torch.no_grad():
                val_loss = criterion(model(val_x), val_y)
            if name == "plateau":
                scheduler.step(val_loss)
            else:
                scheduler.step()
            env.rec(f"{name} {epoch}", (loss, val_loss, optimizer.param_groups[0]["lr"]))
        env.rec(f"{name} last_lr", scheduler.get_last_lr() if name != "plateau"
                else [g["lr"] for g in optimizer.param_groups])
        env.rec(f"{name} state", model.state_dict())
        sd = scheduler.state_dict()
        env.rec(f"{name} scheduler", {k: v for k, v in sd.items()
                                      if isinstance(v, (int, float, list)) and k != "_lr_lambdas"})


def gradient_accumulation(torch, env):
    nn, optim = torch.nn, torch.optim
    accumulation_steps = 4
    inputs, labels = env.randn(16, 6), env.randint(0, 3, (16,))
    micro = [(inputs[i:i + 4], labels[i:i + 4]) for i in range(0, 16, 4)]
    criterion = nn.CrossEntropyLoss()

    model = env.init(nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3)))
    optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def micro_step(inputs, labels):
        outputs = model(inputs)
        loss = criterion(outputs, labels)
        loss = loss / accumulation_steps
        loss.backward()
        return loss

    micro_step = env.step(micro_step)

    def optimizer_step():
        optimizer.step()
        optimizer.zero_grad()

    optimizer_step = env.step(optimizer_step)
    model.zero_grad()
    for epoch in range(2):
        for i, (inputs_i, labels_i) in enumerate(micro):
            loss = micro_step(inputs_i, labels_i)
            env.rec(f"loss {epoch} {i}", loss)
            if (i + 1) % accumulation_steps == 0:
                env.rec(f"grad {epoch}", [p.grad.clone() for p in model.parameters()])
                optimizer_step()
        env.rec(f"params {epoch}", model.state_dict())

    # the accumulated gradient is the full batch's
    full = env.init(nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3)))
    criterion(full(inputs), labels).backward()
    acc = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
    acc.load_state_dict(full.state_dict())
    for inputs_i, labels_i in micro:
        (criterion(acc(inputs_i), labels_i) / accumulation_steps).backward()
    for p, q in zip(full.parameters(), acc.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-6)
    env.rec("full vs accumulated", [p.grad for p in acc.parameters()])


def checkpoint(torch, env):
    nn, optim = torch.nn, torch.optim
    x, y = env.randn(16, 6), env.randint(0, 3, (16,))
    criterion = nn.CrossEntropyLoss()

    init_state = {k: v.clone() for k, v in env.init(_net(torch)).state_dict().items()}

    def make():
        model = _net(torch)
        model.load_state_dict(init_state)
        optimizer = optim.Adam(model.parameters(), lr=0.01)
        scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
        return model, optimizer, scheduler

    def train(model, optimizer, scheduler, epochs):
        def train_step(x, y):
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            return loss

        train_step = env.step(train_step)
        losses = []
        for epoch in epochs:
            model.train()
            losses.append(train_step(x, y))
            scheduler.step()
        return losses

    # straight through: 6 epochs
    model, optimizer, scheduler = make()
    straight = train(model, optimizer, scheduler, range(6))
    env.rec("straight", (straight, model.state_dict()))

    # 3 epochs, save, load into new objects, 3 more
    model, optimizer, scheduler = make()
    first = train(model, optimizer, scheduler, range(3))
    EPOCH, LOSS = 3, first[-1]
    PATH = env.path("model.pt")
    torch.save({
        'epoch': EPOCH,
        'model_state_dict': model.state_dict(),
        'optimizer_state_dict': optimizer.state_dict(),
        'scheduler_state_dict': scheduler.state_dict(),
        'loss': LOSS,
    }, PATH)

    model, optimizer, scheduler = make()
    checkpoint = torch.load(PATH, weights_only=True)
    model.load_state_dict(checkpoint['model_state_dict'])
    optimizer.load_state_dict(checkpoint['optimizer_state_dict'])
    scheduler.load_state_dict(checkpoint['scheduler_state_dict'])
    epoch = checkpoint['epoch']
    loss = checkpoint['loss']
    env.rec("loaded", (epoch, loss, optimizer.param_groups[0]["lr"],
                       optimizer.state_dict()["state"][0]["step"]))
    model.eval()
    with torch.no_grad():
        env.rec("eval", model(x))
    second = train(model, optimizer, scheduler, range(epoch, 6))
    env.rec("resumed", (first + second, model.state_dict()))
    for a, b in zip(straight, first + second):
        assert torch.allclose(a, b, atol=1e-6)

    # the model alone, for inference: state_dict -> torch.save / torch.load
    PATH = env.path("model_only.pt")
    torch.save(model.state_dict(), PATH)
    model2 = _net(torch)
    model2.load_state_dict(torch.load(PATH, weights_only=True))
    model2.eval()
    with torch.no_grad():
        env.rec("inference", model2(x))
