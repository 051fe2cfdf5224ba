"""Products stored straight into their copies' layout (codegen/schedule/copy_into.py) and a
batched product read through its transpose computed transposed (ir/transposed_copies.py).

attention's `(a @ v).transpose(1, 2).reshape(b, t, c)` ran a product then a copy of it to
contiguous; the backward of the qkv split stacked dQ, dK and dV, and the stack could not
take dK, a view (the transpose of a product). (The backward's copy of the permuted stack
into (b, t, 3c) is still a copy: a product into a strided block of a strided block is not
planned.) Checked: the clone / stack group is gone,
and values, gradients, .grad and n_traces equal eager's and torch's, and the plan without
the elimination (bit for bit); where the rules forbid it, the copy stays."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen import lower
from llgrad.codegen.schedule import copy_into
from llgrad.ir import transposed_copies
from llgrad.ir.builder import Builder
from llgrad.ir.graph import TensorType
from llgrad.ir.interpret import interpret
from llgrad.ir.verify import verify

torch = pytest.importorskip("torch")

B, H, T, D = 2, 3, 5, 4


@pytest.fixture
def one_thread():
    old = llgrad.get_num_threads()
    llgrad.set_num_threads(1)
    yield
    llgrad.set_num_threads(old)


def _attention_graph(also_read=False, returned=False):
    """clone(transpose(a @ v, 1, 2)) @ w (+ the product read again, or returned)."""
    bld = Builder("attn_out")
    a = bld.input(TensorType("float32", (B, H, T, T)))
    v = bld.input(TensorType("float32", (B, H, T, D)))
    p = bld.add("matmul", [a, v])
    pt = bld.add("transpose", [p], {"dim0": 1, "dim1": 2}, view_of=p)
    c = bld.add("clone", [pt], {"memory_format": "contiguous"})
    flat = bld.add("view", [c], {"shape": (B * T, H * D)}, view_of=c)
    w = bld.input(TensorType("float32", (H * D, 3)))
    out = [bld.add("mm", [flat, w])]            # (a product reads the copy, as proj does)
    if also_read:
        out.append(bld.add("neg", [p]))
    if returned:
        out.append(p)
    return bld.ret(*out)


def _lowered(g, enabled, blas=True):
    old = copy_into.ENABLED
    copy_into.ENABLED = enabled
    try:
        return lower.lower(g, blas=blas)
    finally:
        copy_into.ENABLED = old


def _run(g, seed=0, blas=True):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(x.type.shape).astype(np.float32) for x in g.inputs]
    on, off = _lowered(g, True, blas), _lowered(g, False, blas)
    got = on([x.copy() for x in arrays])
    want = off([x.copy() for x in arrays])
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(got, interpret(g, *arrays)):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    return on, off


# (BLAS or llgrad's own GEMM, gemm.py; on 2 threads the batch may be split among them)
@pytest.mark.parametrize("threads, blas", [(1, True), *(pytest.param(
    t, b, marks=pytest.mark.slow) for t, b in ((1, False), (2, True), (2, False)))])
def test_attention_output_copy_is_the_products_store(threads, blas):
    old = llgrad.get_num_threads()
    llgrad.set_num_threads(threads)
    try:
        on, off = _run(_attention_graph(), blas=blas)
    finally:
        llgrad.set_num_threads(old)
    ops_on = [grp.root.op for grp in on.plan.groups]
    ops_off = [grp.root.op for grp in off.plan.groups]
    assert "clone" in ops_off and "clone" not in ops_on


@pytest.mark.parametrize("case", ["also_read", "returned"])
def test_copy_kept_where_the_product_is_seen(one_thread, case):
    on, _ = _run(_attention_graph(**{case: True}))
    assert "clone" in [grp.root.op for grp in on.plan.groups]


def test_batched_product_read_transposed_is_computed_transposed():
    bld = Builder("bt")
    a = bld.input(TensorType("float64", (2, 3, 4, 5)))
    b = bld.input(TensorType("float64", (3, 5, 6)))         # (broadcast batch)
    p = bld.add("matmul", [a, b])
    pt = bld.add("transpose", [p], {"dim0": -1, "dim1": -2}, view_of=p)
    g = bld.ret(bld.add("exp", [pt]))
    r = transposed_copies.products_untransposed(g)
    assert r is not g
    verify(r)
    mm, = [n for n in r.nodes if n.op == "matmul"]
    assert mm.outputs[0].type.shape == (2, 3, 6, 4)
    assert mm.outputs[0].type.strides == (72, 24, 4, 1)
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(x.type.shape) for x in g.inputs]
    np.testing.assert_allclose(interpret(r, *arrays)[0], interpret(g, *arrays)[0],
                               rtol=1e-13)


def _block_attention(lib, x, w):
    """The transformer block's attention (real_model_defs.py) without the projections'
    biases: qkv split, causal softmax, the output copied into (b, t, c)."""
    b, t, c = x.shape
    d = c // H
    q, k, v = (x @ w).reshape(b, t, 3, H, d).permute(2, 0, 3, 1, 4)
    s = (q @ k.transpose(-2, -1)) * (1.0 / d ** 0.5)
    mask = lib.ones(t, t, dtype=lib.bool).triu(1)
    a = lib.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
    return ((a @ v).transpose(1, 2).reshape(b, t, c) ** 2).sum()


def test_block_attention_equals_eager_and_torch_without_copies(one_thread):
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((2, 6, 12)).astype(np.float32)
    ws = (rng.standard_normal((12, 36)) * 0.3).astype(np.float32)
    tx, tw = torch.tensor(xs, requires_grad=True), torch.tensor(ws, requires_grad=True)
    _block_attention(torch, tx, tw).backward()
    ex, ew = llgrad.tensor(xs, requires_grad=True), llgrad.tensor(ws, requires_grad=True)
    eager = _block_attention(llgrad, ex, ew)
    eager.backward()
    fn = llgrad.compile(lambda x, w: _block_attention(llgrad, x, w))
    cx, cw = llgrad.tensor(xs, requires_grad=True), llgrad.tensor(ws, requires_grad=True)
    fn(cx, cw).backward()
    fn.wait()                          # (LLGRAD_COMPILE=background: native code from here)
    cx.grad, cw.grad = None, None
    for _ in range(2):
        loss = fn(cx, cw)
        gx, gw = llgrad.autograd.grad(loss, [cx, cw])
    loss.detach()
    np.testing.assert_allclose(loss.item(), eager.item(), rtol=1e-5)
    want = float(_block_attention(torch, tx.detach(), tw.detach()))
    np.testing.assert_allclose(loss.item(), want, rtol=1e-5)
    for got, e, t in ((gx, ex.grad, tx.grad), (gw, ew.grad, tw.grad)):
        np.testing.assert_allclose(got.numpy(), e.numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got.numpy(), t.numpy(), rtol=1e-4, atol=1e-5)
    loss = fn(cx, cw)
    loss.backward()
    np.testing.assert_allclose(cw.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-5)
    assert fn.n_traces == 1
    kernels = fn.entries[-1].kernels
    assert set(kernels) >= {"forward", "backward"}
    fwd = [grp.root.op for grp in kernels["forward"].plan.groups]
    bwd = [grp.root.op for grp in kernels["backward"].plan.groups]
    assert "clone" not in fwd, fwd         # (a @ v stores into (b, t, c) itself)
    assert "stack" not in bwd, bwd         # (dQ, dK, dV stored into the stack's blocks)
