"""Compile-contract adversary s64 (c7), hooks and random numbers: each program runs with torch
(the oracle), llgrad eagerly and llgrad.compile in lockstep (contract_harness_sweep7.runs), and
every observation of every call must match: results, .grad, parameters after optimizer steps,
the hooks that ran with their arguments and order, and the random generator's state after each
call. Hooks: module forward pre/post hooks (with kwargs, prepend, always_call), full backward
(pre) hooks on submodules, hooks added, removed and reading changed closures between calls,
tensor hooks and retain_grad inside the compiled function, post-accumulate-grad hooks running
an optimizer per parameter. Random numbers: dropout with manual_seed inside the step, Generator
objects, fork_rng, get/set_rng_state around calls, randperm/multinomial in a training step,
and each sampling op of the default generator. Calls that cannot be exact run eagerly with a
warning; those programs also check the warning."""
import pytest
from contract_harness_sweep7 import runs

torch = pytest.importorskip("torch")


def _mlp(T, dims=(3, 4, 2), act="Tanh"):
    T.manual_seed(0)
    return T.nn.Sequential(T.nn.Linear(dims[0], dims[1]), getattr(T.nn, act)(),
                           T.nn.Linear(dims[1], dims[2]))


def _x(T, i):
    return T.arange(6.0).reshape(2, 3) / (i + 1) - 1


