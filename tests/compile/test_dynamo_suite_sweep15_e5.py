"""Sweep 15 (helper E), part 5: programs in the manner of PyTorch's Dynamo tests
(test/dynamo: test_functions, test_misc, test_repros, test_modules, test_hooks,
test_autograd_function), each run with torch (the oracle), llgrad eagerly and llgrad.compile
over several calls with the state it reads changed between calls.
This part: autograd: backward after writes, twice, double backward,
autograd.Function variants, hooks added between calls, grads set and cleared.
Every observation must match (or the call runs eagerly with a warning)."""

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


def _output_modified_before_backward(lib, wrap, see):
    cf = wrap(lambda x: x.exp())
    for k in range(3):
        x = lib.ones(2, requires_grad=True)
        y = cf(x)
        if k != 1:
            y.add_(1)
        _attempt(see, lambda: y.sum().backward())
        see(x.grad)


def _input_modified_before_backward(lib, wrap, see):
    cf = wrap(lambda w, x: (w * x).sum())
    for k in range(3):
        w = lib.ones(2, requires_grad=True)
        x = lib.arange(2.)
        y = cf(w, x)
        if k != 1:
            x.add_(1)
        _attempt(see, lambda: y.backward())
        see(w.grad)


def _backward_twice(lib, wrap, see):
    cf = wrap(lambda x: (x.sin() * x).sum())
    for k in range(3):
        x = lib.ones(2, requires_grad=True)
        y = cf(x)
        y.backward(retain_graph=(k == 1))
        _attempt(see, lambda: y.backward())
        see(x.grad)


def _double_backward_through_compiled(lib, wrap, see):
    cf = wrap(lambda x: (x ** 3).sum())
    for k in range(3):
        x = (lib.ones(2) * (k + 1)).requires_grad_()
        g, = lib.autograd.grad(cf(x), x, create_graph=True)
        g.sum().backward()
        see(g, x.grad)


def _grad_allow_unused(lib, wrap, see):
    cf = wrap(lambda x, y: (x * 2).sum())
    for k in range(2):
        x = lib.ones(2, requires_grad=True); y = lib.ones(2, requires_grad=True)
        see(list(lib.autograd.grad(cf(x, y), [x, y], allow_unused=True)))
        _attempt(see, lambda: lib.autograd.grad(cf(x, y), [x, y]))


def _detach_output_mutated(lib, wrap, see):
    cf = wrap(lambda x: x.detach())
    for k in range(2):
        x = lib.ones(2, requires_grad=True)
        y = cf(x)
        y.mul_(5)
        see(x, y, y.requires_grad)


def _leaf_view_inplace_error(lib, wrap, see):
    def f(x):
        x[0].mul_(2)
        return x
    cf = wrap(f)
    for k in range(3):
        x = lib.ones(2, requires_grad=(k != 1))
        _attempt(see, cf, x)
        see(x)


