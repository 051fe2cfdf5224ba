"""Row fusion (codegen/schedule/rows.py) and the decomposition that feeds it (ir/decompose.py): a
layer norm's forward and backward become one walk over the rows, and every such kernel
computes what the interpreter and eager autograd compute."""
import numpy as np
import pytest
from test_cluster import _check, _ew

import llgrad
import llgrad.nn.functional as F
from llgrad.codegen.lower import lower, simplify
from llgrad.codegen.schedule.rows import ROW_BUFFER_BYTES
from llgrad.ir import Builder, TensorType
from llgrad.ir.decompose import expand_composites
from llgrad.ir.interpret import evaluate


def _kinds(k):
    return [grp.loop for grp in k.plan.groups]


def _ln_graph(shape, dt="float32", affine=True, strides=(None, None, None)):
    """A layer norm over the last dim written out, with its backward (as the VJP rule
    recomputes it) and the weight/bias gradients: the W4 shape of computation."""
    bld = Builder("ln")
    x = bld.input(TensorType(dt, shape, strides[0]), "x")
    g = bld.input(TensorType(dt, shape, strides[1]), "g")
    w = bld.input(TensorType(dt, shape[-1:], strides[2]), "w")
    last = (len(shape) - 1,)
    lead = tuple(range(len(shape) - 1))
    mu = _ew(bld, "mean", x, dim=last, keepdim=True)
    xc = _ew(bld, "sub", x, mu, alpha=1)
    var = _ew(bld, "mean", _ew(bld, "mul", xc, xc), dim=last, keepdim=True)
    rstd = _ew(bld, "rsqrt", _ew(bld, "add", var, 1e-5, alpha=1))
    xhat = _ew(bld, "mul", xc, rstd)
    y = _ew(bld, "mul", xhat, w) if affine else xhat
    loss = _ew(bld, "sum", _ew(bld, "mul", y, y), dim=None, keepdim=False)
    gx = _ew(bld, "mul", g, w)
    a = _ew(bld, "mean", gx, dim=last, keepdim=True)
    b = _ew(bld, "mean", _ew(bld, "mul", gx, xhat), dim=last, keepdim=True)
    dx = _ew(bld, "mul", rstd, _ew(bld, "sub", _ew(bld, "sub", gx, a, alpha=1),
                                      _ew(bld, "mul", xhat, b), alpha=1))
    dw = _ew(bld, "sum", _ew(bld, "mul", g, xhat), dim=lead, keepdim=False)
    db = _ew(bld, "mean", g, dim=lead, keepdim=True)
    return bld.ret(loss, y, dx, dw, db, rstd)


@pytest.mark.parametrize("shape", [(64, 96), (7, 33), (1, 5), (3, 4, 17)])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_layer_norm_forward_and_backward_is_one_row_loop(shape, dt):
    g = _ln_graph(shape, dt)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(dt) for s in (shape, shape, shape[-1:])]
    k = _check(g, arrays, rtol=2e-5 if dt == "float32" else 1e-11)
    assert _kinds(k) == ["rows"]
    # x, g and w are read, the returned values written; nothing else goes through memory
    assert all(b.role == "temp" for b in k.plan.scratch)


def test_strided_and_broadcast_operands():
    g = _ln_graph((40, 24), strides=((1, 40), (0, 1), (2,)))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((24, 40)).astype("float32").T           # transposed
    gr = np.broadcast_to(rng.standard_normal((1, 24)).astype("float32"), (40, 24))
    w = rng.standard_normal(48).astype("float32")[::2]              # stepped
    k = lower(g)
    arrays = [x, gr, w]
    got = k(arrays)
    want, _ = evaluate(g, [np.ascontiguousarray(a) for a in arrays])
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)
    assert "rows" in _kinds(k)


def test_values_read_after_the_cluster_are_stored():
    bld = Builder("after")
    x = bld.input(TensorType("float32", (16, 32)), "x")
    mu = _ew(bld, "mean", x, dim=(1,), keepdim=True)
    xc = _ew(bld, "sub", x, mu, alpha=1)
    s = _ew(bld, "sum", _ew(bld, "mul", xc, xc), dim=(1,), keepdim=True)
    col = _ew(bld, "sum", xc, dim=(0,), keepdim=False)
    # reads a column total: cannot be in the cluster (complete only after every row)
    late = _ew(bld, "mul", xc, col)
    g = bld.ret(s, late)
    k = _check(g, [np.random.default_rng(2).standard_normal((16, 32)).astype("float32")],
               rtol=2e-5)
    rows = [grp for grp in k.plan.groups if grp.loop == "rows"]
    assert len(rows) == 1 and xc in rows[0].results and col in rows[0].results


def test_no_row_reduction_no_row_cluster():
    bld = Builder("plain")
    x = bld.input(TensorType("float32", (16, 32)), "x")
    t = _ew(bld, "tanh", x)
    g = bld.ret(_ew(bld, "sum", t, dim=None, keepdim=False), _ew(bld, "mul", t, 2.0))
    k = _check(g, [np.random.default_rng(3).standard_normal((16, 32)).astype("float32")],
               rtol=2e-5)
    assert "rows" not in _kinds(k)


def test_rows_too_long_for_the_stack_use_ordinary_groups():
    n = ROW_BUFFER_BYTES // 4 + 8
    g = _ln_graph((2, n))
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal(s).astype("float32") for s in ((2, n), (2, n), (n,))]
    k = _check(g, arrays, rtol=1e-4)
    assert "rows" not in _kinds(k)


