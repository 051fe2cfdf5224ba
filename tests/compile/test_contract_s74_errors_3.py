"""Compile-contract s74, errors and bad input (3): errors around compiled calls' backward
(twice, retain_graph, a grad_output of the wrong shape or dtype, an input modified before it,
an output made under no_grad), messages made of the failing call's values, exceptions the
function catches itself, raise-from and finally, a loop of optimizer steps failing in its
third, sizes read from tensors, wrong arguments, replaced parameters, module, tensor and
optimizer hooks, closures and checkpoint raising, and warnings made errors: torch, llgrad
eager and llgrad.compile (test_contract_s74_errors.three)."""
import os
import warnings

import pytest
from test_contract_s74_errors import _try, three

torch = pytest.importorskip("torch")


def message_with_value(T, C, see):
    def f(x):
        l = (x * 2).sum()
        if l > 5:
            raise ValueError(f"loss {l.item():.3f} at {x.tolist()}")
        return l
    s = C(f)
    for k in [3.0, 0.5, 0.25, 4.0, 7.0, 0.5]:
        _try(see, s, T.ones(3) * k)


def user_except_inside(T, C, see):
    def f(a, b):
        try:
            y = a @ b
        except RuntimeError as e:
            y = a @ b.t()
        return y * 2
    s = C(f)
    for n in [3, 2, 2, 3, 2]:
        _try(see, s, T.ones(2, 2), T.arange(2.0 * n).reshape(n, 2))


def loop_of_steps(T, C, see):
    T.manual_seed(0)
    m = T.nn.Linear(2, 1)
    opt = T.optim.SGD(m.parameters(), lr=0.1)
    def train(xs):
        for x in xs:
            opt.zero_grad(); l = m(x).sum(); l.backward(); opt.step()
        return l
    s = C(train)
    for bad in [True, False, False, True, False]:
        xs = [T.ones(3, 2), T.ones(3, 2) * 2, T.ones(3, 3 if bad else 2)]
        _try(see, s, xs)
        see(m.weight, m.bias)


def item_sizes(T, C, see):
    def f(x, n):
        k = int(n.item())
        return x.topk(k).values * 2, T.zeros(k - 1), x.split([k, 4 - k])
    s = C(f)
    for k in [5, 2, 3, 0, 2, 6, 1]:
        _try(see, s, T.arange(4.0), T.tensor(k))


def wrong_args(T, C, see):
    def f(x, y):
        return x * y
    s = C(f)
    _try(see, s, T.ones(2))
    _try(see, s, T.ones(2), T.ones(2))
    _try(see, s, T.ones(2), T.ones(2), T.ones(2))
    _try(see, s, T.ones(2), z=T.ones(2))
    _try(see, s, [1.0, 2.0], T.ones(2))
    _try(see, s, None, T.ones(2))
    _try(see, s, "ab", T.ones(2))


def raise_from(T, C, see):
    def f(x):
        try:
            return x[T.tensor([5])]
        except IndexError as e:
            raise ValueError("wrapped") from e
    s = C(f)
    for k in range(3):
        try:
            s(T.ones(3))
        except ValueError as e:
            see(e, type(e.__cause__).__name__)


def finally_state(T, C, see):
    buf = T.zeros(3)
    def f(x):
        try:
            buf.add_(1)
            return x @ x
        finally:
            buf.mul_(3)
    s = C(f)
    for n in [(2, 3), (3, 3), (3, 3), (2, 3), (3, 3)]:
        _try(see, s, T.ones(*n))
        see(buf)


def nested_compiled(T, C, see):
    w = T.ones(3, requires_grad=True)
    inner = C(lambda x: (x * w).sum())
    def f(x):
        return inner(x[:, 0]) + inner(x[:, 1])
    s = C(f)
    for n in [(3, 1), (3, 2), (3, 2), (3, 1), (3, 2)]:
        _try(see, s, T.ones(*n))


