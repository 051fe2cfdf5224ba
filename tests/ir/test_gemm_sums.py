"""merge_product_sums (ir/gemm_sums.py): a sum of mm(t(a_i), b_i) becomes products of
stacked operands. Checked against the interpreter on the original graph, with chunking, on
the shapes where it must not apply, and end to end: compiled recurrent layers' gradients
equal eager ones and their native plan holds the stacked product."""
import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from llgrad.ir import gemm_sums
from llgrad.ir.builder import Builder
from llgrad.ir.graph import TensorType
from llgrad.ir.interpret import interpret
from llgrad.ir.passes import cse, dce
from llgrad.ir.verify import verify

RNG = np.random.default_rng(6)


def _sum_graph(n_terms, k=3, m=4, n=5, alpha=1, reuse=False, shapes=None):
    bld = Builder("sums")
    arrays, total = [], None
    for i in range(n_terms):
        ka = shapes[i] if shapes else k
        a = bld.input(TensorType("float64", (ka, m)))
        b = bld.input(TensorType("float64", (ka, n)))
        arrays += [RNG.standard_normal((ka, m)), RNG.standard_normal((ka, n))]
        p = bld.add("mm", [bld.add("t", [a], view_of=a), b])
        total = p if total is None else bld.add("add", [total, p], {"alpha": alpha})
        if reuse and i == 1:
            extra = p
    outs = [total, extra] if reuse else [total]
    return bld.ret(*outs), arrays


def _count(graph, op):
    return sum(n.op == op for n in graph.nodes)


@pytest.mark.parametrize("n_terms", [3, 7, 20])
def test_merged_sum_equals_the_original(n_terms):
    g, arrays = _sum_graph(n_terms)
    m = dce(gemm_sums.merge_product_sums(g))
    verify(m)
    assert _count(m, "mm") == 1 and _count(m, "cat") == 2
    np.testing.assert_allclose(interpret(m, *arrays)[0], interpret(g, *arrays)[0], rtol=1e-12)


def test_chunks_bound_the_stacked_rows(monkeypatch):
    monkeypatch.setattr(gemm_sums, "MAX_ROWS", 7)        # k = 3: two products per chunk
    g, arrays = _sum_graph(7)
    m = dce(gemm_sums.merge_product_sums(g))
    verify(m)
    assert _count(m, "mm") == 4
    assert all(n.outputs[0].type.shape[0] <= 7 for n in m.nodes if n.op == "cat")
    np.testing.assert_allclose(interpret(m, *arrays)[0], interpret(g, *arrays)[0], rtol=1e-12)


def test_sum_reads_the_stack_of_its_b_operands_in_its_order():
    # (a recurrent layer's backward: the input weight's product reads the steps' gate
    # gradients stacked in time order; the recurrent weight's sum runs over them reversed)
    bld = Builder("sums")
    arrays, bs, total = [], [], None
    for i in range(4):
        a = bld.input(TensorType("float64", (3, 4)))
        b = bld.input(TensorType("float64", (3, 5)))
        arrays += [RNG.standard_normal((3, 4)), RNG.standard_normal((3, 5))]
        bs.append(b)
        p = bld.add("mm", [bld.add("t", [a], view_of=a), b])
        total = p if total is None else bld.add("add", [total, p], {"alpha": 1})
    stacked = bld.add("stack", bs[::-1], {"dim": 0})
    g = bld.ret(total, stacked)
    m = dce(cse(gemm_sums.merge_product_sums(g)))
    verify(m)
    assert _count(m, "stack") == 1 and _count(m, "cat") == 1 and _count(m, "mm") == 1
    for got, want in zip(interpret(m, *arrays), interpret(g, *arrays)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("kw", [dict(n_terms=2), dict(n_terms=4, alpha=2),
                                dict(n_terms=4, reuse=True),
                                dict(n_terms=3, shapes=[3, 4, 3])])
def test_not_applied(kw):
    g, arrays = _sum_graph(**kw)
    assert gemm_sums.merge_product_sums(g) is g


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_compiled_recurrent_gradients_equal_eager(kind):
    llgrad.manual_seed(0)
    layer = getattr(nn, kind)(4, 6, batch_first=True)
    x = llgrad.tensor(RNG.standard_normal((3, 7, 4)).astype(np.float32))

    def loss(x):
        return layer(x)[0].pow(2).sum()
    grads = []
    for fn in (loss, llgrad.compile(loss)):
        for _ in range(2):
            for p in layer.parameters():
                p.grad = None
            fn(x).backward()
        grads.append([p.grad.numpy().copy() for p in layer.parameters()])
    for a, b in zip(*grads):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
    compiled = llgrad.compile(loss)
    compiled(x).backward()
    compiled(x).backward()
    from llgrad.codegen.build import simplify
    g = simplify(compiled.entries[-1].backward)
    # the recurrent weight's gradient: one product over the 7 steps' 3 rows each (its b the
    # stack the input weight's product reads too, or a cat of its own)
    assert any(n.op == "mm" and n.inputs[1].type.shape[0] == 21 for n in g.nodes)


def test_a_stack_of_fewer_operands_than_products_is_not_read():
    # (two products sharing their b: a stack of the distinct b's has fewer rows than the sum)
    bld = Builder("sums")
    a = [bld.input(TensorType("float64", (3, 4))) for _ in range(3)]
    b, c = (bld.input(TensorType("float64", (3, 5))) for _ in range(2))
    arrays = [RNG.standard_normal((3, 4)) for _ in range(3)] + \
        [RNG.standard_normal((3, 5)) for _ in range(2)]
    total = None
    for ai, bi in zip(a, (b, b, c)):
        p = bld.add("mm", [bld.add("t", [ai], view_of=ai), bi])
        total = p if total is None else bld.add("add", [total, p], {"alpha": 1})
    g = bld.ret(total, bld.add("stack", [b, c], {"dim": 0}))
    m = dce(cse(gemm_sums.merge_product_sums(g)))
    verify(m)
    for got, want in zip(interpret(m, *arrays), interpret(g, *arrays)):
        np.testing.assert_allclose(got, want, rtol=1e-12)
