"""Official recipes the other files leave out, nearly verbatim (sweep 22, H2 part B):
"Skipping Module Parameter Initialization" (nn.utils.skip_init, the meta device, to_empty,
then a custom init and training); the load_state_dict / state_dict extension points (a
pre-hook renaming an old checkpoint's keys, a post-hook clearing a missing buffer, state_dict
pre/post hooks); "Reducing torch.compile cold start with regional compilation" (each
repeated Layer compiled on its own, then the full model); "(beta) Compiling the optimizer"
and "Running the compiled optimizer with an LR scheduler" (opt.step() and sched.step() in a
compiled function of no arguments, lr a tensor, LinearLR then ExponentialLR). Programs
`f(torch, env)`, see tutorial_harness.py."""


def skip_init_meta(torch, env):
    nn = torch.nn

    # Example: Do custom, non-default parameter initialization.
    m = torch.nn.utils.skip_init(nn.Linear, 10, 5)
    env.rec("skip_init shapes", (tuple(m.weight.shape), tuple(m.bias.shape)))
    env.rec("skip_init requires_grad", (m.weight.requires_grad, m.bias.requires_grad))
    torch.manual_seed(0)
    nn.init.orthogonal_(m.weight)
    nn.init.zeros_(m.bias)
    env.rec("orthogonal rows", m.weight @ m.weight.T)

    m = nn.Linear(10, 5, device='meta')
    env.rec("meta", (m.weight.is_meta, m.weight.device.type, tuple(m.weight.shape)))

    class MyModule(nn.Module):
        def __init__(self, foo, bar, device=None):
            super().__init__()
            self.fc1 = nn.Linear(foo, bar, device=device)
            self.fc2 = nn.Linear(bar, 1, device=device)
            self.register_buffer("scale", torch.ones(1, device=device))

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x))) * self.scale

    module = MyModule(3, 4, device='meta')
    env.rec("module on meta", all(p.is_meta for p in module.parameters()))
    module.to_empty(device='cpu')
    env.rec("to_empty", (module.fc1.weight.device.type, module.fc1.weight.is_meta,
                         isinstance(module.fc1.weight, nn.Parameter)))
    torch.manual_seed(1)

    def init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            m.bias.data.fill_(0.01)

    module.apply(init_weights)
    with torch.no_grad():
        module.scale.fill_(2.0)
    env.rec("initialised", module.state_dict())

    x = env.randn(6, 3)
    y = env.randn(6, 1)
    opt = torch.optim.SGD(module.parameters(), lr=0.05, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(module(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(step)
    for i in range(3):
        env.rec(f"loss {i}", step(x, y))
    env.rec("state", module.state_dict())


def state_dict_hooks(torch, env):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)       # (version 1 named it "fc")
            self.register_buffer("steps", torch.zeros((), dtype=torch.long))
            self.register_load_state_dict_pre_hook(self._upgrade)
            self.register_load_state_dict_post_hook(self._allow_missing_steps)

        @staticmethod
        def _upgrade(module, state_dict, prefix, local_metadata, strict, missing_keys,
                     unexpected_keys, error_msgs):
            for name in ("weight", "bias"):
                old = prefix + "fc." + name
                if old in state_dict:
                    state_dict[prefix + "proj." + name] = state_dict.pop(old)

        @staticmethod
        def _allow_missing_steps(module, incompatible_keys):
            for k in list(incompatible_keys.missing_keys):
                if k.endswith("steps"):
                    incompatible_keys.missing_keys.remove(k)

        def forward(self, x):
            return torch.relu(self.proj(x)) + x

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.Sequential(Block(), Block())
            self.head = nn.Linear(4, 2)

        def forward(self, x):
            return self.head(self.blocks(x))

    old = env.init(Net())
    old_state = {k.replace("proj.", "fc."): v for k, v in old.state_dict().items()
                 if not k.endswith("steps")}
    env.rec("old keys", sorted(old_state))
    net = Net()
    seen = []
    net.register_state_dict_pre_hook(lambda module, prefix, keep_vars: seen.append(prefix))

    def drop_steps(module, state_dict, prefix, local_metadata):
        for k in [k for k in state_dict if k.endswith("steps")]:
            del state_dict[k]

    net.register_state_dict_post_hook(drop_steps)
    result = net.load_state_dict(old_state)
    env.rec("incompatible", (result.missing_keys, result.unexpected_keys))
    env.rec("loaded", [p.detach() for p in net.parameters()])
    env.rec("state keys", sorted(net.state_dict()))
    env.rec("pre hook prefixes", seen)

    x = env.randn(5, 4)
    y = env.randint(0, 2, (5,))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        for b in net.blocks:
            b.steps += 1
        return loss.detach()

    step = env.step(step)
    for i in range(3):
        env.rec(f"loss {i}", step(x, y))
    env.rec("steps", [b.steps.clone() for b in net.blocks])
    # the model's own keys load back without hooks' help, strict
    twin = Net()
    twin.load_state_dict({**net.state_dict(), "blocks.0.steps": torch.tensor(3),
                          "blocks.1.steps": torch.tensor(3)})
    env.rec("twin", twin(x))


def regional_compilation(torch, env):
    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear1 = torch.nn.Linear(10, 10)
            self.relu1 = torch.nn.ReLU()
            self.linear2 = torch.nn.Linear(10, 10)
            self.relu2 = torch.nn.Sigmoid()

        def forward(self, x):
            a = self.linear1(x)
            a = self.relu1(a)
            a = torch.sigmoid(a)
            b = self.linear2(a)
            b = self.relu2(b)
            return b

    class Model(torch.nn.Module):
        def __init__(self, apply_regional_compilation):
            super().__init__()
            self.linear = torch.nn.Linear(10, 10)
            # Apply compile only to the repeated layers.
            if apply_regional_compilation:
                self.layers = torch.nn.ModuleList(
                    [torch.compile(Layer()) for _ in range(4)]
                )
            else:
                # Apply compile to the full model.
                self.layers = torch.nn.ModuleList([Layer() for _ in range(4)])

        def forward(self, x):
            x = self.linear(x)
            for layer in self.layers:
                x = layer(x)
            return x

    input = env.randn(8, 10)
    target = env.randn(8, 10)
    for regional in (True, False):
        torch.manual_seed(0)
        model = Model(apply_regional_compilation=regional and env.compiled)
        if not regional and env.compiled:
            model = torch.compile(model)
        env.rec(f"regional={regional} out", model(input))
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        for i in range(3):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(input), target)
            loss.backward()
            opt.step()
            env.rec(f"regional={regional} loss {i}", loss.detach())
        env.rec(f"regional={regional} state", model.state_dict())
        if env.compiled:    # (the harness checks each compiled region ran native code)
            regions = [layer._compiled for layer in model.layers] if regional \
                else [model._compiled]
            env.steps.extend(regions)


def compiled_optimizer(torch, env):
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16, False) for _ in range(4)])
    input = torch.rand(16)
    output = model(input)
    output.sum().backward()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def fn():
        opt.step()

    fn = env.step(fn, fullgraph=False)
    for i in range(3):
        fn()
        env.rec(f"adam {i}", [p.detach().clone() for p in model.parameters()])

    # "Running the compiled optimizer with an LR scheduler"
    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16, False) for _ in range(4)])
    input = torch.rand(16)
    output = model(input)
    output.sum().backward()
    opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01))
    sched = torch.optim.lr_scheduler.LinearLR(opt, total_iters=5)

    def fn():
        opt.step()
        sched.step()

    fn = env.step(fn, fullgraph=False)
    for i in range(5):
        fn()
        env.rec(f"linear lr {i}", opt.param_groups[0]["lr"])
    env.rec("after linear", [p.detach().clone() for p in model.parameters()])
    if env.compiled:    # (the lr is a tensor: one trace serves every value)
        assert fn.n_traces <= 2, fn.n_traces

    opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.05))
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)

    def fn():
        opt.step()
        sched.step()

    fn = env.step(fn, fullgraph=False)
    for i in range(5):
        fn()
        env.rec(f"exp lr {i}", opt.param_groups[0]["lr"])
    env.rec("after exponential", [p.detach().clone() for p in model.parameters()])
    if env.compiled:
        assert fn.n_traces <= 2, fn.n_traces
