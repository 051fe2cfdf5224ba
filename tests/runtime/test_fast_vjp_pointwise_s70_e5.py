"""The NumPy VJPs of relu, sigmoid, masked_fill and mse_loss for small eager tensors
(runtime/fast_vjp_pointwise.py) against their rules bit for bit (the same backward with the
fast VJP taken out of node.fast_vjps) and against torch: NaN, infinities, -0.0 and ties at 0,
float32 and float64, several shapes and layouts (a non-contiguous gradient or result goes to
the rule; torch's sigmoid backward rounds in another order, within an ulp of the rule's), leaves' .grad and gradients of non-leaves; the in-place version error of a saved
result is still raised; a pack hook's unpack runs as often as without the fast VJP."""
import numpy as np
import pytest

import llgrad
from llgrad.ir.optable import OPS
from llgrad.runtime import node as node_mod

torch = pytest.importorskip("torch")

_SPECIAL = [0.0, -0.0, float("nan"), float("inf"), float("-inf"), 1e-30, -1e-30, 2.5, -3.0]


def _data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape).astype(dtype)
    flat = a.reshape(-1)
    flat[:len(_SPECIAL)] = np.array(_SPECIAL[:flat.size], dtype=dtype)
    return a


def _program(L, name, x, w, m):
    h = x * 1.0
    if name == "relu":
        h = L.relu(h)
    elif name == "relu_module":
        h = L.nn.ReLU()(h)
    elif name == "sigmoid":
        h = h.sigmoid()
    elif name == "masked_fill":
        h = h.masked_fill(m, 0.5)
    elif name == "relu_transposed":     # (a non-contiguous gradient: the rule runs)
        h = L.relu(h).t().contiguous().t()
    elif name.startswith("mse_"):       # (the target wants a gradient too: -gd)
        return L.nn.functional.mse_loss(h, w * m, reduction=name[4:]).sum()
    return (h * w).sum()


def _grads(L, name, arrays):
    a, b, c = arrays
    x = L.tensor(a, requires_grad=True)
    w = L.tensor(b, requires_grad=name.startswith("mse_"))
    m = L.tensor(c)
    _program(L, name, x, w, m).backward()
    return x.grad if w.grad is None else L.cat([x.grad.reshape(-1), w.grad.reshape(-1)])


_NAMES = ["relu", "relu_module", "sigmoid", "masked_fill", "relu_transposed", "mse_mean",
          "mse_sum", "mse_none"]
_OPS = {"relu": "relu", "relu_module": "relu", "sigmoid": "sigmoid", "masked_fill": "masked_fill",
        "relu_transposed": "relu", "mse_mean": "mse_loss", "mse_sum": "mse_loss",
        "mse_none": "mse_loss"}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(9,), (4, 8), (3, 5, 7)])
@pytest.mark.parametrize("name", _NAMES)
def test_same_bits_as_the_rule_and_torchs(name, shape, dtype, monkeypatch):
    if name == "relu_transposed" and len(shape) != 2:
        pytest.skip("a matrix's transpose")
    arrays = (_data(shape, dtype, 0), np.full(shape, 0.75, dtype),
              _data(shape, dtype, 2) > 0)
    fast = _grads(llgrad, name, arrays).numpy().copy()
    monkeypatch.delitem(node_mod.fast_vjps, OPS[_OPS[name]])
    rule = _grads(llgrad, name, arrays).numpy()
    want = _grads(torch, name, arrays).numpy()
    np.testing.assert_array_equal(fast.view(np.uint8), rule.view(np.uint8))
    if name == "sigmoid" or name.startswith("mse_"):    # (torch's backward kernels
        # multiply in another order, and in another one again on AVX-512 hosts: a few ulps)
        np.testing.assert_allclose(fast, want, rtol=4e-7 if dtype == np.float32 else 4e-15)
    else:
        np.testing.assert_array_equal(fast.view(np.uint8), want.view(np.uint8))


def _node_and_grad(op_name):
    x = llgrad.tensor(_data((4, 8), np.float32, 0), requires_grad=True)
    y = x * 2.0
    if op_name == "relu":
        out = llgrad.relu(y)
    elif op_name == "sigmoid":
        out = y.sigmoid()
    elif op_name == "masked_fill":
        out = y.masked_fill(y > 0, 1.0)
    else:
        out = llgrad.nn.functional.mse_loss(y, llgrad.tensor(_data((4, 8), np.float32, 5)))
    return out.grad_fn, llgrad.ones(out.shape) * 0.5


@pytest.mark.parametrize("op_name", ["relu", "sigmoid", "masked_fill", "mse_loss"])
def test_fast_vjp_serves_with_the_rules_values_and_layout(op_name):
    # (a check that the tests above compare two paths, and of the results' strides)
    node, g = _node_and_grad(op_name)
    with llgrad.no_grad():
        fast = node_mod.fast_vjps[OPS[op_name]](node, g)
        rule = OPS[op_name].vjp(node, g)
    assert fast is not None
    for a, b in zip(fast, rule):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.stride() == b.stride() and a.dtype == b.dtype
            np.testing.assert_array_equal(a.numpy().view(np.uint8), b.numpy().view(np.uint8))


def test_saved_result_written_in_place_still_raises():
    for f in (llgrad.relu, llgrad.sigmoid):
        x = llgrad.tensor([1.0, -2.0, 3.0], requires_grad=True)
        y = f(x * 1.0)
        loss = (y * 2).sum()
        with llgrad.no_grad():
            y.add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


def test_masked_fill_mask_written_in_place_still_raises():
    x = llgrad.tensor([1.0, -2.0, 3.0], requires_grad=True)
    m = llgrad.tensor([True, False, True])
    loss = (x * 1.0).masked_fill(m, 0.0).sum()
    m.logical_not_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_unpack_hook_calls_unchanged(monkeypatch):
    def run():
        calls = []

        def unpack(t):
            calls.append(1)
            return t
        x = llgrad.tensor(_data((4, 8), np.float32, 3), requires_grad=True)
        with llgrad.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
            y = llgrad.relu(x * 1.0).sigmoid()
        y.sum().backward()
        return len(calls), x.grad.numpy().copy()
    fast = run()
    for name in ("relu", "sigmoid"):
        monkeypatch.delitem(node_mod.fast_vjps, OPS[name])
    rule = run()
    assert fast[0] == rule[0]
    np.testing.assert_array_equal(fast[1].view(np.uint8), rule[1].view(np.uint8))
