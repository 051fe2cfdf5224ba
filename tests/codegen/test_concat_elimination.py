"""Concat elimination (codegen/schedule/concat.py): the groups computing a cat's (or stack's)
operands write into their blocks of its result and the cat's copy is dropped.

Results must be the bits of the plan without it (concat.ENABLED off) and NumPy's / eager's
values; the cat group must be gone where the rules allow it (dense blocks, or strided ones
stored by an elementwise loop that only the cat reads) and kept where they do not (an
operand returned, a graph input, a strided block read by another group)."""
import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F
from llgrad.codegen import lower
from llgrad.codegen.schedule import concat
from llgrad.ir.builder import Builder
from llgrad.ir.graph import TensorType


@pytest.fixture
def one_thread():
    old = llgrad.get_num_threads()
    llgrad.set_num_threads(1)       # (the bits of a threaded sum may vary with the split)
    yield
    llgrad.set_num_threads(old)


def _lowered(g, enabled):
    old = concat.ENABLED
    concat.ENABLED = enabled
    try:
        return lower.lower(g)
    finally:
        concat.ENABLED = old


def _ops(kernel):
    """The root op of each group of the kernel's plan."""
    return [grp.root.op for grp in kernel.plan.groups]


def _both(g, arrays):
    """(results with elimination, results without, the two kernels): equal bit for bit."""
    on, off = _lowered(g, True), _lowered(g, False)
    a, b = on([x.copy() for x in arrays]), off([x.copy() for x in arrays])
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    return a, on, off


def _arrays(g, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(v.type.shape).astype(np.float32) for v in g.inputs]


def _f32(shape, b, name):
    return b.input(TensorType("float32", shape), name)


def _cat_graph(dim, op="cat", returned=False, read_after=False, graph_input=False):
    """sin(a) and exp(2c) (and the input c) joined, returned and summed."""
    b = Builder(f"{op}{dim}")
    shape = (4, 6)
    a, c_in = _f32(shape, b, "a"), _f32(shape, b, "c")
    x = b.add("sin", [a])
    y = b.add("exp", [b.add("mul", [c_in, 2])])
    parts = [x, y] + ([c_in] if graph_input else [])
    j = b.add(op, parts, {"dim": dim})
    s = b.add("sum", [b.add("tanh", [j])], {"dim": None, "keepdim": False})
    out = [j, s]
    if returned:
        out.append(x)
    if read_after:                  # another group reads an operand after the cat
        out.append(b.add("mul", [b.add("cos", [s]), y]))
    return b.ret(*out)


def _numpy_cat(arrays, dim, op="cat", graph_input=False):
    a, c = arrays
    parts = [np.sin(a), np.exp(c * np.float32(2))] + ([c] if graph_input else [])
    return (np.concatenate if op == "cat" else np.stack)(parts, axis=dim)


@pytest.mark.parametrize("dim", [0, 1])
def test_cat_of_elementwise_results_is_dropped(one_thread, dim):
    g = _cat_graph(dim)
    arrays = _arrays(g)
    got, on, off = _both(g, arrays)
    want = _numpy_cat(arrays, dim)
    np.testing.assert_allclose(got[0], want, rtol=1e-6)
    assert "cat" in _ops(off) and "cat" not in _ops(on), _ops(on)
    slices = [b for b in on.plan.buffers.values() if b.role == "slice"]
    assert len(slices) == 2
    assert all((b.strides is None) == (dim == 0) for b in slices)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_stack_is_dropped(one_thread, dim):
    g = _cat_graph(dim, op="stack")
    arrays = _arrays(g)
    got, on, off = _both(g, arrays)
    want = _numpy_cat(arrays, dim, op="stack")
    np.testing.assert_allclose(got[0], want, rtol=1e-6)
    assert "stack" in _ops(off) and "stack" not in _ops(on), _ops(on)


@pytest.mark.parametrize("dim", [0, 1])
def test_cat_of_a_returned_operand_is_kept(one_thread, dim):
    g = _cat_graph(dim, returned=True)
    arrays = _arrays(g)
    got, on, _ = _both(g, arrays)
    assert "cat" in _ops(on)
    np.testing.assert_allclose(got[2], np.sin(arrays[0]), rtol=1e-6)


