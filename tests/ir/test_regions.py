"""Control flow in the IR: `cond` / `while_loop` nodes hold their regions as sub-Graphs. The
printer prints them nested and the parser reads them back; the verifier checks region
signatures (errors name the node, its line and the region); the interpreter, the passes and
the Python-source backend run them."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen.pysource import compile_source, graph_source
from llgrad.ir import Builder, TensorType, VerifyError, cse, dce, interpret
from llgrad.ir import parse_graph, verify
from llgrad.ir.graph import StackType, Value
from llgrad.ir.parser import parse_type
from llgrad.ir.printer import print_graph

F3 = TensorType("float64", (3,))
B0 = TensorType("bool", ())
I0 = TensorType("int64", ())


def region(name, types, body):
    b = Builder(name)
    ins = [b.input(t, f"a{k}") for k, t in enumerate(types)]
    return b.ret(*body(b, ins))


def cond_graph(else_body=None):
    """f(x, y) = (x * y if sum(x) > 0 else -x) + 1"""
    b = Builder("f")
    x, y = b.input(F3, "x"), b.input(F3, "y")
    p = b.add("gt", [b.add("sum", [x], {"dim": None, "keepdim": False}), 0], loc="m.py:2")
    then = region("then", [F3, F3], lambda b, a: [b.add("mul", [a[0], a[1]], loc="m.py:3")])
    other = region("else", [F3, F3], else_body or (lambda b, a: [b.add("neg", [a[0]],
                                                                        loc="m.py:5")]))
    types = [TensorType("float64", (3,))]
    r = b.add("cond", [p, x, y], {"then": then, "else": other}, types=types, loc="m.py:2")
    return b.ret(b.add("add", [r, 1], loc="m.py:6"))


def while_graph(save=True):
    """Halve x (counting steps) while sum(|x|) > limit."""
    b = Builder("g")
    x, lim = b.input(F3, "x"), b.input(TensorType("float64", ()), "limit")
    n0 = b.add("constant", [], {"value": 0, "dtype": "int64"})
    cond = region("cond", [F3, I0, TensorType("float64", ())], lambda b, a: [
        b.add("gt", [b.add("sum", [b.add("abs", [a[0]])], {"dim": None, "keepdim": False}),
                     a[2]], loc="m.py:9")])
    body = region("body", [F3, I0, TensorType("float64", ())], lambda b, a: [
        b.add("mul", [a[0], 0.5], loc="m.py:10"), b.add("add", [a[1], 1], loc="m.py:11")])
    types = [F3, I0] + ([I0, StackType(F3), StackType(I0)] if save else [])
    outs = b.add("while_loop", [x, n0, lim], {"n_carried": 2, "save": save, "cond": cond,
                                              "body": body}, types=types, loc="m.py:9")
    return b.ret(*outs)


def test_printed_regions_nest_and_parse_back():
    for g in (cond_graph(), while_graph(), while_graph(save=False)):
        verify(g)
        text = print_graph(g)
        assert print_graph(parse_graph(text)) == text
        verify(parse_graph(text))
    text = print_graph(while_graph())
    assert "\n    cond(%a0: f64[3]{1}, %a1: i64[]{}, %a2: f64[]{}) {\n" in text
    assert "stack(f64[3]{1}), stack(i64[]{})" in text
    assert " n_carried=2 save=True " in text
    assert parse_type("stack(f32[2,3]{3,1})") == StackType(TensorType("float32", (2, 3)))


def test_traced_control_flow_round_trips_and_interprets_the_same():
    def f(x, w):
        y = x
        while y.abs().sum() > 1:
            if (y * w).sum() > 0:
                y = y * 0.5
            else:
                y = y * 0.25 + w * 0.01
        return (y * w).sum()
    cf = llgrad.compile(f, backend="interpret")
    xs = [np.array([3.0, -2.0, 1.0]), np.array([0.5, 0.2, -0.1])]
    cf(*[llgrad.tensor(a, requires_grad=True) for a in xs]).backward()
    e = cf.entries[0]
    for g in (e.forward, e.backward):
        text = str(g)
        parsed = parse_graph(text)
        assert str(parsed) == text
        verify(parsed)
    feeds = [a.copy() for a in xs]
    for p, q in zip(interpret(e.forward, *feeds), interpret(parse_graph(str(e.forward)), *feeds)):
        np.testing.assert_array_equal(p, q)


def test_interpreter_runs_cond_and_while():
    g = cond_graph()
    x, y = np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0])
    np.testing.assert_array_equal(interpret(g, x, y)[0], x * y + 1)
    np.testing.assert_array_equal(interpret(g, -x, y)[0], x + 1)
    out, n, trips, s_x, s_n = interpret(while_graph(), np.array([4.0, -4.0, 8.0]), np.array(1.0))
    assert int(n) == int(trips) == 4 and s_x.shape == (4, 3) and s_n.tolist() == [0, 1, 2, 3]
    np.testing.assert_array_equal(out, np.array([4.0, -4.0, 8.0]) / 16)
    np.testing.assert_array_equal(s_x[1], np.array([2.0, -2.0, 4.0]))
    out, n, trips, s_x, s_n = interpret(while_graph(), np.zeros(3), np.array(1.0))  # no trip
    assert int(trips) == 0 and s_x.shape == (0, 3) and s_n.shape == (0,)


def test_python_source_runs_control_flow_like_the_interpreter():
    for g, feeds in [(cond_graph(), [np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0])]),
                     (cond_graph(), [np.array([-1.0, 2.0, -3.0]), np.array([2.0, 2.0, 2.0])]),
                     (while_graph(), [np.array([4.0, -4.0, 8.0]), np.array(1.0)]),
                     (while_graph(), [np.zeros(3), np.array(1.0)])]:
        src = graph_source(g)
        compile(src, "<check>", "exec")
        for p, q in zip(compile_source(g)(*feeds), interpret(g, *feeds)):
            assert p.shape == q.shape and p.dtype == q.dtype
            np.testing.assert_array_equal(p, q)
    src = graph_source(while_graph())
    assert "while True:  # while_loop; m.py:9" in src and ".append(" in src
    assert "if bool(" in graph_source(cond_graph())


def test_verifier_checks_region_signatures_naming_node_and_line():
    bad = cond_graph(lambda b, a: [b.add("sum", [a[0]], {"dim": None, "keepdim": False},
                                         loc="m.py:5")])
    with pytest.raises(VerifyError, match=r"node 2 `cond %1, %x, %y` \(m.py:2\): invalid "
                                          r"operands: result 0: region 'then' gives "
                                          r"f64\[3\]\{1\}, region 'else' gives f64\[\]"):
        verify(bad)
    g = while_graph()
    node = g.nodes[1]
    body = node.attrs["body"]
    body.outputs = body.outputs[::-1]
    with pytest.raises(VerifyError, match=r"`while_loop .*` \(m.py:9\): invalid operands: "
                                          r"region 'body' gives i64\[\]\{\} for carried value 0"):
        verify(g)
    g = while_graph()
    g.nodes[1].attrs["cond"].inputs.append(Value(F3, None, 3, "extra"))
    with pytest.raises(VerifyError, match=r"region 'cond' takes 4 inputs, the node passes 3"):
        verify(g)


def test_an_error_inside_a_region_names_the_outer_node_too():
    g = cond_graph()
    then = g.nodes[2].attrs["then"]
    then.nodes[0].inputs[1] = g.inputs[0]      # an outer value: regions are closed
    with pytest.raises(VerifyError, match=r"node 2 `cond %1, %x, %y` \(m.py:2\): region "
                                          r"'then': node 0 `mul %a0, %\?` \(m.py:3\): uses a "
                                          r"value before it is defined"):
        verify(g)


def test_passes_keep_control_flow_nodes_whole():
    g = cond_graph()
    b = Builder("h")
    x, y = b.input(F3, "x"), b.input(F3, "y")
    node = g.nodes[2]
    p = b.add("gt", [b.add("sum", [x], {"dim": None, "keepdim": False}), 0])
    r1 = b.add("cond", [p, x, y], dict(node.attrs), types=[F3])
    r2 = b.add("cond", [p, x, y], dict(node.attrs), types=[F3])     # not merged by cse
    b.add("cond", [p, x, y], dict(node.attrs), types=[F3])         # dead: dropped by dce
    h = b.ret(b.add("add", [r1, r2]))
    out = dce(cse(h))
    verify(out)
    assert [n.op for n in out.nodes].count("cond") == 2
    feeds = [np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0])]
    np.testing.assert_array_equal(interpret(out, *feeds)[0], interpret(h, *feeds)[0])
