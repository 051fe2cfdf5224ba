"""A compiled backward lets go of its saved activations before it allocates its big late
gradients (codegen.lower.release_split, CompiledFunctionBackward.apply_last): the peak
memory of backward() is lower without retain_graph than with it, by about the saved
bytes, and the gradients are the same either way and equal to eager's."""
import tracemalloc

import numpy as np
import pytest

import llgrad


def _mlp(x, w1, w2, w3):
    h1 = (x @ w1).relu()
    h2 = (h1 @ w2).relu()
    return (h2 @ w3).sum()


def _data():
    rng = np.random.default_rng(0)
    shapes = [(128, 600), (600, 512), (512, 256), (256, 4)]
    return [rng.standard_normal(s).astype(np.float32) * (1.0 if k == 0 else 0.05)
            for k, s in enumerate(shapes)]


def _grads(fn, arrays, retain_graph=False, measure=False):
    """The gradients (autograd.grad: no .grad accumulation) and, when measured, the peak
    of traced memory during the backward above the memory live when it starts (the
    forward runs traced too, so its saved arrays count, and their release shows)."""
    x, *ws = [llgrad.tensor(a, requires_grad=k > 0) for k, a in enumerate(arrays)]
    if measure:
        tracemalloc.start()
    loss = fn(x, *ws)
    peak = None
    if measure:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
    grads = llgrad.autograd.grad(loss, ws, retain_graph=retain_graph)
    if measure:
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
    return [g.numpy() for g in grads], peak


def _backward_kernel(cf):
    entry = cf.entries[-1]
    return entry.kernels["backward"]


def test_split_frees_saved_before_late_gradients():
    arrays = _data()
    cf = llgrad.compile(_mlp, backend="llvm")
    for _ in range(2):                  # (the first call runs the trace's own values)
        _grads(cf, arrays)
        cf.wait()
    kernel = _backward_kernel(cf)
    assert kernel.split is not None
    start, late, released = kernel.split
    assert 0 < start < len(kernel.plan.groups) and late and released
    assert "split: groups" in cf.dump(*[llgrad.tensor(a, requires_grad=k > 0)
                                        for k, a in enumerate(arrays)], llvm=True)
    _, free_peak = _grads(cf, arrays, measure=True)
    _, kept_peak = _grads(cf, arrays, retain_graph=True, measure=True)
    saved = (128 * 512 + 128 * 256) * 4          # the two relu outputs the backward reads
    # without retain_graph the saved activations are gone when dW1 (600 x 512) is made
    assert kept_peak - free_peak > 0.8 * saved, (kept_peak, free_peak)


def test_split_gradients_match_eager_and_retained():
    arrays = _data()
    want, _ = _grads(_mlp, [a.astype(np.float64) for a in arrays])
    cf = llgrad.compile(_mlp, backend="llvm")
    for retain in (False, True, False):
        got, _ = _grads(cf, arrays, retain_graph=retain)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4 * np.abs(w).max())
    # retained: a second backward through the same graph still has its saved values
    x, *ws = [llgrad.tensor(a, requires_grad=k > 0) for k, a in enumerate(arrays)]
    loss = cf(x, *ws)
    first = llgrad.autograd.grad(loss, ws, retain_graph=True)
    again = llgrad.autograd.grad(loss, ws)
    for a, b in zip(again, first):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(RuntimeError, match="second time"):
        llgrad.autograd.grad(loss, ws)


def test_no_split_for_small_graphs_or_returned_saved_values():
    rng = np.random.default_rng(1)
    x = llgrad.tensor(rng.standard_normal((8, 16)).astype(np.float32))
    w = llgrad.tensor(rng.standard_normal((16, 4)).astype(np.float32), requires_grad=True)
    cf = llgrad.compile(lambda x, w: (x @ w).tanh().sum(), backend="llvm")
    for _ in range(2):
        llgrad.autograd.grad(cf(x, w), [w])
        cf.wait()
    assert _backward_kernel(cf).split is None        # too little memory at stake

    # the saved activation is also returned (the user holds it): gradients still right
    arrays = _data()

    def both(x, w1, w2, w3):
        h1 = (x @ w1).relu()
        return (h1 @ w2).relu().matmul(w3).sum(), h1

    cf = llgrad.compile(both, backend="llvm")
    for _ in range(2):
        x, *ws = [llgrad.tensor(a, requires_grad=k > 0) for k, a in enumerate(arrays)]
        loss, h1 = cf(x, *ws)
        h1_before = h1.detach().numpy().copy()
        got = llgrad.autograd.grad(loss, ws)
        want, _ = _grads(_mlp, [a.astype(np.float64) for a in arrays])
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w, rtol=2e-4, atol=2e-4 * np.abs(w).max())
        np.testing.assert_array_equal(h1.detach().numpy(), h1_before)
