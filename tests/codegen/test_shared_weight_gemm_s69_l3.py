"""Few-row products whose B is one row-major matrix shared by several products (a recurrent
layer's W_hh at every step) run on llgrad's own GEMM with a BLAS present
(codegen/lowerings/shared_weight_gemm.py).

Native code (llvm) against the IR interpreter on graphs with dense and strided operands
(A transposed, A and B column slices of wider matrices, addmm's bias), float32 and float64;
which products the rule takes and which it leaves to BLAS; and nn.LSTM / nn.GRU training
steps compiled against eager llgrad and torch (loss, every gradient)."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen.build import blas_available
from llgrad.codegen.lower import lower
from llgrad.codegen.lowerings.shared_weight_gemm import B_ELEMENTS, FEW_ROWS
from llgrad.ir import Builder, TensorType
from llgrad.ir.interpret import evaluate

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _rule_on_every_host(monkeypatch):
    # (the rule holds on hosts with 512-bit vectors only; these tests check gemm.py's
    # products on any host: LLGRAD_SHARED_WEIGHT_GEMM=1, a part of the kernels' keys)
    monkeypatch.setenv("LLGRAD_SHARED_WEIGHT_GEMM", "1")


def _tol(dt):
    return 2e-5 if dt == "float32" else 1e-12


def _kinds(k):
    return [grp.state["kind"] for grp in k.plan.groups if grp.root.op in ("mm", "addmm")]


def _check(g, ins, dt, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(v.type.shape).astype(dt) for v in ins]
    k = lower(g)
    got = k(arrays)
    want, _ = evaluate(g, arrays)
    for a, b in zip(got, want):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=_tol(dt), atol=_tol(dt))
    return k


def _recurrence(dt, M=8, K=12, N=20, steps=3, a_layout="dense", b_layout="dense",
                addmm=False):
    """h_{t+1} = tanh(h_t @ W [+ bias])[:, :K] for `steps` steps: one W read by every
    step's product, as an RNN's W_hh^T. a_layout: the first A dense, a transposed view or
    a column slice of a wider matrix; b_layout: W dense or a column slice (row stride > N)."""
    bld = Builder("recurrence")
    ins = []
    if a_layout == "transposed":
        xt = bld.input(TensorType(dt, (K, M)))
        h = bld.add("t", [xt], {}, view_of=xt)
    elif a_layout == "sliced":
        xt = bld.input(TensorType(dt, (M, K + 5)))
        h = bld.add("slice", [xt], dict(dim=1, start=2, end=K + 2, step=1), view_of=xt)
    else:
        xt = h = bld.input(TensorType(dt, (M, K)))
    ins.append(xt)
    if b_layout == "sliced":
        wide = bld.input(TensorType(dt, (K, N + 7)))
        w = bld.add("slice", [wide], dict(dim=1, start=3, end=N + 3, step=1), view_of=wide)
    else:
        wide = w = bld.input(TensorType(dt, (K, N)))
    ins.append(wide)
    if addmm:
        bias = bld.input(TensorType(dt, (M, N)))
        ins.append(bias)
    outs = []
    for _ in range(steps):
        y = bld.add("addmm", [bias, h, w], dict(beta=1, alpha=1)) if addmm else \
            bld.add("mm", [h, w], {})
        outs.append(y)
        a = bld.add("tanh", [y])
        h = bld.add("slice", [a], dict(dim=1, start=0, end=K, step=1), view_of=a)
    return bld.ret(*outs), ins


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("a_layout,b_layout,addmm", [
    ("dense", "dense", False), ("transposed", "dense", False), ("sliced", "sliced", False),
    ("dense", "sliced", True), ("transposed", "dense", True)])
def test_shared_weight_products_equal_the_interpreter(dt, a_layout, b_layout, addmm):
    g, ins = _recurrence(dt, a_layout=a_layout, b_layout=b_layout, addmm=addmm)
    k = _check(g, ins, dt)
    if blas_available():
        assert _kinds(k) == ["small"] * 3, _kinds(k)


@pytest.mark.parametrize("M", [2, 7, FEW_ROWS])
def test_row_counts_up_to_the_bound_equal_the_interpreter(M):
    # (edge tiles: rows not a multiple of the kernel's 8, columns not of its vector width)
    g, ins = _recurrence("float32", M=M, K=33, N=70)
    k = _check(g, ins, "float32", seed=M)
    if blas_available():
        assert _kinds(k) == ["small"] * 3


@pytest.mark.skipif(not blas_available(), reason="the rule chooses between BLAS and gemm.py")
@pytest.mark.parametrize("case", ["one product", "many rows", "transposed B", "big B", "1 row"])
def test_products_outside_the_rule_stay_with_blas(case):
    kw = {"one product": dict(steps=1), "many rows": dict(M=FEW_ROWS + 1),
          "1 row": dict(M=1), "big B": dict(K=128, N=B_ELEMENTS // 128 + 1)}.get(case, {})
    if case == "transposed B":
        bld = Builder("tb")
        wt = bld.input(TensorType("float32", (20, 12)))
        w = bld.add("t", [wt], {}, view_of=wt)
        h0, h1 = (bld.input(TensorType("float32", (8, 12))) for _ in range(2))
        g = bld.ret(bld.add("mm", [h0, w], {}), bld.add("mm", [h1, w], {}))
        ins = [wt, h0, h1]
    else:
        g, ins = _recurrence("float32", **kw)
    k = _check(g, ins, "float32")
    assert set(_kinds(k)) == {"blas"}, _kinds(k)


def _step(lib, kind, batch, seq, hidden, seed):
    """A sequence model's loss and gradients: lib.nn.LSTM / GRU, a linear head."""
    gen = np.random.default_rng(seed)
    torch.manual_seed(seed)         # (the same weights for every lib)
    tm = getattr(torch.nn, kind)(6, hidden, batch_first=True)
    head = torch.nn.Linear(hidden, 3)
    x = gen.standard_normal((batch, seq, 6)).astype(np.float32)
    y = gen.integers(0, 3, batch * seq)
    if lib is torch:
        rnn, lin = tm, head
    else:
        rnn = getattr(llgrad.nn, kind)(6, hidden, batch_first=True)
        lin = llgrad.nn.Linear(hidden, 3)
        for mine, theirs in ((rnn, tm), (lin, head)):
            mine.load_state_dict({k: llgrad.tensor(v.detach().numpy().copy())
                                  for k, v in theirs.state_dict().items()})
    params = list(rnn.parameters()) + list(lin.parameters())

    def loss_fn(x, y):
        return lib.nn.functional.cross_entropy(lin(rnn(x)[0]).reshape(-1, 3), y)
    return loss_fn, params, lib.tensor(x), lib.tensor(y)


