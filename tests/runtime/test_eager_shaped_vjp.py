"""layer_norm's eager backward on its shaped kernel (compile/eager_shaped_vjp.py) against the
VJP rule run as written and against torch: shapes, dtypes, affine or not, several normalised
dims, non-contiguous operands, gradients wanted for some inputs only; create_graph keeps the
rule (double backward), and the kernel really runs (else these tests could not fail)."""
import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_shaped_vjp
from llgrad.ir import OPS
from llgrad.runtime import node as node_mod

def _grads(lib, shape, k, affine, dtype, wrt, transposed, seed=0):
    lib.manual_seed(seed)
    dt = getattr(lib, dtype)
    x = lib.randn(*shape, dtype=dt)
    if transposed:                  # (a non-contiguous input and gradient)
        x = x.transpose(0, 1).contiguous().transpose(0, 1)
    ln = lib.nn.LayerNorm(shape[-k:], elementwise_affine=affine, dtype=dt)
    if affine:
        with lib.no_grad():
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-1, 1)
        ln.weight.requires_grad_("w" in wrt)
        ln.bias.requires_grad_("w" in wrt)
    x.requires_grad_("x" in wrt)
    g = lib.randn(*shape, dtype=dt)
    if transposed:
        g = g.transpose(0, 1).contiguous().transpose(0, 1)
    ln(x).backward(g)
    out = [x.grad] + ([ln.weight.grad, ln.bias.grad] if affine else [])
    return [None if t is None else t.numpy() for t in out]


@pytest.mark.parametrize("shape,k,affine,dtype,wrt,transposed", [
    ((16, 32, 64), 1, True, "float32", "xw", False),
    ((16, 32, 64), 1, True, "float32", "xw", True),
    ((16, 32, 64), 1, True, "float64", "x", False),
    ((40, 130), 1, False, "float32", "x", True),
    ((8, 4, 8, 32), 2, True, "float32", "w", False),
    ((4, 6, 10, 10), 3, True, "float64", "xw", True),
    ((2, 1024), 1, True, "float32", "x", False),
])
def test_kernel_equals_rule_and_torch(shape, k, affine, dtype, wrt, transposed, monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    before = eager_shaped_vjp.stats["calls"]
    got = _grads(llgrad, shape, k, affine, dtype, wrt, transposed)
    assert eager_shaped_vjp.stats["calls"] == before + 1        # (the kernel ran)
    fast = node_mod.fast_vjps.pop(OPS["layer_norm"])
    try:
        want = _grads(llgrad, shape, k, affine, dtype, wrt, transposed)
    finally:
        node_mod.fast_vjps[OPS["layer_norm"]] = fast
    tol = 2e-5 if dtype == "float32" else 1e-12
    for a, b in zip(got, want):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol * np.abs(b).max())
    torch = pytest.importorskip("torch")
    ref = _grads(torch, shape, k, affine, dtype, wrt, transposed)
    for a, b in zip(got, ref):
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=tol * 5, atol=tol * 5 * np.abs(b).max())


def _double_backward(lib):
    lib.manual_seed(1)
    x = lib.randn(4, 512, dtype=lib.float64, requires_grad=True)
    w = lib.rand(512, dtype=lib.float64, requires_grad=True)
    y = lib.nn.functional.layer_norm(x, (512,), w)
    before = eager_shaped_vjp.stats["calls"]
    gx, = lib.autograd.grad((y * y * w).sum(), x, create_graph=True)
    assert eager_shaped_vjp.stats["calls"] == before      # (a graph of the rule's ops)
    (gx ** 2).sum().backward()      # (through the rule's ops, and layer_norm's node again)
    return x.grad.numpy(), w.grad.numpy()


def test_create_graph_keeps_the_rule():
    torch = pytest.importorskip("torch")
    got = _double_backward(llgrad)
    for a, b in zip(got, _double_backward(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9 * np.abs(b).max())


def test_compiled_step_unchanged():
    llgrad.manual_seed(0)
    ln = llgrad.nn.LayerNorm(64)
    x = llgrad.randn(16, 64, requires_grad=True)

    def step(x):
        ln.zero_grad()
        y = ln(x)
        (y * y).sum().backward()
        return ln.weight.grad.clone(), x.grad.clone()
    f = llgrad.compile(step)
    for _ in range(3):
        x.grad = None
        got = f(x)
        x.grad = None
        want = step(x)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


OTHER_OPS = {
    "softmax_last": lambda L, x: L.softmax(x, -1),
    "softmax_mid": lambda L, x: L.softmax(x, 1),
    "log_softmax": lambda L, x: L.log_softmax(x, -1),
    "group_norm": lambda L, x: L.nn.functional.group_norm(
        x, 4, L.linspace(0.5, 1.5, 16, dtype=x.dtype), L.linspace(-1, 1, 16, dtype=x.dtype)),
    "group_norm_plain": lambda L, x: L.nn.functional.group_norm(x, 2),
}


@pytest.mark.parametrize("name", sorted(OTHER_OPS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_other_ops_kernel_equals_rule_and_torch(name, dtype, monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")

    def grads(lib):
        lib.manual_seed(3)
        x = lib.randn(8, 16, 6, 5, dtype=getattr(lib, dtype), requires_grad=True)
        g = lib.randn(8, 16, 6, 5, dtype=getattr(lib, dtype))
        OTHER_OPS[name](lib, x).backward(g)
        return x.grad.numpy()
    before = eager_shaped_vjp.stats["calls"]
    got = grads(llgrad)
    assert eager_shaped_vjp.stats["calls"] == before + 1
    op = OPS[name.split("_plain")[0].replace("_last", "").replace("_mid", "")]
    fast = node_mod.fast_vjps.pop(op)
    try:
        want = grads(llgrad)
    finally:
        node_mod.fast_vjps[op] = fast
    tol = 2e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
    torch = pytest.importorskip("torch")
    np.testing.assert_allclose(got, grads(torch), rtol=tol * 5, atol=tol * 5 * np.abs(want).max())


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [-100, 3])
def test_nll_loss_kernel_equals_rule_and_torch(reduction, weighted, ignore_index, monkeypatch):
    """cross_entropy's nll_loss backward (int64 targets beside the float operands)."""
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")

    def grads(lib):
        lib.manual_seed(4)
        x = lib.randn(256, 20, requires_grad=True)
        y = lib.arange(256) % 7
        w = lib.rand(20) if weighted else None
        out = lib.nn.functional.cross_entropy(x, y, weight=w, ignore_index=ignore_index,
                                              reduction=reduction)
        out.backward(lib.ones_like(out) if out.dim() else None)
        return x.grad.numpy()
    before = eager_shaped_vjp.stats["calls"]
    got = grads(llgrad)
    assert eager_shaped_vjp.stats["calls"] == before + 2    # (nll_loss's, log_softmax's)
    fast = node_mod.fast_vjps.pop(OPS["nll_loss"])
    try:
        want = grads(llgrad)
    finally:
        node_mod.fast_vjps[OPS["nll_loss"]] = fast
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    torch = pytest.importorskip("torch")
    np.testing.assert_allclose(got, grads(torch), rtol=1e-5, atol=1e-8)
