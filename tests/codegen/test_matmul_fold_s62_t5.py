"""A stack of matrices times one matrix in native code (codegen/lowerings/ops_matmul.py
_fold_rows): where the stack's rows are evenly spaced they are one product of all the rows
(a cross network's matmul(W, x_l) with x_l of (batch, d, 1) ran as one one-row product per
sample, each reading all of W), as NumPy's matmul (eager) and PyTorch fold them; elsewhere a
product per batch index. Values against torch, forward and backward."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen.lower import blas_available, plan_graph, simplify, small_gemm_bound

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(5)


def _products(entry):
    plan = plan_graph(simplify(entry.forward), {"blas": blas_available(),
                                                "small_gemm": small_gemm_bound()})
    return [(g.state["M"], g.state["batch"]) for g in plan.groups
            if g.root is not None and g.root.op == "matmul"]


def _cross(lib, w, x):
    # (DCN-V2's CrossNet: W @ x_l for x_l of (batch, d, 1); matmul computes it transposed)
    x0 = x.unsqueeze(2)
    return (x0 * lib.matmul(w, x0) + x0).pow(2).sum()


def _sliced(lib, w, x):
    # rows of a slice: 5 of every 6, not evenly spaced over the stack
    return lib.matmul(x[:, :5], w).pow(2).sum()


@pytest.mark.parametrize("fn,wshape,xshape,folded", [
    (_cross, (9, 9), (12, 9), [(12, ())]),
    (_sliced, (7, 3), (4, 6, 7), [(5, (4,))]),
])
def test_stack_times_matrix(fn, wshape, xshape, folded):
    W = RNG.standard_normal(wshape).astype(np.float32)
    X = RNG.standard_normal(xshape).astype(np.float32)
    got = {}
    cf = llgrad.compile(lambda w, x: fn(llgrad, w, x))
    for k, lib, f in (("torch", torch, lambda w, x: fn(torch, w, x)), ("compiled", llgrad, cf)):
        w, x = lib.tensor(W, requires_grad=True), lib.tensor(X, requires_grad=True)
        for _ in range(3):
            w.grad = x.grad = None
            loss = f(w, x)
            loss.backward()
        got[k] = [loss.detach().numpy(), w.grad.numpy(), x.grad.numpy()]
    assert cf.n_traces == 1 and not cf.graph_breaks
    for a, b in zip(got["compiled"], got["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    assert _products(cf.entries[-1])[:1] == folded