def test_cat_of_a_graph_input_is_kept(one_thread):
    g = _cat_graph(0, graph_input=True)
    arrays = _arrays(g)
    got, on, _ = _both(g, arrays)
    assert "cat" in _ops(on)
    np.testing.assert_allclose(got[0], _numpy_cat(arrays, 0, graph_input=True), rtol=1e-6)


@pytest.mark.parametrize("dim", [0, 1])
def test_operand_read_after_the_cat(one_thread, dim):
    """A dense slice is read where it is (the cat is dropped); a strided one is not a loop's
    dense operand, so that cat stays."""
    g = _cat_graph(dim, read_after=True)
    arrays = _arrays(g)
    got, on, _ = _both(g, arrays)
    assert ("cat" in _ops(on)) == (dim == 1), _ops(on)
    y = np.exp(arrays[1] * np.float32(2))
    want = np.cos(got[1]) * y
    np.testing.assert_allclose(got[2], want, rtol=1e-5)


def test_cat_read_by_a_view_and_a_gemm(one_thread):
    """The cat's result read through a transpose by a GEMM, its operands by a later loop."""
    b = Builder("cat_mm")
    a, c = _f32((8, 5), b, "a"), _f32((8, 5), b, "c")
    x, y = b.add("tanh", [a]), b.add("sigmoid", [c])
    j = b.add("cat", [x, y], {"dim": 0})
    m = b.add("mm", [b.add("t", [j], view_of=j), j])
    g = b.ret(m, b.add("add", [x, y], {"alpha": 1}))
    arrays = _arrays(g, 3)
    got, on, _ = _both(g, arrays)
    assert "cat" not in _ops(on)
    j_np = np.concatenate([np.tanh(arrays[0]), 1 / (1 + np.exp(-arrays[1]))])
    np.testing.assert_allclose(got[0], j_np.T @ j_np, rtol=1e-5, atol=1e-5)


# ---- recurrent models: loss and gradients ----------------------------------------------------
def _rnn_grads(kind, enabled, steps=6):
    rng = np.random.default_rng(0)
    llgrad.manual_seed(0)
    rnn = getattr(nn, kind)(8, 16, batch_first=True)
    head = nn.Linear(16, 5)
    x = llgrad.tensor(rng.standard_normal((4, steps, 8)).astype(np.float32))
    y = llgrad.tensor(rng.integers(0, 5, 4 * steps).astype(np.int64))
    params = list(rnn.parameters()) + list(head.parameters())

    def loss_fn(x, y):
        return F.cross_entropy(head(rnn(x)[0]).reshape(-1, 5), y)

    old = concat.ENABLED
    concat.ENABLED = enabled
    try:
        fn = llgrad.compile(loss_fn)
        loss = fn(x, y)
        grads = llgrad.autograd.grad(loss, params)
    finally:
        concat.ENABLED = old
    eager = llgrad.autograd.grad(loss_fn(x, y), params)
    out = [loss.detach().numpy()] + [gr.numpy() for gr in grads]
    return out, [e.numpy() for e in eager], fn, (x, y)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_rnn_loss_and_grads_bitwise(one_thread, kind):
    on, eager, fn, args = _rnn_grads(kind, True)
    off, _, _, _ = _rnn_grads(kind, False)
    for a, b in zip(on, off):
        np.testing.assert_array_equal(a, b)
    for a, e in zip(on[1:], eager):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)
    if kind == "LSTM":
        old, concat.ENABLED = concat.ENABLED, True     # (the dump plans again: with it on)
        try:
            dump = fn.dump(*args, llvm=True)
        finally:
            concat.ENABLED = old
        plan = dump.split("== backward loop plan (groups, buffers) ==")[1].split("\n== ")[0]
        groups = [line for line in plan.splitlines() if line.startswith("group")]
        # the per-step gate gradients (cat along dim 1) and their join over the steps (one
        # stack for both weights' gradients: ir/gemm_sums.py) are written in place; what is
        # left: the join of the saved hidden states (graph inputs)
        cats = [line for line in groups if ": [cat]" in line or ": [stack]" in line]
        assert len(cats) == 1, cats
        assert sum("slice buffer" in line for line in groups) >= 6
