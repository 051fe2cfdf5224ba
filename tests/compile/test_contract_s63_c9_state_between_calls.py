"""Compile-contract adversary s63 (c9): state a guard might miss, changed between compiled
calls, compared with eager (and eager with torch): saved-tensor hooks entered around some
calls only (their pack hook runs on what the call saves), and an Embedding whose max_norm
(an in-place renorm of the weight inside forward) and padding_idx change between calls."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _saved_hooks_run(T, compiled):
    packed, got = [], []

    def pack(t):
        packed.append(tuple(t.shape))
        return t * 2        # (what backward reads: the gradient shows whether it ran)

    def fn(x, w):
        return (x * w).exp().sum()
    f = llgrad.compile(fn) if compiled else fn
    for i in range(4):
        w = T.tensor([0.1, 0.2], requires_grad=True)
        x = T.tensor([1.0, 2.0])
        if i % 2:
            with T.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                r = f(x, w)
        else:
            r = f(x, w)
        r.backward()
        got.append((r.item(), w.grad.numpy().copy(), len(packed)))
    return got


def test_saved_tensor_hooks_around_some_calls():
    want = _saved_hooks_run(llgrad, False)
    for oracle, run in (("torch", _saved_hooks_run(torch, False)),
                        ("compiled", _saved_hooks_run(llgrad, True))):
        for (a, ga, na), (b, gb, nb) in zip(want, run):
            # (how many tensors are packed: eager llgrad packs 3 per call where torch packs
            # 2; the compiled call packs as many as eager)
            assert oracle == "torch" or na == nb
            np.testing.assert_allclose(b, a, rtol=1e-6)
            np.testing.assert_allclose(gb, ga, rtol=1e-6)


W = np.array([[3.0, 0.0, 4.0], [0.1, 0.2, 0.3], [1.0, 1.0, 1.0], [-2.0, 0.5, 0.0]], np.float32)


def _embedding_run(T, compiled):
    e = T.nn.Embedding(4, 3, max_norm=1.0, padding_idx=0)
    with T.no_grad():
        e.weight.copy_(T.tensor(W))
    f = llgrad.compile(e) if compiled else e
    got = []
    for i in range(4):
        if i == 2:
            e.max_norm, e.padding_idx = 0.5, 2
        y = f(T.tensor([0, 2, 2, 3]))
        (y * T.arange(12.0).reshape(4, 3)).sum().backward()
        got.append([y.detach().numpy().copy(), e.weight.detach().numpy().copy(),
                    e.weight.grad.numpy().copy()])
        e.weight.grad = None
    return got


def test_embedding_max_norm_and_padding_idx_changed_between_calls():
    want = _embedding_run(llgrad, False)
    for run in (_embedding_run(torch, False), _embedding_run(llgrad, True)):
        for i, (a, b) in enumerate(zip(want, run)):
            for u, v in zip(a, b):
                np.testing.assert_allclose(v, u, rtol=1e-6, atol=1e-7, err_msg=f"call {i}")
