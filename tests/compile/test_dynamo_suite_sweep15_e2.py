"""Sweep 15 (helper E), part 2: programs in the manner of PyTorch's Dynamo tests
(test/dynamo: test_functions, test_misc, test_repros, test_modules, test_hooks,
test_autograd_function), each run with torch (the oracle), llgrad eagerly and llgrad.compile
over several calls with the state it reads changed between calls.
This part: Python control flow on values and shapes, closures, globals,
containers in and out, *args/**kwargs, in-place writes to inputs, modules' attributes.
Every observation must match (or the call runs eagerly with a warning)."""
import collections
import dataclasses

import pytest
from contract_harness_sweep7 import runs

torch = pytest.importorskip("torch")

E = (RuntimeError, ValueError, IndexError, TypeError, KeyError, AssertionError,
     ZeroDivisionError)


def _attempt(see, fn, *args):
    """fn(*args) seen, or the error it raised: its type and first line up to a hint, the
    library's name left out."""
    try:
        r = fn(*args)
    except E as e:
        see((type(e).__name__, str(e).splitlines()[0].split(" Hint")[0]
             .replace("torch.", "").replace("llgrad.", "")))
    else:
        see(r)


CONST = [1.5]


def _global_scale_changes(lib, wrap, see):
    g = {"s": 2.0}
    def f(x):
        return x * g["s"] + 1
    cf = wrap(f)
    for k in range(4):
        g["s"] = k * 0.5 if k != 2 else 3
        see(cf(lib.ones(3)))


def _module_global_list(lib, wrap, see):
    def f(x):
        return x + CONST[0]
    cf = wrap(f)
    for k in range(3):
        CONST[0] = k + 0.25
        see(cf(lib.arange(3.)))
    CONST[0] = 1.5


def _closure_nonlocal_counter(lib, wrap, see):
    n = 0
    def f(x):
        nonlocal n
        n += 1
        return x * n
    cf = wrap(f)
    for k in range(4):
        see(cf(lib.ones(2)), n)


def _shape_control_flow(lib, wrap, see):
    def f(x):
        if x.shape[0] > 2:
            return x.sum(0)
        return x * len(x)
    cf = wrap(f)
    for n in (1, 3, 2, 5):
        see(cf(lib.ones(n, 2)))


def _item_control_flow(lib, wrap, see):
    def f(x):
        v = x.sum().item()
        if v > 3:
            return x * v
        return x - v
    cf = wrap(f)
    for s in (1., 2., 0.5, 3.):
        see(cf(lib.ones(4) * s))


def _tolist_loop(lib, wrap, see):
    def f(x, y):
        out = y
        for v in x.tolist():
            out = out * v
        return out
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.tensor([1., 2. + k, 0.5]), lib.ones(2)))
        see(cf(lib.tensor([1., 2.]), lib.ones(2)))


def _namedtuple_io(lib, wrap, see):
    NT = collections.namedtuple("NT", "a b")
    def f(t):
        return NT(t.a + t.b, t.a * t.b)
    cf = wrap(f)
    for k in range(3):
        r = cf(NT(lib.ones(2) * k, lib.arange(2.)))
        see(type(r).__name__, r.a, r.b)


def _dataclass_io(lib, wrap, see):
    @dataclasses.dataclass
    class D:
        x: object
        scale: float = 1.0
    def f(d):
        d.x = d.x * d.scale
        return d.x.sum()
    cf = wrap(f)
    d = D(lib.ones(3))
    for k in range(4):
        d.scale = 1.0 + k
        see(cf(d), d.x)


def _dict_in_out(lib, wrap, see):
    def f(d):
        return {k: v * 2 for k, v in d.items() if k != "skip"}
    cf = wrap(f)
    for k in range(3):
        d = {"a": lib.ones(2) * k, "b": lib.arange(3.)}
        if k == 2:
            d["skip"] = lib.zeros(1); d["c"] = lib.ones(1)
        see(cf(d))


def _generator_in_fn(lib, wrap, see):
    def f(xs):
        return sum(x * i for i, x in enumerate(xs))
    cf = wrap(f)
    for k in range(3):
        see(cf([lib.ones(2) * (k + j) for j in range(k + 2)]))