def grad_wrong_shape_assign(T, C, see):
    w = T.ones(3, requires_grad=True)
    opt = T.optim.SGD([w], lr=0.1)
    def f(g):
        w.grad = g
        opt.step()
        return w * 1
    s = C(f)
    for n in [2, 3, 3, 4, 3]:
        _try(see, s, T.ones(n))
        see(w)


def exception_in_tensor_hook_later(T, C, see):
    w = T.ones(3, requires_grad=True)
    def h(g):
        if g.sum() > 10:
            raise RuntimeError(f"grad sum {float(g.sum())}")
    w.register_hook(h)
    def f(x):
        l = (x * w).sum(); l.backward(); return l
    s = C(f)
    for k in [5.0, 1.0, 2.0, 6.0, 1.0]:
        _try(see, s, T.ones(3) * k)
        see(w.grad)


def backward_twice_outside(T, C, see):
    w = T.tensor([1.0, -2.0, 3.0], requires_grad=True)
    s = C(lambda x: (x * w).exp().sum())
    for k in range(4):
        l = s(T.ones(3) * 0.1 * k)
        l.backward()
        _try(see, l.backward)
        see(w.grad)


def retain_twice_outside(T, C, see):
    w = T.tensor([1.0, -2.0, 3.0], requires_grad=True)
    s = C(lambda x: (x * w).exp().sum())
    for k in range(4):
        l = s(T.ones(3) * 0.1 * k)
        l.backward(retain_graph=True)
        _try(see, l.backward)
        _try(see, l.backward)
        see(w.grad)


def wrong_grad_output(T, C, see):
    w = T.tensor([1.0, -2.0, 3.0], requires_grad=True)
    s = C(lambda x: (x * w).exp())
    for n in [2, 3, 3, 2, 3, 1]:
        y = s(T.ones(3))
        _try(see, y.backward, T.ones(n))
        _try(see, T.autograd.grad, y, w, T.ones(n) * 2)
        see(w.grad)


def wrong_grad_output_dtype(T, C, see):
    w = T.tensor([1.0, -2.0, 3.0], requires_grad=True)
    s = C(lambda x: (x * w).exp())
    for dt in [T.long, T.float32, T.float32, T.long]:
        y = s(T.ones(3))
        _try(see, y.backward, T.ones(3, dtype=dt))
        see(w.grad)


def input_modified_before_backward(T, C, see):
    w = T.tensor([1.0, -2.0, 3.0], requires_grad=True)
    s = C(lambda x: (x * w).sum())
    for k in range(4):
        x = T.ones(3) * (k + 1)
        l = s(x)
        if k % 2 == 0:
            x.add_(1)
        _try(see, l.backward)
        see(w.grad)


def output_no_grad(T, C, see):
    w = T.tensor([1.0, -2.0, 3.0], requires_grad=True)
    s = C(lambda x: (x * w).sum())
    for k in range(4):
        with T.set_grad_enabled(k % 2 == 1):
            l = s(T.ones(3))
        _try(see, l.backward)
        see(w.grad)


def param_replaced_wrong_shape(T, C, see):
    T.manual_seed(0)
    m = T.nn.Linear(3, 2)
    s = C(lambda x: m(x).sum())
    for k in range(5):
        if k == 3:
            m.weight = T.nn.Parameter(T.ones(2, 4))
        if k == 4:
            m.weight = T.nn.Parameter(T.ones(2, 3))
        _try(see, s, T.ones(1, 3))


def full_backward_hook_raises(T, C, see):
    T.manual_seed(0)
    m = T.nn.Linear(3, 2)
    def h(mod, gi, go):
        if go[0].abs().max() > 3:
            raise RuntimeError("big grad")
    m.register_full_backward_hook(h)
    def f(x, g):
        y = m(x)
        y.backward(g)
        return y
    s = C(f)
    for k in [5.0, 1.0, 2.0, 4.0, 1.0]:
        _try(see, s, T.ones(1, 3), T.ones(1, 2) * k)
        see(m.weight.grad)


