"""Sweep 68 (a9), the compile contract on training steps whose state changes between
compiled calls, run with PyTorch, with llgrad eagerly and with llgrad compiling the step
(tutorial_harness.py), compared at every call:

- a forward that writes two buffers in place under no_grad, appends to a Python list and
  counts in a dict, with the buffer zeroed outside and the batch size changed between calls;
- optimizer.add_param_group after two compiled calls (a frozen body unfrozen);
- a submodule replaced (model.fc = nn.Linear(...)) between calls of the same step;
- hooks registered and removed mid-training: tensor hooks clamping gradients, a forward
  hook that rescales, a forward pre-hook, a full backward hook;
- the RNG reseeded, saved and restored (get/set_rng_state) between calls of a step with
  Dropout (eager vs compiled: the same draws);
- requires_grad_ toggled on a submodule and on one weight (fine-tuning's freezing) with a
  BatchNorm switched to eval and back;
- clip_grad_value_ switched on and tightened between calls, gradient hooks added mid-way;
- gradient accumulation over a compiled micro-step and a compiled update that zeroes
  grads (set_to_none alternating);
- Parameters replaced (a new nn.Parameter, .data of another value and of another layout);
- labels sampled by one compiled function (multinomial under no_grad) and trained on by
  another with Dropout (the RNG shared by the two, eager vs compiled);
- a compiled loss whose backward the caller runs after changing state: a tensor hook and a
  post-accumulate hook registered, retain_grad and a hook on the loss, a saved weight
  bumped in place (eager's version error), a bias's requires_grad switched off;
- meters (Python numbers from .item(), a list, a buffer) the step updates by the batch's
  size, over batches of changing sizes."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _train_step(torch, model, opt, loss_fn):
    def train_step(x, y):
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return train_step


def buffers_list_dict(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)
            self.register_buffer("count", torch.zeros(()))
            self.register_buffer("mean", torch.zeros(4))
            self.history = []
            self.stats = {"n": 0}

        def forward(self, x):
            with torch.no_grad():
                self.count += 1
                self.mean.mul_(0.9).add_(x.mean(0), alpha=0.1)
            self.history.append(x.shape[0])
            self.stats["n"] += x.shape[0]
            return self.fc(x - self.mean)

    model = env.init(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = env.step(_train_step(torch, model, opt, F.cross_entropy))
    for it in range(5):
        n = 5 if it == 3 else 6
        env.rec(f"loss {it}", step(env.randn(n, 4), env.randint(0, 3, (n,))))
        env.rec(f"count {it}", model.count)
        if it == 2:
            with torch.no_grad():
                model.mean.zero_()
    env.rec("history", list(model.history))
    env.rec("stats", dict(model.stats))
    env.rec("params", dict(model.state_dict()))


def add_param_group(torch, env):
    nn, F = torch.nn, torch.nn.functional
    body, head = env.init(nn.Linear(4, 6)), env.init(nn.Linear(6, 3))
    body.requires_grad_(False)
    opt = torch.optim.Adam(head.parameters(), lr=1e-2)

    def train_step(x, y):
        loss = F.cross_entropy(head(torch.relu(body(x))), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        if it == 2:
            body.requires_grad_(True)
            opt.add_param_group({"params": list(body.parameters()), "lr": 1e-3})
        env.rec(f"loss {it}", step(env.randn(8, 4), env.randint(0, 3, (8,))))
    env.rec("body", dict(body.state_dict()))
    env.rec("head", dict(head.state_dict()))
    env.rec("body's Adam state", [opt.state[p]["exp_avg"] for p in body.parameters()])


def replace_submodule(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body, self.fc = nn.Linear(4, 6), nn.Linear(6, 3)

        def forward(self, x):
            return self.fc(torch.relu(self.body(x)))

    model = env.init(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = env.step(_train_step(torch, model, opt, F.cross_entropy))
    for it in range(6):
        if it == 2:     # (the old optimizer still steps the old head's parameters)
            model.fc = env.init(nn.Linear(6, 3))
        env.rec(f"loss {it}", step(env.randn(8, 4), env.randint(0, 3, (8,))))
    env.rec("params", dict(model.state_dict()))


def hooks_mid_training(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    seen = []

    def rescale(m, inp, out):
        seen.append(out.detach().abs().mean())
        return out * 0.5

    step = env.step(_train_step(torch, model, opt, F.cross_entropy))
    handles = []
    for it in range(8):
        if it == 2:
            handles += [p.register_hook(lambda g: g.clamp(-0.01, 0.01))
                        for p in model.parameters()]
        if it == 3:
            handles.append(model[0].register_forward_hook(rescale))
        if it == 4:
            handles.append(model[2].register_forward_pre_hook(lambda m, a: (a[0] + 1.0,)))
        if it == 5:
            handles.append(model[2].register_full_backward_hook(
                lambda m, gi, go: (gi[0] * 2,)))
        if it == 6:
            for h in handles[:4]:
                h.remove()
        if it == 7:
            for h in handles[4:]:
                h.remove()
        env.rec(f"loss {it}", step(env.randn(8, 4), env.randint(0, 3, (8,))))
        env.rec(f"params {it}", list(model.parameters()))
    env.rec("seen", seen)


def rng_reseeded(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.5),
                                   nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = env.step(_train_step(torch, model, opt, F.cross_entropy))
    for it in range(7):
        if it == 2:
            torch.manual_seed(123)
        if it == 3:
            state = torch.get_rng_state()
        if it == 5:
            torch.set_rng_state(state)      # (the draws of calls 3 and 4 again)
        if it == 6:
            model.eval()
        env.rec(f"loss {it}", step(env.randn(8, 4), env.randint(0, 2, (8,))), cross=False)
        env.rec(f"rand {it}", torch.rand(3), cross=False)
    env.rec("params", dict(model.state_dict()), cross=False)


def freeze_unfreeze(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(),
                                   nn.Linear(8, 3)))
    # (SGD: Adam would blow up the rounding noise of the first bias's zero gradient)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
    step = env.step(_train_step(torch, model, opt, F.cross_entropy))
    for it in range(8):
        if it == 2:
            model[0].requires_grad_(False)
            model[1].eval()
        if it == 4:
            model[0].requires_grad_(True)
            model[1].train()
        if it == 5:
            model[3].weight.requires_grad_(False)
        if it == 6:
            model[3].weight.requires_grad_(True)
        env.rec(f"loss {it}", step(env.randn(8, 4), env.randint(0, 3, (8,))))
        env.rec(f"state {it}", dict(model.state_dict()))
        env.rec(f"grad is None {it}", [p.grad is None for p in model.parameters()])


def clip_value_then_hooks(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    clip = [None]

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        if clip[0] is not None:
            nn.utils.clip_grad_value_(model.parameters(), clip[0])
        total = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.detach(), total

    step = env.step(train_step)
    for it in range(7):
        if it == 2:
            clip[0] = 0.05
        if it == 3:
            for p in model.parameters():
                p.register_hook(lambda g: g * 3)
        if it == 5:
            clip[0] = 0.01
        env.rec(f"loss {it}", step(env.randn(8, 4), env.randint(0, 3, (8,))))
    env.rec("params", dict(model.state_dict()))


def accumulate_then_update(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.5)

    def micro(x, y, accum):
        loss = F.cross_entropy(model(x), y) / accum
        loss.backward()
        return loss.detach()

    def update(set_to_none):
        opt.step()
        opt.zero_grad(set_to_none=set_to_none)

    micro, update = env.step(micro), env.step(update)
    n_updates = 0
    for it in range(9):
        accum = 3 if it < 6 else 2
        env.rec(f"loss {it}", micro(env.randn(4, 4), env.randint(0, 3, (4,)), accum))
        if it % accum == accum - 1:
            update(n_updates % 2 == 0)
            n_updates += 1
        env.rec(f"grads {it}", [p.grad for p in model.parameters()])
    env.rec("params", dict(model.state_dict()))


def parameters_replaced(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)))

    def loss_backward(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss.detach()

    step = env.step(loss_backward)
    for it in range(6):
        if it == 2:
            model[2].weight = nn.Parameter(model[2].weight.detach() * 2)
        if it == 3:
            model[2].bias.data = model[2].bias.data + 1
        if it == 4:     # (.data of another layout: two columns repeated)
            w = model[0].weight.data
            model[0].weight.data = torch.cat([w[:, :2], w[:, :2]], 1)
        env.rec(f"loss {it}", step(env.randn(5, 4), env.randint(0, 3, (5,))))
        env.rec(f"grads {it}", [p.grad for p in model.parameters()])
        model.zero_grad()


def sampled_labels_then_train(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5),
                                   nn.Linear(8, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def sample(n):
        probs = torch.softmax(model(torch.randn(n, 4)), -1)
        return torch.multinomial(probs, 1).squeeze(1)

    # (sample's result, a view of its kernel's output, is an input train writes beside:
    # the overlap check before the write was given the RNG state's position, IndexError)
    sample, train = env.step(sample), env.step(_train_step(torch, model, opt, F.cross_entropy))
    for it in range(6):
        x = env.randn(6, 4)
        with torch.no_grad():
            y = sample(6)
        env.rec(f"labels {it}", y, cross=False)
        env.rec(f"loss {it}", train(x, y), cross=False)
    env.rec("params", dict(model.state_dict()), cross=False)


def between_forward_and_backward(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)))
    loss_of = env.step(lambda x, y: F.cross_entropy(model(x), y))
    log = []
    for it in range(6):
        loss = loss_of(env.randn(5, 4), env.randint(0, 3, (5,)))
        # (after the compiled forward, before the backward the caller runs)
        handles = []
        if it == 1:
            handles.append(model[0].weight.register_hook(lambda g: g * 10))
        if it == 2:
            handles.append(model[2].bias.register_post_accumulate_grad_hook(
                lambda p: log.append(p.grad.sum())))
        if it == 3:
            loss.retain_grad()
            handles.append(loss.register_hook(lambda g: g * 2))
        if it == 4:
            with torch.no_grad():
                model[2].weight.mul_(1.0)   # (a saved tensor's version moved: raises)
        if it == 5:
            model[0].bias.requires_grad_(False)
        try:
            loss.backward()
            env.rec(f"grads {it}", [p.grad for p in model.parameters()])
        except RuntimeError:
            env.rec(f"grads {it}", "raised")
        if it == 3:
            env.rec("loss.grad", loss.grad)
        for h in handles:
            h.remove()
        model.zero_grad()
        model[0].bias.requires_grad_(True)
    env.rec("post-accumulate log", log)


def meters_over_batch_sizes(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Meter:
        def __init__(self):
            self.n, self.total, self.correct, self.sizes = 0, 0.0, 0, []

    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    meter, running = Meter(), torch.zeros(3)

    def train_step(x, y):
        out = model(x)
        loss = F.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        b = x.shape[0]      # (the state the step writes depends on the batch's size)
        meter.n += b
        meter.total += loss.item() * b
        meter.correct += (out.argmax(1) == y).sum().item()
        meter.sizes.append(b)
        with torch.no_grad():
            running.add_(out.mean(0) * b / 10)
        return loss.detach(), b * 2

    step = env.step(train_step)
    for it, b in enumerate([8, 8, 8, 5, 8, 8, 3, 8, 6, 6, 8]):
        env.rec(f"out {it}", step(env.randn(b, 4), env.randint(0, 3, (b,))))
        env.rec(f"meter {it}", (meter.n, meter.total, meter.correct, running))
    env.rec("sizes", list(meter.sizes))
    env.rec("params", dict(model.state_dict()))
    if env.compiled:    # (the first size, then a size template: meter.n a graph input)
        assert env.steps[0].n_traces <= 2, env.steps[0].n_traces


PROGRAMS = {f.__name__: f for f in (
    buffers_list_dict, add_param_group, replace_submodule, hooks_mid_training, rng_reseeded,
    freeze_unfreeze, clip_value_then_hooks, accumulate_then_update, parameters_replaced,
    sampled_labels_then_train, between_forward_and_backward, meters_over_batch_sizes)}

# (the default run keeps the quickest; the others, 0.7-4 s each with a cold kernel
# cache, are marked slow)
SLOW = ('accumulate_then_update', 'clip_value_then_hooks', 'sampled_labels_then_train',
        'meters_over_batch_sizes', 'freeze_unfreeze')


@pytest.mark.parametrize("name, program", program_params(PROGRAMS, slow=SLOW))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
