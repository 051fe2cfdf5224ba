"""cond and while_loop on the llvm backend (codegen/control.py, stacks.py): native
branches and loops, compared with the interpreter backend and with eager (values and
gradients), and checked to be native: every graph claimed lowered has a Kernel in
entry.kernels, not an 'interpreted: ...' note. A loop's backward reads the stacks its
forward saved (grown natively); a loop saving stacks inside a region (the backward of a
loop in a branch) stays interpreted, with a note naming why."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen.kernel import Kernel
from llgrad.codegen.lower import lower
from llgrad.ir import Builder, TensorType, verify
from llgrad.ir.graph import StackType
from llgrad.ir.interpret import evaluate


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv("LLGRAD_BACKEND", raising=False)
    monkeypatch.delenv("LLGRAD_DUMP", raising=False)


def rnd(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape)


def _run(fn, arrays, grad):
    """fn on fresh leaves: output arrays, then the leaves' gradients (grad=True)."""
    xs = [llgrad.tensor(np.array(a), requires_grad=grad and a.dtype.kind == "f")
          for a in arrays]
    out = fn(*xs)
    outs = list(out) if isinstance(out, tuple) else [out]
    if grad:
        loss = sum((o * llgrad.tensor(rnd(90 + k, *o.shape))).sum()
                   for k, o in enumerate(outs) if getattr(o, "requires_grad", False))
        loss.backward()
    vals = [o.detach().numpy().copy() if isinstance(o, llgrad.Tensor) else np.asarray(o)
            for o in outs]          # (eager gives a Python int where a loop counted one)
    return vals + ([x.grad.numpy().copy() if x.grad is not None else None
                    for x in xs if x.requires_grad] if grad else [])


def check(fn, inputs, grad=True, native=("forward", "backward")):
    """llvm == interpret == eager on every input list (each run twice: the tracing call,
    then the compiled one); the graphs named in `native` are native on llvm, the others
    are interpreted. Returns the llvm compiled function."""
    cf = llgrad.compile(fn, backend="llvm")
    ci = llgrad.compile(fn, backend="interpret")
    for arrays in inputs:
        for _ in range(2):
            got, ref, want = _run(cf, arrays, grad), _run(ci, arrays, grad), _run(fn, arrays, grad)
            cf.wait()       # (background builds: native from the next call on)
            assert len(got) == len(want)
            for g, r, w in zip(got, ref, want):
                if w is None:       # eager: no path to the leaf (a zero-trip loop's
                    for x in (g, r):    # compiled backward gives zeros)
                        assert x is None or not np.any(x)
                    continue
                np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-14)
                np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    assert cf.n_traces == 1
    for entry in cf.entries:
        kinds = ("forward", "backward") if grad else ("forward",)
        for which in kinds:
            k = entry.kernels[which]
            if which in native:
                assert isinstance(k, Kernel), (which, k)
            else:
                assert isinstance(k, str) and k.startswith("interpreted: "), (which, k)
    return cf


def ops(graph):
    found, todo = [], [graph]
    while todo:
        g = todo.pop()
        for n in g.nodes:
            found.append(n.op)
            todo += [v for v in n.attrs.values() if isinstance(v, type(g))]
    return found


# ---- cond ------------------------------------------------------------------------------------

def branchy(x, w):
    if x.sum() > 0:
        y = (x * w).tanh()
    else:
        y = x.exp() * 2
    return (y * w).sum(), y


def test_cond_takes_each_branch_forward_and_backward():
    pos, neg, w = np.abs(rnd(1, 3, 4)), -np.abs(rnd(2, 3, 4)), rnd(3, 3, 4)
    cf = check(branchy, [[pos, w], [neg, w], [pos, w]])
    entry = cf.entries[0]
    assert "cond" in ops(entry.forward) and "cond" in ops(entry.backward)


def test_cond_runs_only_the_taken_branch():
    # the untaken branch would divide by zero; a select running both would still give the
    # right value, so check the branch's side by the result of each path separately
    def f(x):
        if x.sum() > 0:
            y = x * 10
        else:
            y = x - 100
        return y
    cf = check(f, [[np.ones(3)], [-np.ones(3)]], grad=False)
    assert cf.entries[0].kernels["forward"].ir_before.count("br i1") >= 1


def composites_and_cond(x, w, b):
    # layer_norm and gelu have no lowering of their own: expanded into primitives
    # (ir/decompose.py) in the graph holding the cond and in its regions
    h = llgrad.nn.functional.layer_norm(x, (4,), w, b)
    if h.sum() > 0:
        y = llgrad.nn.functional.gelu(llgrad.nn.functional.layer_norm(h * 2, (4,)))
    else:
        y = h.tanh()
    return (y * w).sum(), y


