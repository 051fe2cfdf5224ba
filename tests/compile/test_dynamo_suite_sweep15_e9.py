"""Sweep 15 (helper E), part 9: programs in the manner of PyTorch's Dynamo tests
(test/dynamo: test_functions, test_misc, test_repros, test_modules, test_hooks,
test_autograd_function), each run with torch (the oracle), llgrad eagerly and llgrad.compile
over several calls with the state it reads changed between calls.
This part: programs after test/dynamo's repros: del of attributes and
items, ** unpacking, dataclass factories, list.index, a masked softmax Function, errors
raised inside forward and backward, lists of modules, torch.Size arithmetic.
Every observation must match (or the call runs eagerly with a warning)."""
import collections
import dataclasses
import functools

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


def _delattr_on_object(lib, wrap, see):
    class O:
        def __init__(self, a, b): self.a, self.b = a, b
    def f(x, o):
        del o.a
        o.c = x + 1
        return x + 1 if hasattr(o, "a") else x * o.b
    cf = wrap(f)
    for k in range(3):
        o = O(lib.ones(1), lib.ones(1) * (k + 2))
        see(cf(lib.ones(2), o), sorted(vars(o)), o.c)


def _delattr_then_read_raises(lib, wrap, see):
    class O:
        def __init__(self, a): self.a = a
    def f(x, o):
        del o.a
        return x + o.a
    cf = wrap(f)
    for k in range(2):
        o = O(lib.ones(1))
        try:
            cf(lib.ones(1), o)
        except AttributeError as e:
            see("AttributeError", sorted(vars(o)))


def _del_dict_item(lib, wrap, see):
    def f(d):
        del d["a"]
        return d["b"] + 1
    cf = wrap(f)
    for k in range(3):
        d = {"a": lib.ones(1), "b": lib.ones(1) * k}
        see(cf(d), sorted(d))
    d = {"b": lib.ones(1)}
    try:
        cf(d)
    except KeyError as e:
        see("KeyError", sorted(d))


def _dict_unpack_call(lib, wrap, see):
    def g(x, t, scale, **kw):
        return x.sin() + t + scale + sum(kw.values())
    def f(x, extra):
        d1 = dict(o1=5)
        return g(x, 1, scale=2, **{**d1, **extra})
    cf = wrap(f)
    for e in ({"o2": 4}, {"o2": 1, "o3": 2}, {"o2": 4}):
        see(cf(lib.ones(2), e))


def _dataclass_default_factory(lib, wrap, see):
    @dataclasses.dataclass
    class D:
        items: list = dataclasses.field(default_factory=list)
        a: int = 1
    def f(x, lst):
        d = D(list(lst))
        d.items.append(x.sin() + d.a)
        return d.items[-1] * len(d.items)
    cf = wrap(f)
    for lst in ([1, 2, 3], [2, 3], [1, 2, 3]):
        see(cf(lib.ones(2), lst))


def _list_index_method(lib, wrap, see):
    def f(t, xs, v):
        return t + xs.index(v)
    cf = wrap(f)
    for xs, v in (([1, 2, 3], 3), ((4, 3, 2), 3), ([1, 2, 3], 1)):
        see(cf(lib.zeros(1), xs, v))
    _attempt(see, cf, lib.zeros(1), [1, 2], 5)


def _xsoftmax_function(lib, wrap, see):
    class XSoftmax(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, mask, dim):
            ctx.dim = dim
            rmask = ~mask
            out = x.masked_fill(rmask, float("-inf")).softmax(dim)
            out = out.masked_fill(rmask, 0)
            ctx.save_for_backward(out)
            return out
        @staticmethod
        def backward(ctx, g):
            out, = ctx.saved_tensors
            inner = (g * out).sum(ctx.dim, keepdim=True)
            return out * (g - inner), None, None
    cf = wrap(lambda x, m: XSoftmax.apply(x, m, 1))
    for k in range(3):
        lib.manual_seed(k)
        x = lib.randn(2, 4, requires_grad=True)
        m = lib.randn(2, 4) > -0.5
        y = cf(x, m)
        (y * lib.arange(4.)).sum().backward()
        see(y, x.grad)


def _shape_index_by_shape(lib, wrap, see):
    def f(x):
        y = x * x.size(x.shape[0])
        return lib.sum(y, [y.dim() - 1])
    cf = wrap(f)
    for s in ((1, 3), (2, 1, 4), (1, 2)):
        see(cf(lib.ones(*s)))


def _dropout_p_from_shape(lib, wrap, see):
    cf = wrap(lambda x: lib.nn.functional.dropout(x, x.shape[0] / 6))
    for n in (3, 2, 3):
        see(cf(lib.ones(n, 4)))


def _add_alpha_python_number(lib, wrap, see):
    cf = wrap(lambda a, b, d: lib.add(a, b, alpha=d))
    for d in (5, 6, 2.5, 5):
        a = lib.arange(3.).requires_grad_()
        b = lib.arange(3.).requires_grad_()
        y = cf(a, b, d)
        y.sum().backward()
        see(y, a.grad, b.grad)


