"""The compiled GRU's backward writes each step's two gate gradients (grad_gx = [dr, dz, dn],
grad_gh = [dr, dz, dn * r]: ir/ops_rnn.py's fused_gru_cell_backward decomposition) straight
into the stacked buffers the weight-gradient GEMMs read (schedule/concat.py): no per-step
`cat` copy is left (there were two per step, ~7 us each at hidden 128: 0.45 ms of a 6 ms
training step). Loss and gradients: eager's and torch's values."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen import lower
from llgrad.codegen.schedule import concat
from llgrad.ir.builder import Builder
from llgrad.ir.graph import TensorType
from llgrad.ir.ops_rnn import _gru_cell_backward

STEPS, BATCH, IN, HID, OUT = 6, 4, 8, 16, 5


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, STEPS, IN)).astype(np.float32)
    y = rng.integers(0, OUT, BATCH * STEPS).astype(np.int64)
    return x, y


def _model(lib):
    lib.manual_seed(0)
    return lib.nn.GRU(IN, HID, batch_first=True), lib.nn.Linear(HID, OUT)


def _loss(lib, gru, head, x, y):
    return lib.nn.functional.cross_entropy(head(gru(x)[0]).reshape(-1, OUT), y)


@pytest.fixture
def one_thread():
    old = llgrad.get_num_threads()
    llgrad.set_num_threads(1)
    yield
    llgrad.set_num_threads(old)


def _backward_groups(fn, args):
    dump = fn.dump(*args, llvm=True)
    plan = dump.split("== backward loop plan (groups, buffers) ==")[1].split("\n== ")[0]
    return [line for line in plan.splitlines() if line.startswith("group")]


def _cell_backward_graph(b, h):
    """One fused_gru_cell_backward whose two gate gradients each feed a product (as a
    step's do: the stacked weight-gradient GEMMs), its hidden-state gradient returned. Its
    grad_hy is a product, as a step's is (the next step's dh): of graph inputs alone, the
    elementwise nodes would be free to move (passes.sink_free_nodes), each cat's operands
    then placed just before it."""
    bld = Builder("gru_cell_backward")
    f32 = lambda *s: TensorType("float32", s)     # noqa: E731
    a, w, gx, gh, hx = (bld.input(t) for t in (f32(b, h), f32(h, h), f32(b, 3 * h),
                                                f32(b, 3 * h), f32(b, h)))
    dgx, dgh, dhx = bld.add("fused_gru_cell_backward", [bld.add("mm", [a, w]), gx, gh, hx])
    return bld.ret(bld.add("mm", [bld.add("t", [dgx], view_of=dgx), dgh]), dhx)


def test_cell_backward_writes_both_gate_gradients_in_place(one_thread):
    """Both cats of the cell backward's decomposition go (each gets its own r and z blocks,
    which one loop writes); values: the op's NumPy implementation (the IR interpreter's),
    and bit for bit the plan with the cats kept."""
    b, h = 4, 8
    graph = _cell_backward_graph(b, h)
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(v.type.shape).astype(np.float32) for v in graph.inputs]
    old = concat.ENABLED
    try:
        on = lower.lower(graph)
        concat.ENABLED = False
        off = lower.lower(graph)
    finally:
        concat.ENABLED = old
    ops = [grp.root.op for grp in on.plan.groups]
    assert "cat" not in ops, ops
    assert "cat" in [grp.root.op for grp in off.plan.groups]
    got, ref = on([a.copy() for a in arrays]), off([a.copy() for a in arrays])
    for x, y in zip(got, ref):
        np.testing.assert_array_equal(x, y)
    a, w, gx, gh, hx = (x.astype(np.float64) for x in arrays)
    dgx, dgh, dhx = _gru_cell_backward(a @ w, gx, gh, hx)
    np.testing.assert_allclose(got[0], dgx.T @ dgh, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[1], dhx, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_gru_backward_has_no_per_step_cat_and_matches_eager_and_torch(one_thread):
    x_np, y_np = _data()
    gru, head = _model(llgrad)
    params = list(gru.parameters()) + list(head.parameters())
    x, y = llgrad.tensor(x_np), llgrad.tensor(y_np)

    fn = llgrad.compile(lambda x, y: _loss(llgrad, gru, head, x, y))
    loss = fn(x, y)
    grads = llgrad.autograd.grad(loss, params)
    eager_loss = _loss(llgrad, gru, head, x, y)
    eager = llgrad.autograd.grad(eager_loss, params)
    np.testing.assert_allclose(loss.item(), eager_loss.item(), rtol=1e-5)
    for a, e in zip(grads, eager):
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-4, atol=1e-5)

    groups = _backward_groups(fn, (x, y))
    cats = [line for line in groups if ": [cat]" in line or ": [stack]" in line]
    # left: the join of the saved hidden states (graph inputs of the backward)
    assert len(cats) == 1, cats
    # each step's cluster writes its blocks of both stacked gate gradients
    assert sum(line.count("slice buffer") >= 6 for line in groups) == STEPS, groups

    torch = pytest.importorskip("torch")
    tg, th = _model(torch)
    tg.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in gru.state_dict().items()})
    th.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in head.state_dict().items()})
    tl = _loss(torch, tg, th, torch.tensor(x_np), torch.tensor(y_np))
    tgrads = torch.autograd.grad(tl, list(tg.parameters()) + list(th.parameters()))
    np.testing.assert_allclose(loss.item(), tl.item(), rtol=1e-5)
    for a, t in zip(grads, tgrads):
        np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-4, atol=1e-5)


def test_gru_double_backward_through_compiled_step_matches_eager(one_thread):
    """create_graph through the compiled GRU: the backward's own derivative (the fused cell
    backward's VJP) still sees both gate gradients."""
    x_np, _ = _data()
    gru, _ = _model(llgrad)
    gru = gru.double()
    x = llgrad.tensor(x_np.astype(np.float64)[:, :3], requires_grad=True)

    def f(x):
        return gru(x)[0].square().sum()

    fn = llgrad.compile(f)
    (gc,) = llgrad.autograd.grad(fn(x), x, create_graph=True)
    (ge,) = llgrad.autograd.grad(f(x), x, create_graph=True)
    np.testing.assert_allclose(gc.detach().numpy(), ge.detach().numpy(), rtol=1e-10)
    (hc,) = llgrad.autograd.grad(gc.sum(), x)
    (he,) = llgrad.autograd.grad(ge.sum(), x)
    np.testing.assert_allclose(hc.numpy(), he.numpy(), rtol=1e-8, atol=1e-10)
