"""The eager graph is freed by reference counting alone (no reference cycle left for the
garbage collector), and records few objects the collector tracks per op; gradients stay
PyTorch's (the shared per-node input metadata included)."""
import gc
import weakref

import numpy as np
import pytest

import llgrad
from llgrad.runtime import dispatch

torch = pytest.importorskip("torch")


class _NoCollector:
    """gc off for the block (restored after): what survives a `del` is then in a cycle."""

    def __enter__(self):
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc):
        if self.was:
            gc.enable()


def _solution(lib, y0, first_write=None):
    # (torchdiffeq's fixed-grid solvers write each step into an empty tensor like this)
    sol = lib.empty(3, 2, dtype=lib.float64)
    sol[0] = y0         # (into a view without history: the case that made a cycle)
    if first_write is not None:
        first_write.append(weakref.ref(sol.grad_fn.fn))     # (the node CopySlices calls)
    sol[1] = y0 * 2
    sol[2] = (y0 * 3).exp()
    return sol


def test_write_into_view_frees_graph_without_collector():
    y = llgrad.tensor([0.5, -1.5], dtype=llgrad.float64, requires_grad=True)
    with _NoCollector():
        written = []
        sol = _solution(llgrad, y, written)
        inner = written.pop()
        loss = (sol * sol).sum()
        loss.backward()
        del sol, loss
        assert inner() is None, "the in-place node on a view is kept alive by a cycle"
    yt = torch.tensor([0.5, -1.5], dtype=torch.float64, requires_grad=True)
    (_solution(torch, yt) ** 2).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), yt.grad.numpy(), rtol=1e-12)


def test_write_into_view_double_backward_matches_torch():
    def run(lib):
        y = lib.tensor([0.5, -1.5], dtype=lib.float64, requires_grad=True)
        sol = _solution(lib, y)
        (g,) = lib.autograd.grad((sol ** 3).sum(), y, create_graph=True)
        g.sum().backward()
        return g.detach().numpy(), y.grad.numpy()
    for a, b in zip(run(llgrad), run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def _mixed(lib):
    # broadcasting and mixed dtypes: the backward reads each node's input shapes and dtypes
    a = lib.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    b = lib.tensor([[0.5], [-1.0]], dtype=lib.float64, requires_grad=True)
    c = lib.tensor(2.0, requires_grad=True)
    out = (a * b + c) * a
    out = (out * b).sum() + (a * c).sum()
    out.backward()
    return [t.grad.numpy() for t in (a, b, c)]


def test_shared_input_metadata_gradients_match_torch(monkeypatch):
    want = _mixed(torch)
    for limit in (dispatch._META_LIMIT, 1):     # (1: the table cleared on every op)
        monkeypatch.setattr(dispatch, "_META_LIMIT", limit)
        for got, w in zip(_mixed(llgrad), want):
            np.testing.assert_allclose(got, w, rtol=1e-6)


def test_tracked_objects_per_recorded_op():
    # a mul of two leaves keeps: its node, the result and its storage, two saved tensors,
    # the saved dict, next_functions and its two edges. Was 11 (the input metadata: a tuple
    # of two (shape, dtype) tuples per node), which made small-op models collect often
    a = llgrad.rand(3, requires_grad=True)
    b = llgrad.rand(3, requires_grad=True)
    x = a * b       # (the shapes' metadata seen once)
    with _NoCollector():
        gc.collect(0)
        before = len(gc.get_objects())
        xs = [a * b for _ in range(200)]
        gc.collect(0)       # (untracks tuples of numbers only, as any young collection)
        per_op = (len(gc.get_objects()) - before) / len(xs)
    assert per_op <= 9.1, per_op
    del x, xs
