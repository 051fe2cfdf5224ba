"""Python numbers given to a compiled function that change between calls (an annealing
weight, a temperature, a step count) become graph inputs after their second value
(compile/symbolic_args.py): compiled calls equal eager ones for every value, bit for bit,
and a number used only in arithmetic costs at most one more trace; one whose value steers
Python (an index, a size, an `if`, math.*, an op's argument) is guarded by value, as before,
and each call still gives eager's result and effects."""
import math
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F

VALUES = [0.5, 1.25, -3.0, 0.0, -0.0, 2.0 ** 60, 1e-300, 7.0, float("inf"), float("nan")]
INTS = [1, 2, -3, 0, 5, 2 ** 40, 7]


def _x(dtype="float32"):
    a = np.linspace(-2, 2, 12).reshape(3, 4)
    return llgrad.tensor(a.astype(dtype))


def _same(a, b):
    if isinstance(a, llgrad.Tensor):
        assert isinstance(b, llgrad.Tensor) and a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
        assert a.requires_grad == b.requires_grad
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        assert type(a) is type(b) and repr(a) == repr(b)


def _check(fn, values, args=(), max_traces=None, dtype="float32"):
    """fn(x, *args, n) compiled and eagerly for every n: the same results (or errors)."""
    cf = llgrad.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in values:
            outs = []
            for f in (fn, cf):
                try:
                    outs.append(f(_x(dtype), *args, n))
                except Exception as e:          # noqa: BLE001
                    outs.append((type(e).__name__, str(e).split("\n")[0]))
            _same(outs[0], outs[1])
    if max_traces is not None:
        assert cf.n_traces <= max_traces, cf.n_traces
    return cf


ARITHMETIC = {
    "scale": lambda x, n: x * n,
    "reflected": lambda x, n: n * x + (n - x) - x / 3 * n,
    "divide": lambda x, n: x / (n + 10.0),
    "python arithmetic": lambda x, n: x * (n * 0.5 + 1) - (2 - n) / 4,
    "negated": lambda x, n: x + (-n) + abs(n),
    "compared": lambda x, n: ((x > n), (n <= x), x == n, llgrad.where(x < n, x, x * 2)),
    "chained": lambda x, n: x.mul(n).add(n).sub(n),
}


@pytest.mark.parametrize("name", sorted(ARITHMETIC))
def test_a_number_in_arithmetic_traces_at_most_twice(name):
    _check(ARITHMETIC[name], VALUES[:4] + VALUES[5:], max_traces=2)
    _check(ARITHMETIC[name], INTS, max_traces=2)


@pytest.mark.parametrize("dtype", ["float64", "int64", "int32", "bool", "float16"])
def test_the_number_is_read_as_torch_reads_a_python_number(dtype):
    """x * n and x + n with n a float, then an int: the dtype and the values are eager's (an
    int tensor times a float is float32; a uint8/int32 with a big int wraps eagerly)."""
    _check(lambda x, n: (x * n, x + n, x > n), [0.5, 1.5, -2.25, 3.0], dtype=dtype)
    _check(lambda x, n: (x * n, x - n, x < n), [1, 2, -7, 300, 2 ** 31 + 5], dtype=dtype)