def test_composites_around_and_inside_a_cond_are_native():
    x, w, b = rnd(6, 3, 4), rnd(7, 4), rnd(8, 4)
    cf = check(composites_and_cond, [[x, w, b + 5], [x, w, b - 5], [x, w, b + 5]])
    assert {"layer_norm", "gelu", "cond"} <= set(ops(cf.entries[0].forward))


def nested_cond(x):
    if x.sum() > 0:
        if x.max() > 1.5:
            y = x * 3
        else:
            y = x * x
    else:
        y = -x
    return y.sum(), y


def test_nested_cond_every_path():
    base = np.abs(rnd(4, 5)) * 0.2
    check(nested_cond, [[base + 2], [base], [-base], [base + 2]])


def passthrough(x, c):
    if c.sum() > 0:
        y, z = x, x.t()             # an operand returned as is, and a view of it
    else:
        y, z = x * 2, x.t() * 3
    return y, z


def test_cond_results_that_are_operands_or_views_are_copied():
    x = rnd(5, 3, 3)
    check(passthrough, [[x, np.ones(1)], [x, -np.ones(1)]])


def strided_operand(x):
    xt = x.t()[1:]                  # a captured view: the region reads it where it is
    if x.sum() > 0:
        y = xt * 2
    else:
        y = xt + 1
    return y


def test_cond_reads_a_strided_view_operand():
    check(strided_operand, [[np.abs(rnd(6, 4, 3))], [-np.abs(rnd(7, 4, 3))]])


def rnn(xs, h0, wx, wh):
    h = h0
    for t in range(xs.shape[0]):        # unrolled: a tensor-dependent rescale per step
        h = (xs[t] @ wx + h @ wh).tanh()
        if h.abs().sum() > 2.0:
            h = h * 0.5
    return h.sum(), h


def test_rnn_with_a_cond_per_step_is_native_forward_and_backward():
    args = [rnd(8, 5, 2, 3), rnd(9, 2, 4), rnd(10, 3, 4) * 0.8, rnd(11, 4, 4) * 0.8]
    quiet = [args[0] * 0.01, args[1] * 0.01, args[2], args[3]]
    cf = check(rnn, [args, quiet])
    assert ops(cf.entries[0].forward).count("cond") == 5


def gathered(x, idx):
    if x.sum() > 0:
        y = x.index_select(0, idx) * 2
    else:
        y = x.index_select(0, idx)
    return y


def test_an_index_error_inside_a_branch_raises():
    x, ok = np.abs(rnd(12, 4, 2)), np.array([3, 0, 1])
    check(gathered, [[x, ok], [-x, ok]])
    cf = llgrad.compile(gathered, backend="llvm")
    cf(llgrad.tensor(x), llgrad.tensor(ok))
    cf.wait()
    assert isinstance(cf(llgrad.tensor(x), llgrad.tensor(ok)).numpy(), np.ndarray)
    assert isinstance(cf.entries[0].kernels["forward"], Kernel)
    with pytest.raises(IndexError):
        cf(llgrad.tensor(x), llgrad.tensor(np.array([3, 9, 1])))
    with pytest.raises(IndexError):
        cf(llgrad.tensor(-x), llgrad.tensor(np.array([3, 9, 1])))


# ---- while_loop ------------------------------------------------------------------------------

def halve(x):
    n = x * 0
    while x.abs().sum() > 1:
        x = x * 0.5
        n = n + 1
    return x, n


def test_while_zero_and_many_trips_without_grad_is_native():
    small, large = rnd(13, 3) * 0.01, rnd(14, 3) * 1e6
    cf = check(halve, [[small], [large], [small]], grad=False)
    out = cf(llgrad.tensor(large))
    assert out[1].numpy()[0] > 15          # many trips ...
    assert cf(llgrad.tensor(small))[1].numpy()[0] == 0      # ... and none


def test_while_with_grad_saves_stacks_and_its_backward_reads_them_natively():
    cf = check(halve, [[rnd(15, 3) * 10], [rnd(16, 3) * 0.01]])
    assert "save=True" in str(cf.entries[0].forward)
    assert "stack_get" in ops(cf.entries[0].backward)


def count_up(x, limit):
    n = x.sum() * 0
    while n < limit.sum():          # many trips: the stacks grow (realloc) several times
        x = x * 0.999 + 0.001
        n = n + 1
    return x, n


