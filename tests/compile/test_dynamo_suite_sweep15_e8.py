"""Sweep 15 (helper E), part 8: programs in the manner of PyTorch's Dynamo tests
(test/dynamo: test_functions, test_misc, test_repros, test_modules, test_hooks,
test_autograd_function), each run with torch (the oracle), llgrad eagerly and llgrad.compile
over several calls with the state it reads changed between calls.
This part: hooks whose closures change, module state loaded or converted
between calls, autograd.Function's other forms, checkpoint, eval/train inside.
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


def _tensor_hook_closure_changes(lib, wrap, see):
    s = [2.0]
    w = lib.ones(2, requires_grad=True)
    w.register_hook(lambda g: g * s[0])
    cf = wrap(lambda x: (w * x).sum())
    for k in range(3):
        w.grad = None
        cf(lib.ones(2)).backward()
        see(w.grad)
        s[0] = k + 5.0


def _hook_on_input_changes_between_forward_and_backward(lib, wrap, see):
    s = [2.0]
    cf = wrap(lambda x: (x * x).sum())
    for k in range(3):
        x = lib.ones(2, requires_grad=True)
        x.register_hook(lambda g: g * s[0])
        l = cf(x)
        s[0] = k + 7.0
        l.backward()
        see(x.grad)


def _forward_hook_closure_changes(lib, wrap, see):
    s = [1.0]
    m = lib.nn.Linear(2, 2)
    m.register_forward_hook(lambda mod, i, o: o * s[0])
    cm = wrap(m)
    for k in range(3):
        see(cm(lib.ones(1, 2)))
        s[0] = k + 3.0


def _forward_hook_with_kwargs(lib, wrap, see):
    class Scaled(lib.nn.Module):
        def forward(self, x, scale=1.0):
            return x * scale
    m = Scaled()
    m.register_forward_hook(lambda mod, args, kwargs, out: out + kwargs.get("scale", 0.0),
                            with_kwargs=True)
    cf = wrap(lambda x, s: m(x, scale=s) + m(x))
    for s in (2.0, 3.0, 2.0):
        see(cf(lib.ones(2), s))


def _pre_hook_changes_module_state(lib, wrap, see):
    m = lib.nn.Linear(2, 1)
    m.count = 0
    def pre(mod, inp):
        mod.count += 1
    m.register_forward_pre_hook(pre)
    cm = wrap(m)
    for k in range(3):
        see(cm(lib.ones(1, 2)), m.count)


def _post_accumulate_grad_hook(lib, wrap, see):
    w = lib.ones(2, requires_grad=True)
    log = []
    w.register_post_accumulate_grad_hook(lambda p: log.append(p.grad.sum().item()))
    cf = wrap(lambda x: (w * x).sum())
    for k in range(3):
        cf(lib.ones(2) * (k + 1)).backward()
        see(list(log), w.grad)


def _load_state_dict_between(lib, wrap, see):
    m = lib.nn.Linear(2, 2)
    cm = wrap(m)
    see(cm(lib.ones(1, 2)))
    sd = {"weight": lib.ones(2, 2) * 3, "bias": lib.zeros(2)}
    m.load_state_dict(sd)
    see(cm(lib.ones(1, 2)))


def _module_requires_grad_toggled(lib, wrap, see):
    m = lib.nn.Linear(2, 1)
    cm = wrap(m)
    for k in range(4):
        m.requires_grad_(k % 2 == 0)
        m.zero_grad()
        out = cm(lib.ones(3, 2))
        if out.requires_grad:
            out.sum().backward()
        see(out.requires_grad, m.weight.grad)


def _module_to_double(lib, wrap, see):
    m = lib.nn.Linear(2, 1)
    cm = wrap(m)
    see(cm(lib.ones(1, 2)))
    m.double()
    see(cm(lib.ones(1, 2, dtype=lib.float64)))
    m.float()
    see(cm(lib.ones(1, 2)))


def _custom_fn_no_grad_inputs(lib, wrap, see):
    class F(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3
        @staticmethod
        def backward(ctx, g):
            return g * 3
    cf = wrap(lambda x: F.apply(x))
    for rg in (False, True, False):
        y = cf(lib.ones(2, requires_grad=rg))
        see(y, y.requires_grad)
    with lib.no_grad():
        y = cf(lib.ones(2, requires_grad=True))
        see(y.requires_grad)


def _custom_fn_setup_context(lib, wrap, see):
    class F(lib.autograd.Function):
        @staticmethod
        def forward(x, k):
            return x ** k
        @staticmethod
        def setup_context(ctx, inputs, output):
            x, k = inputs
            ctx.save_for_backward(x)
            ctx.k = k
        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * ctx.k * x ** (ctx.k - 1), None
    cf = wrap(lambda x, k: F.apply(x, k).sum())
    for k in (2, 3, 2):
        x = lib.arange(1., 4.).requires_grad_()
        cf(x, k).backward()
        see(x.grad)


def _custom_fn_materialize_off(lib, wrap, see):
    class F(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3
        @staticmethod
        def backward(ctx, ga, gb):
            out = lib.zeros(2)
            if ga is not None: out = out + ga * 2
            if gb is not None: out = out + gb * 3
            return out
    def f(x, which):
        a, b = F.apply(x)
        return (a if which else b).sum()
    cf = wrap(f)
    for which in (True, False, True):
        x = lib.ones(2, requires_grad=True)
        cf(x, which).backward()
        see(x.grad)


def _checkpoint_inside(lib, wrap, see):
    ck = lib.utils.checkpoint.checkpoint
    def f(x, w):
        return ck(lambda a: (a @ w).tanh(), x, use_reentrant=False).sum()
    cf = wrap(f)
    for k in range(2):
        w = lib.ones(2, 2, requires_grad=True)
        cf(lib.ones(1, 2) * (k + 1), w).backward()
        see(w.grad)


def _grad_accumulate_retain(lib, wrap, see):
    w = lib.ones(2, requires_grad=True)
    cf = wrap(lambda x: (w * x).exp().sum())
    y = cf(lib.ones(2))
    y.backward(retain_graph=True)
    y.backward()
    see(w.grad)
    cf(lib.ones(2) * 2).backward()
    see(w.grad)


def _backward_with_grad_tensor(lib, wrap, see):
    cf = wrap(lambda x: x * x)
    for k in range(3):
        x = lib.arange(3.).requires_grad_()
        y = cf(x)
        y.backward(lib.ones(3) * (k + 1))
        see(x.grad)
        _attempt(see, lambda: cf(x).backward())


def _eval_train_inside(lib, wrap, see):
    m = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.Dropout(0.5))
    def f(x, ev):
        if ev:
            m.eval()
        else:
            m.train()
        return m(x)
    cf = wrap(f)
    for ev in (True, False, True, False):
        see(cf(lib.ones(4, 2), ev), m.training, m[1].training)


def _global_tensor_replaced_shape(lib, wrap, see):
    box = {"w": lib.ones(2)}
    cf = wrap(lambda x: x * box["w"])
    see(cf(lib.ones(2)))
    box["w"] = lib.ones(3)
    _attempt(see, cf, lib.ones(2))
    see(cf(lib.ones(3)))


def _inplace_on_output_of_view_chain(lib, wrap, see):
    def f(x):
        y = x.view(2, 2).t()[0]
        y.mul_(10)
        return x
    cf = wrap(f)
    for k in range(2):
        w = lib.arange(4.).requires_grad_()
        x = w * 1
        out = cf(x)
        out.sum().backward()
        see(out, w.grad)


def _recursion_on_list(lib, wrap, see):
    def tree_sum(t):
        if isinstance(t, (list, tuple)):
            return sum(tree_sum(c) for c in t) if t else 0
        return t * 2
    cf = wrap(tree_sum)
    see(cf([lib.ones(1), [lib.ones(1), (lib.ones(1),)]]))
    see(cf([lib.ones(1), []]))


def _calling_other_compiled_with_state(lib, wrap, see):
    st = {"s": 1.0}
    inner = wrap(lambda x: x * st["s"])
    outer = wrap(lambda x: inner(x) + inner(x * 2))
    for k in range(3):
        see(outer(lib.ones(2)), inner(lib.ones(2)))
        st["s"] = k + 2.0


PROGRAMS = [v for k, v in sorted(globals().items()) if k.startswith("_") and callable(v)
            and getattr(v, "__code__", None) is not None and v.__code__.co_argcount == 3
            and v.__code__.co_varnames[:3] == ("lib", "wrap", "see") and v is not _checkpoint_inside]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.strip("_"))
def test_compiled_equals_eager_and_torch(program):
    runs(program, torch)


@pytest.mark.slow       # (torch.utils.checkpoint's first use imports for seconds)
def test_checkpoint_inside():
    runs(_checkpoint_inside, torch)