def step_pre_hook_raises(T, C, see):
    T.manual_seed(0)
    m = T.nn.Linear(3, 1)
    opt = T.optim.Adam(m.parameters(), lr=0.1)
    def pre(o, a, kw):
        if m.weight.grad.abs().max() > 3:
            raise RuntimeError("refuse")
    opt.register_step_pre_hook(pre)
    def step(x):
        opt.zero_grad(); l = m(x).sum(); l.backward(); opt.step(); return l
    s = C(step)
    for k in [5.0, 1.0, 2.0, 4.0, 1.0]:
        _try(see, s, T.ones(2, 3) * k)
        see(m.weight, opt.state[m.weight])


def closure_raises(T, C, see):
    T.manual_seed(0)
    m = T.nn.Linear(3, 1)
    opt = T.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    def step(x):
        def closure():
            opt.zero_grad(); l = m(x).sum(); l.backward()
            if l > 5: raise ValueError("diverged")
            return l
        return opt.step(closure)
    s = C(step)
    for k in [5.0, 1.0, 2.0, 4.0, 1.0]:
        _try(see, s, T.ones(2, 3) * k)
        see(m.weight, m.weight.grad, opt.state[m.weight])


def compiled_module_errors(T, C, see):
    T.manual_seed(0)
    m = T.nn.Sequential(T.nn.Linear(3, 4), T.nn.ReLU(), T.nn.Linear(4, 1))
    cm = C(m)
    for n in [2, 3, 3, 4, 3]:
        _try(see, cm, T.ones(2, n))
    _try(see, cm)
    _try(see, cm, T.ones(2, 3), T.ones(2))


def error_in_checkpoint(T, C, see):
    T.manual_seed(0)
    m = T.nn.Linear(3, 3)
    def blk(x):
        y = m(x)
        if y.sum() > 10: raise ValueError("inside checkpoint")
        return y.relu()
    def f(x):
        y = T.utils.checkpoint.checkpoint(blk, x, use_reentrant=False)
        y.sum().backward()
        return y
    s = C(f)
    for k in [9.0, 1.0, 1.0, 9.0, 1.0]:
        _try(see, s, T.ones(2, 3) * k)
        see(m.weight.grad)


def warning_error_after_ignored_trace(T, C, see):
    """torch.tensor(a tensor) warns at every call: under "error" a compiled call raises it
    as eager does, though its trace ran under "ignore"."""
    def f(x):
        return T.tensor(x) * 2
    s = C(f)
    for k, action in enumerate(["ignore", "ignore", "error", "always", "error"]):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter(action)
            _try(see, s, T.ones(3) * k)
        see(len(w))


PROGRAMS = [message_with_value, user_except_inside, loop_of_steps, item_sizes, wrong_args,
            raise_from, finally_state, nested_compiled, grad_wrong_shape_assign,
            exception_in_tensor_hook_later, backward_twice_outside, retain_twice_outside,
            wrong_grad_output, wrong_grad_output_dtype, input_modified_before_backward,
            output_no_grad, param_replaced_wrong_shape, full_backward_hook_raises,
            step_pre_hook_raises, closure_raises, compiled_module_errors,
            error_in_checkpoint, warning_error_after_ignored_trace]
OWN_MESSAGE = {input_modified_before_backward}     # (see test_contract_s74_errors_2.py)
UNFIXED = {input_modified_before_backward: (
    "llgrad's own hint of the version-counter error: a compiled call's names "
    "'CompiledFunctionBackward at' the call's line where eager's names 'MulBackward0 at' the "
    "line of the op that saved the tensor")}


# (with background builds the calls before the native code is ready run eagerly, so the
# hint may be eager's: strict only where every call after the trace is compiled)
_STRICT = os.environ.get("LLGRAD_COMPILE", "sync") == "sync"


@pytest.mark.parametrize("prog", [pytest.param(p, marks=pytest.mark.xfail(
    strict=_STRICT, reason=UNFIXED[p])) if p in UNFIXED else p for p in PROGRAMS],
    ids=lambda p: p.__name__)
def test_error_program_equals_eager_and_torch(prog):
    three(prog, msg=prog not in OWN_MESSAGE)
