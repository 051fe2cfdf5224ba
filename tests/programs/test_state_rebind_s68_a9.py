"""Sweep 68 (a9), the compile contract on training steps whose Python state is rebound
between compiled calls, run with PyTorch, with llgrad eagerly and with llgrad compiling
the step (tutorial_harness.py), compared at every call:

- a global float, a global list of masks (appended to, a mask filled in place), a tensor
  in a captured list and in a captured dict replaced and negated in place;
- closure variables (a float temperature, a tensor) rebound by the enclosing function;
- a global activation function rebound (tanh, sigmoid, a functools.partial, a lambda);
- forward monkeypatched: a class attribute, then an instance attribute shadowing it, an
  instance forward (types.MethodType) set and deleted, the class's forward replaced, a
  submodule's forward replaced by a lambda, a bias frozen;
- a forward steered by hasattr / isinstance / `in self._buffers` / getattr(default), with
  the attribute, the activation module and a buffer added and removed between calls;
- a namedtuple batch and a dict of extra loss terms whose keys change between calls;
- net surgery: a hidden layer widened 6 -> 8 through the Parameters' .data, a weight given
  transposed strides, .data.set_ to a new storage;
- an RNN whose hidden state is kept on the module (self.h = h.detach()) and reset to None;
- weight tying switched on (dec.weight = emb.weight) and off, the optimizer remade;
- llgrad.compile(model) of a BatchNorm / Dropout model put in eval and back, a forward hook
  added and removed, its head replaced and added to the optimizer, its body frozen;
- a compiled model.forward called with keyword arguments that change between calls;
- models and optimizers passed as arguments of one compiled step, in turn, then fresh ones."""
import collections
import functools
import types

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

# (globals the programs rebind between calls)
SCALE = 1.0
MASKS = []
ACT = None


def _train_step(torch, model, opt, loss_fn):
    def train_step(x, y):
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return train_step


def _mlp(torch, env):
    nn = torch.nn
    return env.init(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)))


def _batch(env, n=5):
    return env.randn(n, 4), env.randint(0, 3, (n,))


