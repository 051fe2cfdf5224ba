"""Session 68 (f6): draws from Python's random module (and NumPy's global generator) inside a
compiled function are made again by each compiled call (compile/py_draws.py), so the
numbers, the branches they decide, the gradients and the generators' states after the calls
equal eager's (and PyTorch's), with a trace per outcome of a comparison, not one per call;
draws compile cannot follow (an index, random.seed, random.shuffle, a function bound before
the trace) keep the eager fallback with its warning."""
import random
import warnings
from random import random as bound_random

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _run(lib, fn, n, args, seed=0):
    """fn(*args(lib, i)) for i < n from seeded generators -> ([results as NumPy / numbers],
    the generators' next draws, the llgrad warnings)."""
    random.seed(seed)
    np.random.seed(seed)
    out = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(n):
            r = fn(*args(lib, i))
            out.append(tuple(x.detach().numpy().copy() if hasattr(x, "numpy") else x
                             for x in (r if isinstance(r, tuple) else (r,))))
    return out, (random.random(), np.random.rand()), [
        str(w.message) for w in caught if "llgrad" in str(w.message)]


def _same(a, b, exact=True):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            if isinstance(u, np.ndarray):
                if exact:
                    np.testing.assert_array_equal(u, v)
                else:
                    np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-6)
            else:
                assert u == v and type(u) is type(v), (u, v)


def _check(make, n, args, max_traces, warned=None):
    """make(lib) -> fn; torch, llgrad eager and llgrad compiled runs compared."""
    t_out, t_next, _ = _run(torch, make(torch), n, args)
    e_out, e_next, e_warn = _run(llgrad, make(llgrad), n, args)
    cf = llgrad.compile(make(llgrad))
    c_out, c_next, c_warn = _run(llgrad, cf, n, args)
    _same(t_out, e_out, exact=False)
    _same(e_out, c_out, exact=False)     # (a fused sum may round otherwise)
    assert t_next == e_next == c_next
    assert not e_warn
    if warned is None:
        assert not c_warn, c_warn
        assert 1 <= cf.n_traces <= max_traces, cf.n_traces
    else:
        assert len(c_warn) == 1 and warned in c_warn[0], c_warn
    return cf


def _x(lib, i):
    return (lib.arange(4.0) - i,)


def test_branch_on_draw_guarded_per_outcome():
    """`if random.random() < ratio` with the ratio changing per call (a dynamic number):
    one entry per outcome, the draws made by every compiled call."""
    def make(lib):
        def f(x, ratio):
            y = x * 2
            if random.random() < ratio:
                y = y + 1
            return y.sum()
        return f
    cf = _check(make, 10, lambda lib, i: (lib.ones(3), 0.9 - 0.05 * i), max_traces=3)
    assert all(len(e.draws) == 1 for e in cf.entries)


def test_arithmetic_and_gradient_of_draws():
    """A loss scaled by random.uniform, a randint and a gauss: graph inputs (no trace per
    number), the gradient through the drawn scale equal to eager's."""
    def make(lib):
        w = lib.tensor([0.5, -1.0, 2.0, 0.25], requires_grad=True)

        def f(x):
            w.grad = None
            loss = (w * x).pow(2).sum() * random.uniform(0.5, 1.5) + random.randint(0, 5)
            loss = loss + random.gauss(0.0, 1.0)     # (gauss keeps a second number: state)
            loss.backward()
            return loss.detach(), w.grad.clone()
        return f
    _check(make, 6, _x, max_traces=2)     # (w.grad None, then set: two keys)


def test_randint_choice_numpy_and_returned_draw():
    """randint compared, choice of floats, NumPy's np.random.rand() / uniform(), and a draw
    returned as a Python number."""
    def make(lib):
        def f(x):
            y = x * random.choice([0.5, 1.5, 2.5])
            if random.randint(0, 2) == 1:
                y = y - 3
            y = y * np.random.uniform(0.5, 1.0)
            if np.random.rand() < 0.3:
                y = y.exp()
            return y.sum(), random.random()
        return f
    _check(make, 10, _x, max_traces=6)


def test_draws_beside_llgrad_generator():
    """A draw after the trace has made llgrad's RNG state an input (torch.rand, dropout):
    both replayed, llgrad's generator state equal to eager's."""
    def make(lib):
        def f(x):
            a = lib.rand(4)
            r = random.random()
            return a * r + lib.nn.functional.dropout(x, 0.5) * (1 if r < 0.5 else 2)
        return f

    def run(fn):
        llgrad.manual_seed(3)
        out, nxt, warn = _run(llgrad, fn, 6, _x)
        return out, nxt, warn, llgrad.rand(2).numpy()
    e = run(make(llgrad))
    cf = llgrad.compile(make(llgrad))
    c = run(cf)
    _same(e[0], c[0], exact=False)
    assert e[1] == c[1] and not c[2]
    np.testing.assert_array_equal(e[3], c[3])
    assert cf.n_traces <= 2


