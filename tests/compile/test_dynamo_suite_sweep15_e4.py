"""Sweep 15 (helper E), part 4: programs in the manner of PyTorch's Dynamo tests
(test/dynamo: test_functions, test_misc, test_repros, test_modules, test_hooks,
test_autograd_function), each run with torch (the oracle), llgrad eagerly and llgrad.compile
over several calls with the state it reads changed between calls.
This part: aliasing between inputs, NumPy, iterators and Python's random,
memoised and lazily made state, hooks and seeds, .grad and optimisers inside.
Every observation must match (or the call runs eagerly with a warning)."""
import random

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


def _try_except_runtime_error(lib, wrap, see):
    def f(a, b):
        try:
            return a + b
        except RuntimeError:
            return a.sum() + b.sum()
    cf = wrap(f)
    for sa, sb in (((2,), (2,)), ((2,), (3,)), ((3,), (3,)), ((2,), (3,))):
        see(cf(lib.ones(*sa), lib.ones(*sb)))


def _try_finally_state(lib, wrap, see):
    log = []
    def f(x):
        try:
            if x.shape[0] > 2:
                raise KeyError("k")
            return x * 2
        finally:
            log.append(x.shape[0])
    cf = wrap(f)
    for n in (1, 3, 2, 3):
        try:
            see(cf(lib.ones(n)))
        except KeyError as e:
            see(e)
        see(list(log))


def _iterator_argument(lib, wrap, see):
    def f(x, it):
        return x * next(it)
    cf = wrap(f)
    it = iter([1.0, 2.0, 3.0, 4.0])
    for k in range(3):
        see(cf(lib.ones(2), it))
    see(next(it))


def _python_random_inside(lib, wrap, see):
    def f(x):
        return x * random.random()
    cf = wrap(f)
    random.seed(0)
    for k in range(3):
        see(cf(lib.ones(2)))


def _memo_cache_dict(lib, wrap, see):
    cache = {}
    def f(x):
        key = tuple(x.shape)
        if key not in cache:
            cache[key] = lib.ones(key) * len(cache)
        return x + cache[key]
    cf = wrap(f)
    for s in ((2,), (3,), (2,), (2, 1), (3,)):
        see(cf(lib.zeros(*s)), len(cache))


def _lazy_init_module(lib, wrap, see):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.buf = None
        def forward(self, x):
            if self.buf is None:
                self.buf = lib.zeros_like(x)
            self.buf = self.buf + x
            return self.buf * 2
    m = M()
    cm = wrap(m)
    for k in range(4):
        see(cm(lib.ones(2) * k), m.buf)


def _register_buffer_in_forward(lib, wrap, see):
    class M(lib.nn.Module):
        def forward(self, x):
            if not hasattr(self, "count"):
                self.register_buffer("count", lib.zeros(()))
            self.count += 1
            return x * self.count
    m = M()
    cm = wrap(m)
    for k in range(3):
        see(cm(lib.ones(2)), m.count, sorted(dict(m.named_buffers())))


def _forward_hook_added_later(lib, wrap, see):
    m = lib.nn.Linear(2, 2)
    with lib.no_grad():
        m.weight.fill_(0.5); m.bias.fill_(0.1)
    cm = wrap(m)
    see(cm(lib.ones(1, 2)))
    h = m.register_forward_hook(lambda mod, i, o: o * 10)
    see(cm(lib.ones(1, 2)))
    h.remove()
    see(cm(lib.ones(1, 2)))
    h2 = m.register_forward_pre_hook(lambda mod, i: (i[0] + 1,))
    see(cm(lib.ones(1, 2)))


def _manual_seed_inside(lib, wrap, see):
    def f(x):
        lib.manual_seed(7)
        return x + lib.rand(2)
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.zeros(2)), lib.rand(1))


def _default_dtype_changed(lib, wrap, see):
    def f(x):
        return lib.ones(2) * x + lib.tensor(1.5)
    cf = wrap(f)
    see(cf(lib.tensor(2)))
    lib.set_default_dtype(lib.float64)
    try:
        see(cf(lib.tensor(2)))
    finally:
        lib.set_default_dtype(lib.float32)
    see(cf(lib.tensor(2)))


def _sgd_update_no_grad(lib, wrap, see):
    w = lib.ones(3, requires_grad=True)
    def step(x, lr):
        l = (w * x).sum() ** 2
        l.backward()
        with lib.no_grad():
            w.sub_(lr * w.grad)
        w.grad.zero_()
        return l
    cf = wrap(step)
    for k in range(4):
        see(cf(lib.arange(3.), 0.01 * (k + 1)), w, w.grad)


def _grad_none_inside(lib, wrap, see):
    w = lib.ones(2, requires_grad=True)
    def f(x):
        w.grad = None
        return (w * x).sum()
    cf = wrap(f)
    for k in range(3):
        cf(lib.ones(2) * k).backward()
        see(w.grad)


def _return_view_then_mutate(lib, wrap, see):
    def f(x):
        return x[0], x.view(-1)
    cf = wrap(f)
    for k in range(3):
        x = lib.zeros(2, 2)
        a, b = cf(x)
        a.add_(1)
        b[3] = 7
        see(x, a, b)


def _return_input_itself(lib, wrap, see):
    def f(x, y):
        return x, y + 1, x
    cf = wrap(f)
    for k in range(2):
        x = lib.ones(2)
        a, b, c = cf(x, x)
        see(a is x, c is x, a is c, b)


def _retain_grad_inside(lib, wrap, see):
    holder = {}
    def f(x):
        y = x * 2
        y.retain_grad()
        holder["y"] = y
        return (y * y).sum()
    cf = wrap(f)
    for k in range(3):
        x = lib.ones(2, requires_grad=True)
        cf(x * (k + 1)).backward()
        see(holder["y"].grad, holder["y"].is_leaf)


