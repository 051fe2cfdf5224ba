"""Sweep 15 (helper E), part 3: programs in the manner of PyTorch's Dynamo tests
(test/dynamo: test_functions, test_misc, test_repros, test_modules, test_hooks,
test_autograd_function), each run with torch (the oracle), llgrad eagerly and llgrad.compile
over several calls with the state it reads changed between calls.
This part: recursion, nested compiled functions, builtins on sizes,
loops on tensor values, arguments' types, and state reached through closures and objects.
Every observation must match (or the call runs eagerly with a warning)."""
import functools
import math

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


G_T = {}
G_W = None


def _exception_after_input_write(lib, wrap, see):
    def f(x):
        x.add_(1)
        if x.sum() > 5:
            raise RuntimeError("too big")
        return x * 2
    cf = wrap(f)
    x = lib.zeros(2)
    for k in range(5):
        try:
            see(cf(x))
        except RuntimeError as e:
            see(e)
        see(x)


def _recursion(lib, wrap, see):
    def r(x, n):
        if n == 0:
            return x
        return r(x * 2, n - 1) + 1
    cf = wrap(r)
    for n in (0, 3, 2, 3):
        see(cf(lib.ones(2), n))


def _nested_compiled(lib, wrap, see):
    g = wrap(lambda x: x.sin() * 2)
    def f(x):
        return g(x) + g(x * 2)
    cf = wrap(f)
    for k in range(3):
        x = lib.arange(3.).requires_grad_()
        l = cf(x * (k + 1)).sum()
        l.backward()
        see(l, x.grad)


def _attribute_on_object_changes(lib, wrap, see):
    class Cfg: pass
    c = Cfg(); c.mode = "a"; c.p = 2
    def f(x):
        if c.mode == "a":
            return x ** c.p
        return x - c.p
    cf = wrap(f)
    for k in range(4):
        if k == 1: c.mode = "b"
        if k == 2: c.p = 3
        if k == 3: c.mode = "a"
        see(cf(lib.arange(3.)))


def _list_mutated_input(lib, wrap, see):
    def f(xs):
        xs.append(xs[0] * 2)
        xs[0] = xs[0] + 1
        return len(xs)
    cf = wrap(f)
    xs = [lib.ones(2)]
    for k in range(3):
        see(cf(xs), xs)


def _builtins_on_sizes(lib, wrap, see):
    def f(x):
        n = math.prod(x.shape)
        m = max(x.size())
        return x.reshape(-1) * n + min(x.shape) - m + x.numel() + x.dim() + x.ndim
    cf = wrap(f)
    for s in ((2, 3), (4,), (1, 2, 2)):
        see(cf(lib.ones(*s)))


def _size_as_tensor_factory(lib, wrap, see):
    def f(x):
        return lib.zeros(x.size(0), x.shape[-1] + 1) + x.sum()
    cf = wrap(f)
    for s in ((2, 3), (3, 1)):
        see(cf(lib.ones(*s)))


def _comprehension_with_cond(lib, wrap, see):
    def f(xs, th):
        return [x * 2 for x in xs if x.sum() > th]
    cf = wrap(f)
    xs = [lib.ones(2) * k for k in range(4)]
    for th in (0., 3., 5., 1.):
        see(cf(xs, th))


def _while_on_tensor(lib, wrap, see):
    def f(x):
        n = 0
        while x.sum() < 10:
            x = x * 2
            n += 1
        return x, n
    cf = wrap(f)
    for s in (1., 3., 0.4, 20.):
        see(*cf(lib.ones(2) * s))


def _enumerate_zip(lib, wrap, see):
    def f(a, b):
        out = 0
        for i, (x, y) in enumerate(zip(a, b)):
            out = out + x * y * i
        return out
    cf = wrap(f)
    for k in range(2, 5):
        see(cf(list(lib.arange(float(k)).unbind()), [lib.tensor(2.)] * k))


def _functools_partial_arg(lib, wrap, see):
    def f(x, g):
        return g(x)
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.ones(2), functools.partial(lib.add, other=k)))
    see(cf(lib.ones(2), lambda t: t * 9))


def _set_grad_enabled_arg(lib, wrap, see):
    def f(x, flag):
        with lib.set_grad_enabled(flag):
            y = x * 2
        return y
    cf = wrap(f)
    for flag in (True, False, True):
        x = lib.ones(2, requires_grad=True)
        y = cf(x, flag)
        see(y, y.requires_grad)


def _requires_grad_toggle(lib, wrap, see):
    def f(x, w):
        return (x @ w).sum()
    cf = wrap(f)
    w = lib.ones(2, 2)
    for k in range(4):
        w.requires_grad_(k % 2 == 0)
        l = cf(lib.ones(1, 2), w)
        if l.requires_grad:
            l.backward()
        see(l, w.grad)


def _python_float_int_arg(lib, wrap, see):
    def f(x, a):
        return x * a, type(a).__name__
    cf = wrap(f)
    for a in (1, 2.5, True, 3, -1.0):
        see(*cf(lib.arange(3), a))


