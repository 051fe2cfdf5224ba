"""Programs of tests/programs/test_tutorials_autograd_s76_b.py (stop 76, file b):
hooks for saved tensors, parametrizations and pruning, written as pytorch.org's autograd /
torch.func tutorials write them, against the module parameter `torch` (tutorial_harness.py)."""
import importlib


def saved_tensor_hooks(torch, env):
    a = env.randn(5).requires_grad_()
    b = torch.ones(5, requires_grad=True)
    c = torch.ones(5, requires_grad=True)
    y = a * b * c
    env.rec("saved other", y.grad_fn._saved_other)
    env.rec("saved self is a", y.grad_fn._saved_self is None)

    x = env.randn(5).requires_grad_()
    y = x.pow(2)
    env.rec("pow saved self is x", y.grad_fn._saved_self is x)
    env.rec("pow saved exponent", y.grad_fn._saved_exponent)
    y = x.exp()
    env.rec("exp saved result equal", y.grad_fn._saved_result.equal(y))
    env.rec("exp saved result is y", y.grad_fn._saved_result is y)
    env.rec("raw saved", type(y.grad_fn._raw_saved_result).__name__)

    def pack_hook(x):
        return x

    def unpack_hook(x):
        return x

    x = env.randn(5).requires_grad_()
    y = x.pow(2)
    y.grad_fn._raw_saved_self.register_hooks(pack_hook, unpack_hook)
    y.sum().backward()
    env.rec("raw hook grad", x.grad)
    try:
        y.grad_fn._raw_saved_self.register_hooks(lambda x: x, lambda x: x)
        env.rec("second register", "ok")
    except RuntimeError as e:
        env.rec("second register", "RuntimeError")

    def pack_hook2(x):
        print("Packing", x)
        return x

    x = env.randn(5).requires_grad_()
    with torch.autograd.graph.saved_tensors_hooks(pack_hook2, unpack_hook):
        y = x * x
    y.sum().backward()
    env.rec("ctx hooks grad", x.grad)

    counts = {"pack": 0, "unpack": 0}

    def pack_count(t):
        counts["pack"] += 1
        return t.clone()

    def unpack_count(t):
        counts["unpack"] += 1
        return t

    x = env.randn(4).requires_grad_()
    with torch.autograd.graph.saved_tensors_hooks(pack_count, unpack_count):
        y = (x.sin() * x).exp().sum()
    y.backward()
    env.rec("counts", dict(counts))
    env.rec("counted grad", x.grad)

    # saving on disk, as the tutorial's second example (here a dict keyed by a counter)
    storage = {}

    def pack_to_store(tensor):
        name = len(storage)
        storage[name] = tensor.clone()
        return name

    def unpack_from_store(name):
        return storage[name]

    x = env.randn(3, 3).requires_grad_()
    with torch.autograd.graph.saved_tensors_hooks(pack_to_store, unpack_from_store):
        y = x.tanh().mm(x).sum()
    y.backward()
    env.rec("stored grad", x.grad)

    model = env.init(torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(),
                                         torch.nn.Linear(8, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    X, t = env.randn(10, 6), env.randn(10, 1)

    def train_step(X, t):
        opt.zero_grad()
        with torch.autograd.graph.save_on_cpu(pin_memory=False):
            loss = torch.nn.functional.mse_loss(model(X), t)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("save_on_cpu losses", [step(X, t).item() for _ in range(3)])

    x = env.randn(5).requires_grad_()
    y = x.pow(2)
    y.sum().backward()
    try:
        y.grad_fn._saved_self
        env.rec("freed", "ok")
    except RuntimeError as e:
        env.rec("freed", "RuntimeError")


def parametrizations(torch, env):
    nn = torch.nn
    parametrize = torch.nn.utils.parametrize

    def symmetric(X):
        return X.triu() + X.triu(1).transpose(-1, -2)

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

    layer = env.init(nn.Linear(3, 3))
    parametrize.register_parametrization(layer, "weight", Symmetric())
    A = layer.weight
    env.rec("symmetric", (A, bool(torch.allclose(A, A.T))))
    env.rec("parametrized", (parametrize.is_parametrized(layer),
                             parametrize.is_parametrized(layer, "bias"),
                             sorted(k for k, _ in layer.named_parameters())))

    class Skew(nn.Module):
        def forward(self, X):
            A = X.triu(1)
            return A - A.transpose(-1, -2)

    cnn = env.init(nn.Conv2d(in_channels=3, out_channels=2, kernel_size=3))
    parametrize.register_parametrization(cnn, "weight", Skew())
    env.rec("skew", (cnn.weight[0, 1], tuple(cnn.weight.shape)))

    class MatrixExponential(nn.Module):
        def forward(self, X):
            return torch.matrix_exp(X)

    layer_orthogonal = env.init(nn.Linear(3, 3))
    parametrize.register_parametrization(layer_orthogonal, "weight", Skew())
    parametrize.register_parametrization(layer_orthogonal, "weight", MatrixExponential())
    X = layer_orthogonal.weight
    env.rec("orthogonal", (X, torch.dist(X.T @ X, torch.eye(3)).item() < 1e-5))
    env.rec("param list", type(layer_orthogonal.parametrizations.weight).__name__)

    layer_spd = env.init(nn.Linear(3, 3))
    parametrize.register_parametrization(layer_spd, "weight", Symmetric())
    parametrize.register_parametrization(layer_spd, "weight", MatrixExponential())
    env.rec("spd eig", torch.linalg.eigvalsh(layer_spd.weight))

    with parametrize.cached():
        foo = layer_orthogonal.weight
        bar = layer_orthogonal.weight
        env.rec("cached same", foo is bar)

    class Symmetric2(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    layer = env.init(nn.Linear(3, 3))
    parametrize.register_parametrization(layer, "weight", Symmetric2())
    X = env.rand(3, 3)
    X = X + X.T
    layer.weight = X
    env.rec("right inverse", (layer.weight, layer.parametrizations.weight.original))
    env.rec("repr", repr(layer))

    class NoisyParametrization(nn.Module):
        def forward(self, X):
            return X

        @staticmethod
        def right_inverse(X):
            return torch.zeros_like(X)

    layer = env.init(nn.Linear(4, 4))
    parametrize.register_parametrization(layer, "weight", NoisyParametrization())
    env.rec("noisy", (layer.weight.abs().sum().item(),))

    # training a symmetric layer (compiled step)
    layer = env.init(nn.Linear(3, 3))
    parametrize.register_parametrization(layer, "weight", Symmetric())
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    xin, t = env.randn(8, 3), env.randn(8, 3)

    def train_step(x, t):
        opt.zero_grad()
        loss = ((layer(x) - t) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("sym train", [step(xin, t).item() for _ in range(3)])
    env.rec("sym weight", layer.weight)

    parametrize.remove_parametrizations(layer, "weight")
    env.rec("removed (leave_parametrized)", (sorted(k for k, _ in layer.named_parameters()),
                                             layer.weight))
    layer = env.init(nn.Linear(3, 3))
    parametrize.register_parametrization(layer, "weight", Symmetric())
    parametrize.remove_parametrizations(layer, "weight", leave_parametrized=False)
    env.rec("removed (original)", (layer.weight, type(layer).__name__))


def pruning(torch, env):
    nn, F = torch.nn, torch.nn.functional
    prune = importlib.import_module(torch.__name__ + ".nn.utils.prune")

    class LeNet(nn.Module):
        def __init__(self):
            super(LeNet, self).__init__()
            self.conv1 = nn.Conv2d(1, 6, 3)
            self.conv2 = nn.Conv2d(6, 16, 3)
            self.fc1 = nn.Linear(16 * 1 * 1, 12)
            self.fc2 = nn.Linear(12, 8)
            self.fc3 = nn.Linear(8, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = x.view(-1, int(x.nelement() / x.shape[0]))
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            x = self.fc3(x)
            return x

    model = env.init(LeNet())
    module = model.conv1
    env.rec("named params", [n for n, _ in module.named_parameters()])
    env.rec("named buffers", [n for n, _ in module.named_buffers()])
    prune.random_unstructured(module, name="weight", amount=0.3)
    env.rec("after random", ([n for n, _ in module.named_parameters()],
                             [n for n, _ in module.named_buffers()]))
    env.rec("random mask zeros", int((module.weight_mask == 0).sum()))
    env.rec("weight is masked",
            bool(torch.equal(module.weight, module.weight_orig * module.weight_mask)))
    env.rec("pre hooks", [type(h).__name__ for h in module._forward_pre_hooks.values()])

    prune.l1_unstructured(module, name="bias", amount=3)
    env.rec("bias mask", module.bias_mask)
    env.rec("bias", module.bias)
    prune.ln_structured(module, name="weight", amount=0.5, n=2, dim=0)
    env.rec("ln mask zero channels", int((module.weight_mask.sum((1, 2, 3)) == 0).sum()))
    for hook in module._forward_pre_hooks.values():
        if hook._tensor_name == "weight":
            break
    env.rec("container", (type(hook).__name__, [type(h).__name__ for h in hook]))
    env.rec("state_dict keys", list(model.state_dict().keys()))

    prune.remove(module, 'weight')
    env.rec("after remove", ([n for n, _ in module.named_parameters()],
                             [n for n, _ in module.named_buffers()]))

    new_model = env.init(LeNet())
    for name, module in new_model.named_modules():
        if isinstance(module, torch.nn.Conv2d):
            prune.l1_unstructured(module, name='weight', amount=0.2)
        elif isinstance(module, torch.nn.Linear):
            prune.l1_unstructured(module, name='weight', amount=0.4)
    env.rec("new mask keys", list(dict(new_model.named_buffers()).keys()))

    model = env.init(LeNet())
    parameters_to_prune = (
        (model.conv1, 'weight'), (model.conv2, 'weight'), (model.fc1, 'weight'),
        (model.fc2, 'weight'), (model.fc3, 'weight'),
    )
    prune.global_unstructured(parameters_to_prune, pruning_method=prune.L1Unstructured, amount=0.2)
    sparsity = [100. * float(torch.sum(m.weight == 0)) / float(m.weight.nelement())
                for m, _ in parameters_to_prune]
    total = sum(float(torch.sum(m.weight == 0)) for m, _ in parameters_to_prune)
    n = sum(float(m.weight.nelement()) for m, _ in parameters_to_prune)
    env.rec("sparsity", (sparsity, 100. * total / n))

    class FooBarPruningMethod(prune.BasePruningMethod):
        PRUNING_TYPE = 'unstructured'

        def compute_mask(self, t, default_mask):
            mask = default_mask.clone()
            mask.view(-1)[::2] = 0
            return mask

    def foobar_unstructured(module, name):
        FooBarPruningMethod.apply(module, name)
        return module

    foobar_unstructured(model.fc3, name='bias')
    env.rec("foobar", model.fc3.bias_mask)

    # fine-tuning the pruned model (compiled step); pruned weights stay zero
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data, target = env.randn(6, 1, 10, 10), env.randint(0, 10, (6,))

    def train_step(x, t):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), t)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("pruned train", [step(data, target).item() for _ in range(3)])
    env.rec("pruned zeros",
            int(sum(float(torch.sum(m.weight == 0)) for m, _ in parameters_to_prune)))
    env.rec("pruned state", dict(model.state_dict()))