def _varargs_kwargs(lib, wrap, see):
    def f(*args, scale=1.0, **kw):
        out = sum(args)
        for k in sorted(kw):
            out = out + kw[k]
        return out * scale
    cf = wrap(f)
    see(cf(lib.ones(2), lib.ones(2), scale=2.0))
    see(cf(lib.ones(2), b=lib.arange(2.)))
    see(cf(lib.ones(2), lib.ones(2), lib.ones(2), a=lib.ones(2), scale=0.5))


def _default_arg_mutable(lib, wrap, see):
    def f(x, acc=[]):
        acc.append(1)
        return x * len(acc)
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.ones(2)))


def _isinstance_dispatch(lib, wrap, see):
    def f(x, y):
        if isinstance(y, lib.Tensor):
            return x + y
        if isinstance(y, (list, tuple)):
            return x + len(y)
        return x * y
    cf = wrap(f)
    for y in (lib.ones(2), [1, 2], 3.0, (1,), 2, lib.ones(1)):
        see(cf(lib.arange(2.), y))


def _inplace_on_input(lib, wrap, see):
    def f(x):
        x.add_(1)
        x.mul_(2)
        return x.sum()
    cf = wrap(f)
    x = lib.zeros(3)
    for k in range(3):
        see(cf(x), x)


def _inplace_on_view_of_input(lib, wrap, see):
    def f(x):
        x[1:].mul_(3)
        x.t()[0].add_(1)
        return x
    cf = wrap(f)
    for k in range(3):
        x = lib.arange(6.).view(3, 2)
        r = cf(x)
        see(r, x, r is x)


def _inplace_on_leaf_view_grad(lib, wrap, see):
    def f(w, x):
        y = w * 1
        y[0] = x.sum()
        return (y * y).sum()
    cf = wrap(f)
    w = lib.ones(3, requires_grad=True)
    for k in range(3):
        x = lib.arange(2.).requires_grad_()
        l = cf(w, x * (k + 1))
        l.backward()
        see(l, w.grad)


def _module_attr_write(lib, wrap, see):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(2, 2)
            self.calls = 0
        def forward(self, x):
            self.calls += 1
            self.last = x.detach()
            return self.lin(x) * self.calls
    m = M()
    cm = wrap(m)
    for k in range(3):
        out = cm(lib.ones(1, 2) * k)
        out.sum().backward()
        see(out, m.calls, m.last, m.lin.weight.grad)


def _hook_registered_inside(lib, wrap, see):
    seen = []
    def f(x):
        y = x * 2
        y.register_hook(lambda g: g * 3)
        return y.sum()
    cf = wrap(f)
    for k in range(3):
        x = lib.ones(2, requires_grad=True)
        cf(x).backward()
        see(x.grad)


def _autograd_function_inside(lib, wrap, see):
    class Sq(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            ctx.k = k
            return x * x * k
        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 2 * x * ctx.k + 1, None
    def f(x, k):
        return Sq.apply(x, k).sum()
    cf = wrap(f)
    for k in range(3):
        x = lib.arange(3.).requires_grad_()
        l = cf(x, k + 1)
        l.backward()
        see(l, x.grad)


def _no_grad_inside(lib, wrap, see):
    def f(x):
        with lib.no_grad():
            y = x * 2
        z = x * y
        return z, y.requires_grad, z.requires_grad
    cf = wrap(f)
    for k in range(3):
        x = lib.ones(2, requires_grad=k != 1)
        z, a, b = cf(x)
        if z.requires_grad:
            z.sum().backward()
        see(z, a, b, x.grad)


def _random_ops(lib, wrap, see):
    def f(x):
        return x + lib.randn(3) * lib.rand(1)
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.ones(3)))
    see(lib.rand(2))


def _exception_raised_inside(lib, wrap, see):
    def f(x, k):
        y = x * 2
        if k > 1:
            raise ValueError("bad k")
        return y
    cf = wrap(f)
    for k in range(4):
        try:
            see(cf(lib.ones(2), k))
        except ValueError as e:
            see(e)


PROGRAMS = [v for k, v in sorted(globals().items()) if k.startswith("_") and callable(v)
            and getattr(v, "__code__", None) is not None and v.__code__.co_argcount == 3
            and v.__code__.co_varnames[:3] == ("lib", "wrap", "see")]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.strip("_"))
def test_compiled_equals_eager_and_torch(program):
    runs(program, torch)