def _custom_backward_reads_global(lib, wrap, see):
    cfg = {"s": 1.0}
    class F(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2
        @staticmethod
        def backward(ctx, g):
            return g * cfg["s"]
    cf = wrap(lambda x: F.apply(x).sum())
    for k in range(4):
        x = lib.ones(2, requires_grad=True)
        y = cf(x)
        cfg["s"] = k + 2.0        # changed after forward, before backward
        y.backward()
        see(x.grad)


def _custom_function_needs_input_grad(lib, wrap, see):
    class F(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y
        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            gx = g * y if ctx.needs_input_grad[0] else None
            gy = g * x * 10 if ctx.needs_input_grad[1] else None
            return gx, gy
    cf = wrap(lambda x, y: F.apply(x, y).sum())
    for rx, ry in ((True, True), (True, False), (False, True)):
        x = lib.arange(2.).requires_grad_(rx); y = lib.ones(2).requires_grad_(ry)
        cf(x, y).backward()
        see(x.grad, y.grad)


def _custom_function_mark_dirty(lib, wrap, see):
    class F(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x
        @staticmethod
        def backward(ctx, g):
            return g * 2
    def f(w):
        y = w * 1
        z = F.apply(y)
        return z.sum(), y
    cf = wrap(f)
    for k in range(3):
        w = lib.ones(2, requires_grad=True)
        l, y = cf(w)
        l.backward()
        see(l, y, w.grad)


def _custom_function_non_diff_output(lib, wrap, see):
    class F(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            idx = x.argmax()
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(x)
            return x.max(), idx
        @staticmethod
        def backward(ctx, g, gi):
            x, = ctx.saved_tensors
            return lib.ones_like(x) * g
    def f(x):
        m, i = F.apply(x)
        return m * 2, i
    cf = wrap(f)
    for k in range(3):
        x = lib.tensor([1., 3., 2.]).roll(k).requires_grad_()
        m, i = cf(x)
        m.backward()
        see(m, i, i.requires_grad, x.grad)


def _custom_function_with_python_out(lib, wrap, see):
    class F(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.scale = scale
            return x * scale
        @staticmethod
        def backward(ctx, g):
            return g * ctx.scale, None
    cf = wrap(lambda x, s: F.apply(x, s).sum())
    for s in (2.0, 3.0, 2.0, -1):
        x = lib.ones(2, requires_grad=True)
        cf(x, s).backward()
        see(x.grad)


def _enable_grad_inside_under_no_grad(lib, wrap, see):
    def f(x):
        with lib.enable_grad():
            y = x * 2
        return y, y.requires_grad
    cf = wrap(f)
    for k in range(3):
        x = lib.ones(2, requires_grad=True)
        if k == 1:
            with lib.no_grad():
                y, r = cf(x)
        else:
            y, r = cf(x)
        see(y, r, y.requires_grad)


def _no_grad_decorated_inner(lib, wrap, see):
    @lib.no_grad()
    def inner(x):
        return x * 3
    def f(x):
        return inner(x) + x
    cf = wrap(f)
    for k in range(2):
        x = lib.ones(2, requires_grad=True)
        y = cf(x); y.sum().backward()
        see(y, x.grad)


def _hook_on_leaf_input_added_later(lib, wrap, see):
    cf = wrap(lambda w: (w * w).sum())
    w = lib.ones(2, requires_grad=True)
    cf(w).backward(); see(w.grad)
    h = w.register_hook(lambda g: g * 10)
    cf(w).backward(); see(w.grad)
    h.remove()
    cf(w).backward(); see(w.grad)


def _module_full_backward_hook(lib, wrap, see):
    m = lib.nn.Linear(2, 2)
    grads = []
    cm = wrap(m)
    x = lib.ones(1, 2, requires_grad=True)
    cm(x).sum().backward()
    h = m.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 0,))
    cm(x).sum().backward()
    see(x.grad)
    h.remove()
    cm(x).sum().backward()
    see(x.grad)


def _parameter_made_in_forward(lib, wrap, see):
    def f(x):
        p = lib.nn.Parameter(lib.ones(2))
        return (p * x).sum(), p
    cf = wrap(f)
    for k in range(3):
        l, p = cf(lib.ones(2) * k)
        l.backward()
        see(p.grad, p.is_leaf, type(p).__name__)


def _tensor_from_shape(lib, wrap, see):
    def f(x, lst):
        return lib.tensor(x.shape) * 2 + lib.tensor(lst), x.new_tensor(lst)
    cf = wrap(f)
    for s, lst in (((2, 3), [1, 2]), ((4, 1), [3, 4]), ((2, 3), [1.5, 2])):
        see(*cf(lib.ones(*s), lst))


def _numpy_arg_mutated(lib, wrap, see):
    import numpy as np
    a = np.ones(3, dtype=np.float32)
    cf = wrap(lambda x, arr: x * lib.from_numpy(arr))
    for k in range(3):
        see(cf(lib.ones(3), a))
        a *= 2


def _zero_div_python(lib, wrap, see):
    def f(x):
        return x / x.shape[0] + 1 / x.numel()
    cf = wrap(f)
    for s in ((2,), (0,), (3,)):
        _attempt(see, cf, lib.ones(*s))


def _modulelist_appended(lib, wrap, see):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = lib.nn.ModuleList([lib.nn.Identity()])
        def forward(self, x):
            for l in self.layers:
                x = l(x) * 2
            return x
    m = M()
    cm = wrap(m)
    for k in range(3):
        see(cm(lib.ones(2)))
        m.layers.append(lib.nn.Tanh())


def _forward_replaced_on_instance(lib, wrap, see):
    m = lib.nn.Identity()
    cm = wrap(m)
    see(cm(lib.ones(2)))
    m.forward = lambda x: x * 7
    see(cm(lib.ones(2)))


def _late_binding_lambdas(lib, wrap, see):
    fs = [lambda x: x * i for i in range(3)]
    def f(x):
        return sum(g(x) for g in fs)
    cf = wrap(f)
    see(cf(lib.ones(2)))
    fs.append(lambda x: x - 100)
    see(cf(lib.ones(2)))


def _kwargs_order(lib, wrap, see):
    cf = wrap(lambda a, b: a - b * 2)
    see(cf(a=lib.ones(2), b=lib.arange(2.)))
    see(cf(b=lib.ones(2), a=lib.arange(2.)))
    see(cf(lib.ones(2), b=lib.zeros(2)))


def _grad_set_on_input_tensor(lib, wrap, see):
    def f(w, g):
        w.grad = g * 2
        return w.sum()
    cf = wrap(f)
    for k in range(3):
        w = lib.ones(2, requires_grad=True)
        r = cf(w, lib.ones(2) * k)
        see(w.grad, r)


def _del_grad_inside(lib, wrap, see):
    w = lib.ones(2, requires_grad=True)
    def f(x):
        del w.grad
        return (w * x).sum()
    cf = wrap(f)
    for k in range(3):
        cf(lib.ones(2) * (k + 1)).backward()
        see(w.grad)


def _zero_grad_set_to_none_false(lib, wrap, see):
    m = lib.nn.Linear(2, 1)
    with lib.no_grad():
        m.weight.fill_(0.5); m.bias.zero_()
    def f(x):
        m.zero_grad(set_to_none=False)
        return m(x).sum()
    cf = wrap(f)
    for k in range(3):
        cf(lib.ones(2, 2) * (k + 1)).backward()
        see(m.weight.grad, m.bias.grad)


def _grad_clear_with_existing(lib, wrap, see):
    w = lib.ones(2, requires_grad=True)
    (w * 5).sum().backward()
    def f(x):
        w.grad = None
        return (w * x).sum()
    cf = wrap(f)
    for k in range(3):
        cf(lib.ones(2) * (k + 1)).backward()
        see(w.grad)


def _grad_input_cleared_arg(lib, wrap, see):
    def f(w, x):
        w.grad = None
        return (w * x).sum()
    cf = wrap(f)
    w = lib.ones(2, requires_grad=True)
    for k in range(3):
        cf(w, lib.ones(2) * (k + 1)).backward()
        see(w.grad)


PROGRAMS = [v for k, v in sorted(globals().items()) if k.startswith("_") and callable(v)
            and getattr(v, "__code__", None) is not None and v.__code__.co_argcount == 3
            and v.__code__.co_varnames[:3] == ("lib", "wrap", "see")]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.strip("_"))
def test_compiled_equals_eager_and_torch(program):
    runs(program, torch)
