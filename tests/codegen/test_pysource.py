"""Graphs as readable Python source: same results as the interpreter, comments with the
user's lines, registered in linecache so tracebacks show the generated code."""
import linecache
import traceback

import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F
from llgrad.codegen.pysource import compile_source, graph_source
from llgrad.ir import interpret


def model(x, w, i):
    h = (x @ w).tanh()
    h[:, 1:] = h[:, 1:] * 2
    return F.cross_entropy(h, i), h.amax(1), (x.long() + 1.5)


def args():
    llgrad.manual_seed(0)
    return llgrad.randn(4, 3), llgrad.randn(3, 5), llgrad.tensor([0, 1, 2, 3])


def test_source_reads_as_python_with_source_lines():
    g = llgrad.trace(model, *args())
    src = graph_source(g)
    assert src.startswith("def model(x, w, i):")
    assert "ops.mm(x, w)  # test_pysource.py:" in src
    assert "ops.strided_put(" in src
    compile(src, "<check>", "exec")          # it is valid Python


def test_generated_function_equals_interpreter_including_write_back():
    def f(x, y):
        x.t()[0].mul_(3)
        return x * y + 1, (y > 0).float().sum()
    x, y = llgrad.randn(3, 3), llgrad.randn(3)
    g = llgrad.trace(f, x.clone(), y)
    fn = compile_source(g)
    a1, a2 = [x.numpy().copy(), y.numpy().copy()], [x.numpy().copy(), y.numpy().copy()]
    for p, q in zip(fn(*a1), interpret(g, *a2)):
        np.testing.assert_array_equal(p, q)
    np.testing.assert_array_equal(a1[0], a2[0])          # the mutated input, written back


def test_promotion_casts_are_explicit():
    g = llgrad.trace(model, *args())
    assert "ops.cast(" in graph_source(g) and "'float32')" in graph_source(g)  # int64 + 1.5
    fn = compile_source(g)
    for p, q in zip(fn(*[a.numpy() for a in args()]), interpret(g, *[a.numpy() for a in args()])):
        assert p.dtype == q.dtype
        np.testing.assert_allclose(p, q, rtol=1e-6)


def test_tracebacks_show_the_generated_lines():
    g = llgrad.trace(lambda x: (x * 2).exp(), llgrad.ones(3))
    fn = compile_source(g)
    filename = fn.__code__.co_filename
    assert linecache.getline(filename, 2).strip().startswith("v0 = ops.mul(x, 2)")
    with pytest.raises(TypeError) as info:
        fn(None)                                 # fails inside the generated code
    text = "".join(traceback.format_exception(info.value))
    assert "v0 = ops.mul(x, 2)" in text


def test_dump_includes_python_source_of_both_graphs():
    cf = llgrad.compile(lambda x, w: (x @ w).tanh().sum())
    x, w = llgrad.randn(2, 3), llgrad.randn(3, 4, requires_grad=True)
    text = cf.dump(x, w, python=True)
    assert "== forward as Python ==" in text and "== backward as Python ==" in text
    assert "ops.mm(" in text.split("== backward as Python ==")[1]


def test_python_backend_runs_compiled_gradients():
    cf = llgrad.compile(lambda x, w: (x @ w).tanh().sum(), backend="python")
    x = llgrad.randn(2, 3)
    grads = []
    for _ in range(3):
        w = llgrad.ones(3, 4, requires_grad=True)
        cf(x, w).backward()
        grads.append(w.grad.numpy())
    we = llgrad.ones(3, 4, requires_grad=True)
    (x @ we).tanh().sum().backward()
    for g in grads:
        np.testing.assert_allclose(g, we.grad.numpy(), rtol=1e-6)