def test_saved_stacks_grow_and_match_the_interpreter():
    x = rnd(30, 2, 3)
    cf = check(count_up, [[x, np.array([1000.0])], [x, np.array([0.0])],
                          [x, np.array([5.0])]])
    kernel = cf.entries[0].kernels["forward"]
    args = [x, np.array([1000.0])]
    outs, _ = kernel.run(args)
    want, _ = evaluate(cf.entries[0].forward, args)
    for v, w in zip(cf.entries[0].forward.outputs, want):
        got = outs[list(cf.entries[0].forward.outputs).index(v)]
        np.testing.assert_allclose(got, w, rtol=1e-13)
        if "stack" in str(v.type):
            assert got.shape[0] in (0, 1000)
    stack = [o for o in outs if o.ndim == 3]
    assert stack and stack[0].shape == (1000, 2, 3)
    np.testing.assert_array_equal(stack[0][0], x)
    for ctx in kernel._pool:        # the native memory was freed and its words cleared
        assert all(list(words) == [0, 0, 0] for words, _, _ in ctx.stacks.items)


def newton_sqrt(a, w):
    x = a * 0.5 + 0.5
    steps = 0
    while (x * x - a).abs().max() > 1e-10 and steps < 60:
        x = x - (x * x - a) / (2 * x)
        steps += 1
    return (x * w).sum(), x, steps


def test_newton_forward_is_native():
    small, large, w = np.abs(rnd(17, 4)) + 0.5, np.abs(rnd(18, 4)) * 1e4 + 1, rnd(19, 4)
    cf = check(newton_sqrt, [[small, w], [large, w], [np.ones(4), w]], grad=False)
    got = cf(llgrad.tensor(large), llgrad.tensor(w))
    np.testing.assert_allclose(got[1].numpy(), np.sqrt(large), rtol=1e-12)
    assert int(got[2]) > int(cf(llgrad.tensor(small), llgrad.tensor(w))[2]) > 0
    assert int(cf(llgrad.tensor(np.ones(4)), llgrad.tensor(w))[2]) == 0   # zero trips


def test_newton_with_grad_is_native_forward_and_backward():
    check(newton_sqrt, [[np.abs(rnd(20, 4)) + 0.5, rnd(21, 4)], [np.ones(4), rnd(21, 4)],
                        [np.abs(rnd(22, 4)) * 1e4 + 1, rnd(21, 4)]])


def rnn_while(x, h0, wx, wh, limit):
    h = h0
    k = 0
    while h.abs().sum() < limit.sum() and k < 30:   # steps until the state grows
        h = (x @ wx + h @ wh).tanh() + h
        k += 1
    return h, k


def test_rnn_style_while_with_matmuls_in_the_body():
    args = [rnd(22, 2, 3), rnd(23, 2, 4) * 0.1, rnd(24, 3, 4) * 0.5, rnd(25, 4, 4) * 0.5]
    check(rnn_while, [args + [np.array([6.0])], args + [np.array([0.0])],
                      args + [np.array([1e9])]])


def cond_in_while(x, k):
    i = 0
    acc = x * 0
    while i < k.sum():
        if (x * i).sum() > 1:
            acc = acc + x * i
        else:
            acc = acc - x
        i += 1
    return acc


def test_cond_inside_while():
    x = np.abs(rnd(26, 3)) * 0.3
    cf = check(cond_in_while, [[x, np.array([6.0])], [x, np.array([0.0])],
                               [-x, np.array([2.5])]])
    assert "cond" in ops(cf.entries[0].forward) and "cond" in ops(cf.entries[0].backward)


def while_in_cond(x):
    if x.sum() > 0:
        y = x
        while y.abs().sum() > 1:
            y = y * 0.5
    else:
        y = x * 2
    return y


def test_while_inside_cond():
    inputs = [[np.abs(rnd(27, 4)) * 3], [-np.abs(rnd(28, 4))]]
    check(while_in_cond, inputs, grad=False)
    # the backward recomputes the loop inside a branch, saving stacks there: interpreted
    cf = check(while_in_cond, inputs, native=("forward",))
    assert "saving stacks" in cf.entries[0].kernels["backward"]


def swap_loop(a, b):
    while a.sum() < 50:             # carried values exchanged: body outputs are inputs
        a, b = b, a + b
    return a, b


def test_while_body_returning_its_inputs():
    check(swap_loop, [[np.ones(3), np.ones(3)], [np.full(3, 30.0), np.ones(3)]])


def strided_carry(x):
    y = x.t()                       # the loop starts from a transposed view
    while y.sum() < 100:
        y = y * 2 + 1
    return y


def test_while_carrying_a_view():
    check(strided_carry, [[np.abs(rnd(29, 2, 3))], [np.full((2, 3), 20.0)]])


# ---- regions built as IR: layouts and results the tracer does not make ---------------------

def _region(name, types, body):
    b = Builder(name)
    ins = [b.input(t, f"a{k}") for k, t in enumerate(types)]
    return b.ret(*body(b, ins))


