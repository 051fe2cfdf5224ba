"""products_untransposed (ir/transposed_copies.py) on batched products: transpose(bmm(a, b),
1, 2), also behind same-shape views, read by nothing else is computed as bmm(t(b), t(a)),
laid out row-major. Checked against the interpreter on the original graph, on graphs where
it must not apply, and end to end on Slot Attention's pattern (einsum('bid,bjd->bij', q, k)
over iterations, whose gradient for k was a (b, d, j) product read as (b, j, d) by every add
and copy after it): compiled values and gradients equal eager's, one trace, and no batched
product is read through a transpose once the graph is simplified."""
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

RNG = np.random.default_rng(77)


def _graph(through_view=False, permute=False, second_reader=False, returned=False):
    """out = transpose(bmm(a, b)) + c (through a same-shape view when through_view), and
    the arrays it reads."""
    bld = Builder("bmm_t")
    bt, m, k, n = 2, 3, 5, 4
    a = bld.input(TensorType("float64", (bt, m, k)))
    b = bld.input(TensorType("float64", (bt, k, n)))
    c = bld.input(TensorType("float64", (bt, n, m)))
    arrays = [RNG.standard_normal((bt, m, k)), RNG.standard_normal((bt, k, n)),
              RNG.standard_normal((bt, n, m))]
    p = bld.add("bmm", [a, b])
    q = bld.add("view", [p], {"shape": (bt, m, n)}, view_of=p) if through_view else p
    pt = bld.add("permute", [q], {"dims": (0, 2, 1)}, view_of=q) if permute else \
        bld.add("transpose", [q], {"dim0": 1, "dim1": 2}, view_of=q)
    out = bld.add("add", [pt, c])
    extra = []
    if second_reader:
        extra.append(bld.add("neg", [p]))
    if returned:
        extra.append(pt)
    return bld.ret(out, *extra), arrays


@pytest.mark.parametrize("through_view,permute", [(False, False), (True, True)])
def test_rewritten_graph_equals_the_original(through_view, permute):
    g, arrays = _graph(through_view, permute)
    r = transposed_copies.products_untransposed(g)
    assert r is not g
    verify(r)
    bmm, = [n for n in r.nodes if n.op == "bmm"]
    assert bmm.outputs[0].type.strides == (12, 3, 1)        # (b, n, m) row-major
    for got, want in zip(interpret(r, *arrays), interpret(g, *arrays)):
        np.testing.assert_allclose(got, want, rtol=1e-13)


@pytest.mark.parametrize("case", ["second_reader", "returned"])
def test_not_applied_where_the_layout_or_product_is_seen(case):
    g, _ = _graph(through_view=True, **{case: True})
    assert transposed_copies.products_untransposed(g) is g


def _attention(lib_compile):
    llgrad.manual_seed(0)
    to_k, to_q = nn.Linear(16, 16), nn.Linear(16, 16)
    opt = llgrad.optim.Adam(list(to_k.parameters()) + list(to_q.parameters()), lr=1e-3)
    x, slots = llgrad.randn(2, 24, 16), llgrad.randn(2, 3, 16)

    def step():
        opt.zero_grad()
        k, q = to_k(x), to_q(slots)
        for _ in range(2):
            attn = (llgrad.einsum('bid,bjd->bij', q, k) * 0.25).softmax(dim=1)
            q = q + llgrad.einsum('bjd,bij->bid', k, attn)
        loss = (q * q).mean()
        loss.backward()
        opt.step()
        return loss.detach()
    fn = lib_compile(step) if lib_compile else step
    losses = [float(fn()) for _ in range(3)]
    params = [p for m in (to_k, to_q) for p in m.parameters()]
    return fn, losses, [p.detach().numpy().copy() for p in params], \
        [p.grad.numpy().copy() for p in params]


def _bmm_read_transposed(graph):
    """Whether a product is read as the keys' gradient (2, 24, 16) through a transpose (the
    outputs (2, 3, 16) of the second einsum are viewed again after theirs: kept)."""
    for n in graph.nodes:
        if n.op in ("transpose", "permute") and n.outputs[0].type.shape == (2, 24, 16):
            v = n.inputs[0]
            while v.node is not None and v.node.op in ("view", "_reshape_alias"):
                v = v.node.inputs[0]
            if v.node is not None and v.node.op == "bmm":
                return True
    return False


def test_compiled_attention_steps_equal_eager_with_row_major_key_gradients():
    _, want_l, want_p, want_g = _attention(None)
    fn, got_l, got_p, got_g = _attention(llgrad.compile)
    fn.wait()
    np.testing.assert_allclose(got_l, want_l, rtol=1e-5)
    for a, b in zip(got_p + got_g, want_p + want_g):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert fn.n_traces == 1
    entry = fn.entries[-1]
    graphs = [g for g in (entry.forward, entry.backward) if g is not None]
    assert any(_bmm_read_transposed(g) for g in graphs), \
        "the traced graph no longer reads a product transposed: the test sees nothing"
    assert not any(_bmm_read_transposed(simplify(g)) for g in graphs)
