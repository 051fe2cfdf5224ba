"""clones_dropped (ir/fresh_clones.py): clone(x) of a value computed in the graph, read by
the clone alone and laid out as the copy, is read as x. Checked against the interpreter on
the original graph, on graphs where it must not apply (x an input, a view, read twice,
returned; the copy returned; another layout), and end to end: Slot Attention's keys
(a Linear over (b, n, d) whose gradient is a sum over the iterations, flattened by a copy)
compiled equal eager with that copy gone (test_bmm_untransposed_s77_L.py runs the step)."""
import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from llgrad.codegen.build import simplify
from llgrad.ir.builder import Builder
from llgrad.ir.fresh_clones import clones_dropped
from llgrad.ir.graph import TensorType
from llgrad.ir.interpret import interpret
from llgrad.ir.verify import verify

RNG = np.random.default_rng(78)


def _graph(case=None):
    """out = view(clone(a + b)) @ w, and the arrays it reads."""
    bld = Builder("fresh_clone")
    a = bld.input(TensorType("float64", (2, 3, 4)))
    b = bld.input(TensorType("float64", (2, 3, 4)))
    w = bld.input(TensorType("float64", (4, 5)))
    arrays = [RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 3, 4)),
              RNG.standard_normal((4, 5))]
    x = {"input": a, "view": bld.add("transpose", [a], {"dim0": 0, "dim1": 0}, view_of=a)
         }.get(case) or bld.add("add", [a, b])
    c = bld.add("clone", [x], {"memory_format": "contiguous"})
    flat = bld.add("view", [c], {"shape": (6, 4)}, view_of=c)
    out = bld.add("mm", [flat, w])
    extra = {"read_twice": lambda: [bld.add("neg", [x])], "returned": lambda: [x],
             "copy_returned": lambda: [c]}.get(case, lambda: [])()
    return bld.ret(out, *extra), arrays


def test_rewritten_graph_equals_the_original():
    g, arrays = _graph()
    r = clones_dropped(g)
    assert r is not g
    verify(r)
    assert not any(n.op == "clone" for n in r.nodes)
    for got, want in zip(interpret(r, *arrays), interpret(g, *arrays)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", ["input", "view", "read_twice", "returned", "copy_returned"])
def test_not_applied_where_the_copy_is_needed(case):
    g, _ = _graph(case)
    assert clones_dropped(g) is g


def test_not_applied_to_a_copy_of_another_layout():
    bld = Builder("relayout")
    a = bld.input(TensorType("float64", (3, 4)))
    x = bld.add("neg", [a])
    t = bld.add("t", [x], view_of=x)
    g = bld.ret(bld.add("clone", [t], {"memory_format": "contiguous"}))
    assert clones_dropped(g) is g


def _keys_step(compile_):
    llgrad.manual_seed(0)
    to_k = nn.Linear(8, 8)
    x, q = llgrad.randn(2, 12, 8), llgrad.randn(2, 3, 8)

    def step():
        k = to_k(x)
        loss = 0
        for _ in range(2):
            loss = loss + llgrad.einsum('bid,bjd->bij', q, k).softmax(dim=1).square().sum()
        loss.backward()
        return loss.detach()
    fn = compile_(step) if compile_ else step
    losses = []
    for _ in range(2):
        to_k.zero_grad()
        losses.append(float(fn()))
    return fn, losses, [p.grad.numpy().copy() for p in to_k.parameters()]


def test_compiled_keys_gradient_equals_eager_without_the_copy():
    _, want_l, want_g = _keys_step(None)
    fn, got_l, got_g = _keys_step(llgrad.compile)
    fn.wait()
    np.testing.assert_allclose(got_l, want_l, rtol=1e-5)
    for a, b in zip(got_g, want_g):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert fn.n_traces == 1
    entry = fn.entries[-1]
    graphs = [g for g in (entry.forward, entry.backward) if g is not None]
    big = lambda g: [n for n in g.nodes if n.op == "clone"                # noqa: E731
                     and n.outputs[0].type.shape == (2, 12, 8)]
    assert any(big(g) for g in graphs), "the trace has no copy of the keys' gradient"
    assert not any(big(simplify(g)) for g in graphs)
