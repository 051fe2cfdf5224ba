"""Sweep 15 (helper E), part 10: programs in the manner of PyTorch's Dynamo tests
(test/dynamo: test_functions, test_misc, test_repros, test_modules, test_hooks,
test_autograd_function), each run with torch (the oracle), llgrad eagerly and llgrad.compile
over several calls with the state it reads changed between calls.
This part: .grad zeroed, cleared or frozen inside, a compiled function calling
itself, sets and buffers the call reads, and Python effects inside tensor-dependent ifs
and whiles (a raise, a list append, a counter, random draws, writes to inputs).
Every observation must match (or the call runs eagerly with a warning)."""
import enum

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


VALS = ([1., 2.], [-3., 1.], [1., 2.], [-1., -1.], [0.5, 0.5])


def _grad_zero_inplace_in_forward(lib, wrap, see):
    w = lib.ones(2, requires_grad=True)
    def f(x):
        if w.grad is not None:
            w.grad.zero_()
        return (w * x).sum()
    cf = wrap(f)
    for k in range(4):
        cf(lib.ones(2) * (k + 1)).backward()
        see(w.grad)


def _requires_grad_off_inside(lib, wrap, see):
    w = lib.ones(2, requires_grad=True)
    def f(x, freeze):
        w.requires_grad_(not freeze)
        return (w * x).sum()
    cf = wrap(f)
    for fr in (False, True, False, True):
        l = cf(lib.ones(2), fr)
        if l.requires_grad:
            l.backward()
        see(l.requires_grad, w.grad, w.requires_grad)


def _compiled_recursion_through_wrapper(lib, wrap, see):
    box = {}
    def f(x, n):
        if n == 0:
            return x
        return box["cf"](x * 2, n - 1) + 1
    box["cf"] = wrap(f)
    for n in (2, 3, 2):
        see(box["cf"](lib.ones(2), n))


def _map_filter_zip(lib, wrap, see):
    def f(xs, ws):
        ys = list(map(lambda t: t * 2, filter(lambda t: t.shape[0] > 1, xs)))
        return sum(y * w for y, w in zip(ys, ws))
    cf = wrap(f)
    for n in (2, 3):
        see(cf([lib.ones(k + 1) [:2] for k in range(n)], [1.0, 2.0]))


def _grads_clear_only_some(lib, wrap, see):
    a = lib.ones(2, requires_grad=True)
    b = lib.ones(2, requires_grad=True)
    def f(x, which):
        if which:
            a.grad = None
        else:
            b.grad = None
        return (a * b * x).sum()
    cf = wrap(f)
    for which in (True, False, True, True, False):
        cf(lib.ones(2), which).backward()
        see(a.grad, b.grad)


def _set_grad_then_clear(lib, wrap, see):
    w = lib.ones(2, requires_grad=True)
    def f(x):
        w.grad = None
        l = (w * x).sum()
        l.backward()
        g = w.grad.clone()
        w.grad = None
        return g
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.ones(2) * (k + 1)), w.grad)


def _param_grad_none_module(lib, wrap, see):
    m = lib.nn.Linear(2, 1, bias=False)
    with lib.no_grad():
        m.weight.fill_(1.0)
    def f(x):
        for p in m.parameters():
            p.grad = None
        return m(x).sum()
    cf = wrap(f)
    for k in range(3):
        l = cf(lib.ones(1, 2) * (k + 1))
        l.backward()
        l2 = cf(lib.ones(1, 2))
        see(m.weight.grad)
        l2.backward()
        see(m.weight.grad)


def _tensor_if_raise_in_branch(lib, wrap, see):
    def f(x):
        if x.sum() > 0:
            y = x * 2
        else:
            raise ValueError("negative")
        return y
    cf = wrap(f)
    for v in VALS:
        _attempt(see, cf, lib.tensor(v))


def _tensor_if_list_append(lib, wrap, see):
    log = []
    def f(x):
        if x.sum() > 0:
            log.append("pos")
            y = x * 2
        else:
            y = x - 1
        return y
    cf = wrap(f)
    for v in VALS:
        see(cf(lib.tensor(v)), list(log))


def _tensor_if_nonlocal_counter(lib, wrap, see):
    n = 0
    def f(x):
        nonlocal n
        if x.sum() > 0:
            n += 1
            y = x * n
        else:
            y = x
        return y
    cf = wrap(f)
    for v in VALS:
        see(cf(lib.tensor(v)), n)


def _tensor_if_item_inside(lib, wrap, see):
    def f(x):
        if x.sum() > 0:
            y = x * x.max().item()
        else:
            y = x
        return y
    cf = wrap(f)
    for v in VALS:
        see(cf(lib.tensor(v)))


def _tensor_if_random_in_branch(lib, wrap, see):
    def f(x):
        if x.sum() > 0:
            y = x + lib.rand(2)
        else:
            y = x * 2
        return y
    cf = wrap(f)
    for v in VALS:
        see(cf(lib.tensor(v)), lib.rand(1))


def _tensor_if_inplace_on_input(lib, wrap, see):
    def f(x):
        if x.sum() > 0:
            x.mul_(3)
        else:
            x.add_(1)
        return x.sum()
    cf = wrap(f)
    for v in VALS:
        x = lib.tensor(v)
        see(cf(x), x)


