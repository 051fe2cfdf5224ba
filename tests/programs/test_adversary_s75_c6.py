"""Session 75 (c6), adversarial: Python state a compiled step reads: a train() override
with side effects, a submodule's flag set after model.train(), getattr by a changing name,
a property reading a global list, iterators and itertools.count, random.Random reseeded,
branches on .grad is None, on len(optimizer.state), on a version counter and on .item(),
a class's forward swapped, a hook logging norms, a list on the module returned: torch,
llgrad eager and llgrad.compile call by call."""
import itertools
import random
import pytest

pytest.importorskip("torch")
from stateful_harness_s70_a11 import randn  # noqa: E402
from test_adversary_s75_c import net, observed, run_case, train_step  # noqa: E402

pytestmark = pytest.mark.torch


LOG = []


def custom_train_override(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(4, 2)
            self.k = 1.0
            self.switches = 0

        def train(self, mode=True):
            self.k = 2.0 if mode else 0.5
            self.switches += 1
            return super().train(mode)

        def forward(self, x):
            return self.fc(x) * self.k
    m = M()
    with lib.no_grad():
        m.fc.weight.copy_(lib.tensor(randn(747, 2, 4)))
        m.fc.bias.zero_()
    mode = [True]

    def step(x, y):
        m.train(mode[0])
        loss = (m(x) - y).pow(2).mean()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: observed(m, [m.k, m.switches, m.training]),
                between=lambda i: mode.__setitem__(0, i % 2 == 1))


def step_trains_flag_then_submodule_eval(lib):
    m = net(lib)
    m.insert(1, lib.nn.Dropout(0.999))
    drop_off = [False]

    def step(x, y):
        m.train()
        if drop_off[0]:
            m[1].eval()
        loss = (m(x) - y).pow(2).mean()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: observed(m, [m[1].training]),
                between=lambda i: drop_off.__setitem__(0, i % 2 == 0))


def getattr_by_name_changed(lib):
    m = net(lib)
    cfg = {"act": "tanh"}

    def step(x, y):
        loss = (getattr(lib, cfg["act"])(m(x)) - y).pow(2).mean()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: observed(m),
                between=lambda i: cfg.update(act=["sigmoid", "relu", "exp", "tanh"][i % 4]))


def property_reads_global_list(lib):
    LOG.clear()

    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(4, 2)

        @property
        def scale(self):
            return 1.0 + len(LOG)

        def forward(self, x):
            return self.fc(x) * self.scale
    m = M()
    with lib.no_grad():
        m.fc.weight.copy_(lib.tensor(randn(748, 2, 4)))
        m.fc.bias.zero_()
    return dict(step=train_step(lib, m), state=lambda: observed(m),
                between=lambda i: LOG.append(i))


def iterator_of_batches(lib):
    w = lib.tensor(randn(749, 4, 2), requires_grad=True)
    batches = iter([lib.tensor(randn(800 + k, 4, 2)) for k in range(6)])

    def step(x, y):
        t = next(batches)
        loss = (x @ (w * t) - y).pow(2).mean()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: [w.grad])


def itertools_count(lib):
    w = lib.tensor(randn(751, 4, 2), requires_grad=True)
    c = itertools.count(1)

    def step(x, y):
        k = next(c)
        loss = (x @ w * k - y).pow(2).mean()
        loss.backward()
        return loss, k
    return dict(step=step, state=lambda: [w.grad])


def python_random_reseeded(lib):
    w = lib.tensor(randn(752, 4, 2), requires_grad=True)
    rng = random.Random(0)

    def step(x, y):
        k = rng.random()
        loss = (x @ w * k - y).pow(2).mean()
        loss.backward()
        return loss, k

    def between(i):
        if i % 2:
            rng.seed(0)
    return dict(step=step, state=lambda: [w.grad], between=between)


def branch_on_grad_is_none(lib):
    m = net(lib)

    def step(x, y):
        k = 1.0 if m[0].weight.grad is None else 3.0
        loss = ((m(x) - y) * k).pow(2).mean()
        loss.backward()
        return loss

    def between(i):
        if i % 2:
            m.zero_grad()
    return dict(step=step, state=lambda: observed(m), between=between)


def branch_on_optimizer_state(lib):
    m = net(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        warm = len(opt.state) == 0
        loss = (m(x) - y).pow(2).mean() * (0.1 if warm else 1.0)
        loss.backward()
        opt.step()
        return loss, warm

    def between(i):
        if i == 2:
            opt.state.clear()
    return dict(step=step, state=lambda: observed(m), between=between)


def branch_on_version_counter(lib):
    w = lib.tensor(randn(753, 4, 2), requires_grad=True)
    buf = lib.zeros(2)

    def step(x, y):
        k = float(buf._version % 3)
        loss = (x @ w * k + buf - y).pow(2).mean()
        loss.backward()
        return loss, k

    def between(i):
        buf.add_(0.1)
    return dict(step=step, state=lambda: [w.grad])


def branch_on_item(lib):
    m = net(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.5)

    def step(x, y):
        opt.zero_grad()
        loss = (m(x) - y).pow(2).mean()
        if loss.item() > 1.0:
            loss = loss * 0.1
        loss.backward()
        opt.step()
        return loss
    return dict(step=step, state=lambda: observed(m))


def class_forward_swapped(lib):
    class A(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(x)
    m = A()
    with lib.no_grad():
        m.fc.weight.copy_(lib.tensor(randn(754, 2, 4)))
        m.fc.bias.zero_()

    def between(i):
        if i == 1:
            A.forward = lambda self, x: self.fc(x).tanh()
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def weight_hook_stores_grad_norms(lib):
    m = net(lib)
    norms = []
    m[0].weight.register_hook(lambda g: norms.append(float(g.norm())))
    return dict(step=train_step(lib, m), state=lambda: observed(m, norms))


def step_returns_module_attr_list(lib):
    m = net(lib)
    m.history = []

    def step(x, y):
        out = m(x)
        loss = (out - y).pow(2).mean()
        loss.backward()
        m.history.append(loss.detach())
        return loss, list(m.history)
    return dict(step=step, state=lambda: observed(m, m.history),
                between=lambda i: m.history.pop(0) if i == 2 else None)


python_random_reseeded.warns = "random"
iterator_of_batches.warns = "the call reaches an iterator"
itertools_count.warns = "the call reaches an iterator"
weight_hook_stores_grad_norms.warns = "the value read from a tensor"
branch_on_version_counter.warns = "Tensor._version"


CASES = [custom_train_override, step_trains_flag_then_submodule_eval,
         getattr_by_name_changed, property_reads_global_list, iterator_of_batches,
         itertools_count, python_random_reseeded, branch_on_grad_is_none,
         branch_on_optimizer_state, branch_on_version_counter, branch_on_item,
         class_forward_swapped, weight_hook_stores_grad_norms,
         step_returns_module_attr_list]


@pytest.mark.slow       # (a sweep: the fix's own case runs by default)
@pytest.mark.parametrize("make", CASES, ids=[f.__name__ for f in CASES])
def test_state_changed_between_calls(make):
    run_case(make)