@pytest.mark.parametrize("kind,batch,hidden", [
    ("LSTM", 4, 16), pytest.param("LSTM", 32, 24, marks=pytest.mark.slow),
    pytest.param("GRU", 5, 16, marks=pytest.mark.slow)])
def test_recurrent_training_steps_equal_eager_and_torch(kind, batch, hidden, monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")    # (the third call runs native code)
    seq = 5
    fn, params, x, y = _step(torch, kind, batch, seq, hidden, 1)
    loss = fn(x, y)
    want = [loss.item()] + [g.numpy() for g in torch.autograd.grad(loss, params)]
    for compiled in (False, True):
        fn, params, x, y = _step(llgrad, kind, batch, seq, hidden, 1)
        run = llgrad.compile(fn) if compiled else fn
        for _ in range(3 if compiled else 1):
            loss = run(x, y)
            got = [loss.item()] + [g.numpy() for g in llgrad.autograd.grad(loss, params)]
        if compiled:
            assert any(e.kernels for e in run.entries)      # (native code ran)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
        for a, b in zip(got[1:], want[1:]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * float(np.abs(b).max()))


@pytest.mark.parametrize("dt,a_layout,b_layout", [("float32", "transposed", "sliced"),
                                                  ("float64", "sliced", "dense")])
def test_more_threads_call_blas_equal_the_interpreter(dt, a_layout, b_layout):
    # the kernel reads the thread count at run time: one thread runs gemm.py, two BLAS
    # (the same operands, their BLAS layouts: a transposed A, a B with a row stride)
    g, ins = _recurrence(dt, M=12, K=40, N=72, a_layout=a_layout, b_layout=b_layout)
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(v.type.shape).astype(dt) for v in ins]
    want, _ = evaluate(g, arrays)
    k = lower(g)
    before = llgrad.get_num_threads()
    try:
        for n in (2, 1):
            llgrad.set_num_threads(n)
            for a, w in zip(k(arrays), want):
                np.testing.assert_allclose(a, w, rtol=_tol(dt), atol=_tol(dt))
    finally:
        llgrad.set_num_threads(before)
