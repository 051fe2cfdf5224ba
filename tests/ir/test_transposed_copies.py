"""read_untransposed (ir/transposed_copies.py): a product's operand t(clone(t(x))) is read as
x. Checked against the interpreter on the original graph, on graphs where it must not apply,
and end to end: compiled gradients through `w.t().contiguous()` equal eager's (also when w
is changed in place between the forward and the backward, where eager's backward reads the
copy), and the backward reads the weight instead of a saved copy."""
import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from llgrad.ir import transposed_copies
from llgrad.ir.builder import Builder
from llgrad.ir.graph import TensorType
from llgrad.ir.interpret import interpret
from llgrad.ir.verify import verify

RNG = np.random.default_rng(11)


def _graph(op="mm", inner="t", copy="clone"):
    """out = op(a, t(copy(inner(w)))) (addmm: with a bias) and the arrays it reads."""
    bld = Builder("untranspose")
    k, n = 4, 6
    a = bld.input(TensorType("float64", (3, k)))
    w = bld.input(TensorType("float64", (k, n)))
    arrays = [RNG.standard_normal((3, k)), RNG.standard_normal((k, n))]
    attrs = {"dim0": 0, "dim1": 1} if inner == "transpose" else {}
    wt = bld.add(inner, [w], attrs, view_of=w)
    c = bld.add(copy, [wt], {"memory_format": "contiguous"}) if copy == "clone" else \
        bld.add(copy, [wt])
    back = bld.add("t", [c], view_of=c)
    if op == "addmm":
        bias = bld.input(TensorType("float64", (n,)))
        arrays.append(RNG.standard_normal(n))
        out = bld.add("addmm", [bias, a, back], {"beta": 1, "alpha": 1})
    else:
        out = bld.add(op, [a, back])
    # (the copy itself is an output too: the rewrite leaves its other readers alone)
    return bld.ret(out, c), arrays


def _products_read_inputs(graph):
    return all(all(x.node is None for x in n.inputs[-2:] if hasattr(x, "node"))
               for n in graph.nodes if n.op in transposed_copies.PRODUCTS)


@pytest.mark.parametrize("op,inner", [("mm", "t"), ("matmul", "t"), ("addmm", "t"),
                                      ("mm", "transpose")])
def test_rewritten_graph_equals_the_original(op, inner):
    g, arrays = _graph(op, inner)
    r = transposed_copies.read_untransposed(g)
    assert r is not g
    verify(r)
    assert _products_read_inputs(r)
    for got, want in zip(interpret(r, *arrays), interpret(g, *arrays)):
        np.testing.assert_array_equal(got, want)


def test_not_applied_without_a_copy_between_the_transposes():
    g, _ = _graph(copy="neg")        # t(neg(t(w))) is not w
    assert transposed_copies.read_untransposed(g) is g


def test_compiled_gradients_through_a_transposed_copy_equal_eager():
    llgrad.manual_seed(0)
    w = llgrad.randn(6, 4, requires_grad=True)
    h = llgrad.randn(3, 6, requires_grad=True)

    def loss(w, h):
        wt = w.t().contiguous()            # (4, 6) row-major, as a recurrent layer's W_hh
        x = llgrad.tanh(h[:, :4] @ wt)
        return (x @ wt.t()).pow(2).sum()   # the backward reads wt transposed back
    grads = []
    for fn in (loss, llgrad.compile(loss)):
        for _ in range(2):
            w.grad = h.grad = None
            fn(w, h).backward()
            grads.append((w.grad.numpy().copy(), h.grad.numpy().copy()))
    for got in grads[1:]:       # (float32 sums of terms up to ~20 in another order)
        np.testing.assert_allclose(got[0], grads[0][0], rtol=1e-5, atol=2e-5)
        np.testing.assert_allclose(got[1], grads[0][1], rtol=1e-5, atol=2e-5)
    assert llgrad.autograd.gradcheck(llgrad.compile(loss), (w.double().detach().requires_grad_(),
                                                            h.double().detach().requires_grad_()))


def test_weight_changed_between_forward_and_backward_reads_the_forward_values():
    # eager's backward reads the copy made in the forward: a compiled backward reading the
    # weight itself must read the weight as the forward saw it
    def loss(w, h):
        return (h @ w.t().contiguous()).pow(2).sum()
    grads = []
    for compiled in (False, True):
        fn = llgrad.compile(loss) if compiled else loss
        for _ in range(2):
            llgrad.manual_seed(3)
            w = llgrad.randn(5, 4, requires_grad=True)
            h = llgrad.randn(3, 4, requires_grad=True)
            out = fn(w, h)
            with llgrad.no_grad():
                w.mul_(10)
            out.backward()
            grads.append(h.grad.numpy().copy())
    for g in grads[1:]:
        np.testing.assert_allclose(g, grads[0], rtol=1e-6)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_recurrent_backward_saves_no_copy_of_the_weight(kind):
    llgrad.manual_seed(0)
    layer = getattr(nn, kind)(4, 8, batch_first=True)
    x = llgrad.randn(2, 5, 4)

    def loss(x):
        return layer(x)[0].pow(2).sum()
    cf = llgrad.compile(loss)
    text = str(cf.dump(x))
    saved = text.split("== saved values ==")[1].split("==")[0]
    gates = 4 if kind == "LSTM" else 3
    # the copy laid out for the forward (hidden x gates) is not saved; the weight is read
    assert f"[8,{gates * 8}]" not in saved
    ref = []
    for fn in (loss, cf):
        for p in layer.parameters():
            p.grad = None
        fn(x).backward()
        ref.append([p.grad.numpy().copy() for p in layer.parameters()])
    for a, b in zip(*ref):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_compiled_training_step_equals_eager(kind):
    # one graph holds the forward, its backward and the optimiser's in-place update of the
    # weight the backward product now reads: it must read the weight before the update
    losses, weights = [], []
    for compiled in (False, True):
        llgrad.manual_seed(1)
        layer = getattr(nn, kind)(4, 8, batch_first=True)
        opt = llgrad.optim.SGD(layer.parameters(), lr=0.5, momentum=0.9)
        x = llgrad.randn(2, 6, 4)

        def step():
            opt.zero_grad()
            loss = layer(x)[0].pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        fn = llgrad.compile(step) if compiled else step
        losses.append([fn().item() for _ in range(4)])
        weights.append([p.detach().numpy().copy() for p in layer.parameters()])
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    for a, b in zip(*weights):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
