"""Elementwise results read in last-dim blocks computed block by block (ir/block_split.py): an
LSTM step's gates = gx + h @ W_hh^T, sliced into its four gate blocks by the fused cell, is
computed inside the cell's loop and written straight into its blocks of the saved gates.

Native code (llvm) against the IR interpreter on graphs with dense and strided operands, a
bias, a cat reader and none; the pass leaving graphs alone where the blocks do not cover
the dim; and compiled LSTM cells (contiguous and strided inputs) against eager and torch."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen.lower import lower
from llgrad.ir import Builder, TensorType
from llgrad.ir.block_split import split_blocks
from llgrad.ir.interpret import evaluate

torch = pytest.importorskip("torch")


def _slice(bld, x, start, end):
    return bld.add("slice", [x], dict(dim=len(x.type.shape) - 1, start=start, end=end, step=1),
                   view_of=x)


def _check(g, arrays, tol):
    k = lower(g)
    got = k(arrays)
    want, _ = evaluate(g, arrays)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    return k


def _gates_graph(dt, op="add", bias=False, transposed=False, keep_whole=True, blocks=4):
    """x (+ bias) op y, read as `blocks` blocks (sigmoid / tanh of each, as the LSTM cell),
    and (keep_whole) returned whole too, as the forward returns its saved gates."""
    H, B, K = 6, 5, 3
    bld = Builder("gates")
    if transposed:              # an operand read through a transposing view
        xt = bld.input(TensorType(dt, (blocks * H, B)))
        x = bld.add("t", [xt], {}, view_of=xt)
    else:
        xt = x = bld.input(TensorType(dt, (B, blocks * H)))
    # (the other operand a product, as h @ W_hh^T: a kernel's result, so the elementwise
    # nodes are not moved about as free ones: passes.sink_free_nodes)
    h, w = bld.input(TensorType(dt, (B, K))), bld.input(TensorType(dt, (K, blocks * H)))
    y = bld.add("mm", [h, w], {})
    ins = [xt, h, w]
    if bias:
        b = bld.input(TensorType(dt, (blocks * H,)))
        ins.append(b)
        y = bld.add("add", [y, b], dict(alpha=1))
    gates = bld.add(op, [x, y], dict(alpha=1) if op != "mul" else {})
    acts = [bld.add("tanh" if j == 2 else "sigmoid", [_slice(bld, gates, j * H, (j + 1) * H)])
            for j in range(blocks)]
    c = acts[0]
    for a in acts[1:]:
        c = bld.add("mul", [c, a])
    g = bld.ret(c, gates) if keep_whole else bld.ret(c)
    return g, ins


def _arrays(ins, rng):
    return [rng.standard_normal(v.type.shape).astype(v.type.dtype) for v in ins]


@pytest.mark.parametrize("dt,op,transposed", [("float32", "add", False), ("float64", "add", False),
                                               ("float32", "sub", True), ("float64", "mul", True)])
def test_split_gates_equal_the_interpreter(dt, op, transposed):
    g, ins = _gates_graph(dt, op=op, transposed=transposed)
    out = split_blocks(g)
    assert out is not g and "cat" in [n.op for n in out.nodes]
    k = _check(g, _arrays(ins, np.random.default_rng(0)), 1e-6 if dt == "float32" else 1e-12)
    # the blocks are computed in the activations' loop, into the returned gates: the
    # product and one loop (no loop of the whole sum, no cat's copy)
    loops = [grp.loop for grp in k.plan.groups]
    assert loops == ["kernel", "cluster"], loops


@pytest.mark.parametrize("keep_whole", [True, False])
def test_split_with_a_bias_and_without_a_whole_reader(keep_whole):
    g, ins = _gates_graph("float32", bias=True, keep_whole=keep_whole, blocks=3)
    out = split_blocks(g)
    # (nothing reads the whole: no cat stays once dead code is dropped)
    _check(g, _arrays(ins, np.random.default_rng(1)), 1e-6)
    assert out is not g


def test_blocks_that_do_not_cover_the_dim_leave_the_graph_alone():
    bld = Builder("partial")
    x, y = (bld.input(TensorType("float32", (4, 12))) for _ in range(2))
    s = bld.add("add", [x, y], dict(alpha=1))
    a = bld.add("sigmoid", [_slice(bld, s, 0, 4)])
    b = bld.add("tanh", [_slice(bld, s, 8, 12)])           # columns 4..8 never read
    g = bld.ret(bld.add("mul", [a, b]))
    assert split_blocks(g) is g
    _check(g, _arrays([x, y], np.random.default_rng(2)), 1e-6)


def test_a_broadcast_operand_leaves_the_graph_alone():
    bld = Builder("bcast")
    x = bld.input(TensorType("float32", (4, 8)))
    y = bld.input(TensorType("float32", (4, 1)))
    s = bld.add("add", [x, y], dict(alpha=1))
    a = bld.add("sigmoid", [_slice(bld, s, 0, 4)])
    b = bld.add("tanh", [_slice(bld, s, 4, 8)])
    g = bld.ret(bld.add("mul", [a, b]))
    assert split_blocks(g) is g


def _cell_run(lib, compiled, strided):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 4, 10 if strided else 5)).astype(np.float32)
    hx = rng.standard_normal((4, 7)).astype(np.float32)
    torch.manual_seed(0)
    state = {k: v.detach().numpy().copy() for k, v in torch.nn.LSTMCell(5, 7).state_dict().items()}
    cell = lib.nn.LSTMCell(5, 7)
    cell.load_state_dict({k: lib.tensor(v.copy()) for k, v in state.items()})

    def loss(cell, x, h0):
        if strided:
            x = x[..., ::2]
        h, c = h0, h0 * 0.5
        tot = 0
        for t in range(x.shape[0]):
            h, c = cell(x[t], (h, c))
            tot = tot + (h * c).sum() + h.mean()
        return tot
    fn = llgrad.compile(loss) if compiled else loss
    out = None
    for _ in range(2):
        cell.zero_grad()
        xt, ht = lib.tensor(x), lib.tensor(hx, requires_grad=True)
        v = fn(cell, xt, ht)
        v.backward()
        out = [float(v.item()), np.array(ht.grad.numpy())] + \
            [np.array(p.grad.numpy()) for p in cell.parameters()]
    return out


@pytest.mark.parametrize("strided", [False, True])
def test_lstm_cell_steps_compiled_equal_eager_and_torch(strided):
    eager, comp = _cell_run(llgrad, False, strided), _cell_run(llgrad, True, strided)
    ref = _cell_run(torch, False, strided)
    for a, b, r in zip(eager, comp, ref):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-5)


def test_chunked_linear_compiled_equals_eager_and_torch():
    """A Linear's output chunked on its last dim (GLU, gates, q / k / v): halves and thirds
    read by elementwise ops, and the whole value returned too."""
    rng = np.random.default_rng(5)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((6, 8), (12, 8), (12,)))

    def run(lib, compiled):
        xt, wt, bt = (lib.tensor(a, requires_grad=True) for a in (x, w, b))

        def f(x, w, b):
            y = lib.nn.functional.linear(x, w, b)
            a, g = y.chunk(2, -1)
            q, k, v = y.chunk(3, -1)
            return (a * g.sigmoid()).sum() + lib.nn.functional.glu(y, -1).pow(2).sum() + \
                (q * k.tanh() - v).sum(), y
        fn = llgrad.compile(f) if compiled else f
        for _ in range(2):
            xt.grad = wt.grad = bt.grad = None
            loss, y = fn(xt, wt, bt)
            (loss + y.sum()).backward()
        return [loss.detach().numpy(), y.detach().numpy()] + [t.grad.numpy() for t in (xt, wt, bt)]
    eager, comp, ref = run(llgrad, False), run(llgrad, True), run(torch, False)
    for a, c, r in zip(eager, comp, ref):
        np.testing.assert_allclose(c, a, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-4)
