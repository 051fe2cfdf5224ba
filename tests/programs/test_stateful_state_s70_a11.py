"""State a compiled function reads or writes, changed between calls: a captured tensor
(rebound, written in place), a module attribute (a number, a tensor, a flag), a global
Python number, a list appended to (and read), a buffer updated in place, a dict of running
figures, a module's train/eval mode and requires_grad of its parameters: torch, llgrad
eager and llgrad.compile over six calls (stateful_harness_s70_a11.check)."""
import pytest

pytest.importorskip("torch")
from stateful_harness_s70_a11 import check, randn  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile or two a case; the fast regressions are in
# test_stateful_regressions_s70_a11.py)


def xy(i):
    return randn(10 + i, 3, 4), randn(20 + i, 3, 2)


def linear(lib):
    lin = lib.nn.Linear(4, 2)
    with lib.no_grad():
        lin.weight.copy_(lib.tensor(randn(1, 2, 4)))
        lin.bias.copy_(lib.tensor(randn(2, 2)))
        lin.bias.copy_(lib.tensor(randn(2, 2)))
    return lin


def captured_tensor_written_between(lib):
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)
    scale = lib.ones(2)

    def step(x, y):
        loss = ((x @ w) * scale - y).pow(2).sum()
        loss.backward()
        return loss

    def between(i):
        scale.mul_(1.5)
        scale[0] = -i
    return dict(step=step, state=lambda: [w.grad, scale], between=between)


def captured_tensor_rebound_between(lib):
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)
    box = {"bias": lib.zeros(2)}

    def step(x, y):
        return ((x @ w) + box["bias"] - y).abs().sum()

    def between(i):
        box["bias"] = lib.full((2,), float(i)) if i % 2 else lib.tensor(randn(i, 2))
    return dict(step=step, state=lambda: [box["bias"]], between=between)


def captured_tensor_written_inside(lib):
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)
    total = lib.zeros(2)

    def step(x, y):
        out = x @ w
        total.add_(out.detach().sum(0))
        return (out * y).sum() + total.sum()
    return dict(step=step, state=lambda: [total])


def module_number_attribute_changed(lib):
    lin = linear(lib)
    lin.temperature = 1.0

    def step(x, y):
        loss = ((lin(x) / lin.temperature).softmax(-1) * y).sum()
        loss.backward()
        return loss

    def between(i):
        lin.temperature = 1.0 + 0.5 * i
    return dict(step=step, state=lambda: [lin.weight.grad], between=between)


def module_tensor_attribute_changed(lib):
    lin = linear(lib)
    lin.shift = lib.zeros(2)

    def step(x, y):
        return (lin(x) + lin.shift - y).pow(2).mean()

    def between(i):
        lin.shift = lin.shift + 0.25 if i % 2 else lib.tensor(randn(i, 2))
    return dict(step=step, state=lambda: [lin.shift], between=between)


def module_flag_changed(lib):
    lin = linear(lib)
    lin.use_relu = False

    def step(x, y):
        h = lin(x)
        if lin.use_relu:
            h = h.relu()
        return (h - y).pow(2).sum()

    def between(i):
        lin.use_relu = not lin.use_relu
    return dict(step=step, state=lambda: [], between=between)


G = {"alpha": 0.5}


def global_number_changed(lib):
    G["alpha"] = 0.5
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)

    def step(x, y):
        loss = (x @ w - y).pow(2).sum() * G["alpha"] + w.abs().sum() * (1 - G["alpha"])
        loss.backward()
        return loss

    def between(i):
        G["alpha"] = G["alpha"] * 0.8 + (0.3 if i == 2 else 0.0)
    return dict(step=step, state=lambda: [w.grad], between=between)


def python_counter_inside(lib):
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)
    st = {"t": 0, "ema": 0.0}

    def step(x, y):
        st["t"] += 1
        loss = (x @ w - y).pow(2).mean() * (0.9 ** st["t"])
        st["ema"] = 0.9 * st["ema"] + 0.1 * loss.item()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: [w.grad, st["t"], st["ema"]])