def _tensor_if_object_attr_write(lib, wrap, see):
    class C: pass
    c = C(); c.mode = "none"; c.t = lib.zeros(2)
    def f(x):
        if x.sum() > 0:
            c.mode = "pos"
            c.t = x * 2
        else:
            c.mode = "neg"
        return x + 1
    cf = wrap(f)
    for v in VALS:
        see(cf(lib.tensor(v)), c.mode, c.t)


def _tensor_if_return_in_branch(lib, wrap, see):
    def f(x):
        if x.sum() > 0:
            return x * 2, 1
        return x - 1, 0
    cf = wrap(f)
    for v in VALS:
        see(*cf(lib.tensor(v)))


def _tensor_if_dtype_differs(lib, wrap, see):
    def f(x):
        if x.sum() > 0:
            y = x.double()
        else:
            y = x
        return y
    cf = wrap(f)
    for v in VALS:
        _attempt(see, cf, lib.tensor(v))


def _tensor_if_shape_differs(lib, wrap, see):
    def f(x):
        if x.sum() > 0:
            y = x.sum(0, keepdim=True)
        else:
            y = x
        return y * 2
    cf = wrap(f)
    for v in VALS:
        see(cf(lib.tensor(v)))


def _tensor_and_chain(lib, wrap, see):
    def f(x):
        if x.sum() > 0 and x.max() < 1.5:
            return x * 10
        elif x.min() < -2 or x.sum() == -2:
            return x - 10
        return x
    cf = wrap(f)
    for v in VALS:
        see(cf(lib.tensor(v)))


def _tensor_while_with_break_and_counter(lib, wrap, see):
    def f(x):
        n = 0
        while x.abs().sum() > 0.1:
            x = x / 2
            n += 1
            if n > 3:
                break
        return x, n
    cf = wrap(f)
    for v in VALS:
        see(*cf(lib.tensor(v)))


def _tensor_if_grad(lib, wrap, see):
    def f(w, x):
        if (w * x).sum() > 0:
            y = (w * x).tanh()
        else:
            y = w.exp() * x
        return y.sum()
    cf = wrap(f)
    for v in VALS:
        w = lib.tensor(v, requires_grad=True)
        l = cf(w, lib.tensor([1., 0.5]))
        l.backward()
        see(l, w.grad)


def _tensor_if_module_state(lib, wrap, see):
    bn = lib.nn.BatchNorm1d(2)
    def f(x):
        if x.sum() > 0:
            y = bn(x)
        else:
            y = x
        return y
    cf = wrap(f)
    for v in VALS:
        see(cf(lib.tensor([v, [0., 1.]])), bn.running_mean, bn.num_batches_tracked)


def _tensor_if_print_like_side_effect(lib, wrap, see):
    d = {}
    def f(x):
        if x.sum() > 0:
            d["last"] = "pos"
        else:
            d.pop("last", None)
        return x * 2
    cf = wrap(f)
    for v in VALS:
        see(cf(lib.tensor(v)), dict(d))


def _set_of_enum_members_mutated(lib, wrap, see):
    class Mode(enum.Enum):
        A = 1
        B = 2
    enabled = {Mode.A}
    cf = wrap(lambda x: x * 2 if Mode.B in enabled else x)
    see(cf(lib.ones(2)))
    enabled.add(Mode.B)
    see(cf(lib.ones(2)))
    enabled.discard(Mode.B)
    see(cf(lib.ones(2)))


def _set_of_tuples_mutated(lib, wrap, see):
    pairs = {(0, 1)}
    cf = wrap(lambda x: x * 2 if (1, 2) in pairs else x)
    see(cf(lib.ones(2)))
    pairs.add((1, 2))
    see(cf(lib.ones(2)))


def _frozenset_of_tuples_arg(lib, wrap, see):
    cf = wrap(lambda x, s: x * 2 if (1, 2) in s else x)
    see(cf(lib.ones(2), frozenset({(0, 1)})))
    see(cf(lib.ones(2), frozenset({(1, 2)})))


def _bytes_and_complex_python(lib, wrap, see):
    cf = wrap(lambda x, b: x * len(b) + b[0])
    for b in (b"ab", b"xyz", b"ab"):
        see(cf(lib.ones(2), b))


def _array_module_mutated(lib, wrap, see):
    import array
    a = array.array("d", [1.0, 2.0])
    cf = wrap(lambda x: x * a[0])
    see(cf(lib.ones(2)))
    a[0] = 5.0
    see(cf(lib.ones(2)))


def _slice_object_arg(lib, wrap, see):
    cf = wrap(lambda x, s: x[s] * 2)
    for s in (slice(0, 2), slice(1, None), slice(None, None, 2), slice(0, 2)):
        see(cf(lib.arange(5.), s))


def _type_object_arg(lib, wrap, see):
    cf = wrap(lambda x, t: t(x.sum().item()) * x)
    for t in (int, float, int, bool):
        see(cf(lib.tensor([0.6, 1.2]), t))


def _object_with_set_attr(lib, wrap, see):
    class C: pass
    class Flag: pass
    f1 = Flag()
    c = C(); c.flags = set()
    cf = wrap(lambda x: x * (3 if f1 in c.flags else 1))
    see(cf(lib.ones(1)))
    c.flags.add(f1)
    see(cf(lib.ones(1)))


PROGRAMS = [v for k, v in sorted(globals().items()) if k.startswith("_") and callable(v)
            and getattr(v, "__code__", None) is not None and v.__code__.co_argcount == 3
            and v.__code__.co_varnames[:3] == ("lib", "wrap", "see")]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.strip("_"))
def test_compiled_equals_eager_and_torch(program):
    runs(program, torch)
