"""Sweep 15 (D): pytorch/tutorials programs run as written with `import llgrad as torch`,
seeded with the library's own generator (llgrad draws torch's numbers for manual_seed, the
init functions and dropout), eagerly and with their steps under llgrad.compile, against
torch: parametrizations, pruning, saved-tensor hooks, custom Function double backward,
defining a network / zeroing gradients, checkpoints and warm-starting, bag-of-words and
CBOW (see tutorial_harness.py for the runs and their comparison)."""
import importlib

import pytest

pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def parametrizations(torch, env):
    """intermediate/parametrizations: Symmetric, skew + Cayley map (orthogonal), matrix
    exponential, right_inverse, caching, several parametrizations, removal, training."""
    nn, P = torch.nn, torch.nn.utils.parametrize

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    class Skew(nn.Module):
        def forward(self, X):
            A = X.triu(1)
            return A - A.transpose(-1, -2)

    class CayleyMap(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.register_buffer("Id", torch.eye(n))

        def forward(self, X):
            return torch.linalg.solve(self.Id - X, self.Id + X)

    class MatrixExponential(nn.Module):
        def forward(self, X):
            return torch.matrix_exp(X)

    torch.manual_seed(0)
    layer = nn.Linear(3, 3)
    P.register_parametrization(layer, "weight", Symmetric())
    A = layer.weight
    env.rec("symmetric", (A, bool(torch.allclose(A, A.T))))
    env.rec("original", layer.parametrizations.weight.original)
    env.rec("is_parametrized", (P.is_parametrized(layer), P.is_parametrized(layer, "bias")))
    env.rec("names", [n for n, _ in layer.named_parameters()])
    X = torch.rand(3, 3)
    X = X + X.T
    layer.weight = X                       # (through right_inverse)
    env.rec("assigned", (layer.parametrizations.weight.original, layer.weight))

    layer_orth = nn.Linear(3, 3)
    P.register_parametrization(layer_orth, "weight", Skew())
    P.register_parametrization(layer_orth, "weight", CayleyMap(3))
    Q = layer_orth.weight
    env.rec("orthogonal", (Q, torch.dist(Q.T @ Q, torch.eye(3))))
    env.rec("chain", [type(m).__name__ for m in layer_orth.parametrizations.weight])

    layer_spd = nn.Linear(3, 3)
    P.register_parametrization(layer_spd, "weight", Symmetric())
    P.register_parametrization(layer_spd, "weight", MatrixExponential())
    X = layer_spd.weight
    env.rec("spd", (X, torch.linalg.eigvalsh(X)))

    x = torch.randn(5, 3)
    with P.cached():
        out = layer_orth(x) + layer_orth(x)
    env.rec("cached", out)

    model = nn.Sequential(layer_orth, nn.Tanh(), layer_spd, nn.Tanh(), nn.Linear(3, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    y = torch.randn(5, 2)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = env.step(step)
    for i in range(3):
        env.rec(f"loss {i}", step(x, y))
    env.rec("grads", [p.grad for p in model.parameters()])
    env.rec("still orthogonal", torch.dist(layer_orth.weight.T @ layer_orth.weight,
                                           torch.eye(3)).item() < 1e-5)
    P.remove_parametrizations(layer_orth, "weight")
    env.rec("removed", (type(layer_orth.weight).__name__, layer_orth.weight,
                        P.is_parametrized(layer_orth)))
    P.remove_parametrizations(layer_spd, "weight", leave_parametrized=False)
    env.rec("removed unparametrized", layer_spd.weight)


def test_parametrizations():
    run_tutorial(parametrizations, rtol=1e-4, atol=1e-5)


def pruning(torch, env):
    """intermediate/pruning_tutorial: LeNet, random / l1 / ln-structured pruning of
    weights and biases (masks, forward pre-hooks, iterative pruning), global pruning,
    prune.remove, a custom pruning method, and training the pruned net."""
    prune = importlib.import_module(torch.__name__ + ".nn.utils.prune")
    nn, F = torch.nn, torch.nn.functional

    class LeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 6, 3)
            self.conv2 = nn.Conv2d(6, 16, 3)
            self.fc1 = nn.Linear(16 * 2 * 2, 24)
            self.fc2 = nn.Linear(24, 16)
            self.fc3 = nn.Linear(16, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = x.view(-1, int(x.nelement() / x.shape[0]))
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            return self.fc3(x)

    torch.manual_seed(0)
    model = LeNet()
    module = model.conv1
    env.rec("before", [n for n, _ in module.named_parameters()])
    prune.random_unstructured(module, name="weight", amount=0.3)
    env.rec("after", ([n for n, _ in module.named_parameters()],
                      [n for n, _ in module.named_buffers()]))
    env.rec("mask", module.weight_mask)
    env.rec("weight", module.weight)
    env.rec("hooks", [type(h).__name__ for h in module._forward_pre_hooks.values()])
    prune.l1_unstructured(module, name="bias", amount=3)
    env.rec("bias", (module.bias_mask, module.bias))
    prune.ln_structured(module, name="weight", amount=0.5, n=2, dim=0)
    env.rec("iterative mask", module.weight_mask)
    hook = next(h for h in module._forward_pre_hooks.values() if h._tensor_name == "weight")
    env.rec("container", [type(h).__name__ for h in hook])
    env.rec("state keys", list(model.state_dict().keys()))
    prune.remove(module, "weight")
    env.rec("removed", ([n for n, _ in module.named_parameters()], module.weight))

    model = LeNet()
    for name, m in model.named_modules():
        if isinstance(m, nn.Conv2d):
            prune.l1_unstructured(m, name="weight", amount=0.2)
        elif isinstance(m, nn.Linear):
            prune.l1_unstructured(m, name="weight", amount=0.4)
    env.rec("masks", list(dict(model.named_buffers()).keys()))

    model = LeNet()
    parameters_to_prune = ((model.conv1, "weight"), (model.conv2, "weight"),
                           (model.fc1, "weight"), (model.fc2, "weight"), (model.fc3, "weight"))
    prune.global_unstructured(parameters_to_prune, pruning_method=prune.L1Unstructured,
                              amount=0.2)
    env.rec("sparsity", [float(torch.sum(m.weight == 0)) / float(m.weight.nelement())
                         for m, _ in parameters_to_prune])

    class FooBarPruningMethod(prune.BasePruningMethod):
        PRUNING_TYPE = "unstructured"

        def compute_mask(self, t, default_mask):
            mask = default_mask.clone()
            mask.view(-1)[::2] = 0
            return mask

    def foobar_unstructured(module, name):
        FooBarPruningMethod.apply(module, name)
        return module

    foobar_unstructured(model.fc3, name="bias")
    env.rec("foobar", model.fc3.bias_mask)

    x = torch.randn(4, 1, 14, 14)
    y = torch.randint(0, 10, (4,))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    train_step = env.step(train_step)
    for i in range(3):
        env.rec(f"loss {i}", train_step(x, y))
    env.rec("orig grads", [p.grad for p in model.parameters()])
    env.rec("pruned stay zero", [m.weight for m, _ in parameters_to_prune])


@pytest.mark.slow       # (~2-5 s: builds of its compiled steps)
def test_pruning():
    run_tutorial(pruning, rtol=1e-4, atol=1e-5)


def saved_tensor_hooks(torch, env):
    """intermediate/autograd_saved_tensors_hooks: what grad_fn saved (_saved_self is x,
    _saved_result equals the output), hooks on one saved tensor (_raw_saved_self
    .register_hooks), saved_tensors_hooks around a region, packing to a store by index,
    save_on_cpu, hooks registered in a module's forward, a pack hook writing in place."""
    torch.manual_seed(0)
    x = torch.randn(5, requires_grad=True)
    y = x.pow(2)
    env.rec("saved self", (y.grad_fn._saved_self is x, y.grad_fn._saved_self.equal(x)))
    y = x.exp()
    env.rec("saved result", (y.grad_fn._saved_result.equal(y), y.grad_fn._saved_result is y))

    x = torch.randn(5, requires_grad=True)
    y = x.pow(2)
    y.grad_fn._raw_saved_self.register_hooks(lambda x: x * 1, lambda x: x * 2)
    y.sum().backward()
    env.rec("raw hooks grad", x.grad)
    try:
        y.grad_fn._raw_saved_self.register_hooks(lambda x: x, lambda x: x)
    except RuntimeError as e:
        env.rec("freed", str(e)[:60])
    y = x.exp()
    calls = []
    y.grad_fn._raw_saved_result.register_hooks(lambda t: calls.append("pack") or t,
                                               lambda t: calls.append("unpack") or t * 2)
    env.rec("result hooks", (y.grad_fn._saved_result, calls))
    try:
        y.grad_fn._raw_saved_result.register_hooks(lambda t: t, lambda t: t)
    except RuntimeError as e:
        env.rec("twice", str(e))

    log = []

    def pack_hook(x):
        log.append(("pack", tuple(x.shape)))
        return x

    def unpack_hook(x):
        log.append(("unpack", tuple(x.shape)))
        return x

    a = torch.ones(5, requires_grad=True)
    b = torch.ones(5, requires_grad=True) * 2
    with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        y = a * b
    y.sum().backward()
    env.rec("log", log)
    env.rec("a grad", a.grad)

    storage = []

    def pack(x):
        storage.append(x.clone())
        return len(storage) - 1

    def unpack(i):
        return storage[i]

    x = torch.randn(3, 4, requires_grad=True)
    w = torch.randn(4, 2, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        loss = (x @ w).tanh().sum()
    loss.backward()
    env.rec("stored", (len(storage), x.grad, w.grad))
    with torch.autograd.graph.save_on_cpu(pin_memory=False):
        loss = (x.sin() * w.sum()).sum()
    loss.backward()
    env.rec("save_on_cpu", x.grad)

    class SelfDeletingTempFile(torch.autograd.graph.saved_tensors_hooks):
        def __init__(self):
            self.store = {}

            def pack(t):
                key = len(self.store)
                self.store[key] = t.detach().clone()
                return key

            super().__init__(pack, lambda key: self.store[key])

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)

        def forward(self, x):
            with SelfDeletingTempFile():
                return self.lin(x).relu().sum()

    model = Model()
    model(x).backward()
    env.rec("module hooks", [p.grad for p in model.parameters()])

    def bad_pack(t):
        t.add_(1)
        return t

    try:
        with torch.autograd.graph.saved_tensors_hooks(bad_pack, lambda t: t):
            torch.randn(3, requires_grad=True).exp()
    except RuntimeError as e:
        env.rec("pack writes", str(e)[:50])

    def plain_step(x):         # (no hooks active: the compiled call runs compiled)
        loss = model.lin(x).relu().sum()
        loss.backward()
        return loss

    plain_step = env.step(plain_step)
    model.zero_grad()
    env.rec("plain", (plain_step(x), [p.grad for p in model.parameters()]))


def test_saved_tensor_hooks():
    run_tutorial(saved_tensor_hooks)
