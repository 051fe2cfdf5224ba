"""Tensor-dependent control flow: the source transformation (tracer/convert.py) turns if /
while / conditional expressions / and-or-not on tensors into `cond` and `while_loop` nodes.
Each compiled function is compared with the original function run eagerly (values and
every gradient) on inputs taking each path, on every backend, with exactly one trace; and
gradients against finite differences in float64. Rejected constructs raise errors naming
the user's line (marked `# <- name` below)."""
import functools
import re
import sys
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.tracer.trace import TraceError

BACKENDS = ("interpret", "python", "llvm")


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv("LLGRAD_BACKEND", raising=False)
    monkeypatch.delenv("LLGRAD_DUMP", raising=False)


def line_of(marker):
    """file:line of the line of this file ending in `# <- marker`."""
    with open(__file__) as f:
        for i, line in enumerate(f, 1):
            if line.rstrip().endswith(f"# <- {marker}"):
                return f"test_control_flow.py:{i}"
    raise AssertionError(marker)


def rnd(seed, *shape, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def leaves(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def run(fn, arrays, grad=True):
    """fn on fresh leaves: (output arrays, gradient arrays of the float leaves)."""
    xs = [llgrad.tensor(np.array(a), requires_grad=grad and a.dtype.kind == "f")
          for a in arrays]
    outs = leaves(fn(*xs))
    diff = [o for o in outs if isinstance(o, llgrad.Tensor) and o.requires_grad]
    if diff:
        loss = sum((o * llgrad.tensor(rnd(99 + k, *o.shape, dtype=o.detach().numpy().dtype)))
                   .sum() for k, o in enumerate(diff))
        loss.backward()
    vals = [o.detach().numpy().copy() if isinstance(o, llgrad.Tensor) else o for o in outs]
    return vals, [x.grad.numpy().copy() if x.grad is not None else None for x in xs]


def check(fn, inputs, backends=BACKENDS, traces=1):
    """Compiled fn == eager fn (values, gradients) on every input list, every backend, with
    `traces` traces; returns the compiled functions."""
    made = []
    for backend in backends:
        cf = llgrad.compile(fn, backend=backend)
        for arrays in inputs:
            for _ in range(2):              # the tracing call, then a compiled one
                got, want = run(cf, arrays), run(fn, arrays)
                for g, w in zip(got[0] + got[1], want[0] + want[1]):
                    if w is None:
                        assert g is None
                    else:
                        np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-9,
                                                   err_msg=f"{backend}")
        assert cf.n_traces == traces, backend
        made.append(cf)
    return made


def ops_of(graph):
    """The ops of graph and of its regions (a worklist, not recursion)."""
    found, todo = [], [graph]
    while todo:
        g = todo.pop()
        for n in g.nodes:
            found.append(n.op)
            todo += [v for v in n.attrs.values() if isinstance(v, type(g))]
    return found


# ---- if / elif / else -------------------------------------------------------------------------

def branchy(x, w):
    if x.sum() > 0:
        y = (x * w).tanh()
        z = w * 2
    elif x.sum() < -1:
        y = x * 3
        z = w.exp()
    else:
        y = x.exp() * 2
        z = w
    return (y * z).sum(), y


def test_if_elif_else_compiles_once_matching_eager_on_every_branch():
    pos, mid, neg = np.abs(rnd(1, 3, 4)), rnd(2, 3, 4) * 0.01, -np.abs(rnd(3, 3, 4))
    w = rnd(4, 3, 4)
    cfs = check(branchy, [[pos, w], [neg, w], [mid, w], [pos, w]])
    fwd = cfs[0].entries[0].forward
    assert ops_of(fwd).count("cond") == 2
    assert "cond" in ops_of(cfs[0].entries[0].backward)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_if_gradients_match_finite_differences(sign):
    cf = llgrad.compile(branchy, backend="interpret")
    x = llgrad.tensor(sign * (np.abs(rnd(5, 2, 3)) + 0.5), requires_grad=True)
    w = llgrad.tensor(rnd(6, 2, 3), requires_grad=True)
    assert llgrad.autograd.gradcheck(lambda a, b: cf(a, b)[0], (x, w))


def early_return(x):
    if x.mean() > 0:
        return x * 2
    h = x.exp()
    return h * 3


def test_return_in_a_branch_and_after_the_if():
    check(early_return, [[np.abs(rnd(7, 5))], [-np.abs(rnd(8, 5))]])


def ternary_and_logic(x, y):
    scale = 2.0 if (x.sum() > 0 and not y.max() > 2) or y.min() < -3 else 0.5
    return x * scale + (y if 0 < x.sum() < 10 else -y)


def test_conditional_expression_and_boolean_operators():
    a, b = np.abs(rnd(9, 4)), rnd(10, 4) * 0.1
    check(ternary_and_logic, [[a, b], [-a, b], [a, b + 5], [a * 100, b], [-a, b - 9]])


def python_conditions(x, n, flag, items):
    if n > 2:                           # Python values: decided by Python, as before
        x = x * n
    while n > 0:
        x = x + 1
        n -= 1
    if flag and len(items) > 1:
        out = x * items[1]
    else:
        out = x - 1
    if False:
        out = not_defined_anywhere()   # noqa: F821 (never runs, as in Python)
    return out


def test_python_conditions_keep_python_semantics():
    for n, flag, items in [(3, True, [1, 2]), (1, False, []), (3, True, [5])]:
        x = rnd(11, 3)
        cf = llgrad.compile(python_conditions, backend="interpret")
        got, want = run(lambda t: cf(t, n, flag, items), [x]), \
            run(lambda t: python_conditions(t, n, flag, items), [x])
        np.testing.assert_allclose(got[0][0], want[0][0])
        np.testing.assert_allclose(got[1][0], want[1][0])
        assert ops_of(cf.entries[0].forward).count("cond") == 0


def one_sided_python(x, use):
    if use:
        extra = x * 2
    if use:
        return x + extra
    return x


def test_a_variable_set_in_one_branch_is_fine_with_a_python_condition():
    check(one_sided_python and (lambda x: one_sided_python(x, True)), [[rnd(12, 3)]])
    check(lambda x: one_sided_python(x, False), [[rnd(12, 3)]])


# ---- while ------------------------------------------------------------------------------------

def newton_sqrt(a, w):
    x = a * 0.5 + 0.5
    steps = 0
    while (x * x - a).abs().max() > 1e-10 and steps < 60:
        x = x - (x * x - a) / (2 * x)
        steps += 1
    return (x * w).sum(), x, steps


def test_newton_iteration_with_a_tensor_dependent_while():
    small, large = np.abs(rnd(13, 4)) + 0.5, np.abs(rnd(14, 4)) * 1e4 + 1
    w = rnd(15, 4)
    cfs = check(newton_sqrt, [[small, w], [large, w], [np.ones(4), w]])
    leaf = lambda a: llgrad.tensor(a, requires_grad=True)  # noqa: E731 (the traced key)
    got = cfs[0](leaf(large), leaf(w))
    np.testing.assert_allclose(got[1].detach().numpy(), np.sqrt(large), rtol=1e-12)
    steps = [int(cfs[0](leaf(a), leaf(w))[2]) for a in (small, large)]
    assert steps[0] < steps[1]          # the trip count is data-dependent, with no retrace
    assert cfs[0].n_traces == 1
    assert "while_loop" in ops_of(cfs[0].entries[0].backward)


def test_newton_gradients_match_finite_differences():
    cf = llgrad.compile(newton_sqrt, backend="python")
    a = llgrad.tensor(np.abs(rnd(16, 3)) * 10 + 1, requires_grad=True)
    w = llgrad.tensor(rnd(17, 3), requires_grad=True)
    assert llgrad.autograd.gradcheck(lambda p, q: cf(p, q)[0], (a, w))
    # and the gradient is d sqrt(a)/da = 1 / (2 sqrt(a)) times w
    a.grad = None
    cf(a, w)[0].backward()
    np.testing.assert_allclose(a.grad.numpy(),
                               w.detach().numpy() / (2 * np.sqrt(a.detach().numpy())), rtol=1e-8)


def rnn(xs, h0, wx, wh):
    h = h0
    for t in range(xs.shape[0]):        # a fixed number of steps: unrolled
        h = (xs[t] @ wx + h @ wh).tanh()
        if h.abs().sum() > 2.0:          # a tensor-dependent rescale per step
            h = h * 0.5
    return h.sum(), h


def test_rnn_over_time_steps():
    args = [rnd(18, 5, 2, 3), rnd(19, 2, 4), rnd(20, 3, 4) * 0.8, rnd(21, 4, 4) * 0.8]
    quiet = [args[0] * 0.01, args[1] * 0.01, args[2], args[3]]
    cfs = check(rnn, [args, quiet])
    assert ops_of(cfs[0].entries[0].forward).count("cond") == 5
    cf = llgrad.compile(rnn, backend="interpret")
    ts = [llgrad.tensor(a, requires_grad=True) for a in args]
    assert llgrad.autograd.gradcheck(lambda *t: cf(*t)[0], ts)


def nested(x, k):
    i = 0
    acc = x * 0
    while i < k.sum():                  # a loop over a tensor bound, an if inside
        if (x * i).sum() > 1:
            acc = acc + x * i
        else:
            acc = acc - x
        i += 1
    return acc.sum()


def test_if_inside_a_tensor_dependent_while():
    x = np.abs(rnd(22, 3)) * 0.3
    check(nested, [[x, np.array([4.0])], [x, np.array([0.0])], [-x, np.array([2.5])]])
    cf = llgrad.compile(nested, backend="interpret")
    t = llgrad.tensor(x, requires_grad=True)
    assert llgrad.autograd.gradcheck(lambda a: cf(a, llgrad.tensor([4.0])), (t,))


def loop_in_branch(x):
    if x.sum() > 0:
        y = x
        while y.abs().sum() > 1:
            y = y * 0.5
    else:
        y = x * 2
    return y


def test_tensor_dependent_while_inside_a_branch():
    check(loop_in_branch, [[np.abs(rnd(23, 4)) * 3], [-np.abs(rnd(24, 4))]])


def integrate(x, dt):
    t = 0.0                              # a Python float that the loop makes a float64 tensor
    while t < 1.0:
        x = x + x.sin() * dt
        t = t + dt
    return x.sum(), t


def overshoot(x, dt):
    t = 0.0                              # staged from the first test: retyped to float64
    while x.sum() > t:
        t = t + dt
    return t * x


def test_a_python_number_loop_variable_takes_the_dtype_the_body_gives():
    check(integrate, [[rnd(34, 3), np.array(0.25)], [rnd(35, 3), np.array(0.1)]])
    x = np.abs(rnd(36, 3))
    cfs = check(overshoot, [[x, np.array(0.25)], [x * 3, np.array(0.5)]])
    assert "while_loop" in ops_of(cfs[0].entries[0].forward)


def test_zero_trip_loop_passes_gradients_through():
    check(newton_sqrt, [[np.ones(4) * 1.0, rnd(25, 4)]])   # x starts at the root


def cubic_or_exp(x):
    if x.sum() > 0:
        y = x * x * x
    else:
        y = x.exp()
    return y.sum()


@pytest.mark.parametrize("v", [[1.0, 2.0], [-1.0, -2.0]])
def test_double_backward_through_cond(v):
    cf = llgrad.compile(cubic_or_exp, backend="interpret")
    for _ in range(2):                  # the traced call, then the compiled graphs replayed
        got = []
        for fn in (cf, cubic_or_exp):
            x = llgrad.tensor(np.array(v), requires_grad=True)
            (g,) = llgrad.autograd.grad(fn(x), [x], create_graph=True)
            g.sum().backward()
            got.append((g.detach().numpy(), x.grad.numpy()))
        for a, b in zip(*got):
            np.testing.assert_allclose(a, b)


def halving(x):
    while x.abs().sum() > 1:
        x = x * x * 0.5
    return x.sum()


def test_double_backward_through_while_is_a_clear_error():
    cf = llgrad.compile(halving, backend="interpret")
    for _ in range(2):
        x = llgrad.tensor(np.array([1.5, 0.5]), requires_grad=True)
        with pytest.raises(RuntimeError, match="higher-order gradients .* through a "
                                               "tensor-dependent while loop are not supported"):
            (g,) = llgrad.autograd.grad(cf(x), [x], create_graph=True)
            g.sum().backward()


# ---- what the rewrite must keep working ---------------------------------------------------------

GLOBAL_SCALE = llgrad.tensor(np.array([1.5, -0.5, 2.0]))


def make_closure(threshold, weight, bias_default=1.0, gain_default=2.0):
    def closure(x, bias=bias_default, *, gain=gain_default):
        if x.sum() > threshold:
            y = x * weight * GLOBAL_SCALE + bias
        else:
            y = x * gain
        return y.sum()
    return closure


def test_closures_globals_and_defaults():
    f = make_closure(0.0, llgrad.tensor(np.array([2.0, 3.0, 4.0])))
    check(f, [[np.abs(rnd(26, 3))], [-np.abs(rnd(27, 3))]])
    g = make_closure(0.5, llgrad.tensor(np.array([2.0, 3.0, 4.0])), 3.0, -1.0)
    check(g, [[np.abs(rnd(26, 3))], [-np.abs(rnd(27, 3))]])


def counted(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@counted
def decorated(x):
    if x.sum() > 0:
        x = x * 2
    return x.sum()


def test_a_decorator_around_the_function():
    # (the wrapper's runs counted by a profile hook: a count the wrapper kept itself would
    # be Python state that each compiled call must update as eager does)
    calls, code, before = [0], decorated.__code__, sys.getprofile()

    def count(frame, event, arg):
        if event == "call" and frame.f_code is code:
            calls[0] += 1
    sys.setprofile(count)
    try:
        check(decorated, [[np.abs(rnd(28, 3))], [-np.abs(rnd(29, 3))]], backends=("interpret",))
    finally:
        sys.setprofile(before)
    assert calls[0] >= 2         # the wrapper still runs around the converted body


class Model:
    def __init__(self):
        self.w = llgrad.tensor(rnd(30, 3, 3), requires_grad=True)

    def clip(self, h):
        return h.clamp(-1, 1)

    @llgrad.compile(backend="interpret")
    def forward(self, x):
        h = x @ self.w
        if h.sum() > 0:
            h = self.clip(h)
        return h.sum()


def test_a_method_using_its_object():
    m = Model()
    for x in (np.abs(rnd(31, 2, 3)), -np.abs(rnd(31, 2, 3))):
        m.w.grad = None
        m.forward(llgrad.tensor(x)).backward()
        got = m.w.grad.numpy().copy()
        m.w.grad = None
        Model.__dict__["forward"].fn(m, llgrad.tensor(x)).backward()
        np.testing.assert_allclose(got, m.w.grad.numpy())
    assert Model.__dict__["forward"].n_traces == 1


def test_a_nested_function_and_a_lambda():
    def outer(x):
        def inner(y):
            return y * 2 if y.sum() > 0 else y * 3
        return inner(x) + x
    check(outer, [[np.abs(rnd(32, 3))], [-np.abs(rnd(33, 3))]])
    check(lambda x: x.exp() if x.sum() > 0 else -x, [[np.abs(rnd(32, 3))],
                                                      [-np.abs(rnd(33, 3))]])


def test_without_source_it_falls_back_with_one_warning():
    ns = {}
    exec("def f(x):\n    if x.sum() > 0:\n        return x * 2\n    return -x\n", ns)  # noqa: S102
    cf = llgrad.compile(ns["f"], backend="interpret")
    with pytest.warns(RuntimeWarning, match="without converting its control flow") as rec:
        cf(llgrad.tensor([1.0]))
    assert len(rec) == 1 and "\n" not in str(rec[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cf(llgrad.tensor([-1.0])).item() == 1.0
    assert cf.n_traces == 2             # value guards, as without the conversion


def scalar_branch(x, w):
    if (x * w).sum() > 0:
        return (x * w).exp().sum()
    return (x * w * w).sum()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("transform", ["grad", "value_and_grad"])
def test_grad_transforms_convert_the_function_they_wrap(backend, transform):
    # (the transform's own wrapper was converted once, and the user's if left a guard)
    f = getattr(llgrad, transform)(scalar_branch, argnums=(0, 1), backend=backend)
    w = rnd(41, 3)
    for x in (np.abs(rnd(42, 3)) * np.sign(w), -np.abs(rnd(43, 3)) * np.sign(w)):
        xs, ws = llgrad.tensor(x, requires_grad=True), llgrad.tensor(w, requires_grad=True)
        scalar_branch(xs, ws).backward()
        got = f(llgrad.tensor(x), llgrad.tensor(w))
        grads = got[1] if transform == "value_and_grad" else got
        if transform == "value_and_grad":
            np.testing.assert_allclose(got[0].numpy(), scalar_branch(
                llgrad.tensor(x), llgrad.tensor(w)).numpy(), rtol=1e-12)
        np.testing.assert_allclose(grads[0].numpy(), xs.grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(grads[1].numpy(), ws.grad.numpy(), rtol=1e-12)
    assert f.n_traces == 1
    assert "cond" in ops_of(f.entries[0].forward)


def test_a_function_without_branches_is_traced_without_reading_its_source(monkeypatch):
    import inspect

    def no_source(fn):
        raise OSError("not read")
    monkeypatch.setattr(inspect, "getsource", no_source)

    def straight(x):
        return (x * 2).sum()
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # (the fallback would warn)
        cf = llgrad.compile(straight, backend="interpret")
        assert cf(llgrad.tensor([1.0, 2.0])).item() == 6.0
    assert cf._converted == (straight, None)


def test_transform_false_opts_out():
    cf = llgrad.compile(early_return, backend="interpret", transform=False)
    for v in (1.0, -1.0, 1.0):
        assert cf(llgrad.tensor([v])).item() == pytest.approx(2.0 * v if v > 0
                                                              else 3 * np.exp(v))
    assert cf.n_traces == 2


def test_outside_compile_the_original_function_runs():
    assert early_return(llgrad.tensor([1.0])).item() == 2.0     # plain eager call
    cf = llgrad.compile(early_return, backend="eager")
    assert cf(llgrad.tensor([-1.0])).item() == pytest.approx(3 * np.exp(-1.0))


def test_dump_shows_the_regions_and_the_rewritten_source():
    cf = llgrad.compile(newton_sqrt, backend="interpret")
    text = cf.dump(llgrad.tensor(np.array([4.0]), requires_grad=True),
                   llgrad.tensor(np.array([1.0])), python=True)
    assert re.search(r"while_loop .* n_carried=2 save=True", text)
    assert "    cond(%x: f64[1]{1}, %steps: i64[]" in text and "    body(" in text
    assert "stack(f64[1]{1})" in text and "stack_get" in text
    assert "== rewritten source (tensor-dependent control flow) ==" in text
    assert "ag__.while_stmt(while_test_1, while_body_1, (x, steps), ('x', 'steps')" in text
    assert "while True:  # while_loop; test_control_flow.py:" in text


# ---- rejected constructs name the user's line ---------------------------------------------------

def rejects_break(x):
    for _ in range(3):
        if x.sum() > 0:  # <- break-if
            break
        x = x * 2
    return x


def rejects_continue(x):
    while x.sum() < 10:  # <- continue-while
        x = x + 1
        if x.max() > 3:
            continue
    return x


def rejects_return_in_loop(x):
    for _ in range(3):
        if x.sum() > 0:  # <- return-if
            return x
        x = x + 1
    return x


def rejects_one_branch(x):
    if x.sum() > 0:  # <- one-branch
        y = x * 2
    return y     # noqa: F821 (undefined on the other path)


def rejects_undefined_before_loop(x):
    while x.sum() < 5:  # <- loop-undefined
        d = x + 1
        x = d
    return d


def rejects_shape_change(x):
    while x.sum() < 5:  # <- loop-shape
        x = llgrad.cat([x, x])
    return x


def rejects_branch_shapes(x):
    if x.sum() > 0:  # <- branch-shapes
        y = x
    else:
        y = x.sum()
    return y


def rejects_inplace(x, y):
    if x.sum() > 0:
        y.add_(1)  # <- inplace
    return x + y


def rejects_item(x):
    if x.sum() > 0:
        h = x * 2
        x = x * h.sum().item()  # <- item
    return x


def rejects_random(x):
    if x.sum() > 0:
        x = x + llgrad.randn(3)  # <- random
    return x


def rejects_escape(x):
    saved = []
    if x.sum() > 0:
        saved.append(x * 2)
    return x + saved[0]  # <- escape


class Holder:
    def rejects_attribute(self, x):
        if x.sum() > 0:  # <- attribute
            self.last = x
        return x


@pytest.mark.parametrize("fn,marker,match", [
    (rejects_break, "break-if", r"`break` at line \d+ inside an if whose condition is a tensor"),
    (rejects_continue, "continue-while", r"`continue` at line \d+ inside a while loop"),
    (rejects_return_in_loop, "return-if", r"`return` at line \d+ inside an if"),
    (rejects_one_branch, "one-branch", r"variable 'y' is assigned only in the if branch"),
    (rejects_undefined_before_loop, "loop-undefined", r"variable 'd' .* no value before"),
    (rejects_shape_change, "loop-shape", r"loop variable 'x' is f64\[3\] before .* "
                                         r"f64\[6\] after an iteration"),
    (rejects_branch_shapes, "branch-shapes", r"variable 'y' is f64\[3\] in the if branch but "
                                             r"f64\[\] in the else branch"),
    (rejects_inplace, "inplace", r"in-place add on a tensor from outside"),
    (rejects_item, "item", r"a Python decision .* on a tensor computed inside"),
    (rejects_random, "random", r"random numbers inside"),
    (Holder().rejects_attribute, "attribute", r"assigning to an attribute"),
    (rejects_escape, "escape", r"a tensor computed inside the tensor-dependent if at "
                               r"test_control_flow.py:\d+ is used outside it"),
])
def test_rejected_constructs_name_the_line(fn, marker, match):
    """What converted control flow cannot hold: the function is traced again as it is (its
    tensor conditions value guards), with a warning naming the construct and its line, and
    gives eager's results; fullgraph=True raises the same message."""
    def args():
        return [llgrad.tensor(np.ones(3))] + ([llgrad.tensor(np.ones(3))]
                                              if fn is rejects_inplace else [])
    with pytest.raises(TraceError) as e:
        llgrad.compile(fn, backend="interpret", fullgraph=True)(*args())
    msg = str(e.value)
    assert re.search(match, msg), msg
    assert line_of(marker) in msg, msg
    cf = llgrad.compile(fn, backend="interpret")
    for _ in range(2):
        llgrad.manual_seed(0)
        got = cf(*args())
        llgrad.manual_seed(0)
        want = fn(*args())
        for g, w in zip(*(x if isinstance(x, tuple) else (x,) for x in (got, want))):
            np.testing.assert_allclose(np.asarray(g.detach().numpy()),
                                       np.asarray(w.detach().numpy()))
    first = cf._warned
    assert any(re.search(match, t) and line_of(marker) in t for t in first), first


def test_rejected_constructs_still_run_with_python_conditions():
    """The statements left in Python behave as Python when their condition is not a tensor."""
    def f(x, n):
        for k in range(5):
            if k > n:
                break
            x = x + 1
        return x
    cf = llgrad.compile(f, backend="interpret")
    assert cf(llgrad.tensor([0.0]), 2).item() == 3.0
