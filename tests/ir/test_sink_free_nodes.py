"""sink_free_nodes (ir/passes.py): a node that reads only graph inputs is moved to just
before its first use. Checked against the interpreter on the original graph, on what must
stay in place (random ops, nodes reading computed values, outputs), and end to end: a stack
of transformer layers' backward no longer fuses every layer's recomputation into one loop
at its top, and its compiled gradients equal eager's."""
import numpy as np

import llgrad
import llgrad.nn as nn
from llgrad.codegen import build
from llgrad.codegen.lowerings.ops_matmul import small_gemm_bound
from llgrad.ir.builder import Builder
from llgrad.ir.graph import TensorType
from llgrad.ir.interpret import interpret
from llgrad.ir.passes import FLOATING_KINDS, sink_free_nodes
from llgrad.ir.optable import OPS
from llgrad.ir.verify import verify

RNG = np.random.default_rng(5)
T = TensorType("float64", (4, 4))


def _free(graph):
    free = set()
    for n in graph.nodes:
        if OPS[n.op].kind in FLOATING_KINDS and all(
                x.node is None or x.node in free for x in n.inputs if hasattr(x, "node")):
            free.add(n)
    return free


def _chain():
    """Two recomputations at the top (mul x, 0.25 and its exp) and a third, then products
    that read them one at a time, the way a backward reads its layers' recomputed values."""
    b = Builder("sink")
    x, y, z = b.input(T), b.input(T), b.input(T)
    rx = b.add("mul", [x, 0.25])
    ey = b.add("exp", [rx])
    rz = b.add("mul", [z, 0.5])
    h = b.add("mm", [y, b.add("t", [y], view_of=y)])
    h = b.add("mm", [h, ey])        # first use of ey (and, through it, of rx)
    h = b.add("mm", [h, b.add("t", [rz], view_of=rz)])     # first use of rz
    return b.ret(h, rx), [RNG.standard_normal((4, 4)) for _ in range(3)]


def test_moved_to_first_use_and_same_values():
    g, arrays = _chain()
    s = sink_free_nodes(g)
    assert s is not g
    verify(s)
    ops = [n.op for n in s.nodes]
    assert ops == ["t", "mm", "mul", "exp", "mm", "mul", "t", "mm"], ops
    for got, want in zip(interpret(s, *arrays), interpret(g, *arrays)):
        np.testing.assert_array_equal(got, want)


def test_only_free_nodes_lie_between_a_free_node_and_its_first_user():
    g, _ = _chain()
    s = sink_free_nodes(g)
    free, where = _free(s), {n: i for i, n in enumerate(s.nodes)}
    for n in free:
        users = [where[m] for m in s.nodes if any(x in n.outputs for x in m.inputs)]
        if users:
            assert all(s.nodes[i] in free for i in range(where[n] + 1, min(users)))


def test_a_graph_of_free_nodes_only_keeps_its_order():
    b = Builder("all_free")
    x = b.input(T)
    g = b.ret(b.add("exp", [b.add("neg", [x])]))
    assert sink_free_nodes(g) is g


def test_random_ops_and_reads_of_computed_values_stay():
    b = Builder("stay")
    x = b.input(T)
    h = b.add("neg", [x])
    r = b.add("mul", [h, 2.0])          # reads a computed value: not free
    u = b.add("rand_like", [x]) if "rand_like" in OPS else None
    out = b.add("add", [r, x])
    g = b.ret(out, u) if u is not None else b.ret(out)
    s = sink_free_nodes(g)
    assert [n.op for n in s.nodes] == [n.op for n in g.nodes]


def _stack(n_layers):
    llgrad.manual_seed(0)
    model = nn.Sequential(*[nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0,
                                                       batch_first=True)
                            for _ in range(n_layers)])
    x = llgrad.randn(4, 16, 64)
    return model, x


def _group_kinds(n_layers, monkeypatch=None):
    model, x = _stack(n_layers)
    params = list(model.parameters())

    def loss(x):
        y = model(x)
        return (y * y).mean()

    f = llgrad.compile(loss)
    f(x).backward()
    plan = build.plan_graph(build.simplify(f.entries[-1].backward),
                            {"blas": build.blas_available(), "small_gemm": small_gemm_bound()})
    got = [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    loss(x).backward()
    for a, p in zip(got, params):
        np.testing.assert_allclose(a.numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-6)
    return {tuple(m.op for m in grp.members) for grp in plan.groups}


def test_a_deeper_stack_adds_no_new_kind_of_group(monkeypatch):
    """Left at the top, the layers' `q * scale` recomputations fused into one loop with one
    mul per layer: a new kind of group at every depth (and no dedupe between depths)."""
    assert _group_kinds(3) == _group_kinds(4)
    monkeypatch.setattr(build, "PASSES", tuple(p for p in build.PASSES
                                               if p is not sink_free_nodes))
    assert _group_kinds(3) != _group_kinds(4)       # (what the pass prevents)