def hooks_pre_post(T, C, see):
    m, log = _mlp(T), []
    m[0].register_forward_pre_hook(lambda mod, inp: log.append(inp[0].sum()))
    m[2].register_forward_hook(lambda mod, inp, out: out * 2)
    opt = T.optim.SGD(m.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad(); l = m(x).pow(2).sum(); l.backward(); opt.step()
        return l
    s = C(step)
    for i in range(4):
        see(s(_x(T, i)), m[0].weight, m[2].bias.grad)
    see(log)


def full_backward_hooks(T, C, see):
    m, log = _mlp(T), []
    m[1].register_full_backward_hook(lambda mod, gi, go: log.append(("tanh", gi[0], go[0])))
    m[2].register_full_backward_hook(lambda mod, gi, go: (gi[0] * 0.5,))
    m[2].register_full_backward_pre_hook(lambda mod, go: (go[0] * 3,))

    def step(x):
        l = m(x).pow(2).sum(); l.backward()
        return l
    s = C(step)
    for i in range(4):
        see(s(_x(T, i).requires_grad_()), m[0].weight.grad)
    see(log)


def tensor_hooks_inside(T, C, see):
    w, log = T.ones(3, requires_grad=True), []

    def f(x):
        y = x * w
        y.register_hook(lambda g: log.append(g))
        z = y.exp()
        z.register_hook(lambda g: g * 2)
        z.retain_grad()
        l = z.sum(); l.backward()
        return l, z.grad
    s = C(f)
    for i in range(4):
        see(s(T.arange(3.0) * i / 4), w.grad)
    see(log)


def post_accumulate_grad_hooks(T, C, see):
    m, log = _mlp(T), []
    for n, p in m.named_parameters():
        p.register_post_accumulate_grad_hook(lambda p, n=n: log.append((n, p.grad.sum())))
    opt = T.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def step(x):
        opt.zero_grad(); l = m(x).pow(2).sum(); l.backward(); opt.step()
        return l
    s = C(step)
    for i in range(4):
        see(s(_x(T, i)), list(m.parameters()))
    see(log)


def optimizer_in_backward(T, C, see):
    """The per-parameter optimizer run by post-accumulate-grad hooks (grads freed at once)."""
    m, order = _mlp(T, (3, 4, 1)), []
    opts = {p: T.optim.Adam([p], lr=0.1) for p in m.parameters()}

    def hook(p):
        order.append(tuple(p.shape)); opts[p].step(); opts[p].zero_grad(set_to_none=True)
    for p in m.parameters():
        p.register_post_accumulate_grad_hook(hook)

    def step(x, y):
        l = (m(x) - y).pow(2).mean(); l.backward()
        return l
    s = C(step)
    for i in range(4):
        see(s(T.ones(5, 3) * i, T.ones(5, 1)), list(m.parameters()), [p.grad for p in m.parameters()])
    see(order)


def hooks_changed_between_calls(T, C, see):
    m, log, k = _mlp(T), [], [1.0]
    m[0].register_forward_pre_hook(lambda mod, a: (a[0] + k[0],))
    m[0].register_forward_hook(lambda mod, a, kw, o: o * k[0], with_kwargs=True, prepend=True)

    def step(x):
        l = m(x).pow(2).sum(); l.backward()
        return l
    s = C(step)
    handles = []
    for i in range(7):
        k[0] = 1.0 + (i % 3) / 2
        if i == 2:
            handles.append(m[2].register_forward_hook(lambda mod, a, o: o * 0.5))
        if i == 3:
            handles.append(m[1].register_full_backward_hook(
                lambda mod, gi, go: log.append(go[0])))
        if i == 4:
            handles[0].remove()
        if i == 5:
            handles[1].remove()
            m[2].weight.register_post_accumulate_grad_hook(lambda p: log.append(p.grad * 1))
        see(s(_x(T, i)), m[0].weight.grad)
    see(log)


def module_state_in_hooks(T, C, see):
    T.manual_seed(0)
    m = T.nn.Linear(3, 2)
    m.calls = 0

    def pre(mod, inp):
        mod.calls += 1
        with T.no_grad():
            mod.weight.clamp_(-0.3, 0.3)
    m.register_forward_pre_hook(pre)
    acts = []
    m.register_forward_hook(lambda mod, a, o: acts.append(o))
    opt = T.optim.SGD(m.parameters(), lr=0.5)

    def step(x):
        opt.zero_grad(); l = m(x).pow(2).sum(); l.backward(); opt.step()
        return l
    s = C(step)
    for i in range(4):
        see(s(T.ones(2, 3) * (i + 1)), m.weight, m.calls)
    see(acts)


def always_call_hook_on_raise(T, C, see):
    T.manual_seed(0)

    class M(T.nn.Module):
        def __init__(self):
            super().__init__(); self.l = T.nn.Linear(3, 2)

        def forward(self, x):
            y = self.l(x)
            if (y.abs() > 100).any():
                raise ValueError("activation too big")
            return y
    m, log = M(), []
    m.register_forward_hook(lambda mod, a, o: log.append(len(log)), always_call=True)

    def step(x):
        l = m(x).sum(); l.backward()
        return l
    s = C(step)
    for i in range(4):
        try:
            see(s(T.ones(2, 3) * (1000 if i == 2 else i)))
        except ValueError as e:
            see(e)
        see(m.l.weight.grad, list(log))


# -- random numbers: programs that compile, and programs that run eagerly with a warning --

def dropout_steps_rng_state(T, C, see):
    m = _mlp(T, (4, 8, 1), "ReLU")
    m.insert(2, T.nn.Dropout(0.3))
    opt = T.optim.SGD(m.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad(); l = m(x).pow(2).mean(); l.backward(); opt.step()
        return l, T.randperm(4), T.randint(0, 5, (2,)), T.multinomial(T.ones(4), 2)
    s = C(step)
    for i in range(4):
        see(s(T.ones(3, 4)), T.get_rng_state())
        if i == 1:
            with T.random.fork_rng():
                T.manual_seed(7)
                see(s(T.ones(3, 4)))
            see(T.get_rng_state())
        if i == 2:
            st = T.get_rng_state()
            see(s(T.ones(3, 4)))
            T.set_rng_state(st)
    see(list(m.parameters()))


def randperm_multinomial_step(T, C, see):
    T.manual_seed(1)
    w = T.ones(6, requires_grad=True)

    def step(x, p):
        idx = T.randperm(6)
        pick = T.multinomial(p, 3, replacement=True)
        l = (x[idx] * w).sum() + w[pick].sum() * p.sum()
        l.backward()
        return l, idx, pick
    s = C(step)
    for i in range(4):
        T.manual_seed(i // 2)
        see(s(T.arange(6.0) * (i + 1), T.arange(1.0, 7.0)), w.grad)


def seed_inside_step(T, C, see):
    m = _mlp(T, (4, 8, 1))
    m.insert(1, T.nn.Dropout(0.5))
    opt = T.optim.SGD(m.parameters(), lr=0.1)

    def step(x, seed):
        T.manual_seed(seed)
        opt.zero_grad(); l = m(x).pow(2).mean(); l.backward(); opt.step()
        return l
    s = C(step)
    for i in range(4):
        see(s(T.ones(5, 4) * (i + 1), i % 2), T.rand(2))


def generator_objects(T, C, see):
    g1, g2 = T.Generator().manual_seed(1), T.Generator().manual_seed(2)

    def f(x, g):
        return x * T.rand(3, generator=g) + T.randn(3, generator=g1), T.randperm(4, generator=g)
    s = C(f)
    for i in range(4):
        see(s(T.ones(3), g1 if i % 2 else g2), T.rand(1))
    see(T.rand(3, generator=g1), T.rand(3, generator=g2))


def rng_state_read_inside(T, C, see):
    T.manual_seed(5)

    def f(x):
        with T.random.fork_rng():
            T.manual_seed(0)
            a = T.rand(3)
        st = T.get_rng_state()
        b = T.rand(3)
        T.set_rng_state(st)
        return x + a + b - T.rand(3)
    s = C(f)
    for i in range(3):
        see(s(T.ones(3)), T.rand(1))


COMPILING = [hooks_pre_post, full_backward_hooks, tensor_hooks_inside, post_accumulate_grad_hooks,
             optimizer_in_backward, hooks_changed_between_calls, module_state_in_hooks,
             always_call_hook_on_raise, dropout_steps_rng_state, randperm_multinomial_step]
# (the reason each of these runs eagerly: manual_seed / a Generator / get_rng_state inside)
EAGER = {seed_inside_step: "manual_seed()", generator_objects: "enerator",
         rng_state_read_inside: "rng_state()"}


@pytest.mark.parametrize("prog", COMPILING, ids=lambda p: p.__name__)
def test_compiled_program_equals_eager_and_torch(prog):
    runs(lambda T, C, see: prog(T, C, see), torch)


@pytest.mark.parametrize("prog", [hooks_pre_post, optimizer_in_backward, dropout_steps_rng_state],
                         ids=lambda p: p.__name__)
def test_native_program_equals_eager_and_torch(prog):
    runs(lambda T, C, see: prog(T, C, see), torch, backend="llvm")


@pytest.mark.parametrize("prog", list(EAGER), ids=lambda p: p.__name__)
def test_uncompilable_rng_runs_eagerly_with_warning(prog):
    own = runs(lambda T, C, see: prog(T, C, see), torch)
    assert any("running eagerly" in w and EAGER[prog] in w and __file__.split("/")[-1] in w
               for w in own), own