@pytest.mark.slow      # (~6 s: a trace and its LLVM build per outcome pattern; the default
def test_training_step_with_teacher_forcing_draw():     # run has sweep8's luong program)
    """The seq2seq tutorial's per-call decision inside a compiled training step (SGD, a GRU
    cell unrolled): parameters equal to PyTorch's after the steps."""
    def make(lib):
        lib.manual_seed(0)
        cell = lib.nn.GRUCell(3, 4)
        head = lib.nn.Linear(4, 3)
        params = list(cell.parameters()) + list(head.parameters())
        g = np.random.default_rng(0)
        with lib.no_grad():
            for p in params:
                p.copy_(lib.tensor(g.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
        opt = lib.optim.SGD(params, lr=0.1)

        def step(x, ratio):
            h = lib.zeros(2, 4)
            inp, loss = x[:, 0], 0.0
            for t in range(3):
                h = cell(inp, h)
                out = head(h)
                loss = loss + ((out - x[:, t + 1]) ** 2).mean()
                inp = x[:, t + 1] if random.random() < ratio else out.detach()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss.detach(), params[0].detach().clone()
        return step

    def args(lib, i):
        x = np.random.default_rng(i).standard_normal((2, 4, 3)).astype(np.float32)
        return lib.tensor(x), 1.0 if i == 0 else 0.6
    t_out, t_next, _ = _run(torch, make(torch), 6, args)
    e_out, e_next, _ = _run(llgrad, make(llgrad), 6, args)
    cf = llgrad.compile(make(llgrad))
    c_out, c_next, c_warn = _run(llgrad, cf, 6, args)
    _same(t_out, e_out, exact=False)
    _same(e_out, c_out, exact=False)
    assert t_next == e_next == c_next and not c_warn
    assert cf.n_traces <= 6 and any(len(e.draws) == 3 for e in cf.entries)


@pytest.mark.parametrize("kind", ["index", "seed", "shuffle", "bound"])
def test_draws_compile_cannot_follow_run_eagerly(kind):
    """A drawn number used as an index, random.seed / random.shuffle inside, a draw through a
    name bound before the trace: eager's results, with the fallback's warning."""
    def make(lib):
        def f(x):
            if kind == "index":
                return x * [1.0, 2.0, 3.0][random.randint(0, 2)]
            if kind == "seed":
                random.seed(7)
                return x * random.random()
            if kind == "shuffle":
                order = [1, 2, 3]
                random.shuffle(order)
                return x * (order[0] + random.random())
            return x + (1 if bound_random() < 0.5 else 0)
        return f
    _check(make, 5, _x, max_traces=3, warned="Python's random module")


def test_draw_inside_tensor_if_is_left_as_python():
    """A draw inside a tensor-dependent `if`: that `if` is traced as Python (its condition a
    value guard, with its warning), the draws still replayed."""
    def make(lib):
        def f(x):
            if x.sum() > 0:
                y = x * (2 if random.random() < 0.5 else 3)
            else:
                y = x - 1
            return y
        return f
    _check(make, 6, lambda lib, i: (lib.arange(4.0) * (1 if i % 2 else -1),), max_traces=4,
           warned="tensor-dependent control flow left as Python")


def test_guard_miss_puts_random_state_back():
    """Two entries of one key (both outcomes seen): a call the first entry's guard refuses
    puts the draws back before the second entry draws them again."""
    def f(x):
        r = random.random()
        return x + 1 if r < 0.5 else x - 1

    cf = llgrad.compile(f)
    random.seed(0)
    x = llgrad.zeros(2)
    got = [cf(x).numpy()[0] for _ in range(12)]
    random.seed(0)
    want = [1.0 if random.random() < 0.5 else -1.0 for _ in range(12)]
    assert got == want and cf.n_traces == 2 and len(cf.entries) == 2


def test_branch_on_draw_in_a_differentiated_function():
    """A function the caller differentiates, its scale decided by a draw (the forward graph
    of the partition keeps the guard): gradients equal to PyTorch's, two traces."""
    def run(lib, fn):
        random.seed(5)
        w = lib.tensor([1.0, -0.5, 0.25], requires_grad=True)
        outs = []
        for i in range(8):
            loss = fn(lib, w, lib.arange(3.0) - i, 0.5)
            loss.backward()
            outs.append((loss.item(), w.grad.numpy().copy()))
        return outs, random.random()

    def f(lib, w, x, r):
        y = (w * x).tanh().sum()
        return y * (2.0 if random.random() < r else 3.0) + random.gauss(0, 1)
    cf = llgrad.compile(f)
    (t, t_next), (c, c_next) = run(torch, f), run(llgrad, cf)
    for (a, ga), (b, gb) in zip(t, c):
        assert abs(a - b) < 1e-5
        np.testing.assert_allclose(ga, gb, rtol=1e-5)
    assert t_next == c_next and cf.n_traces == 2
