"""Batch s76 (a2): official pytorch.org tutorials (see test_tutorials_official_s76_a.py):
transfer learning (train/val phases under set_grad_enabled, StepLR, best weights saved and
reloaded, a fixed feature extractor), the Fundamentals of Autograd (grad_fn chains, gradient
accumulation, no_grad, autograd.functional.jacobian / vjp, a data-dependent while loop
under compile) and Introduction to torch.compile (a module, graph breaks, _dynamo.explain,
a compiled train(mod, data))."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]


def transfer_learning(torch, env):
    nn, optim = torch.nn, torch.optim
    lr_scheduler = torch.optim.lr_scheduler

    class BasicBlock(nn.Module):
        def __init__(self, planes):
            super().__init__()
            self.conv1 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)

        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += identity
            return self.relu(out)

    class ResNet(nn.Module):
        def __init__(self, num_classes=10):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1 = nn.Sequential(BasicBlock(8))
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(8, num_classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.avgpool(self.layer1(x))
            return self.fc(torch.flatten(x, 1))

    images = {"train": env.randn(8, 3, 16, 16), "val": env.randn(4, 3, 16, 16)}
    labels = {"train": env.randint(0, 2, (8,)), "val": env.randint(0, 2, (4,))}
    dataloaders = {p: [(images[p][i:i + 4], labels[p][i:i + 4])
                       for i in range(0, len(images[p]), 4)] for p in images}
    dataset_sizes = {p: len(images[p]) for p in images}
    criterion = nn.CrossEntropyLoss()

    def train_model(model, optimizer, scheduler, num_epochs, tag):
        best_model_params_path = env.path(f"best_model_params_{tag}.pt")
        torch.save(model.state_dict(), best_model_params_path)
        best_acc = 0.0

        def run_batch(inputs, labels, phase):
            optimizer.zero_grad()
            with torch.set_grad_enabled(phase == 'train'):
                outputs = model(inputs)
                _, preds = torch.max(outputs, 1)
                loss = criterion(outputs, labels)
                if phase == 'train':
                    loss.backward()
                    optimizer.step()
            return loss, preds

        step = env.step(run_batch)
        for epoch in range(num_epochs):
            for phase in ['train', 'val']:
                if phase == 'train':
                    model.train()
                else:
                    model.eval()
                running_loss = 0.0
                running_corrects = 0
                for inputs, labels in dataloaders[phase]:
                    loss, preds = step(inputs, labels, phase)
                    running_loss += loss.item() * inputs.size(0)
                    running_corrects += torch.sum(preds == labels.data)
                if phase == 'train':
                    scheduler.step()
                epoch_loss = running_loss / dataset_sizes[phase]
                epoch_acc = running_corrects.double() / dataset_sizes[phase]
                env.rec(f"{tag} {epoch} {phase}",
                        f'{phase} Loss: {epoch_loss:.4f} Acc: {epoch_acc:.4f}')
                if phase == 'val' and epoch_acc > best_acc:
                    best_acc = epoch_acc
                    torch.save(model.state_dict(), best_model_params_path)
        env.rec(f"{tag} best", f'Best val Acc: {best_acc:4f}')
        model.load_state_dict(torch.load(best_model_params_path, weights_only=True))
        return model

    model_ft = env.init(ResNet())
    num_ftrs = model_ft.fc.in_features
    model_ft.fc = env.init(nn.Linear(num_ftrs, 2))
    optimizer_ft = optim.SGD(model_ft.parameters(), lr=0.01, momentum=0.9)
    exp_lr_scheduler = lr_scheduler.StepLR(optimizer_ft, step_size=2, gamma=0.1)
    model_ft = train_model(model_ft, optimizer_ft, exp_lr_scheduler, 3, "ft")
    env.rec("ft params", dict(model_ft.named_parameters()))
    env.rec("ft buffers", dict(model_ft.named_buffers()))

    model_conv = env.init(ResNet())
    for param in model_conv.parameters():
        param.requires_grad = False
    model_conv.fc = env.init(nn.Linear(num_ftrs, 2))
    optimizer_conv = optim.SGD(model_conv.fc.parameters(), lr=0.01, momentum=0.9)
    exp_lr_scheduler = lr_scheduler.StepLR(optimizer_conv, step_size=2, gamma=0.1)
    model_conv = train_model(model_conv, optimizer_conv, exp_lr_scheduler, 3, "conv")
    env.rec("conv params", dict(model_conv.named_parameters()))
    env.rec("conv buffers", dict(model_conv.named_buffers()))


def autograd_fundamentals(torch, env):
    nn = torch.nn
    a = torch.linspace(0., 2. * math.pi, steps=25, requires_grad=True)
    b = torch.sin(a)
    c = 2 * b
    d = c + 1
    out = d.sum()
    env.rec("grad_fns", (type(d.grad_fn).__name__,
                         type(d.grad_fn.next_functions[0][0]).__name__,
                         type(d.grad_fn.next_functions[0][0].next_functions[0][0]).__name__,
                         type(c.grad_fn.next_functions[0][0].next_functions[0][0]).__name__,
                         a.grad_fn is None))
    out.backward()
    env.rec("a.grad", a.grad)

    BATCH_SIZE, DIM_IN, HIDDEN_SIZE, DIM_OUT = 16, 40, 20, 10

    class TinyModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer1 = nn.Linear(DIM_IN, HIDDEN_SIZE)
            self.relu = nn.ReLU()
            self.layer2 = nn.Linear(HIDDEN_SIZE, DIM_OUT)

        def forward(self, x):
            x = self.layer1(x)
            x = self.relu(x)
            x = self.layer2(x)
            return x

    some_input = env.randn(BATCH_SIZE, DIM_IN)
    ideal_output = env.randn(BATCH_SIZE, DIM_OUT)
    model = env.init(TinyModel())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
    env.rec("grad before", model.layer2.weight.grad is None)

    def accumulate(x, target):
        prediction = model(x)
        loss = (target - prediction).pow(2).sum()
        loss.backward()
        return loss

    acc = env.step(accumulate)
    env.rec("loss", acc(some_input, ideal_output))
    env.rec("layer2 grad", model.layer2.weight.grad[0][0:10])
    optimizer.step()
    env.rec("layer2 weight", model.layer2.weight[0][0:10])
    optimizer.zero_grad(set_to_none=False)
    env.rec("zeroed", model.layer2.weight.grad[0][0:10])
    for i in range(0, 5):
        acc(some_input, ideal_output)
    env.rec("accumulated", model.layer2.weight.grad[0][0:10])
    optimizer.zero_grad(set_to_none=False)

    a = torch.ones(2, 3, requires_grad=True) * 2
    b = torch.ones(2, 3, requires_grad=True) * 3
    c1 = a + b
    with torch.no_grad():
        c2 = a + b
    c3 = a * b

    @torch.no_grad()
    def add_tensors2(x, y):
        return x + y

    c4 = add_tensors2(a, b)
    x = torch.rand(5, requires_grad=True)
    y = x.detach()
    env.rec("flags", (c1.requires_grad, c2.requires_grad, c3.requires_grad, c4.requires_grad,
                      x.requires_grad, y.requires_grad))
    a = torch.linspace(0., 2. * math.pi, steps=25, requires_grad=True)
    try:
        torch.sin_(a)
        env.rec("in-place leaf", "no error")
    except RuntimeError as e:
        env.rec("in-place leaf", "a leaf Variable that requires grad" in str(e))

    def exp_adder(x, y):
        return 2 * x.exp() + 3 * y

    inputs = (env.rand(1), env.rand(1))
    env.rec("jacobian 1", torch.autograd.functional.jacobian(exp_adder, inputs))
    inputs = (env.rand(3), env.rand(3))
    env.rec("jacobian 3", torch.autograd.functional.jacobian(exp_adder, inputs))

    def do_some_doubling(x):
        y = x * 2
        while y.data.norm() < 1000:
            y = y * 2
        return y

    inputs = env.randn(3)
    my_gradients = torch.tensor([0.1, 1.0, 0.0001])
    env.rec("vjp", torch.autograd.functional.vjp(do_some_doubling, inputs, v=my_gradients))

    def doubling_step(x, v):       # (the old blitz: y.backward(v) through a while loop)
        x = x.detach().requires_grad_(True)
        y = do_some_doubling(x)
        y.backward(v)
        return y.detach(), x.grad

    dstep = env.step(doubling_step)
    for scale in (1.0, 30.0, 0.01, 1.0):
        env.rec(f"doubling {scale}", dstep(inputs * scale, my_gradients))
    env.rec("params", dict(model.named_parameters()))


def compile_intro(torch, env):
    nn, F = torch.nn, torch.nn.functional

    def bar(a, b):
        x = a / (torch.abs(a) + 1)
        if b.sum() < 0:
            b = b * -1
        return x * b

    inp1, inp2 = env.randn(10), env.randn(10)
    explanation = torch._dynamo.explain(bar)(inp1, inp2)
    env.rec("explain", (explanation.graph_count, explanation.graph_break_count), cross=False)
    if env.mode != "torch":
        opt_full = torch.compile(bar, fullgraph=True)
        try:
            opt_full(inp1, inp2)
            env.rec("fullgraph", "compiled", cross=False)
        except Exception:
            env.rec("fullgraph", "raised", cross=False)
    torch._dynamo.reset()      # (forgets what was compiled: the steps come after it)

    def foo(x, y):
        a = torch.sin(x)
        b = torch.cos(y)
        return a + b

    opt_foo1 = env.step(foo)
    env.rec("foo", opt_foo1(env.randn(10, 10), env.randn(10, 10)))

    class MyModule(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(10, 4)

        def forward(self, x):
            return F.relu(self.lin(x))

    mod = env.init(MyModule())
    opt_mod = env.step(mod)
    env.rec("mod", opt_mod(env.randn(5, 10)))

    opt_bar = env.step(bar)
    env.rec("bar", (opt_bar(inp1, inp2), opt_bar(inp1, -inp2), opt_bar(inp1, inp2)))

    def f1(x, y):
        if x.sum() < 0:
            return -y
        return y

    opt_f1 = env.step(f1)
    x, y = env.randn(4), env.randn(4)
    env.rec("f1", (opt_f1(x, y), opt_f1(-x, y), opt_f1(x, y)))

    model = env.init(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                   nn.Flatten(), nn.Linear(4, 5)))
    opt = torch.optim.Adam(model.parameters())

    def train(mod, data):
        opt.zero_grad(True)
        pred = mod(data[0])
        loss = F.cross_entropy(pred, data[1])
        loss.backward()
        opt.step()
        return loss

    train_opt = env.step(train)
    data = (env.randn(4, 3, 8, 8), env.randint(0, 5, (4,)))
    for i in range(4):
        env.rec(f"train {i}", train_opt(model, data))
    env.rec("params", dict(model.named_parameters()))


PROGRAMS = {f.__name__: f for f in (transfer_learning, autograd_fundamentals, compile_intro)}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