def globals_and_containers(torch, env):
    global SCALE
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Linear(4, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    bias, table = [env.randn(3)], {"w": env.randn(3)}
    MASKS[:] = [torch.ones(3)]
    SCALE = 1.0

    def train_step(x, y):
        out = model(x) * SCALE + bias[0] + table["w"] * MASKS[-1]
        loss = F.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    changes = {2: lambda: globals().update(SCALE=3.0),
               3: lambda: bias.__setitem__(0, env.randn(3)),
               4: lambda: table.__setitem__("w", env.randn(3)),
               5: lambda: MASKS.append(torch.zeros(3)),
               6: lambda: MASKS[-1].fill_(2.0),
               7: lambda: table["w"].mul_(-1)}
    for it in range(8):
        if it in changes:
            changes[it]()
        env.rec(f"loss {it}", step(*_batch(env)))
    env.rec("params", dict(model.state_dict()))


def closure_rebound(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Linear(4, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    temp, shift = 1.0, env.randn(3)

    def train_step(x, y):
        loss = F.cross_entropy(model(x) / temp + shift, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(6):
        if it == 2:
            temp = 0.5
        if it == 3:
            shift = env.randn(3)
        if it == 4:
            shift = torch.ones(3)
        env.rec(f"loss {it}", step(*_batch(env)))
    env.rec("params", dict(model.state_dict()))


def global_function_rebound(torch, env):
    global ACT
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Linear(4, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = env.step(_train_step(torch, model, opt, lambda out, y: F.cross_entropy(ACT(out), y)))
    acts = [torch.tanh, torch.tanh, torch.sigmoid,
            functools.partial(F.leaky_relu, negative_slope=0.3), lambda t: t * 3]
    for it, ACT in enumerate(acts):
        env.rec(f"loss {it}", step(*_batch(env)))
    env.rec("params", dict(model.state_dict()))


def monkeypatched_forward(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        scale = 1.0

        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 6), nn.Linear(6, 3)

        def forward(self, x):
            return self.b(torch.tanh(self.a(x))) * self.scale

    def relu_forward(self, x):
        return self.b(torch.relu(self.a(x)))

    def sigmoid_forward(self, x):
        return self.b(torch.sigmoid(self.a(x))) * 2

    model = env.init(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = env.step(_train_step(torch, model, opt, F.cross_entropy))
    changes = {1: lambda: setattr(Net, "scale", 3.0),
               2: lambda: setattr(model, "scale", 0.5),
               3: lambda: setattr(model, "forward", types.MethodType(relu_forward, model)),
               4: lambda: delattr(model, "forward"),
               5: lambda: setattr(Net, "forward", sigmoid_forward),
               6: lambda: setattr(model.a, "forward", lambda x: F.linear(
                   x, model.a.weight * 2, model.a.bias)),
               7: lambda: model.b.bias.requires_grad_(False)}
    for it in range(8):
        if it in changes:
            changes[it]()
        env.rec(f"loss {it}", step(*_batch(env)))
        env.rec(f"params {it}", dict(model.state_dict()))


def attribute_probes(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.act = nn.Linear(4, 3), nn.ReLU()

        def forward(self, x):
            if hasattr(self, "mask"):
                x = x * self.mask
            x = self.act(x)
            if isinstance(self.act, nn.Tanh):
                x = x * 2
            if "bias2" in self._buffers:
                x = x + self.bias2
            return self.fc(x) + getattr(self, "shift", 0.0)

    model = env.init(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = env.step(_train_step(torch, model, opt, F.cross_entropy))
    changes = {1: lambda: setattr(model, "mask", torch.tensor([1.0, 0.0, 1.0, 0.5])),
               2: lambda: setattr(model, "act", nn.Tanh()),
               3: lambda: model.register_buffer("bias2", torch.ones(4)),
               4: lambda: setattr(model, "shift", 0.7),
               5: lambda: delattr(model, "mask"),
               6: lambda: model._buffers.pop("bias2"),
               7: lambda: setattr(model, "act", nn.GELU())}
    for it in range(8):
        if it in changes:
            changes[it]()
        env.rec(f"loss {it}", step(*_batch(env)))
        env.rec(f"params {it}", dict(model.state_dict()))


def container_arguments(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Linear(4, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    Batch = collections.namedtuple("Batch", "x y w")

    def train_step(batch, extra):
        loss = (F.cross_entropy(model(batch.x), batch.y, reduction="none") * batch.w).mean()
        for k in sorted(extra):
            loss = loss + extra[k].sum() * (0.1 if k == "a" else 0.01)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(6):
        extra = {"a": env.randn(2)} if it % 2 == 0 else {"b": env.randn(3), "a": env.randn(2)}
        if it == 4:
            extra = {}
        env.rec(f"loss {it}", step(Batch(*_batch(env), env.rand(5)), extra))
    env.rec("params", dict(model.state_dict()))


def net_surgery(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)))

    def loss_backward(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss.detach()

    step = env.step(loss_backward)
    first, last = model[0], model[2]
    for it in range(7):
        with torch.no_grad():
            if it == 2:     # (widen the hidden layer 6 -> 8: two units repeated)
                first.weight.data = torch.cat([first.weight.data, first.weight.data[:2]], 0)
                first.bias.data = torch.cat([first.bias.data, first.bias.data[:2]], 0)
                last.weight.data = torch.cat([last.weight.data, last.weight.data[:, :2]],
                                             1) * 0.75
            if it == 4:
                last.weight.data = last.weight.data.t().contiguous().t()
            if it == 5:
                first.weight.data.set_(first.weight.data.clone() * 0.5)
        env.rec(f"loss {it}", step(*_batch(env)))
        env.rec(f"grads {it}", [p.grad for p in model.parameters()])
        model.zero_grad()


def hidden_state_on_module(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Stateful(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn, self.fc = nn.RNN(3, 4, batch_first=True), nn.Linear(4, 2)
            self.h = None

        def forward(self, x):
            out, h = self.rnn(x, self.h)
            self.h = h.detach()
            return self.fc(out[:, -1])

    model = env.init(Stateful())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    step = env.step(_train_step(torch, model, opt, F.cross_entropy))
    for it in range(7):
        if it in (3, 5):
            model.h = None
        env.rec(f"loss {it}", step(env.randn(2, 5, 3), env.randint(0, 2, (2,))))
        env.rec(f"hidden {it}", model.h)
    env.rec("params", dict(model.state_dict()))


def weight_tying(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.dec = nn.Embedding(10, 6), nn.Linear(6, 10)

        def forward(self, t):
            return self.dec(torch.tanh(self.emb(t)))

    model = env.init(LM())
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    # (a closure over opt: the step uses the optimizer remade below)
    step = env.step(lambda t, y: _train_step(torch, model, opt, F.cross_entropy)(t, y))
    for it in range(6):
        if it == 2:
            model.dec.weight = model.emb.weight
            opt = torch.optim.SGD(model.parameters(), lr=0.5)
        if it == 4:
            model.dec.weight = nn.Parameter(model.emb.weight.detach().clone())
            opt = torch.optim.SGD(model.parameters(), lr=0.5)
        env.rec(f"loss {it}", step(env.randint(0, 10, (6,)), env.randint(0, 10, (6,))))
        env.rec(f"params {it}", dict(model.state_dict()))


def compiled_module(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(),
                                   nn.Dropout(0.2), nn.Linear(8, 3)))
    cm = env.step(model)        # (llgrad.compile(model): its attributes are the model's)
    opt = torch.optim.SGD(cm.parameters(), lr=0.1, momentum=0.9)
    for it in range(8):
        if it == 2:
            cm.eval()
        if it == 3:
            cm.train()
        if it == 4:
            hook = model[0].register_forward_hook(lambda m, i, o: o * 0.5)
        if it == 5:
            hook.remove()
        if it == 6:
            model[4] = env.init(nn.Linear(8, 3))
            opt.add_param_group({"params": model[4].parameters()})
        if it == 7:
            cm.requires_grad_(False)
            model[4].requires_grad_(True)
        loss = F.cross_entropy(cm(env.randn(6, 4)), env.randint(0, 3, (6,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        # (Dropout's draws are the library's: eager vs compiled only)
        env.rec(f"loss {it}", loss, cross=False)
        env.rec(f"state {it}", dict(model.state_dict()), cross=False)


def compiled_forward_keywords(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x, temperature=1.0, mask=None, *, bias=None):
            out = self.fc(x) / temperature
            if mask is not None:
                out = out.masked_fill(~mask, -1e9)
            return out if bias is None else out + bias

    model = env.init(Net())
    model.forward = env.step(model.forward)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    keywords = [{}, {"temperature": 2.0}, {"mask": env.rand(6, 3) > 0.3},
                {"bias": env.randn(3)}, {"temperature": 0.5, "bias": env.randn(3)}, {},
                {"mask": env.rand(6, 3) > 0.5}]
    for it, kw in enumerate(keywords):
        loss = F.cross_entropy(model(env.randn(6, 4), **kw), env.randint(0, 3, (6,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        env.rec(f"loss {it}", loss)
    env.rec("params", dict(model.state_dict()))


def models_as_arguments(torch, env):
    nn, F = torch.nn, torch.nn.functional

    def train_step(model, opt, x, y, scale=1.0):
        loss = F.cross_entropy(model(x) * scale, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    models = [_mlp(torch, env) for _ in range(4)]
    opts = [torch.optim.SGD(models[0].parameters(), lr=0.1, momentum=0.9),
            torch.optim.Adam(models[1].parameters(), lr=1e-2),
            torch.optim.SGD(models[2].parameters(), lr=0.1, momentum=0.9)]
    for it in range(9):     # (three models in turn through one compiled step)
        k = it % 3
        env.rec(f"loss {it}", step(models[k], opts[k], *_batch(env), 1.0 + 0.5 * (it // 3)))
    fresh = torch.optim.SGD(models[3].parameters(), lr=0.1, momentum=0.9)
    for it in range(3):     # (a fresh model and optimizer: a k-fold loop's next fold)
        env.rec(f"fresh {it}", step(models[3], fresh, *_batch(env)))
    env.rec("params", [dict(m.state_dict()) for m in models])


PROGRAMS = {f.__name__: f for f in (
    globals_and_containers, closure_rebound, global_function_rebound, monkeypatched_forward,
    attribute_probes, container_arguments, net_surgery, hidden_state_on_module, weight_tying,
    compiled_module, compiled_forward_keywords, models_as_arguments)}

# (the default run keeps the quickest; the others, 0.7-2 s each with a cold kernel
# cache, are marked slow)
SLOW = ('net_surgery', 'hidden_state_on_module', 'compiled_forward_keywords', 'weight_tying',
        'compiled_module')


@pytest.mark.parametrize("name, program", program_params(PROGRAMS, slow=SLOW))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
