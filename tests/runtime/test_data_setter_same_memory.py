"""`w.data *= mask` (PixelCNN's masked convolution, in forward): Python sets w.data back to
the tensor .data gave, over w's own memory. As in PyTorch that changes nothing but the
values: w keeps its storage and its version counter, and a compiled step doing it is kept
as compiled code (not run eagerly as a `.data = other memory` would be)."""
import warnings

import numpy as np
import pytest

import llgrad


def test_data_set_back_keeps_storage_and_version():
    torch = pytest.importorskip("torch")
    out = []
    for lib in (llgrad, torch):
        w = lib.nn.Parameter(lib.ones(2, 3))
        y = (w * 2).sum()              # (saves nothing of w's values that matter here)
        v0 = w._version
        w.data *= lib.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
        y.backward()
        out.append((w.detach().numpy().copy(), w._version - v0, w.grad.numpy().copy()))
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)


def test_data_set_to_other_memory_still_replaces_it():
    w = llgrad.ones(3)
    other = llgrad.zeros(3)
    w.data = other
    other.add_(1)
    assert w.tolist() == [1.0, 1.0, 1.0] and w.data_ptr() == other.data_ptr()


def test_compiled_masked_weight_step():
    mask = llgrad.tensor([[1.0, 0.0], [1.0, 1.0]])

    def run(compiled):
        w = llgrad.nn.Parameter(llgrad.tensor([[0.5, -1.0], [2.0, 0.3]]))
        opt = llgrad.optim.SGD([w], lr=0.1)
        x = llgrad.tensor([[1.0, 2.0], [3.0, -1.0]])

        def step(x):
            w.data *= mask
            loss = (x @ w).pow(2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss.item()

        fn = llgrad.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            losses = [fn(x) for _ in range(3)]
        return losses, w.detach().numpy().copy(), fn

    eager, w_eager, _ = run(False)
    got, w_got, fn = run(True)
    assert fn.entries
    np.testing.assert_allclose(got, eager, rtol=1e-6)
    np.testing.assert_allclose(w_got, w_eager, rtol=1e-6)
