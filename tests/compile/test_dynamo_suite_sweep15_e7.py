"""Sweep 15 (helper E), part 7: programs in the manner of PyTorch's Dynamo tests
(test/dynamo: test_functions, test_misc, test_repros, test_modules, test_hooks,
test_autograd_function), each run with torch (the oracle), llgrad eagerly and llgrad.compile
over several calls with the state it reads changed between calls.
This part: aliased slots, methods, writes through views and out=,
index writes with repeated indices, hooks whose closures change, modules converted.
Every observation must match (or the call runs eagerly with a warning)."""
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


def _dict_same_tensor_twice(lib, wrap, see):
    def f(d):
        d["a"].add_(1)
        return d["b"] * 1
    cf = wrap(f)
    t = lib.zeros(2)
    d = {"a": t, "b": t}
    see(cf(d), t)
    see(cf(d), t)
    d["b"] = t.clone()
    see(cf(d), t, d["b"])
    d["b"] = t
    see(cf(d), t)


def _list_same_object_twice(lib, wrap, see):
    class C:
        def __init__(self, s): self.s = s
    a = C(2.0)
    xs = [a, a]
    def f(x):
        return x * xs[0].s + x * xs[1].s
    cf = wrap(f)
    see(cf(lib.ones(2)))
    xs[1] = C(5.0)
    see(cf(lib.ones(2)))
    xs[1] = a
    see(cf(lib.ones(2)))


def _shared_submodule_untied(lib, wrap, see):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = lib.nn.Linear(2, 2)
            self.b = self.a
        def forward(self, x):
            return self.b(self.a(x))
    m = M()
    cm = wrap(m)
    x = lib.ones(1, 2)
    out = cm(x); out.sum().backward()
    see(out, m.a.weight.grad)
    m.b = lib.nn.Linear(2, 2)
    out = cm(x); out.sum().backward()
    see(out, m.a.weight.grad, m.b.weight.grad)


def _generator_function_compiled(lib, wrap, see):
    def gen(x):
        for i in range(3):
            yield x * i
    cg = wrap(gen)
    for k in range(2):
        see(list(cg(lib.ones(2) * (k + 1))))


def _compiled_method_two_instances(lib, wrap, see):
    class C:
        def __init__(self, s): self.s = s
        def f(self, x):
            return x * self.s
    C.cf = wrap(C.f)
    a, b = C(2.0), C(3.0)
    see(a.cf(lib.ones(2)), b.cf(lib.ones(2)))
    a.s = 7.0
    see(a.cf(lib.ones(2)), b.cf(lib.ones(2)))


def _compiled_bound_method(lib, wrap, see):
    class C:
        def __init__(self): self.s = 1.0; self.t = lib.ones(2)
        def f(self, x):
            return x * self.s + self.t
    c = C()
    cf = wrap(c.f)
    for k in range(3):
        see(cf(lib.ones(2)))
        c.s += 1; c.t = c.t * 2


def _classmethod_staticmethod(lib, wrap, see):
    class C:
        K = 2.0
        @classmethod
        def cm(cls, x): return x * cls.K
        @staticmethod
        def sm(x): return x + 1
    cf = wrap(lambda x: C.cm(x) + C.sm(x))
    for k in range(3):
        see(cf(lib.ones(2)))
        C.K += 1


def _super_forward(lib, wrap, see):
    class Base(lib.nn.Module):
        def __init__(self):
            super().__init__(); self.s = 2.0
        def forward(self, x):
            return x * self.s
    class D(Base):
        def forward(self, x):
            return super().forward(x) + 1
    m = D()
    cm = wrap(m)
    for k in range(3):
        see(cm(lib.ones(2)))
        m.s = k + 5.0


def _closure_list_of_tensors_grows(lib, wrap, see):
    store = []
    def f(x):
        store.append(x * 2)
        return sum(store)
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.ones(2) * k), len(store))


def _returns_none_and_nested(lib, wrap, see):
    def f(x):
        return None, {1: [x, (x * 2, None)], "s": "str"}, 3
    cf = wrap(f)
    for k in range(2):
        see(list(cf(lib.ones(2) * k)))


def _shape_unpack_and_size(lib, wrap, see):
    def f(x):
        a, b = x.shape
        return x.view(x.size(0), -1) * a - b, x.shape, x.size()
    cf = wrap(f)
    for s in ((2, 3), (3, 2)):
        r = cf(lib.ones(*s))
        see(r[0], tuple(r[1]), type(r[2]).__name__)


