"""Random numbers and structure across calls of a compiled training step: dropout in
train and eval mode, a generator object, manual_seed and fork_rng inside the step, in-place
random fills; a submodule replaced, a parameter added to a group, a parameter group's
params list edited between calls: torch, llgrad eager (PyTorch's generator, draw for draw)
and llgrad.compile over six calls (stateful_harness_s70_a11.check)."""
import pytest

pytest.importorskip("torch")
from stateful_harness_s70_a11 import check, randn  # noqa: E402
from test_stateful_optim_s70_a11 import _observed, model_of  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile or two a case)


def xy(i):
    return randn(10 + i, 5, 4), randn(20 + i, 5, 2)



def dropout_step(lib, toggle_eval=False):
    lib.manual_seed(7)
    model = model_of(lib)
    drop = lib.nn.Dropout(0.3)
    opt = lib.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = (model(drop(x)) - y).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    def between(i):
        if toggle_eval:
            drop.train(i % 2 == 1)
    return dict(step=step, state=lambda: [_observed(model, opt), lib.rand(2)], between=between)


def dropout_train(lib):
    return dropout_step(lib)


def dropout_eval_toggled(lib):
    return dropout_step(lib, True)


def generator_object(lib):
    g = lib.Generator().manual_seed(11)
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)

    def step(x, y):
        noise = lib.randn(x.shape, generator=g) * 0.1
        loss = ((x + noise) @ w - y).pow(2).sum()
        loss.backward()
        return loss, noise
    return dict(step=step, state=lambda: [w.grad, g.initial_seed()])


def manual_seed_inside(lib):
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)
    k = [0]

    def step(x, y):
        k[0] += 1
        lib.manual_seed(k[0])
        m = (lib.rand(x.shape) > 0.5).float()
        return ((x * m) @ w - y).abs().sum()
    return dict(step=step, state=lambda: [lib.rand(2)])


def fork_rng_inside(lib):
    lib.manual_seed(3)
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)

    def step(x, y):
        with lib.random.fork_rng():
            lib.manual_seed(5)
            a = lib.randn(4, 2)
        b = lib.randn(4, 2)
        return (x @ (w + a + b) - y).sum()
    return dict(step=step, state=lambda: [lib.rand(2)])


def random_fills(lib):
    lib.manual_seed(4)
    w = lib.tensor(randn(1, 4, 2), requires_grad=True)
    buf = lib.empty(4, 2)

    def step(x, y):
        buf.normal_(0, 0.1)
        m = lib.empty(3, 2).bernoulli_(0.7)
        p = lib.randperm(4)
        return ((x[:, p] @ (w + buf)) * m - y).pow(2).sum(), p
    return dict(step=step, state=lambda: [buf, lib.rand(2)])


def submodule_replaced(lib):
    model = model_of(lib)

    def step(x, y):
        return (model(x) - y).pow(2).mean()

    def between(i):
        if i == 2:
            model[2] = lib.nn.Linear(3, 2)
            with lib.no_grad():
                model[2].weight.copy_(lib.tensor(randn(50, 2, 3)))
                model[2].bias.copy_(lib.tensor(randn(51, 2)))
        if i == 3:
            model[1] = lib.nn.ReLU()
    return dict(step=step, state=lambda: [], between=between)


def param_added_to_group(lib):
    model = model_of(lib)
    opt = lib.optim.Adam(model[0].parameters(), lr=0.01)

    def step(x, y):
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    def between(i):
        if i == 1:
            opt.param_groups[0]["params"].append(model[2].weight)
        if i == 3:
            opt.param_groups[0]["params"].pop(0)
    return dict(step=step, state=lambda: [list(model.parameters())], between=between)


CASES = [dropout_train, dropout_eval_toggled, generator_object, manual_seed_inside,
         fork_rng_inside, random_fills, submodule_replaced, param_added_to_group]

# (cases compile runs eagerly, and the reason its warning gives)
EAGER = {generator_object: "llgrad.Generator object", manual_seed_inside: "manual_seed()",
         fork_rng_inside: "get_rng_state()"}


@pytest.mark.parametrize("make", CASES, ids=lambda f: f.__name__)
def test_rng_and_structure(make):
    check(make, xy, compiled_warns=EAGER.get(make), atol=1e-5)
