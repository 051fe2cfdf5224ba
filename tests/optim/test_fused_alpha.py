"""add / sub with an alpha, lerp and addcmul are one fused multiply-add in ATen's CPU kernels
(vec::fmadd): llgrad's eager ops, their lowerings, the native SGD / Adam loops and the
running statistics' blend compute them so too, so optimiser steps keep torch's bits."""
import numpy as np
import pytest

import llgrad
from llgrad.ir.fused_madd import fma64

torch = pytest.importorskip("torch")


def _ops(lib, a, b, c, w):
    A, B, C, W = (lib.tensor(x) for x in (a, b, c, w))
    return [A.add(B, alpha=-0.1), A.sub(B, alpha=0.37), lib.rsub(A, B, alpha=0.37),
            A.clone().sub_(B, alpha=3), A.lerp(B, 0.1), A.lerp(B, 0.8), A.lerp(B, W),
            A.clone().lerp_(B, -0.3), A.addcmul(B, C, value=0.3), A.addcmul(B, C),
            A.clone().mul_(0.999).addcmul_(B, B, value=0.001), A.addcdiv(B, C, value=0.3)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_ops_are_atens_bit_for_bit(dtype):
    g = np.random.RandomState(1)
    a, b, c = (g.randn(3001).astype(dtype) for _ in range(3))
    a[:4], b[:4] = [np.inf, np.nan, 1e30, -0.0], [1.0, 2.0, -1e30, 0.0]
    w = (g.rand(3001) * 1.4 - 0.2).astype(dtype)
    for x, y in zip(_ops(torch, a, b, c, w), _ops(llgrad, a, b, c, w)):
        np.testing.assert_array_equal(x.numpy(), y.numpy())


@pytest.mark.parametrize("backend", ["interpret", "llvm"])
def test_compiled_equals_eager(backend):
    g = np.random.RandomState(2)
    a, b, c = (llgrad.tensor(g.randn(4, 257).astype(np.float32)) for _ in range(3))
    w = llgrad.tensor(g.rand(4, 257).astype(np.float32))

    def f(a, b, c, w):
        return [a.add(b, alpha=-0.1), a.sub(b, alpha=0.37), a.lerp(b, 0.1), a.lerp(b, 0.8),
                a.lerp(b, w), a.addcmul(b, c, value=0.3), (a * 2).add_(c, alpha=0.7)]
    for x, y in zip(f(a, b, c, w), llgrad.compile(f, backend=backend)(a, b, c, w)):
        np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_fma64_survives_huge_operands():
    a = np.array([1e305, np.inf, 1e200, -np.inf, 3.0])
    b = np.array([2.0, 1.0, 1e200, 1.0, 1e-320])
    c = np.array([1.0, -np.inf, 1.0, 5.0, 1.0])
    np.testing.assert_array_equal(fma64(a, b, c), [2e305, np.nan, np.inf, -np.inf, 1.0])


def _train(lib, make_opt, steps=8, n=5000):
    g = np.random.RandomState(3)
    w0 = g.randn(n).astype(np.float32)
    grads = [g.randn(n).astype(np.float32) for _ in range(steps)]
    p = lib.nn.Parameter(lib.tensor(w0))
    small = lib.nn.Parameter(lib.tensor(w0[:7].copy()))     # (the NumPy passes, not the loop)
    opt = make_opt(lib, [p, small])
    for gr in grads:
        p.grad, small.grad = lib.tensor(gr), lib.tensor(gr[:7].copy())
        opt.step()
    return p.detach().numpy().copy(), small.detach().numpy().copy()


SGDS = [lambda lib, ps: lib.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
        lambda lib, ps: lib.optim.SGD(ps, lr=0.1, momentum=0.5, dampening=0.3),
        lambda lib, ps: lib.optim.SGD(ps, lr=0.1, maximize=True)]
SQRTS = [lambda lib, ps: lib.optim.Adam(ps, lr=1e-2, weight_decay=1e-2),
         lambda lib, ps: lib.optim.AdamW(ps, lr=1e-2, betas=(0.3, 0.99)),
         lambda lib, ps: lib.optim.RMSprop(ps, lr=1e-2, momentum=0.9),
         lambda lib, ps: lib.optim.Adagrad(ps, lr=1e-1)]


@pytest.mark.parametrize("make_opt", SGDS, ids=["nesterov-decay", "dampening", "maximize"])
def test_sgd_steps_keep_torchs_bits(make_opt):
    for x, y in zip(_train(torch, make_opt), _train(llgrad, make_opt)):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("make_opt", SQRTS, ids=["adam", "adamw", "rmsprop", "adagrad"])
def test_steps_with_a_square_root_stay_within_its_rounding(make_opt):
    """torch's float32 sqrt is not correctly rounded (an ulp off in ~15% of elements, where
    NumPy's is IEEE's): the moments agree to the bit, the parameters to that ulp's effect."""
    for x, y in zip(_train(torch, make_opt), _train(llgrad, make_opt)):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def test_batch_norm_running_stats_follow_the_tensor_calls():
    g = np.random.RandomState(4)
    x = llgrad.tensor(g.randn(64, 128).astype(np.float32))
    bn = llgrad.nn.BatchNorm1d(128, momentum=0.3)
    bn(x)
    mean = x.numpy().astype(np.float64).mean(0).astype(np.float32)
    want = llgrad.zeros(128).mul_(0.7).add_(llgrad.tensor(mean), alpha=0.3)
    np.testing.assert_array_equal(bn.running_mean.numpy(), want.numpy())


def test_fma32_where_float64_rounding_lands_on_a_float32_tie():
    """a * b + c whose float64 sum rounds onto a float32 half-way point (the exact value just
    below or above it): rounded once, as an FMA, not twice."""
    a = np.float32(2.0 ** -24 + 2.0 ** -47)
    b = np.float32(1 - 2.0 ** -23)              # a * b = 2**-24 - 2**-70, exactly
    c = np.float32(1 + 2.0 ** -23)
    got = llgrad.tensor([c]).addcmul(llgrad.tensor([a]), llgrad.tensor([b]))
    assert got.item() == 1 + 2.0 ** -23         # (twice rounded: 1 + 2**-22)
    want = torch.tensor([c]).addcmul(torch.tensor([a]), torch.tensor([b]))
    assert got.item() == want.item()
    one, above = np.float32(1.0), np.float32(1 + 2.0 ** -23)   # (a * b above 2**-24)
    up = llgrad.tensor([one]).addcmul(llgrad.tensor([a]), llgrad.tensor([above]))
    assert up.item() == 1 + 2.0 ** -23


@pytest.mark.parametrize("name,kwargs,change", [
    ("SGD", dict(momentum=0.9, nesterov=True, weight_decay=1e-3), "momentum"),
    ("Adam", dict(weight_decay=1e-2), "weight_decay"),
    ("AdamW", dict(betas=(0.8, 0.99)), "weight_decay")])
def test_compiled_step_with_hypers_changed_between_calls_is_eagers(name, kwargs, change):
    """lr and another hyper-parameter changed between calls: a compiled step takes them as
    graph inputs (0-d tensors), which add's alpha reads as one FMA as it reads a number, so
    the interpreted step's parameters are eager's to the bit."""
    got = []
    for compiled in (False, True):
        llgrad.manual_seed(0)
        w = llgrad.nn.Parameter(llgrad.randn(4, 8))
        x = llgrad.randn(16, 8)
        opt = getattr(llgrad.optim, name)([w], lr=0.1, **kwargs)

        def step():
            opt.zero_grad()
            loss = (x @ w.t()).tanh().pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        f = llgrad.compile(step, backend="interpret") if compiled else step
        for k in range(6):
            f()
            opt.param_groups[0]["lr"] = 0.1 / (k + 2)
            opt.param_groups[0][change] = (0.9 if change == "momentum" else 1e-2) / (k + 2)
        got.append(w.detach().numpy().copy())
    np.testing.assert_array_equal(got[1], got[0])
