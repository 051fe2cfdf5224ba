"""The sum-rewriting passes (gemm_sums.py, scatter_sums.py) read each tree of adds once
(ir/add_trees.py): a chain of N single-use adds costs them O(N) leaf checks, where walking
every add as a root of its own cost O(N^2) (4,000 terms: 5 and 12 s), and they still find a
qualifying subtree below a tree that does not qualify."""
import numpy as np
import pytest

from llgrad.ir import Builder, TensorType, gemm_sums, scatter_sums
from llgrad.ir.interpret import interpret
from llgrad.ir.passes import dce
from llgrad.ir.verify import verify


def _counting(monkeypatch, module, name):
    calls = [0]
    real = getattr(module, name)

    def counted(*a, **k):
        calls[0] += 1
        return real(*a, **k)
    monkeypatch.setattr(module, name, counted)
    return calls


def _chain(n, term):
    bld = Builder("chain")
    x = bld.input(TensorType("float32", (2, 3)), "x")
    acc = bld.add("exp", [x])
    for i in range(n):
        acc = bld.add("add", [acc, term(bld, x, i)], {"alpha": 1})
    return bld.ret(acc)


@pytest.mark.parametrize("n", [200, 800])
def test_a_chain_of_adds_is_read_once_by_both_passes(monkeypatch, n):
    products = _counting(monkeypatch, gemm_sums, "_product")
    scatters = _counting(monkeypatch, scatter_sums, "_scatter")
    g = _chain(n, lambda bld, x, i: bld.add("mul", [x, float(i)]))
    assert gemm_sums.merge_product_sums(g) is g
    assert scatter_sums.merge_scatter_sums(g) is g
    assert products[0] <= 3 * n and scatters[0] <= 3 * n, (products[0], scatters[0])


def test_scatters_at_uneven_offsets_stay_linear(monkeypatch):
    # every subtree qualifies by its counts but none steps evenly: the search below each
    # failed one is bounded by a few times the graph
    n = 600
    calls = _counting(monkeypatch, scatter_sums, "_scatter")
    offsets = [k * (k + 1) // 2 for k in range(n)]      # steps 1, 2, 3, ...
    span = offsets[-1] + 1
    bld = Builder("uneven")
    acc = None
    for k in range(n):
        x = bld.input(TensorType("float64", (1,)))
        s = bld.add("strided_scatter", [x], {"geom": ((1,), (1,), offsets[k]), "span": span})
        acc = s if acc is None else bld.add("add", [acc, s], {"alpha": 1})
    g = bld.ret(acc)
    assert scatter_sums.merge_scatter_sums(g) is g
    assert calls[0] <= 12 * n, calls[0]


def test_products_below_a_tree_with_other_terms_are_still_merged():
    # ((p0 + p1 + p2) + other) + other: the whole tree has other leaves, its first subtree
    # is a sum of three uniform products
    bld = Builder("sub")
    a = [bld.input(TensorType("float64", (4, 3))) for _ in range(3)]
    b = [bld.input(TensorType("float64", (4, 5))) for _ in range(3)]
    o = [bld.input(TensorType("float64", (3, 5))) for _ in range(2)]
    acc = None
    for ak, bk in zip(a, b):
        p = bld.add("mm", [bld.add("t", [ak], view_of=ak), bk])
        acc = p if acc is None else bld.add("add", [acc, p], {"alpha": 1})
    for ok in o:
        acc = bld.add("add", [acc, ok], {"alpha": 1})
    g = bld.ret(acc)
    m = dce(gemm_sums.merge_product_sums(g))
    verify(m)
    assert sum(n.op == "mm" for n in m.nodes) == 1
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(v.type.shape) for v in g.inputs]
    np.testing.assert_allclose(interpret(m, *arrays)[0], interpret(g, *arrays)[0], rtol=1e-12)
