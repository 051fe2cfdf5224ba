"""The NumPy VJPs of tanh and t and nll_loss's selections on NumPy (runtime/fast_vjp_small.py):
the same bits as the op table's rules (forced by taking the fast VJPs out), the same kind of
result (t's: a view of the gradient, as the dispatcher makes it), the rule kept where the
fast VJP does not serve, and a whole MLP step's gradients unchanged."""
import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_shaped_vjp
from llgrad.ir import OPS
from llgrad.runtime import fast_vjp_small, node as node_mod

torch = pytest.importorskip("torch")


def _counted(monkeypatch, name, table=None):
    """Count the calls of name's fast VJP that return a result (the path really taken)."""
    table = node_mod.fast_vjps if table is None else table
    real = table[OPS[name]]
    ran = []

    def counted(node, g):
        res = real(node, g)
        ran.append(res is not None)
        return res
    monkeypatch.setitem(table, OPS[name], counted)
    return ran


def _special(a):
    a = a.copy()
    a.flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    return a


def _tanh_grads(lib, dtype, strided, seed=0):
    rng = np.random.default_rng(seed)
    x = lib.tensor(_special(rng.standard_normal((6, 5)) * 3).astype(dtype), requires_grad=True)
    g = _special(rng.standard_normal((6, 5))).astype(dtype)
    g.flat[5] = -0.0
    g = lib.tensor(g)
    if strided:
        g = g.t().contiguous().t()
    x.tanh().backward(g)
    return x.grad.numpy()


@pytest.mark.parametrize("dtype,strided", [("float32", False), ("float64", False),
                                           ("float32", True)])
def test_tanh_backward_same_bits_as_the_rule(dtype, strided, monkeypatch):
    ran = _counted(monkeypatch, "tanh")
    fast = _tanh_grads(llgrad, dtype, strided)
    assert ran == [not strided]         # (a strided gradient: the rule)
    monkeypatch.delitem(node_mod.fast_vjps, OPS["tanh"])
    rule = _tanh_grads(llgrad, dtype, strided)
    assert fast.dtype == rule.dtype and fast.tobytes() == rule.tobytes()
    ref = _tanh_grads(torch, dtype, strided)
    # (1 - tanh^2 cancels near |tanh| = 1: torch's tanh a rounding apart is 1e-4 relative)
    np.testing.assert_allclose(fast, ref, rtol=1e-3 if dtype == "float32" else 1e-10, atol=1e-6)


def test_tanh_backward_keeps_the_version_check_and_double_backward():
    x = llgrad.tensor([0.5, -1.0], requires_grad=True)
    y = x.tanh()
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    x = llgrad.tensor([0.5, -1.0], dtype=llgrad.float64, requires_grad=True)
    assert llgrad.autograd.gradcheck(lambda t: t.tanh(), (x,))
    (g,) = llgrad.autograd.grad(x.tanh().sum(), x, create_graph=True)
    (gg,) = llgrad.autograd.grad(g.sum(), x)
    t = np.tanh(x.detach().numpy())
    np.testing.assert_allclose(gg.numpy(), -2 * t * (1 - t * t), rtol=1e-12)


def test_t_backward_is_the_dispatchers_view_of_the_gradient(monkeypatch):
    ran = _counted(monkeypatch, "t")
    w = llgrad.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3), requires_grad=True)
    seen = []
    w.register_hook(seen.append)
    g = llgrad.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2))
    w.t().backward(g)
    assert ran == [True]
    fast = seen[0]
    monkeypatch.delitem(node_mod.fast_vjps, OPS["t"])
    w.grad = None
    seen.clear()
    w.t().backward(g)
    rule = seen[0]
    for r in (fast, rule):
        assert r._base is g and r.stride() == (1, 2) and r._creation == "no_grad"
        assert not r.requires_grad and r.grad_fn is None
    assert fast.numpy().tobytes() == rule.numpy().tobytes()
    y = llgrad.tensor([1.0, 2.0], requires_grad=True)     # (1-D and 0-d: t is the identity)
    y.t().backward(llgrad.tensor([3.0, 4.0]))
    assert y.grad.tolist() == [3.0, 4.0]


def _nll_grads(lib, dtype, reduction, weighted, g_value, seed=0):
    rng = np.random.default_rng(seed)
    x = _special(rng.standard_normal((12, 5))).astype(dtype)
    x = lib.tensor(x, requires_grad=True)
    t = rng.integers(0, 5, 12)
    t[[1, 7]] = 3
    t[[2, 9]] = -100
    w = lib.tensor(rng.uniform(0.1, 2.0, 5).astype(dtype)) if weighted else None
    loss = lib.nn.functional.nll_loss(x, lib.tensor(t), weight=w, reduction=reduction)
    g = np.full(loss.shape, g_value, dtype)
    loss.backward(lib.tensor(g))
    return x.grad.numpy()


@pytest.mark.parametrize("dtype,reduction,weighted,g_value", [
    ("float32", "mean", False, -0.0), ("float32", "mean", True, 2.5), ("float64", "sum", True, 0.0),
    ("float32", "none", False, -0.0), ("float64", "none", True, np.inf),
    ("float32", "mean", False, np.nan)])
def test_nll_loss_backward_same_bits_as_the_rule(dtype, reduction, weighted, g_value,
                                                 monkeypatch):
    ran = _counted(monkeypatch, "nll_loss", eager_shaped_vjp._below)
    fast = _nll_grads(llgrad, dtype, reduction, weighted, g_value)
    assert ran == [True]
    monkeypatch.delitem(eager_shaped_vjp._below, OPS["nll_loss"])
    rule = _nll_grads(llgrad, dtype, reduction, weighted, g_value)
    assert fast.dtype == rule.dtype and fast.tobytes() == rule.tobytes()
    # (-0.0 scattered into zeros is +0.0, as the rule's add gives it)
    assert not np.signbit(fast[[2, 9]]).any()


def test_nll_loss_backward_leaves_a_bad_saved_target_to_the_rule():
    x = llgrad.zeros(3, 4, requires_grad=True)
    t = llgrad.tensor([0, 1, 2])
    loss = llgrad.nn.functional.nll_loss(x, t)
    node = loss.grad_fn
    t._data[1] = 7                  # (behind the version counter's back: the rule's error)
    with llgrad.no_grad():
        assert fast_vjp_small.nll_loss_vjp(node, llgrad.tensor(1.0)) is None
    with pytest.raises((IndexError, RuntimeError)):
        loss.backward()


def _mlp_step(lib, fast_off):
    rng = np.random.default_rng(3)
    model = lib.nn.Sequential(lib.nn.Linear(2, 16), lib.nn.Tanh(), lib.nn.Linear(16, 16),
                              lib.nn.Tanh(), lib.nn.Linear(16, 3))
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
    x = lib.tensor(rng.standard_normal((32, 2)).astype(np.float32))
    y = lib.tensor(rng.integers(0, 3, 32))
    lib.nn.CrossEntropyLoss()(model(x), y).backward()
    return [p.grad.numpy().copy() for p in model.parameters()]


def test_mlp_step_gradients_same_bits_without_the_fast_vjps(monkeypatch):
    fast = _mlp_step(llgrad, False)
    for name in ("tanh", "t"):
        monkeypatch.delitem(node_mod.fast_vjps, OPS[name])
    monkeypatch.delitem(eager_shaped_vjp._below, OPS["nll_loss"])
    rule = _mlp_step(llgrad, True)
    for a, b in zip(fast, rule):
        assert a.tobytes() == b.tobytes()
    for a, b in zip(fast, _mlp_step(torch, False)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
