"""Official recipes and notes the other files leave out, nearly verbatim (sweep 21b, D):
"Tips for loading an nn.Module from a checkpoint" (mmap=True, the meta device,
load_state_dict(assign=True)); "Reasoning about shapes in PyTorch" (meta tensors through a
CNN, forward hooks printing shapes); "Changing default device"; the profiler recipe and
"Profiling your PyTorch module" (torch.profiler, record_function, key_averages, schedule),
run as an API check; the "Autograd mechanics" note (grad modes, inference mode, the in-place
correctness check, tensor and module hooks). Programs `f(torch, env)`, see
tutorial_harness.py."""
import numpy as np


def checkpoint_tips(torch, env):
    class SomeModule(torch.nn.Module):
        def __init__(self, size):
            super().__init__()
            self.linears = torch.nn.ModuleList([torch.nn.Linear(size, size) for i in range(3)])

        def forward(self, x):
            return self.linears[0](self.linears[1](self.linears[2](x)))

    m = env.init(SomeModule(16))
    torch.save(m.state_dict(), env.path('checkpoint.pth'))

    # Using mmap=True
    state_dict = torch.load(env.path('checkpoint.pth'), mmap=True, weights_only=True)
    env.rec("mmap keys", sorted(state_dict.keys()))
    # Using torch.device('meta')
    with torch.device('meta'):
        meta_m = SomeModule(16)
    env.rec("meta", (meta_m.linears[0].weight.device.type, meta_m.linears[0].weight.is_meta,
                     tuple(meta_m.linears[0].weight.shape)))
    try:
        meta_m(env.rand(2, 16).to("meta"))
        env.rec("meta forward", "ran")
    except Exception as e:      # (torch runs meta kernels: shapes only)
        env.rec("meta forward", type(e).__name__)
    # Using load_state_dict(assign=True)
    meta_m.load_state_dict(state_dict, assign=True)
    env.rec("assigned", (meta_m.linears[0].weight.is_meta,
                         meta_m.linears[0].weight is not state_dict["linears.0.weight"],
                         isinstance(meta_m.linears[0].weight, torch.nn.Parameter)))
    x = env.rand(2, 16)
    env.rec("assigned out", meta_m(x))
    env.rec("same as saved", torch.allclose(meta_m(x), m(x)))

    opt = torch.optim.SGD(meta_m.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = meta_m(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    step = env.step(step)
    for i in range(3):
        env.rec(f"loss {i}", step(x))
    env.rec("trained", list(meta_m.parameters()))


def reasoning_about_shapes(torch, env):
    nn = torch.nn
    F = torch.nn.functional
    a = torch.rand(2, 3, 10, 10, device="meta")
    conv = torch.nn.Conv2d(3, 5, 2, device="meta")
    out = conv(a)
    env.rec("meta conv", (tuple(out.shape), out.device.type))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 6, 5)
            self.pool = nn.MaxPool2d(2, 2)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1 = nn.Linear(16 * 5 * 5, 120)
            self.fc2 = nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, x):
            x = self.pool(F.relu(self.conv1(x)))
            x = self.pool(F.relu(self.conv2(x)))
            x = torch.flatten(x, 1)  # flatten all dimensions except batch
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            x = self.fc3(x)
            return x

    shapes = []

    def fw_hook(module, input, output):
        shapes.append(f"Shape of output to {module} is {output.shape}.")

    # Any tensor created within this torch.device context manager will be
    # on the meta device.
    with torch.device("meta"):
        net = Net()
        inp = torch.randn((1024, 3, 32, 32))

    for name, layer in net.named_modules():
        layer.register_forward_hook(fw_hook)

    out = net(inp)
    env.rec("shapes", [s.replace(f"{torch.__name__}.Size", "Size") for s in shapes])
    env.rec("out", (tuple(out.shape), out.device.type))


def default_device(torch, env):
    torch.set_default_device('cpu')
    try:
        env.rec("default", torch.get_default_device().type)
        mod = torch.nn.Linear(20, 30)
        env.rec("weight device", mod.weight.device.type)
        env.rec("randn device", torch.randn(2, 2).device.type)
        with torch.device('cpu'):
            mod = torch.nn.Linear(20, 30)
            env.rec("ctx device", (mod.weight.device.type, torch.get_default_device().type))
    finally:
        torch.set_default_device(None)
    env.rec("after", torch.get_default_device().type)