def _dtype_flag_control(lib, wrap, see):
    def f(x, y):
        if x.dtype.is_floating_point:
            return x.to(y) * 2
        return x.to(y.dtype) + 1
    cf = wrap(f)
    for x, y in ((lib.ones(2), lib.ones(1, dtype=lib.int64)),
                 (lib.arange(2), lib.ones(1, dtype=lib.float64)), (lib.ones(2), lib.ones(1))):
        see(cf(x, y))


def _data_add_inside(lib, wrap, see):
    def f(w, x):
        w.data.add_(x)
        return (w * 2).sum()
    cf = wrap(f)
    w = lib.ones(2, requires_grad=True)
    for k in range(3):
        l = cf(w, lib.ones(2) * k)
        l.backward()
        see(l, w, w.grad, w._version if hasattr(w, "_version") else 0)


def _detach_add_inside(lib, wrap, see):
    def f(x):
        x.detach().add_(1)
        return x * 2
    cf = wrap(f)
    x = lib.zeros(2)
    for k in range(3):
        see(cf(x), x)


def _copy_broadcast(lib, wrap, see):
    def f(x, y):
        x.copy_(y)
        return x
    cf = wrap(f)
    for ys in ((2,), (1,), (3, 2), ()):
        x = lib.zeros(3, 2)
        _attempt(see, cf, x, lib.arange(float(math.prod(ys))).reshape(ys) + 1)
        see(x)


def _out_kwarg(lib, wrap, see):
    def f(a, b, c):
        lib.add(a, b, out=c)
        return c * 2
    cf = wrap(f)
    for k in range(3):
        c = lib.zeros(2)
        see(cf(lib.ones(2), lib.ones(2) * k, c), c)


def _mask_assign_input(lib, wrap, see):
    def f(x):
        x[x > 0] = 0
        return x.sum()
    cf = wrap(f)
    for v in ([1., -1.], [-2., 3.], [4., 5.]):
        x = lib.tensor(v)
        see(cf(x), x)


def _repeated_index_inplace_add(lib, wrap, see):
    def f(x, idx):
        x[idx] += 1
        return x
    cf = wrap(f)
    for idx in ([0, 0], [0, 1], [1, 1, 1]):
        x = lib.zeros(3)
        see(cf(x, idx), x)
    for k in range(2):
        x = lib.zeros(3)
        see(cf(x, lib.tensor([2, 2, k])), x)


def _index_put_accumulate(lib, wrap, see):
    def f(x, i, v):
        return x.index_put((i,), v, accumulate=True), x.index_add(0, i, v), x.scatter_add(0, i, v)
    cf = wrap(f)
    for k in range(2):
        see(*cf(lib.zeros(3), lib.tensor([0, 0, k + 1]), lib.ones(3)))


def _inplace_on_expanded_view(lib, wrap, see):
    def f(x):
        y = x.expand(3, 2)
        y.add_(1)
        return y
    cf = wrap(f)
    for k in range(2):
        _attempt(see, cf, lib.zeros(1, 2))


def _unbind_views_written(lib, wrap, see):
    def f(x):
        a, b = x.unbind(0)
        a.mul_(2)
        b.add_(a)
        return x
    cf = wrap(f)
    for k in range(3):
        x = lib.arange(4.).view(2, 2) + k
        see(cf(x), x)


def _input_slice_overlap_copy(lib, wrap, see):
    def f(x):
        x[1:] = x[:-1]      # (overlapping memory: an error in both)
        return x
    cf = wrap(f)
    for k in range(2):
        x = lib.arange(5.)
        _attempt(see, cf, x)
        see(x)


def _callable_obj_arg(lib, wrap, see):
    class Scale:
        def __init__(self, s): self.s = s
        def __call__(self, x): return x * self.s
    cf = wrap(lambda x, g: g(x))
    for s in (2.0, 3.0, 2.0):
        see(cf(lib.ones(2), Scale(s)))


def _batchnorm_no_grad_train(lib, wrap, see):
    bn = lib.nn.BatchNorm1d(2)
    def f(x):
        with lib.no_grad():
            y = bn(x)
        return y * 2
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.arange(6.).view(3, 2) * (k + 1)), bn.running_mean, bn.num_batches_tracked)


def _returns_same_output_twice_and_mutate(lib, wrap, see):
    def f(x):
        y = x * 2
        return y, y, y.view(-1)
    cf = wrap(f)
    for k in range(2):
        a, b, c = cf(lib.ones(2, 1))
        a.add_(1)
        see(a is b, b, c)


PROGRAMS = [v for k, v in sorted(globals().items()) if k.startswith("_") and callable(v)
            and getattr(v, "__code__", None) is not None and v.__code__.co_argcount == 3
            and v.__code__.co_varnames[:3] == ("lib", "wrap", "see")]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.strip("_"))
def test_compiled_equals_eager_and_torch(program):
    runs(program, torch)
