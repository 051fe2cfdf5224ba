"""products_untransposed (ir/transposed_copies.py): t(mm(a, b)) read by nothing else is computed
as mm(t(b), t(a)), row-major. Checked against the interpreter on the original graph (with
a, b plain, and transposed views whose transposes cancel), on graphs where it must not
apply (the product or its transpose returned, read twice, viewed again), and end to end:
a Linear's weight gradient no longer reaches the optimiser's update as a transposed view,
and compiled SGD-with-momentum steps equal eager's."""
import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from llgrad.codegen.build import simplify
from llgrad.ir import transposed_copies
from llgrad.ir.builder import Builder
from llgrad.ir.graph import TensorType
from llgrad.ir.interpret import interpret
from llgrad.ir.verify import verify

RNG = np.random.default_rng(5)


def _graph(a_view=False, returned=False, second_reader=False, viewed=False):
    """out = t(mm(a, b)) + c, with a = t(x) when a_view, and the arrays it reads."""
    bld = Builder("product_t")
    m, k, n = 3, 5, 4
    x = bld.input(TensorType("float64", (k, m) if a_view else (m, k)))
    b = bld.input(TensorType("float64", (k, n)))
    c = bld.input(TensorType("float64", (n, m)))
    arrays = [RNG.standard_normal((k, m) if a_view else (m, k)), RNG.standard_normal((k, n)),
              RNG.standard_normal((n, m))]
    a = bld.add("t", [x], view_of=x) if a_view else x
    p = bld.add("mm", [a, b])
    pt = bld.add("t", [p], view_of=p)
    out = bld.add("add", [pt, c])
    extra = []
    if returned:
        extra.append(pt)
    if second_reader:
        extra.append(bld.add("neg", [p]))
    if viewed:
        extra.append(bld.add("unsqueeze", [pt], {"dim": 0}, view_of=pt))
    return bld.ret(out, *extra), arrays


@pytest.mark.parametrize("a_view", [False, True])
def test_rewritten_graph_equals_the_original(a_view):
    g, arrays = _graph(a_view)
    r = transposed_copies.products_untransposed(g)
    assert r is not g
    verify(r)
    mm, = [n for n in r.nodes if n.op == "mm"]
    assert mm.outputs[0].type.strides == (g.outputs[0].type.shape[1], 1)    # row-major
    assert not any(n.op == "t" and n.inputs[0] is mm.outputs[0] for n in r.nodes)
    if a_view:                      # (t(t(x)) is x itself: one new view, of b)
        assert sum(n.op == "t" for n in r.nodes) == 1
    for got, want in zip(interpret(r, *arrays), interpret(g, *arrays)):
        np.testing.assert_allclose(got, want, rtol=1e-13)


@pytest.mark.parametrize("case", ["returned", "second_reader", "viewed"])
def test_not_applied_where_the_layout_or_product_is_seen(case):
    g, _ = _graph(**{case: True})
    assert transposed_copies.products_untransposed(g) is g


def _sgd_run(step_fn, steps=3):
    llgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(40, 24), nn.ReLU(), nn.Linear(24, 5))
    opt = llgrad.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = llgrad.randn(16, 40), llgrad.randint(0, 5, (16,))
    step = step_fn(model, opt)
    losses = [float(step(x, y)) for _ in range(steps)]
    return losses, [p.detach().numpy().copy() for p in model.parameters()]


def _step(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def test_compiled_sgd_steps_equal_eager_and_read_weight_grads_row_major():
    want = _sgd_run(_step)
    got = _sgd_run(lambda m, o: llgrad.compile(_step(m, o)))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for a, b in zip(got[1], want[1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # the compiled step's graph: nothing but a view reads a product's result column-major
    # once simplified (this pass, or the mm backward's own layout: t(t(product)))
    llgrad.manual_seed(0)
    model = nn.Linear(40, 24)
    opt = llgrad.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    step = llgrad.compile(_step(model, opt))
    x, y = llgrad.randn(16, 40), llgrad.randint(0, 24, (16,))
    for _ in range(3):
        step(x, y)
    entry = step.entries[-1]
    graphs = [g for g in (entry.forward, entry.backward) if g is not None]
    products = 0
    views = ("t", "transpose")
    for graph in map(simplify, graphs):
        for n in graph.nodes:
            if n.op in views:
                continue
            for v in n.inputs:
                base = v
                while getattr(base, "node", None) is not None and base.node.op in views:
                    base = base.node.inputs[0]
                if getattr(base, "node", None) is not None and base.node.op == "mm":
                    products += 1
                    assert v.type.strides == (v.type.shape[1], 1), (n.op, v.type)
    assert products, "no product is read: the test no longer sees the weight gradient"
