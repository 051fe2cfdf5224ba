"""Sweep 20 (C), part 23: retain_grad() inside a compiled training step (Karpathy's makemore
part 3: `layer.out.retain_grad()` before `loss.backward()`, the gradients read after the
step). Compiled calls give the retained tensors (kept in objects, or returned) eager's
.grad and retains_grad; where a backward after the call would have to fill them, or the
tensor was made before the call, the call runs eagerly with a warning."""
import warnings

import numpy as np
import pytest

import llgrad

nn = llgrad.nn


class Layer:
    def __init__(self, w):
        self.w = w

    def __call__(self, x):
        self.out = llgrad.tanh(x @ self.w)
        return self.out


def _make():
    rng = np.random.default_rng(0)
    ws = [llgrad.tensor(rng.standard_normal((4, 4)).astype(np.float32) * 0.5).requires_grad_()
          for _ in range(3)]
    x = llgrad.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    return [Layer(w) for w in ws], ws, x


def _state(layers, ws, extra=()):
    outs = [layer.out for layer in layers if hasattr(layer, "out")]
    grads = [o.grad if o.retains_grad else None for o in outs]
    return ([None if g is None else g.numpy().copy() for g in grads],
            [o.retains_grad for o in outs], [o.requires_grad for o in outs],
            [w.detach().numpy().copy() for w in ws],
            [None if e is None else np.array(e.detach().numpy()) if hasattr(e, "numpy") else e
             for e in extra])


def _compare(a, b):
    for x, y in zip(a, b):
        if isinstance(x, (list, tuple)):
            assert len(x) == len(y)
            _compare(x, y)
        elif isinstance(x, (np.ndarray, float)):
            np.testing.assert_allclose(y, x, rtol=1e-6, atol=1e-7)
        else:
            assert x == y


def _both(step, n=3):
    runs = []
    for compiled in (False, True):
        layers, ws, x = _make()
        fn = llgrad.compile(step) if compiled else step
        recs = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for i in range(n):
                extra = fn(layers, ws, x, i)
                recs.append(_state(layers, ws, extra if isinstance(extra, tuple) else ()))
        runs.append((recs, [str(w.message) for w in caught], fn))
    (e, ew, _), (c, cw, cf) = runs
    assert not ew, ew
    _compare(e, c)
    return cw, cf


def _sgd(ws, lr=0.1):
    with llgrad.no_grad():
        for w in ws:
            w -= lr * w.grad
            w.grad = None


def test_retained_in_objects():
    def step(layers, ws, x, i):
        h = x
        for layer in layers:
            h = layer(h)
        for layer in layers[:2]:
            layer.out.retain_grad()
        loss = (h ** 2).mean()
        loss.backward()
        stds = [layer.out.grad.std().item() for layer in layers[:2]]
        _sgd(ws)
        return (loss.detach(), stds)
    warned, cf = _both(step)
    assert not warned and cf.entries, warned


def test_retained_grad_returned_and_accumulated():
    """A tensor used twice (its gradient the sum), two backwards into it (retain_graph),
    and its .grad returned: the same tensor as the retained .grad, as eager's."""
    def step(layers, ws, x, i):
        h = layers[0](x)
        h.retain_grad()
        y = layers[1](h) + h
        y.sum().backward(retain_graph=True)
        (y ** 2).sum().backward()
        _sgd(ws[:2])
        return (h.grad, h.grad is layers[0].out.grad)
    warned, cf = _both(step)
    assert not warned and cf.entries, warned


def test_backward_after_the_call_runs_eagerly():
    def step(layers, ws, x, i):
        h = layers[0](x)
        h.retain_grad()
        return (h,)

    runs = []
    for compiled in (False, True):
        layers, ws, x = _make()
        fn = llgrad.compile(step) if compiled else step
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            (h,) = fn(layers, ws, x, 0)
            (h * 3).sum().backward()
        runs.append((h.grad.numpy().copy(), ws[0].grad.numpy().copy(),
                     [str(w.message) for w in caught]))
    np.testing.assert_allclose(runs[1][0], runs[0][0])
    np.testing.assert_allclose(runs[1][1], runs[0][1])
    assert any("retain_grad" in w for w in runs[1][2]), runs[1][2]


def test_tensor_made_before_the_call_runs_eagerly():
    layers, ws, x = _make()
    h = layers[0](x)

    def step(h):
        h.retain_grad()
        (h ** 2).sum().backward()
        return h.grad * 1
    with pytest.warns(UserWarning, match="made before the call"):
        g = llgrad.compile(step)(h)
    np.testing.assert_allclose(g.numpy(), (2 * h).detach().numpy(), rtol=1e-6)
