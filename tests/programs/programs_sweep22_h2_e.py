"""Official docs tutorials the other files leave out, nearly verbatim (sweep 22, H2 part E):
"Control Flow - Cond" (torch.cond on a shape predicate and on a data-dependent predicate,
then a model whose forward picks its head by torch.cond, trained with its step compiled:
llgrad traces each branch once, as the predicate is a guard); "Dynamic shapes" (a function
compiled with dynamic=True and its inputs' batch dimension marked dynamic, called with ten
batch sizes); the
"Performance Tuning Guide" (a compiled gelu called from a compiled step, Conv2d without bias
before BatchNorm, `param.grad = None`, cudnn.benchmark, inference under no_grad). Programs
`f(torch, env)`, see tutorial_harness.py."""


def control_flow_cond(torch, env):
    def true_fn(x):
        return x.cos() + x.sin()

    def false_fn(x):
        return x.sin()

    class DynamicShapeCondPredicate(torch.nn.Module):
        """
        A basic usage of cond based on dynamic shape predicate.
        """

        def __init__(self):
            super().__init__()

        def forward(self, x):
            def true_fn(x):
                return x.cos()

            def false_fn(x):
                return x.sin()

            return torch.cond(x.shape[0] > 4, true_fn, false_fn, (x,))

    dyn_shape_mod = DynamicShapeCondPredicate()
    inp = env.randn(3)
    inp2 = env.randn(5)
    assert torch.equal(dyn_shape_mod(inp), inp.sin())
    assert torch.equal(dyn_shape_mod(inp2), inp2.cos())

    class DataDependentCondPredicate(torch.nn.Module):
        """
        A basic usage of cond based on data dependent predicate.
        """

        def __init__(self):
            super().__init__()

        def forward(self, x):
            return torch.cond(x.sum() > 4.0, true_fn, false_fn, (x,))

    mod = DataDependentCondPredicate()
    def run(x):
        return mod(x)

    run = env.step(run)
    for i, x in enumerate([env.randn(4) + 2, env.randn(4) - 2, env.randn(4) + 2]):
        env.rec(f"data-dependent {i}", run(x))
    if env.compiled:    # (llgrad guards on the predicate: a trace per branch, no more)
        assert run.n_traces == 2, run.n_traces

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = torch.nn.Linear(4, 6)
            self.a = torch.nn.Linear(6, 2)
            self.b = torch.nn.Linear(6, 2)

        def forward(self, x):
            h = torch.tanh(self.enc(x))

            def true_fn(h):
                return self.a(h)

            def false_fn(h):
                return self.b(h).relu()

            return torch.cond(h.mean() > 0, true_fn, false_fn, (h,))

    net = env.init(Net())
    opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(step)
    y = env.randn(3, 2)
    for i, shift in enumerate([3.0, -3.0, 3.0, -3.0]):
        env.rec(f"loss {i}", step(env.randn(3, 4) + shift, y))
    env.rec("state", net.state_dict())
    if env.compiled:
        assert step.n_traces == 2, step.n_traces


def dynamic_shapes(torch, env):
    model = env.init(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                                         torch.nn.Linear(8, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(step, dynamic=True)
    for n in range(2, 12):
        x, y = env.randn(n, 4), env.randn(n, 1)
        torch._dynamo.mark_dynamic(x, 0)
        torch._dynamo.mark_dynamic(y, 0)
        env.rec(f"loss {n}", step(x, y))
    env.rec("state", model.state_dict())


def performance_tuning(torch, env):
    nn = torch.nn

    def gelu(x):
        return x * 0.5 * (1.0 + torch.erf(x / 1.41421))

    gelu = env.step(gelu)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            # Disable bias for convolutions directly followed by a batch norm
            self.conv = nn.Conv2d(3, 6, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(6)
            self.fc = nn.Linear(6 * 4 * 4, 5)

        def forward(self, x):
            x = gelu(self.bn(self.conv(x)))
            x = nn.functional.max_pool2d(x, 2)
            return self.fc(x.flatten(1))

    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x = env.randn(4, 3, 8, 8)
    y = env.randint(0, 5, (4,))

    def step(x, y):
        # use parameter.grad = None instead of model.zero_grad() or optimizer.zero_grad()
        for param in model.parameters():
            param.grad = None
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(step)
    for i in range(3):
        env.rec(f"loss {i}", step(x, y))
    torch.backends.cudnn.benchmark = False
    model.eval()
    with torch.no_grad():
        env.rec("eval", model(x))
    env.rec("gelu", gelu(env.randn(7)))
    env.rec("state", model.state_dict())