def _dtype_arg(lib, wrap, see):
    def f(x, dt):
        return x.to(dt) / 3
    cf = wrap(f)
    for dt in (lib.float32, lib.float64, lib.int64, lib.float32):
        see(cf(lib.arange(4), dt))


def _tensor_attr_read(lib, wrap, see):
    def f(x):
        if x.requires_grad:
            return x * 2
        if x.dtype == lib.int64:
            return x + 1
        return x.is_contiguous()
    cf = wrap(f)
    for x in (lib.ones(2, requires_grad=True), lib.ones(2, dtype=lib.int64),
              lib.ones(2, 3).t(), lib.ones(2)):
        see(cf(x))


def _closure_cell_reassigned_tensor(lib, wrap, see):
    w = lib.ones(2)
    def f(x):
        return x * w
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.arange(2.)))
        w = lib.ones(2) * (k + 2)


def _global_tensor_mutated_in_place(lib, wrap, see):
    G_T["w"] = lib.ones(3)
    def f(x):
        return x + G_T["w"]
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.zeros(3)))
        G_T["w"].mul_(2)
    G_T["w"] = lib.arange(3.)
    see(cf(lib.zeros(3)))


def _global_written_by_fn(lib, wrap, see):
    def f(x):
        global G_W
        G_W = x * 2
        return G_W.sum()
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.ones(2) * k), G_W)


def _defaults_changed(lib, wrap, see):
    def f(x, s=2.0):
        return x * s
    cf = wrap(f)
    see(cf(lib.ones(2)))
    f.__defaults__ = (5.0,)
    see(cf(lib.ones(2)))


def _class_attr_changed(lib, wrap, see):
    class C:
        factor = 2
        def run(self, x):
            return x * self.factor
    c = C()
    cf = wrap(lambda x: c.run(x))
    for k in range(3):
        see(cf(lib.ones(2)))
        C.factor += 1


def _method_monkeypatched(lib, wrap, see):
    class C:
        def g(self, x):
            return x + 1
    c = C()
    cf = wrap(lambda x: c.g(x))
    see(cf(lib.ones(2)))
    c.g = lambda x: x * 10
    see(cf(lib.ones(2)))
    del c.g
    C.g = lambda self, x: x - 5
    see(cf(lib.ones(2)))


def _property_from_state(lib, wrap, see):
    class C:
        def __init__(self): self.n = 1
        @property
        def scale(self): return self.n * 2
    c = C()
    cf = wrap(lambda x: x * c.scale)
    for k in range(3):
        see(cf(lib.ones(2)))
        c.n += 1


def _getattr_dynamic(lib, wrap, see):
    class C:
        def __init__(self): self.d = {"a": 1.0}
        def __getattr__(self, name):
            return self.__dict__["d"][name]
    c = C()
    cf = wrap(lambda x: x * c.a)
    for k in range(3):
        see(cf(lib.ones(2)))
        c.d["a"] = k + 3.0


def _aliased_inputs_inplace(lib, wrap, see):
    def f(a, b):
        a.add_(1)
        return b * 2
    cf = wrap(f)
    x = lib.zeros(2)
    see(cf(x, x), x)
    y = lib.zeros(2)
    see(cf(x, y), x, y)
    see(cf(y, y), y)


def _input_view_of_other_input(lib, wrap, see):
    def f(a, b):
        b.mul_(10)
        return a.sum()
    cf = wrap(f)
    for k in range(3):
        base = lib.arange(4.)
        v = base[1:3] if k != 1 else lib.ones(2)
        see(cf(base, v), base, v)


def _numpy_roundtrip(lib, wrap, see):
    import numpy as np
    def f(x):
        a = x.numpy()
        return lib.from_numpy(np.cumsum(a)) + x
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.arange(4.) * k))


def _and_or_tensor_bool(lib, wrap, see):
    def f(x, flag):
        if flag and x.sum() > 0:
            return x + 1
        if x.max() > 2 or not flag:
            return x - 1
        return x
    cf = wrap(f)
    for x, fl in ((lib.ones(2), True), (-lib.ones(2), True), (lib.ones(2) * 3, False),
                  (-lib.ones(2), False)):
        see(cf(x, fl))


def _range_of_tensor_value(lib, wrap, see):
    def f(x, n):
        out = x
        for _ in range(int(n.sum())):
            out = out * 2
        return out
    cf = wrap(f)
    for k in (1, 3, 0, 2):
        see(cf(lib.ones(2), lib.tensor([k])))


def _argmax_index(lib, wrap, see):
    def f(x):
        return x[int(x.argmax())] * x
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.tensor([1., 5., 2.]).roll(k)))


PROGRAMS = [v for k, v in sorted(globals().items()) if k.startswith("_") and callable(v)
            and getattr(v, "__code__", None) is not None and v.__code__.co_argcount == 3
            and v.__code__.co_varnames[:3] == ("lib", "wrap", "see")]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.strip("_"))
def test_compiled_equals_eager_and_torch(program):
    runs(program, torch)
