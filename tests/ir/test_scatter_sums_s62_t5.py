"""merge_scatter_sums (ir/scatter_sums.py): a sum of strided_scatters into disjoint places of
one buffer (a loop's per-step select gradients, x[:, i] for each i) becomes one stack, or one
scatter of a stack. Checked against the interpreter on the original graph (bit for bit: each
element is one term), on the sums where it must not apply, and end to end: a compiled scan's
gradients equal eager's and torch's, and its native plan no longer scatters per step."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen.build import simplify
from llgrad.ir import scatter_sums
from llgrad.ir.builder import Builder
from llgrad.ir.graph import TensorType
from llgrad.ir.interpret import interpret
from llgrad.ir.passes import dce
from llgrad.ir.verify import verify

RNG = np.random.default_rng(62)


def _graph(offsets, shape=(2, 3), strides=(12, 1), span=24, viewed=None, other=False,
           order=None):
    """sum_k strided_scatter(x_k, (shape, strides, offsets[k]), span), optionally each viewed
    as `viewed` and with a plain input added in the middle."""
    bld = Builder("scatters")
    arrays, total = [], None
    ids = list(range(len(offsets))) if order is None else order
    terms = []
    for k in ids:
        x = bld.input(TensorType("float64", shape))
        arrays.append(RNG.standard_normal(shape))
        s = bld.add("strided_scatter", [x], {"geom": (shape, strides, offsets[k]), "span": span})
        if viewed is not None:
            s = bld.add("view", [s], {"shape": viewed}, view_of=s)
        terms.append(s)
    if other:
        o = bld.input(TensorType("float64", viewed or (span,)))
        arrays.append(RNG.standard_normal(viewed or (span,)))
        terms.insert(len(terms) // 2, o)
    for t in terms:
        total = t if total is None else bld.add("add", [total, t], {"alpha": 1})
    return bld.ret(total), arrays


def _count(graph, op):
    return sum(n.op == op for n in graph.nodes)


def _check(g, arrays, stacks=1, scatters=0):
    m = dce(scatter_sums.merge_scatter_sums(g))
    verify(m)
    assert (_count(m, "stack"), _count(m, "strided_scatter")) == (stacks, scatters)
    np.testing.assert_array_equal(interpret(m, *arrays)[0], interpret(g, *arrays)[0])
    return m


@pytest.mark.parametrize("order", [None, [3, 0, 2, 1]])
def test_selects_tiling_the_buffer_become_a_stack(order):
    # x[:, i] of a (2, 4, 3) tensor: the stack along dim 1 is the gradient itself
    _check(*_graph([0, 3, 6, 9], viewed=(2, 4, 3), order=order))
    _check(*_graph([0, 3, 6, 9], order=order))


def test_selects_leaving_gaps_become_one_scatter_of_a_stack():
    # x[:, 1], x[:, 2] (and every other step: offsets 0, 6) of a (2, 4, 3) tensor
    _check(*_graph([3, 6], viewed=(2, 4, 3)), scatters=1)
    _check(*_graph([0, 6]), scatters=1)


def test_one_other_term_is_added_last():
    _check(*_graph([0, 3, 6, 9], viewed=(2, 4, 3), other=True))


def test_uneven_offsets_merge_only_an_even_subtree():
    # ((s0 + s3) + s7): the whole tree is no stack, its inner sum is
    _check(*_graph([0, 3, 7]), scatters=2)


@pytest.mark.parametrize("offsets,why", [
    ([0, 2, 4], "overlapping places (rows of 3 at a step of 2)"),
    ([0], "one term"),
])
def test_left_alone(offsets, why):
    g, arrays = _graph(offsets)
    assert scatter_sums.merge_scatter_sums(g) is g, why


def test_two_other_terms_keep_their_order():
    # (((o0 + s0) + s1) + o1: merging all four would reorder o0 + o1; the inner three merge)
    bld = Builder("scatters")
    xs = [bld.input(TensorType("float64", (2, 3))) for _ in range(2)]
    os_ = [bld.input(TensorType("float64", (24,))) for _ in range(2)]
    s = [bld.add("strided_scatter", [x], {"geom": ((2, 3), (12, 1), 3 * k), "span": 24})
         for k, x in enumerate(xs)]
    t = bld.add("add", [bld.add("add", [bld.add("add", [os_[0], s[0]], {"alpha": 1}), s[1]],
                                {"alpha": 1}), os_[1]], {"alpha": 1})
    g = bld.ret(t)
    arrays = [RNG.standard_normal((2, 3)) for _ in xs] + [RNG.standard_normal(24) for _ in os_]
    m = _check(g, arrays, scatters=1)
    assert _count(m, "add") == 2


def _scan(lib, a, c):
    h = lib.zeros(a.shape[0], a.shape[2])
    out = []
    for i in range(a.shape[1]):
        h = a[:, i] * h + c[:, i]
        out.append(h)
    return lib.stack(out, 1).pow(2).sum()


def test_compiled_scan_gradients_equal_eager_and_torch():
    torch = pytest.importorskip("torch")
    A = RNG.standard_normal((3, 7, 5)).astype(np.float32)
    C = RNG.standard_normal((3, 7, 5)).astype(np.float32)
    grads = {}
    fn = llgrad.compile(lambda a, c: _scan(llgrad, a, c))
    for k, lib, f in (("torch", torch, lambda a, c: _scan(torch, a, c)),
                      ("eager", llgrad, lambda a, c: _scan(llgrad, a, c)),
                      ("compiled", llgrad, fn)):
        a, c = lib.tensor(A, requires_grad=True), lib.tensor(C, requires_grad=True)
        for _ in range(3):
            a.grad = c.grad = None
            f(a, c).backward()
        grads[k] = [a.grad.numpy(), c.grad.numpy()]
    assert fn.n_traces == 1 and not fn.graph_breaks
    for k in ("eager", "compiled"):
        for got, want in zip(grads[k], grads["torch"]):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # the backward as the native code computes it: no scatter per step left
    a, c = llgrad.tensor(A, requires_grad=True), llgrad.tensor(C, requires_grad=True)
    bwd = llgrad.trace(lambda a, c: llgrad.autograd.grad(_scan(llgrad, a, c), (a, c)), a, c)
    assert _count(bwd, "strided_scatter") >= 14
    assert _count(dce(simplify(bwd)), "strided_scatter") == 0