ESCAPING = {
    "index": lambda x, n: x[:, : int(n)],
    "range": lambda x, n: sum(x[i % 3] for i in range(int(abs(n)) % 5)),
    "if": lambda x, n: x * 2 if n > 0.7 else x - 1,
    "math": lambda x, n: x * math.exp(min(n, 5.0)),
    "float": lambda x, n: x * float(n),
    "format": lambda x, n: (x, f"{n:.3f}"),
    "full": lambda x, n: llgrad.full((2,), n),
    "dropout p": lambda x, n: F.dropout(x, p=min(abs(n), 0.9) / 2, training=False),
    "clamp": lambda x, n: x.clamp(min=n),
    "pow": lambda x, n: x * n ** 2 + 2.0 ** n,
    "floordiv": lambda x, n: x * (n // 2) + n % 3,
    "alpha": lambda x, n: x.add(x, alpha=n),
    "numpy": lambda x, n: x * np.float32(n),
    "returned": lambda x, n: (x * n, n),
    "returned arithmetic": lambda x, n: (x, n * 2, [n + 1]),
    "type checked": lambda x, n: x * n if isinstance(n, float) else x - 1,
    "exact type": lambda x, n: x * n if type(n) is float else x - 1,
    "number abc": lambda x, n: x + (n if isinstance(n, __import__("numbers").Real) else 0),
    "tensor of it": lambda x, n: x + llgrad.tensor([n, n]).sum(),
    "in place": lambda x, n: x.mul_(n).add_(n),
}


@pytest.mark.parametrize("name", sorted(ESCAPING))
def test_a_number_whose_value_is_read_is_guarded_and_still_right(name):
    _check(ESCAPING[name], [0.25, 1.5, 0.75, 3.0, 0.25, 2.0])
    _check(ESCAPING[name], [1, 2, 3, 1, 4])


def test_a_number_stored_by_the_function_is_the_number():
    """A dynamic number put into a list or onto an object inside the function is there as
    the Python number eager puts (the traced run is not kept; the call traced again)."""
    seen = []

    class Box:
        pass
    box = Box()

    def f(x, beta):
        seen.append(beta)
        box.beta = beta * 2
        return x * beta
    cf = llgrad.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for b in (0.5, 0.25, 0.125, 1.5):
            out = cf(_x(), b)
            np.testing.assert_array_equal(out.numpy(), (_x() * b).numpy())
            assert type(seen[-1]) is float and seen[-1] == b
            assert type(box.beta) is float and box.beta == b * 2
    assert len(seen) == 4


def test_a_training_step_with_an_annealed_weight_is_eager_and_traces_twice():
    """A VAE-style step: loss = recon + beta * kl, beta annealed every step, SGD inside.
    Parameters and losses are eager's at every step; two traces in all."""
    def run(compiled):
        llgrad.manual_seed(0)
        enc = llgrad.nn.Linear(6, 4)
        opt = llgrad.optim.SGD(enc.parameters(), lr=0.1, momentum=0.9)

        def step(x, beta):
            opt.zero_grad()
            h = enc(x)
            loss = (h - 1).pow(2).mean() + beta * h.pow(2).sum() / x.shape[0]
            loss.backward()
            opt.step()
            return loss.detach()
        f = llgrad.compile(step) if compiled else step
        x = llgrad.randn(5, 6)
        losses = [f(x, min(1.0, k / 7)) for k in range(12)]
        return losses, [p.detach().clone() for p in enc.parameters()], f
    want, wparams, _ = run(False)
    got, gparams, cf = run(True)
    for a, b in zip(want + wparams, got + gparams):    # (reductions: summation order)
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-7)
    assert cf.n_traces <= 3         # (the first step untraced, the second traced, one more)


def test_a_number_and_gradients():
    """x * beta with x requiring grad: the gradient is beta, for every beta."""
    def f(x, beta):
        y = (x * beta).sum()
        y.backward()
        return y.detach()
    cf = llgrad.compile(f)
    for b in (0.5, 1.5, -2.0, 3.25):
        xs = [_x().requires_grad_() for _ in range(2)]
        outs = [f(xs[0], b), cf(xs[1], b)]
        _same(outs[0], outs[1])
        _same(xs[0].grad, xs[1].grad)
    assert cf.n_traces <= 2


def test_an_exception_in_a_traced_call_with_a_stand_in_is_eagers():
    def f(x, n):
        if x.shape[0] == 3:
            raise ValueError(f"bad {n}")
        return x * n
    _check(f, [1.0, 2.0, 3.0])


def test_a_dynamic_number_with_state_changed_between_calls():
    """A compiled module whose forward takes a temperature that changes every call, while
    between calls the program switches train/eval, sets an attribute, adds a forward hook,
    writes a parameter and a captured NumPy array in place, and changes the optimiser's lr:
    every call's result, the parameters and the hook's record are eager's."""
    table = np.linspace(0.5, 1.5, 4).astype(np.float32)

    class Net(llgrad.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.drop, self.scale = llgrad.nn.Linear(4, 4), llgrad.nn.Dropout(0.3), 1.0

        def forward(self, x, temp):
            w = llgrad.from_numpy(table)
            return (self.drop(self.lin(x * w)) * self.scale / temp).softmax(-1)

    def run(compiled):
        llgrad.manual_seed(0)
        net = Net()
        opt = llgrad.optim.SGD(net.parameters(), lr=0.1)
        seen = []
        f = llgrad.compile(net) if compiled else net
        x = llgrad.randn(3, 4)
        outs = []
        for k in range(10):
            if k == 3:
                net.eval()
            if k == 5:
                net.scale = 2.0
                net.register_forward_hook(lambda m, a, out: seen.append(out.sum().item()))
            if k == 6:
                with llgrad.no_grad():
                    net.lin.weight.mul_(0.5)
                table[1] += 0.25
            if k == 7:
                net.train()
                opt.param_groups[0]["lr"] = 0.05
            out = f(x, 0.5 + k / 7)
            loss = out[:, 0].sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            outs.append(out.detach().clone())
        return outs + [p.detach().clone() for p in net.parameters()], seen
    saved = table.copy()
    want, want_seen = run(False)
    table[...] = saved
    got, got_seen = run(True)
    for a, b in zip(want, got):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got_seen, want_seen, rtol=1e-6)