def _closure_returned_function(lib, wrap, see):
    def f(x):
        y = x.cos()
        @functools.wraps(lib.sin)
        def inner():
            return y.sin()
        return inner
    cf = wrap(f)
    r = cf(lib.ones(1))
    see(r(), r.__name__)


def _inplace_on_input_then_read_alias(lib, wrap, see):
    def f(x):
        y = x.view(-1)
        x.add_(1)
        return y * 2, x.sum()
    cf = wrap(f)
    for k in range(3):
        x = lib.zeros(2, 2) + k
        see(*cf(x), x)


def _tensor_method_chain_with_python_numbers(lib, wrap, see):
    def f(x):
        n = x.numel()
        m = x.max().item()
        return (x - m).exp().div(n).clamp(min=1e-3, max=m + 1).round(decimals=2)
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.arange(4.) * (k + 1)))


def _setattr_on_module_in_forward(lib, wrap, see):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(2, 2)
        def forward(self, x):
            self.cache = self.lin(x)
            self.seen_shape = tuple(x.shape)
            return self.cache.relu()
    m = M()
    cm = wrap(m)
    for k in range(3):
        out = cm(lib.ones(k + 1, 2))
        out.sum().backward()
        see(out, m.cache, m.seen_shape, m.lin.weight.grad)


def _exception_in_autograd_function_forward(lib, wrap, see):
    class F(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            if x.shape[0] > 2:
                raise ValueError("too long")
            return x * 2
        @staticmethod
        def backward(ctx, g):
            return g * 2
    cf = wrap(lambda x: F.apply(x))
    for n in (2, 3, 2):
        _attempt(see, cf, lib.ones(n, requires_grad=True))


def _list_of_modules_arg(lib, wrap, see):
    lins = [lib.nn.Linear(2, 2) for _ in range(3)]
    def f(x, ms):
        for m in ms:
            x = m(x).tanh()
        return x.sum()
    cf = wrap(f)
    for k in (3, 2, 3):
        l = cf(lib.ones(1, 2), lins[:k])
        l.backward()
        see(l, lins[0].weight.grad)


def _deque_arg(lib, wrap, see):
    def f(q):
        return q[0] + q[-1] * len(q)
    cf = wrap(f)
    q = collections.deque([lib.ones(1), lib.ones(1) * 2], maxlen=3)
    for k in range(3):
        _attempt(see, cf, q)
        q.append(lib.ones(1) * (k + 3))


def _torch_size_ops(lib, wrap, see):
    def f(x):
        s = x.shape
        return lib.zeros(s[1:] + (2,)), x.reshape(*s[::-1]), s.numel(), len(s)
    cf = wrap(f)
    for sh in ((2, 3), (1, 4), (2, 3)):
        r = cf(lib.ones(*sh))
        see(r[0], r[1], r[2], r[3])


def _int_tensor_arithmetic_and_comparisons(lib, wrap, see):
    def f(a, b):
        return a // b, a % b, a / b, a ** 2, (a > b) & (a < 3), a.float().mean(), -a
    cf = wrap(f)
    for k in range(2):
        see(*cf(lib.tensor([5, -3, 2]) + k, lib.tensor([2, 2, -1])))


def _bool_tensor_python_ops(lib, wrap, see):
    def f(x):
        m = x > 0
        return m.sum(), m.float().mean(), m.any().item(), (~m).int(), m.long().cumsum(0)
    cf = wrap(f)
    for v in ([1., -1., 2.], [-1., -1., -1.]):
        see(*cf(lib.tensor(v)))


def _exception_in_custom_backward(lib, wrap, see):
    flag = {"bad": False}
    class F(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2
        @staticmethod
        def backward(ctx, g):
            if flag["bad"]:
                raise RuntimeError("backward failed")
            return g * 2
    cf = wrap(lambda x: F.apply(x).sum())
    for k in range(3):
        x = lib.ones(2, requires_grad=True)
        y = cf(x)
        flag["bad"] = k == 1
        _attempt(see, y.backward)
        see(x.grad)


PROGRAMS = [v for k, v in sorted(globals().items()) if k.startswith("_") and callable(v)
            and getattr(v, "__code__", None) is not None and v.__code__.co_argcount == 3
            and v.__code__.co_varnames[:3] == ("lib", "wrap", "see")
            and v is not _exception_in_custom_backward]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.strip("_"))
def test_compiled_equals_eager_and_torch(program):
    runs(program, torch)


@pytest.mark.xfail(strict=True, reason="a custom Function's backward is traced with the "
                   "forward: Python state it reads, changed between a compiled forward and its "
                   "backward, is not seen (torch.compile alike); eager reads it at backward time")
def test_custom_backward_reads_state_changed_after_forward():
    runs(_exception_in_custom_backward, torch)