def _int_promotion_0d(lib, wrap, see):
    def f(a, b, c):
        return a + b, a * c, (a / 2), a // 2, b * 1.5
    cf = wrap(f)
    for k in range(2):
        see(*cf(lib.arange(4), lib.tensor(2.5, dtype=lib.float64), lib.tensor(3, dtype=lib.int32)))


def _inplace_type_error(lib, wrap, see):
    def f(x, s):
        x += s
        return x
    cf = wrap(f)
    for s in (1, 1.5, 2):
        x = lib.arange(3)
        try:
            see(cf(x, s))
        except E as e:
            see(e)
        see(x)


def _assert_shape(lib, wrap, see):
    def f(x):
        assert x.shape[0] == 2, f"bad {x.shape[0]}"
        return x * 2
    cf = wrap(f)
    for n in (2, 3, 2):
        try:
            see(cf(lib.ones(n)))
        except AssertionError as e:
            see(e)


def _empty_tensor(lib, wrap, see):
    def f(x):
        return x.sum(), x.mean(0), x * 2, x.amax(1) if x.shape[1] else x
    cf = wrap(f)
    for s in ((0, 3), (2, 3), (0, 3)):
        see(*cf(lib.ones(*s)))


def _backward_inside(lib, wrap, see):
    def f(w, x):
        l = (w * x).pow(2).sum()
        l.backward()
        return w.grad.clone()
    cf = wrap(f)
    w = lib.ones(3, requires_grad=True)
    for k in range(3):
        see(cf(w, lib.arange(3.) + k), w.grad)


def _autograd_grad_inside(lib, wrap, see):
    def f(x):
        y = (x ** 3).sum()
        g, = lib.autograd.grad(y, x, create_graph=True)
        return g.sum()
    cf = wrap(f)
    for k in range(3):
        x = (lib.arange(3.) + k).requires_grad_()
        l = cf(x)
        l.backward()
        see(l, x.grad)


def _optimizer_inside(lib, wrap, see):
    m = lib.nn.Linear(2, 1)
    with lib.no_grad():
        m.weight.fill_(0.3); m.bias.fill_(0.)
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    def step(x, y):
        opt.zero_grad()
        l = ((m(x) - y) ** 2).mean()
        l.backward()
        opt.step()
        return l
    cf = wrap(step)
    for k in range(4):
        see(cf(lib.ones(3, 2) * k, lib.ones(3, 1)), m.weight, m.bias)
        if k == 1:
            opt.param_groups[0]["lr"] = 0.5


def _bool_mask_data_dependent(lib, wrap, see):
    def f(x):
        y = x[x > 0]
        return y * y.shape[0], x.nonzero()
    cf = wrap(f)
    for k in range(3):
        see(*cf(lib.tensor([1., -1., 2., -3.]) * (1 - 2 * (k % 2))))


def _python_list_index_changes(lib, wrap, see):
    def f(x, idx):
        return x[idx]
    cf = wrap(f)
    for idx in ([0, 2], [1, 1, 0], [2, 0], [0, 2]):
        see(cf(lib.arange(6.).view(3, 2), idx))


def _inference_mode_call(lib, wrap, see):
    def f(x):
        return x * 2
    cf = wrap(f)
    see(cf(lib.ones(2, requires_grad=True)).requires_grad)
    with lib.inference_mode():
        y = cf(lib.ones(2, requires_grad=True))
        see(y, y.requires_grad, y.is_inference())
    with lib.no_grad():
        see(cf(lib.ones(2, requires_grad=True)).requires_grad)


def _requires_grad_inside(lib, wrap, see):
    def f(x):
        x.requires_grad_()
        return (x * x).sum()
    cf = wrap(f)
    for k in range(3):
        x = lib.ones(2) * k
        l = cf(x)
        l.backward()
        see(l, x.grad, x.requires_grad)


def _data_swap_param(lib, wrap, see):
    m = lib.nn.Linear(2, 2, bias=False)
    with lib.no_grad():
        m.weight.fill_(1.)
    cm = wrap(m)
    see(cm(lib.ones(1, 2)))
    m.weight.data = lib.ones(2, 2) * 3
    see(cm(lib.ones(1, 2)))
    m.weight.data.mul_(2)
    see(cm(lib.ones(1, 2)))
    m.weight = lib.nn.Parameter(lib.ones(2, 2) * -1)
    out = cm(lib.ones(1, 2)); out.sum().backward()
    see(out, m.weight.grad)


def _dict_order_changes(lib, wrap, see):
    def f(d):
        out = []
        for k, v in d.items():
            out.append(v * len(k))
        return lib.stack(out)
    cf = wrap(f)
    see(cf({"a": lib.ones(1), "bb": lib.ones(1)}))
    see(cf({"bb": lib.ones(1), "a": lib.ones(1)}))


def _stride_control_flow(lib, wrap, see):
    def f(x):
        if x.stride()[0] == 1:
            return x.contiguous() * 2
        return x + 1
    cf = wrap(f)
    for x in (lib.ones(2, 3), lib.ones(3, 2).t(), lib.ones(2, 3)):
        see(cf(x))


def _item_return(lib, wrap, see):
    def f(x):
        return x.sum().item(), x.tolist(), x.shape, int(x[0])
    cf = wrap(f)
    for k in range(3):
        see(*cf(lib.arange(3) + k))


PROGRAMS = [v for k, v in sorted(globals().items()) if k.startswith("_") and callable(v)
            and getattr(v, "__code__", None) is not None and v.__code__.co_argcount == 3
            and v.__code__.co_varnames[:3] == ("lib", "wrap", "see")]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.strip("_"))
def test_compiled_equals_eager_and_torch(program):
    runs(program, torch)