def profiler_recipe(torch, env):
    from_profiler = torch.profiler
    profile, record_function, ProfilerActivity = (
        from_profiler.profile, from_profiler.record_function, from_profiler.ProfilerActivity)
    model = env.init(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(),
                                         torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                         torch.nn.Linear(4, 2)))
    inputs = env.randn(2, 3, 8, 8)

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function("model_inference"):
            out = model(inputs)
    env.rec("out", out)
    keys = [e.key for e in prof.key_averages()]
    env.rec("model_inference recorded", "model_inference" in keys)
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)
    env.rec("table", isinstance(table, str) and "model_inference" in table)
    table = prof.key_averages(group_by_input_shape=True).table(sort_by="cpu_time_total",
                                                               row_limit=10)
    env.rec("table by shape", isinstance(table, str))

    with profile(activities=[ProfilerActivity.CPU],
                 profile_memory=True, record_shapes=True) as prof:
        model(inputs)
    env.rec("memory table", isinstance(prof.key_averages().table(
        sort_by="self_cpu_memory_usage", row_limit=10), str))

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model(inputs)
    prof.export_chrome_trace(env.path("trace.json"))
    import json
    with open(env.path("trace.json")) as f:
        env.rec("chrome trace", "traceEvents" in json.load(f))

    traces = []

    def trace_handler(p):
        output = p.key_averages().table(sort_by="self_cpu_time_total", row_limit=10)
        traces.append((p.step_num, isinstance(output, str)))

    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = model(x).pow(2).sum()
        loss.backward()
        opt.step()
        return loss

    step = env.step(step)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(
            wait=1,
            warmup=1,
            active=2),
        on_trace_ready=trace_handler
    ) as p:
        for idx in range(8):
            env.rec(f"loss {idx}", step(inputs))
            p.step()
    env.rec("traces", traces)

    # Profiling your PyTorch module
    class MyModule(torch.nn.Module):
        def __init__(self, in_features: int, out_features: int, bias: bool = True):
            super(MyModule, self).__init__()
            self.linear = torch.nn.Linear(in_features, out_features, bias)

        def forward(self, input, mask):
            with record_function("LINEAR PASS"):
                out = self.linear(input)

            with record_function("MASK INDICES"):
                threshold = out.sum(axis=1).mean().item()
                hi_idx = np.argwhere(mask.cpu().numpy() > threshold)
                hi_idx = torch.from_numpy(hi_idx)

            return out, hi_idx

    mmodel = env.init(MyModule(50, 10))
    input = env.rand(16, 50)
    mask = env.rand(16, 10) * 2 - 1
    with torch.profiler.profile(with_stack=True, profile_memory=True) as prof:
        out, idx = mmodel(input, mask)
    env.rec("module out", (out, idx))
    keys = [e.key for e in prof.key_averages(group_by_stack_n=5)]
    env.rec("module ranges", ("LINEAR PASS" in keys, "MASK INDICES" in keys))


def autograd_mechanics(torch, env):
    # Grad modes
    x = env.rand(3)
    x.requires_grad_()
    with torch.no_grad():
        y = x * 2
    with torch.enable_grad():
        z = x * 2
    with torch.set_grad_enabled(False):
        w = x * 2
    env.rec("modes", (y.requires_grad, z.requires_grad, w.requires_grad))
    with torch.inference_mode():
        inf = x * 2
    env.rec("inference", (inf.requires_grad, inf.is_inference(), torch.is_inference_mode_enabled()))
    try:
        (inf * x).sum().backward()
        env.rec("inference tensor in autograd", "no error")
    except RuntimeError as e:
        env.rec("inference tensor in autograd", "Inference tensors" in str(e))

    # In-place correctness checks
    a = env.rand(4)
    a.requires_grad_()
    b = a.sigmoid()
    env.rec("version", b._version)
    b.mul_(2)
    env.rec("version after", b._version)
    try:
        b.sum().backward()
        env.rec("sigmoid output modified", "no error")
    except RuntimeError as e:
        env.rec("sigmoid output modified", "modified by an inplace operation" in str(e))
    a = env.rand(4)
    a.requires_grad_()
    c = a * 3
    d = c.exp()
    c.add_(1)      # (exp saved its output, not c: fine)
    d.sum().backward()
    env.rec("exp ok", a.grad)

    # Backward hooks: tensor hook, post-accumulate hook, module full backward hooks
    order = []
    lin = env.init(torch.nn.Linear(3, 2))
    lin.register_full_backward_pre_hook(lambda m, go: order.append("module pre") or None)
    lin.register_full_backward_hook(lambda m, gi, go: order.append("module") or None)
    lin.weight.register_hook(lambda g: order.append("weight hook") or g * 2)
    lin.weight.register_post_accumulate_grad_hook(lambda p: order.append("post accumulate"))
    inp = env.rand(5, 3)
    inp.requires_grad_()
    out = lin(inp)
    out.register_hook(lambda g: order.append("output hook") or g + 1)
    out.sum().backward()
    env.rec("hook order", order)
    env.rec("hooked grads", (lin.weight.grad, lin.bias.grad, inp.grad))

    # (a layer with a module backward pre-hook scaling its output's gradient, trained
    # compiled: the hook runs per call; hooks that append to a list, as above, change
    # Python state each call, so compile traces every call and keeps none)
    _hooked_training(torch, env, leaf_hooks=False)


def _hooked_training(torch, env, leaf_hooks):
    lin = env.init(torch.nn.Linear(3, 2))
    lin.register_full_backward_pre_hook(lambda m, go: (go[0] * 0.5,))
    if leaf_hooks:
        lin.weight.register_hook(lambda g: g * 2)

        def clip(p):
            p.grad.clamp_(-0.01, 0.01)

        lin.bias.register_post_accumulate_grad_hook(clip)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = lin(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    step = env.step(step)
    for i in range(3):
        env.rec(f"loss {i}", step(env.rand(5, 3)))
        env.rec(f"grads {i}", (lin.weight.grad, lin.bias.grad))
    env.rec("params", list(lin.parameters()))


def leaf_hooks_compiled(torch, env):
    """A parameter's tensor hook and post-accumulate-grad hook, registered before the
    compiled step, change its gradients."""
    _hooked_training(torch, env, leaf_hooks=True)