def test_region_inputs_laid_out_otherwise_and_results_that_are_views_or_constants():
    t23, t32 = TensorType("float64", (2, 3)), TensorType("float64", (3, 2))
    odd = TensorType("float64", (2, 3), (1, -2), 4)     # the region reads this layout

    def then_body(b, a):
        m = b.add("mul", [a[0], 2.0])
        return [b.add("transpose", [m], {"dim0": 0, "dim1": 1}, view_of=m)]

    def else_body(b, a):
        return [b.add("constant", [], {"value": [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]],
                                       "dtype": "float64"})]
    b = Builder("f")
    x, p = b.input(t23, "x"), b.input(TensorType("bool", ()), "p")
    r = b.add("cond", [p, x], {"then": _region("then", [odd], then_body),
                               "else": _region("else", [odd], else_body)}, types=[t32])
    g = b.ret(r)
    verify(g)
    kernel = lower(g)
    xv = np.arange(6.0).reshape(2, 3)
    for pv in (True, False):
        want = evaluate(g, [xv, np.array(pv)])[0][0]
        np.testing.assert_array_equal(kernel([xv, np.array(pv)])[0], want)
    np.testing.assert_array_equal(kernel([xv, np.array(True)])[0], xv.T * 2)


def test_loop_whose_cond_returns_a_carried_flag():
    f3, b0, f0 = TensorType("float64", (3,)), TensorType("bool", ()), TensorType("float64", ())
    cond = _region("cond", [f3, b0, f0], lambda b, a: [a[1]])      # the flag as is

    def body(b, a):
        y = b.add("mul", [a[0], 0.5])
        s = b.add("sum", [b.add("abs", [y])], {"dim": None, "keepdim": False})
        return [y, b.add("gt", [s, a[2]])]
    b = Builder("g")
    x, go, lim = b.input(f3, "x"), b.input(b0, "go"), b.input(f0, "limit")
    outs = b.add("while_loop", [x, go, lim], {"n_carried": 2, "save": False, "cond": cond,
                                               "body": _region("body", [f3, b0, f0], body)},
                 types=[f3, b0])
    g = b.ret(*outs)
    verify(g)
    kernel = lower(g)
    xv = np.array([40.0, -3.0, 7.0])
    for start in (True, False):
        args = [xv, np.array(start), np.array(1.0)]
        got, want = kernel(args), evaluate(g, args)[0]
        for a, w in zip(got, want):
            np.testing.assert_array_equal(a, w)
    assert kernel([xv, np.array(True), np.array(1.0)])[0][0] == 40.0 / 64


def test_stack_inputs_are_checked_and_indexed_within_their_length():
    f2, i0 = TensorType("float64", (2,)), TensorType("int64", ())
    b = Builder("h")
    st, i = b.input(StackType(f2), "stack"), b.input(i0, "i")
    g = b.ret(b.add("stack_get", [st, i], types=[f2]))
    kernel = lower(g)
    stack = np.arange(10.0).reshape(5, 2)
    for k in (0, 4, -1, -5):                    # negative counts from the end, as NumPy
        np.testing.assert_array_equal(kernel([stack, np.array(k)])[0], stack[k])
    np.testing.assert_array_equal(kernel([stack[::-1], np.array(1)])[0], stack[3])
    for k in (5, -6, 1 << 40):
        with pytest.raises(IndexError, match="stack_get"):
            kernel([stack, np.array(k)])
    with pytest.raises(IndexError):
        kernel([stack[:0], np.array(0)])        # an empty stack has no entry 0
    with pytest.raises(ValueError, match="stack"):
        kernel([np.zeros((5, 3)), np.array(0)])


def test_a_loop_reading_a_stack_input_checks_its_length():
    f2, i0 = TensorType("float64", (2,)), TensorType("int64", ())
    sig = [i0, f2, StackType(f2), i0]           # carried j, acc; invariant stack, count
    cond = _region("cond", sig, lambda b, a: [b.add("lt", [a[0], a[3]])])

    def body(b, a):
        e = b.add("stack_get", [a[2], a[0]], types=[f2])
        return [b.add("add", [a[0], 1], {"alpha": 1}), b.add("add", [a[1], e], {"alpha": 1})]
    b = Builder("sum_first")
    st, count, j0, acc0 = (b.input(StackType(f2), "stack"), b.input(i0, "count"),
                           b.input(i0, "j0"), b.input(f2, "acc0"))
    outs = b.add("while_loop", [j0, acc0, st, count],
                 {"n_carried": 2, "save": False, "cond": cond,
                  "body": _region("body", sig, body)}, types=[i0, f2])
    g = b.ret(outs[1])
    verify(g)
    kernel = lower(g)
    stack = np.arange(10.0).reshape(5, 2)
    for n in (0, 3, 5):
        args = [stack, np.array(n), np.array(0), np.zeros(2)]
        np.testing.assert_array_equal(kernel(args)[0], evaluate(g, args)[0][0])
    with pytest.raises(IndexError, match="stack_get"):
        kernel([stack, np.array(6), np.array(0), np.zeros(2)])