def test_decompose_and_cse_merge_forward_and_backward_statistics():
    def f(x, w, b):
        return (F.gelu(F.layer_norm(x, (x.shape[-1],), w, b), approximate="tanh") ** 2).mean()

    x = llgrad.tensor(np.random.default_rng(5).standard_normal((8, 16)).astype("float32"))
    w, b = llgrad.ones(16), llgrad.zeros(16)
    vg = llgrad.value_and_grad(f, argnums=(0, 1, 2), backend="interpret")
    vg(x, w, b)
    traced = vg.entries[0].forward
    flat = simplify(traced)
    ops = [n.op for n in flat.nodes]
    assert "layer_norm" not in ops and "gelu" not in ops
    assert ops.count("rsqrt") == 1 and ops.count("tanh") == 1     # shared by fwd and bwd
    assert [n.op for n in expand_composites(flat).nodes] == ops      # nothing left to do


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_compiled_layer_norm_gelu_matches_eager_and_interpreter(approximate):
    def f(x, w, b):
        y = F.gelu(F.layer_norm(x, (x.shape[-1],), w, b), approximate=approximate)
        return (y * y).mean()

    rng = np.random.default_rng(6)
    arrays = [rng.standard_normal((33, 70)).astype("float32"),
              (1 + 0.1 * rng.standard_normal(70)).astype("float32"),
              (0.1 * rng.standard_normal(70)).astype("float32")]
    results = {}
    for backend in ("llvm", "interpret"):
        vg = llgrad.value_and_grad(f, argnums=(0, 1, 2), backend=backend)
        vg(*[llgrad.tensor(a) for a in arrays])            # (the first call traces eagerly)
        vg.wait()
        val, grads = vg(*[llgrad.tensor(a) for a in arrays])
        results[backend] = [val.numpy()] + [g.numpy() for g in grads]
        if backend == "llvm":
            k = vg.entries[0].kernels["forward"]
            # (one pass over the rows; mean's backward divides its one-element gradient
            # first, a group of its own over a single element)
            assert [grp.loop for grp in k.plan.groups
                    if grp.loop == "rows" or grp.root.outputs[0].type.numel > 1] == ["rows"]
    ts = [llgrad.tensor(a, requires_grad=True) for a in arrays]
    loss = f(*ts)
    loss.backward()
    eager = [loss.detach().numpy()] + [t.grad.numpy() for t in ts]
    for got, want, ref in zip(results["llvm"], results["interpret"], eager):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-6)


def test_training_step_with_layer_norm_writes_back_through_the_simplified_graph():
    """Mutated inputs (parameters, optimiser state) are keyed by the traced graph's values
    (lower.simplify rebuilds the graph): compiled updates still land where eager's do."""
    def make():
        llgrad.manual_seed(0)
        m = llgrad.nn.Sequential(llgrad.nn.Linear(8, 16), llgrad.nn.LayerNorm(16),
                                 llgrad.nn.GELU(approximate="tanh"), llgrad.nn.Linear(16, 1))
        return m, llgrad.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def step(m, opt, x):
        opt.zero_grad()
        loss = (m(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    x = llgrad.tensor(np.random.default_rng(7).standard_normal((32, 8)).astype("float32"))
    runs = {}
    for backend in ("llvm", "eager"):
        m, opt = make()
        f = llgrad.compile(step, backend=backend) if backend != "eager" else step
        losses = [float(f(m, opt, x)) for _ in range(4)]
        runs[backend] = losses, [p.detach().numpy().copy() for p in m.parameters()]
    np.testing.assert_allclose(runs["llvm"][0], runs["eager"][0], rtol=1e-5)
    for a, b in zip(runs["llvm"][1], runs["eager"][1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


@pytest.fixture
def threads():
    before = llgrad.get_num_threads()
    yield llgrad.set_num_threads
    llgrad.set_num_threads(before)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_rows_split_over_threads_match_the_interpreter(threads, n):
    """Big enough to fork: each thread its rows, its row buffers and its column partials
    (combined in thread order); an odd row count leaves unequal chunks."""
    threads(n)
    shape = (301, 515)
    g = _ln_graph(shape)
    rng = np.random.default_rng(8)
    arrays = [rng.standard_normal(s).astype("float32") for s in (shape, shape, shape[-1:])]
    k = _check(g, arrays, rtol=5e-5)
    assert _kinds(k) == ["rows"]
    assert "llgrad_parallel_run" in k.ir_before        # (the fork-join is there)


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1)])
def test_addmm_is_decomposed_so_its_bias_fuses(beta, alpha):
    """F.linear with a bias traces as addmm (PyTorch's AddmmBackward0); before lowering it
    is mm + add, so the bias joins the elementwise group after it."""
    def f(x, w, b):
        return b.addmm(x, w.t(), beta=beta, alpha=alpha).tanh().sum()

    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s).astype("float64") for s in ((5, 7), (4, 7), (4,))]
    g = llgrad.trace(f, *[llgrad.tensor(a) for a in arrays])
    assert "addmm" in [n.op for n in g.nodes]
    assert "addmm" not in [n.op for n in simplify(g).nodes]
    k = lower(g)
    ops = [[n.op for n in grp.members] or [grp.root.op] for grp in k.plan.groups]
    assert ["mm"] in ops and any("tanh" in o and (beta == 0 or "add" in o) for o in ops)
    got = k(arrays)
    want, _ = evaluate(g, arrays)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    x, w, b = arrays
    np.testing.assert_allclose(got[0], np.tanh(beta * b + alpha * x @ w.T).sum(), rtol=1e-12)
