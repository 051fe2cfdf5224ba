"""CPU autocast's API against PyTorch: torch.amp.custom_fwd(cast_inputs=...) / custom_bwd
on a custom Function (HF's style: the forward in float32 with autocast off, or under the
caller's autocast with the backward under it too), the decorator form, torch.cpu.amp's
deprecated autocast, nesting, and the state functions (llgrad/amp/autocast_mode.py)."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

A = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)


def _function(L, cast, with_bwd):
    seen = {}

    class MM(L.autograd.Function):
        @staticmethod
        @L.amp.custom_fwd(device_type="cpu", cast_inputs=cast)
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            seen["fwd"] = L.is_autocast_enabled("cpu"), str(a.dtype).split(".")[-1]
            return a @ b.T

        @staticmethod
        @(L.amp.custom_bwd(device_type="cpu") if with_bwd else (lambda f: f))
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            seen["bwd"] = L.is_autocast_enabled("cpu"), str((g @ b).dtype).split(".")[-1]
            return g @ b, g.T @ a
    return MM, seen


@pytest.mark.parametrize("cast", [None, "float32", "bfloat16"])
@pytest.mark.parametrize("with_bwd", [True, False])
def test_custom_fwd_and_bwd_are_torch_s(cast, with_bwd):
    res = []
    for L in (torch, llgrad):
        MM, seen = _function(L, cast and getattr(L, cast), with_bwd)
        a, b = L.tensor(A, requires_grad=True), L.tensor(A[:3].copy(), requires_grad=True)
        with L.autocast("cpu", dtype=L.bfloat16):
            out = MM.apply(a, b)
        try:
            out.float().sum().backward()
        except RuntimeError as e:           # (a bfloat16 g times float32 b, as PyTorch's)
            seen["error"] = "same dtype" in str(e)
        assert not L.is_autocast_enabled("cpu")
        res.append((str(out.dtype).split(".")[-1], seen,
                    a.grad is not None and a.grad.float().numpy()))
    (dt, st, gt), (dl, sl, gl) = res
    assert dl == dt and sl == st
    if gt is not False:
        np.testing.assert_allclose(gl, gt, rtol=2 ** -7, atol=1e-6)


def test_custom_bwd_inside_an_autocast_block_does_not_leak_into_the_backward():
    """backward() called inside the with block: custom_bwd's autocast exits to the backward
    pass's state (no casts), not to the block's."""
    MM, seen = _function(llgrad, None, True)
    x = llgrad.tensor(A, requires_grad=True)
    w = llgrad.tensor(A[:3].copy(), requires_grad=True)
    with llgrad.autocast("cpu"):
        y = MM.apply(x, w)
        z = (y.float() @ llgrad.ones(3, 2)).sum()
        z.backward()
        assert llgrad.is_autocast_enabled("cpu") and (x @ w.T).dtype is llgrad.bfloat16
    assert seen["bwd"] == (True, "bfloat16") and x.grad.dtype is llgrad.float32


def test_decorator_nesting_and_state_functions():
    for L in (torch, llgrad):
        @L.autocast("cpu", dtype=L.float16)
        def f(x):
            with L.autocast("cpu", enabled=False):
                inner = (x @ x.T).dtype, L.is_autocast_enabled("cpu")
            return (x @ x.T).dtype, inner, L.get_autocast_dtype("cpu")
        x = L.tensor(A)
        assert f(x) == (L.float16, (L.float32, False), L.float16)
        assert L.get_autocast_dtype("cpu") == L.bfloat16 and not L.is_autocast_enabled("cpu")
        with pytest.warns(FutureWarning, match="torch.cpu.amp.autocast"):
            ctx = L.cpu.amp.autocast()
        with ctx:
            assert (x @ x.T).dtype == L.bfloat16 and L.is_autocast_enabled("cpu")
        L.set_autocast_enabled("cpu", True)
        try:
            assert F32_LOSS(L, x).dtype == L.float32 and (x @ x.T).dtype == L.bfloat16
        finally:
            L.set_autocast_enabled("cpu", False)
        assert (x @ x.T).dtype == L.float32


def F32_LOSS(L, x):
    return L.nn.functional.mse_loss(x.bfloat16(), x)


def test_backward_outside_the_block_has_no_autocast_and_float64_is_never_cast():
    for L in (torch, llgrad):
        x = L.tensor(A, requires_grad=True)
        d = L.tensor(A.astype(np.float64), requires_grad=True)
        with L.autocast("cpu"):
            y = L.nn.functional.linear(x, x[:3])
            assert (d @ d.T).dtype == L.float64 and L.nn.functional.linear(d, d[:3]).dtype == L.float64
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            y.float().pow(2).sum().backward()
        assert y.dtype == L.bfloat16 and x.grad.dtype == L.float32


@pytest.mark.parametrize("cache", [True, False, None])
def test_weight_cast_cache_adds_the_uses_gradients_in_the_autocast_dtype(cache):
    """A float32 weight used six times in one region is cast once (PyTorch's cached_cast):
    its uses' gradients add up in bfloat16 before the cast back, which changes the
    gradient's value from the uncached float32 sum."""
    rng = np.random.default_rng(3)
    w0, xs = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((6, 4, 7))
    grads = []
    for L in (torch, llgrad):
        w = L.tensor(w0, requires_grad=True)
        with L.autocast("cpu", cache_enabled=cache):
            assert L.is_autocast_cache_enabled() == (cache is not False)
            y = sum(L.nn.functional.linear(L.tensor(x.astype(np.float32)), w) for x in xs)
        assert L.is_autocast_cache_enabled()
        y.float().pow(2).sum().backward()
        grads.append(w.grad.numpy())
    np.testing.assert_array_equal(grads[1], grads[0])


def test_a_cast_under_no_grad_is_not_cached():
    """PyTorch keeps no cast made without autograd: a later use with it records the cast."""
    for L in (torch, llgrad):
        w = L.tensor(A, requires_grad=True)
        with L.autocast("cpu"):
            with L.no_grad():
                L.nn.functional.linear(L.tensor(A), w)
            y = L.nn.functional.linear(L.tensor(A), w)
        assert y.requires_grad and y.dtype == L.bfloat16


@pytest.mark.parametrize("inside", [True, False])
def test_a_custom_backward_runs_under_the_autocast_backward_was_called_in(inside):
    """PyTorch runs a custom Function's backward (user code) under the autocast state of the
    backward() call: inside the with block its products are in bfloat16."""
    seen = []
    for L in (torch, llgrad):
        class Double(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                seen.append((str((g[None] @ L.ones(4, 4)).dtype).split(".")[-1],
                             L.is_autocast_enabled("cpu")))
                return g * 2
        x = L.ones(4, requires_grad=True)
        with L.autocast("cpu"):
            y = Double.apply(x).sum()
            if inside:
                y.backward()
        if not inside:
            y.backward()
        assert str(x.grad.dtype).endswith("float32")
    assert seen[1] == seen[0] == (("bfloat16", True) if inside else ("float32", False))


@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpoint_recomputes_under_the_forward_s_autocast(reentrant):
    """torch.utils.checkpoint inside an autocast region, backward outside it (HF's gradient
    checkpointing with bf16): the recomputation runs under the forward's autocast, as
    PyTorch's does, so the gradients are those of the bfloat16 forward."""
    rng = np.random.default_rng(5)
    w1, w2 = rng.standard_normal((8, 6)), rng.standard_normal((3, 8))
    x0 = rng.standard_normal((4, 6))
    grads = []
    for L in (torch, llgrad):
        a, b = (L.tensor(v.astype(np.float32), requires_grad=True) for v in (w1, w2))
        x = L.tensor(x0.astype(np.float32), requires_grad=True)

        def seg(x):
            h = L.nn.functional.linear(x, a)
            return L.nn.functional.linear(L.tanh(h), b) + L.nn.functional.linear(h, b)
        with L.autocast("cpu"):
            y = L.utils.checkpoint.checkpoint(seg, x, use_reentrant=reentrant)
        y.float().pow(2).sum().backward()
        grads.append([t.grad.numpy() for t in (a, b, x)])
    for g, t in zip(*grads[::-1]):
        np.testing.assert_array_equal(g, t)