def list_appended_inside(lib):
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)
    log = []

    def step(x, y):
        loss = (x @ w - y).pow(2).mean()
        log.append(loss.item())
        log.append(loss.detach() * 2)
        return loss
    return dict(step=step, state=lambda: [len(log), log[-2], log[-1]])


def list_appended_and_read(lib):
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)
    hist = []

    def step(x, y):
        loss = (x @ w - y).pow(2).mean()
        prev = hist[-1] if hist else loss.detach()
        hist.append(loss.detach())
        return loss + 0.1 * prev, len(hist)
    return dict(step=step, state=lambda: [len(hist)])


def list_appended_between(lib):
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)
    extra = []

    def step(x, y):
        out = (x @ w - y).pow(2).mean()
        for e in extra:
            out = out + e
        return out

    def between(i):
        extra.append(lib.tensor(float(i)))
    return dict(step=step, state=lambda: [], between=between)


def buffer_updated_in_place(lib):
    class Norm(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", lib.zeros(4))
            self.register_buffer("count", lib.zeros((), dtype=lib.long))

        def forward(self, x):
            if self.training:
                with lib.no_grad():
                    self.mean.mul_(0.9).add_(x.mean(0), alpha=0.1)
                    self.count += 1
            return x - self.mean
    norm = Norm()
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)

    def step(x, y):
        loss = (norm(x) @ w - y).pow(2).sum()
        loss.backward()
        return loss

    def between(i):
        norm.train(i % 3 != 1)
    return dict(step=step, state=lambda: [norm.mean, norm.count, w.grad], between=between)


def batchnorm_train_eval(lib):
    bn = lib.nn.BatchNorm1d(4, momentum=0.3)
    lin = linear(lib)

    def step(x, y):
        loss = (lin(bn(x)) - y).pow(2).mean()
        loss.backward()
        return loss

    def between(i):
        bn.train(i % 2 == 1)
    return dict(step=step, state=lambda: [bn.running_mean, bn.running_var,
                                          bn.num_batches_tracked, bn.weight.grad,
                                          lin.weight.grad], between=between)


def frozen_then_unfrozen(lib):
    lin = linear(lib)
    opt = lib.optim.SGD(lin.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = (lin(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    def between(i):
        lin.weight.requires_grad_(i >= 2)
    return dict(step=step, state=lambda: [lin.weight, lin.bias, lin.weight.grad],
                between=between)


def weight_replaced_by_data(lib):
    lin = linear(lib)

    def step(x, y):
        loss = (lin(x) - y).pow(2).mean()
        loss.backward()
        return loss

    def between(i):
        lin.weight.data = lin.weight.data * 0.5
        lin.weight.grad = None
    return dict(step=step, state=lambda: [lin.weight, lin.weight.grad], between=between)


def hook_added_between(lib):
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)
    handles = []

    def step(x, y):
        loss = (x @ w - y).pow(2).sum()
        loss.backward()
        return loss

    def between(i):
        if i == 1:
            handles.append(w.register_hook(lambda g: g * 10))
        if i == 3:
            handles.pop().remove()
        w.grad = None
    return dict(step=step, state=lambda: [w.grad], between=between)


def default_argument_list(lib):
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)

    def step(x, y, seen=[]):        # noqa: B006  (the mutable default is the point)
        seen.append(1)
        return (x @ w - y).sum() * len(seen)
    return dict(step=step, state=lambda: [])


CASES = [captured_tensor_written_between, captured_tensor_rebound_between,
         captured_tensor_written_inside, module_number_attribute_changed,
         module_tensor_attribute_changed, module_flag_changed, global_number_changed,
         python_counter_inside, list_appended_inside, list_appended_and_read,
         list_appended_between, buffer_updated_in_place, batchnorm_train_eval,
         frozen_then_unfrozen, weight_replaced_by_data, hook_added_between,
         default_argument_list]

# (cases compile runs eagerly, and the reason its warning gives)
EAGER = {}


@pytest.mark.parametrize("make", CASES, ids=lambda f: f.__name__)
def test_state_between_calls(make):
    check(make, xy, compiled_warns=EAGER.get(make), atol=1e-5)
