"""Batched BLAS products over the threads (lowerings/ops_matmul.py, _batch_split): each
product of the batch one unsplit BLAS call (the shim's serial entry, native/blas.py), the
batch divided among the threads. Compiled == interpreted == eager, with broadcast and
transposed operands; bit-identical results for 1, 2 and 3 threads; a batch of big products
keeps the shim's own split."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen.lower import lower
from llgrad.codegen.lowerings import ops_matmul
from llgrad.codegen.native import blas
from llgrad.ir import Builder, TensorType
from llgrad.ir.interpret import evaluate

pytestmark = pytest.mark.skipif(not blas.gemm_symbols(), reason="no BLAS found")


@pytest.fixture
def restore_threads():
    old = llgrad.get_num_threads()
    yield
    llgrad.set_num_threads(old)


def _graph(ashape, bshape, transpose_b=False, dt="float32"):
    bld = Builder("bmm")
    a = bld.input(TensorType(dt, ashape))
    b = bld.input(TensorType(dt, bshape))
    if transpose_b:                     # a strided view: BLAS reads it as CblasTrans
        nd = len(bshape)
        b = bld.add("transpose", [b], {"dim0": nd - 2, "dim1": nd - 1}, view_of=b)
    return bld.ret(bld.add("matmul", [a, b], {}))


CASES = [((32, 64, 32), (32, 32, 64), False),          # attention's q @ k^T sizes
         ((8, 4, 64, 32), (8, 4, 64, 32), True),       # 4-D, B a transposed view
         ((6, 5, 7), (7, 3), False),                    # B broadcast: folded into one
         ((2, 1, 9, 4), (3, 4, 5), False)]              # batch dims broadcast both ways


@pytest.mark.parametrize("ashape,bshape,tb", CASES)
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_batched_products_match_the_interpreter_at_every_count(ashape, bshape, tb, dt,
                                                               restore_threads):
    rng = np.random.default_rng(0)
    g = _graph(ashape, bshape, tb, dt)
    arrays = [rng.standard_normal(s).astype(dt) for s in (ashape, bshape)]
    k = lower(g)
    # the batch-split path; a stack times one matrix is one product of all its rows
    # (_fold_rows), split by the shim
    folded = len(bshape) == 2
    assert ("llgrad_serial." in k.dump(optimized=False)) != folded
    want, _ = evaluate(g, arrays)
    outs = {}
    for t in (1, 2, 3):
        llgrad.set_num_threads(t)
        outs[t] = k(arrays)[0].copy()
        np.testing.assert_allclose(outs[t], want[0], rtol=1e-5, atol=1e-5)
    assert np.array_equal(outs[1], outs[2]) and np.array_equal(outs[1], outs[3])


def test_a_batch_of_big_products_keeps_the_shims_split():
    big = int(2 * blas.CHUNK_WORK) + 1
    assert not ops_matmul._batch_split(64, 64, big // 4096 + 1, (2,))
    assert ops_matmul._batch_split(64, 64, 32, (2,))
    assert ops_matmul._batch_split(512, 512, 512, (8,))
    assert not ops_matmul._batch_split(64, 64, 32, ())


def test_attention_gradients_match_eager(restore_threads):
    """(Other groups of this graph, softmax's backward, may round differently per thread
    count: deterministic for a count, as parallel.py has it; the products alone are
    bit-identical across counts, above.)"""
    rng = np.random.default_rng(1)
    q, kk, v = (rng.standard_normal((4, 4, 64, 32)).astype("float32") for _ in range(3))

    def f(q, k, v):
        s = (q @ k.transpose(-2, -1)) * 0.125
        return (llgrad.softmax(s, dim=-1) @ v).pow(2).sum()

    cf = llgrad.compile(f, backend="llvm")
    results = []
    for fn, t in ((f, 1), (cf, 1), (cf, 2), (cf, 2)):
        llgrad.set_num_threads(t)
        args = [llgrad.tensor(a, requires_grad=True) for a in (q, kk, v)]
        loss = fn(*args)
        results.append((loss.item(), [g.numpy() for g in llgrad.autograd.grad(loss, args)]))
    (want, wgrads), *got = results
    for loss, grads in got:
        assert loss == pytest.approx(want, rel=1e-5)
        for a, c in zip(grads, wgrads):
            np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-5)
    assert all(np.array_equal(a, b) for a, b in zip(got[1][1], got[2][1]))
    assert cf.n_traces == 1
