"""Adam's and AdamW's eager update without the dispatcher (llgrad/optim/_eager_adam.py): bit
for bit the tensor calls' parameters, moments, step counts and version counters, over
contiguous and strided parameters and gradients, float32 and float64, with every weight-decay
form; the cases it does not serve (maximize, a tensor lr) still take the tensor calls (AMSGrad's,
served since: test_untuned_seventh_amsgrad.py); and a few steps agree with torch.optim."""
import numpy as np
import pytest

import llgrad
import llgrad.optim as optim
from llgrad.compile import eager_builds, eager_native, eager_optim
from llgrad.optim import _eager_adam

RNG = np.random.default_rng(7)


def _params(dtype):
    rng = np.random.default_rng(7)      # (the same parameters for every run)
    a = rng.standard_normal((6, 5))
    b = rng.standard_normal((5, 6))
    c = rng.standard_normal((7,))
    d = rng.standard_normal((4, 3)) * 1e-3
    ps = [llgrad.tensor(a, dtype=dtype), llgrad.tensor(b, dtype=dtype).t(),    # (strided)
          llgrad.tensor(c, dtype=dtype), llgrad.tensor(d, dtype=dtype)[:, ::2]]
    return [p.detach().requires_grad_() for p in ps]


def _grads(ps, k):
    rng = np.random.default_rng(100 + k)
    gs = []
    for i, p in enumerate(ps):
        g = llgrad.tensor(rng.standard_normal(tuple(p.shape)[::-1]), dtype=p.dtype).t() \
            if i == 0 and p.dim() == 2 else llgrad.tensor(rng.standard_normal(tuple(p.shape)),
                                                          dtype=p.dtype)
        gs.append(g if i != 3 else g * 0)      # (an all-zero gradient: 0 / eps)
    return gs


def _run(make, dtype, fast, steps=4):
    ps = _params(dtype)
    opt = make(ps)
    saved, _eager_adam.ENABLED = _eager_adam.ENABLED, fast
    try:
        for k in range(steps):
            for p, g in zip(ps, _grads(ps, k)):
                p.grad = g
            opt.step()
    finally:
        _eager_adam.ENABLED = saved
    st = [opt.state[p] for p in ps]
    return ([p.detach().numpy().copy() for p in ps], [p._version for p in ps],
            [(s["exp_avg"].numpy().copy(), s["exp_avg_sq"].numpy().copy(), s["step"].item(),
              s["exp_avg"]._version, s["exp_avg_sq"]._version, s["step"]._version)
             for s in st])


MAKERS = {
    "adam": lambda ps: optim.Adam(ps, lr=1e-2),
    "adam_l2": lambda ps: optim.Adam(ps, lr=1e-2, weight_decay=0.1),
    "adamw": lambda ps: optim.AdamW(ps, lr=3e-3, betas=(0.8, 0.99), eps=1e-6),
    "adamw_int_lr": lambda ps: optim.AdamW(ps, lr=1, weight_decay=0.5),
    "groups": lambda ps: optim.AdamW([{"params": ps[:2]}, {"params": ps[2:], "lr": 0.1,
                                                           "weight_decay": 0}], lr=1e-3),
}


@pytest.mark.parametrize("dtype", [llgrad.float32, llgrad.float64])
@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_matches_the_tensor_calls_bit_for_bit(kind, dtype):
    fast = _run(MAKERS[kind], dtype, True)
    slow = _run(MAKERS[kind], dtype, False)
    for a, b in zip(fast[0], slow[0]):
        np.testing.assert_array_equal(a, b)
    assert fast[1] == slow[1]
    for (m1, v1, *rest1), (m2, v2, *rest2) in zip(fast[2], slow[2]):
        np.testing.assert_array_equal(m1, m2)
        np.testing.assert_array_equal(v1, v2)
        assert rest1 == rest2


@pytest.mark.parametrize("kw", [{"maximize": True}])
def test_unserved_options_take_the_tensor_calls(kw, monkeypatch):
    calls = []
    monkeypatch.setattr(_eager_adam, "update", lambda *a: calls.append(a) or False)
    ps = _params(llgrad.float32)
    opt = optim.Adam(ps, lr=1e-2, **kw)
    for p, g in zip(ps, _grads(ps, 0)):
        p.grad = g
    opt.step()
    assert calls == []
    assert all(opt.state[p]["step"].item() == 1 for p in ps)


def test_served_case_takes_the_fast_update(monkeypatch):
    calls = []
    real = _eager_adam.update
    monkeypatch.setattr(_eager_adam, "update", lambda *a: calls.append(1) or real(*a))
    ps = _params(llgrad.float32)
    opt = optim.AdamW(ps)
    for p, g in zip(ps, _grads(ps, 0)):
        p.grad = g
    opt.step()
    assert len(calls) == len(ps)


def test_a_few_steps_match_torch():
    torch = pytest.importorskip("torch")
    init = [RNG.standard_normal((5, 4)).astype(np.float32), RNG.standard_normal(4).astype(
        np.float32)]
    lp = [llgrad.tensor(a.copy(), requires_grad=True) for a in init]
    tp = [torch.tensor(a.copy(), requires_grad=True) for a in init]
    lo, to = optim.AdamW(lp, lr=1e-2), torch.optim.AdamW(tp, lr=1e-2)
    for k in range(5):
        gs = [np.random.default_rng(k).standard_normal(a.shape).astype(np.float32)
              for a in init]
        for p, q, g in zip(lp, tp, gs):
            p.grad, q.grad = llgrad.tensor(g), torch.tensor(g)
        lo.step()
        to.step()
    for p, q in zip(lp, tp):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_a_modules_parameters_take_the_update(monkeypatch):
    """nn.Parameter (a Tensor subclass that overrides no tensor call) and its gradient,
    a plain Tensor as torch's, are served: the path counts every parameter."""
    served = []
    update = _eager_adam.update
    monkeypatch.setattr(_eager_adam, "update",
                        lambda *a: served.append(update(*a)) or served[-1])
    model = llgrad.nn.Sequential(llgrad.nn.Linear(4, 3), llgrad.nn.Linear(3, 2))
    opt = optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(2):
        opt.zero_grad()
        model(llgrad.ones(5, 4)).sum().backward()
        opt.step()
    assert served == [True] * 8
    assert all(type(p.grad) is llgrad.Tensor for p in model.parameters())


def test_a_parameters_gradient_is_a_plain_tensor():
    torch = pytest.importorskip("torch")
    for lib in (torch, llgrad):
        p = lib.nn.Parameter(lib.ones(3))
        (p * 2).sum().backward()
        assert type(p.grad) is lib.Tensor, lib.__name__
        (p * 2).sum().backward()           # (accumulated in place: still the same tensor)
        assert type(p.grad) is lib.Tensor and "Parameter" not in repr(p.grad)


NATIVE_MAKERS = {
    "adam": lambda ps: optim.Adam(ps, lr=1e-2),
    "adam_l2_far_lerp": lambda ps: optim.Adam(ps, lr=3e-2, betas=(0.3, 0.5), weight_decay=0.1),
    "adamw": lambda ps: optim.AdamW(ps, lr=3e-3, betas=(0.8, 0.99), eps=1e-6),
    "adamw_int": lambda ps: optim.AdamW(ps, lr=1, weight_decay=1),
}


def _big_run(make, dtype, fast, native, steps=3):
    rng = np.random.default_rng(3)
    ps = [llgrad.tensor(rng.standard_normal((80, 60)), dtype=dtype).requires_grad_(),
          llgrad.tensor(rng.standard_normal(4200) * 1e-30, dtype=dtype).requires_grad_()]
    opt = make(ps)
    saved = _eager_adam.ENABLED, eager_native.ENABLED
    _eager_adam.ENABLED, eager_native.ENABLED = fast, native
    try:
        for k in range(steps):
            g = np.random.default_rng(k)
            grads = [g.standard_normal((80, 60)), g.standard_normal(4200) * 1e-35]
            grads[0][0, :5] = [0, 1e30, -1e-30, 5e-39, 0]       # (and a subnormal, in float32)
            for p, a in zip(ps, grads):
                p.grad = llgrad.tensor(a, dtype=dtype)
            opt.step()
    finally:
        _eager_adam.ENABLED, eager_native.ENABLED = saved
    return [(p.detach().numpy().copy(), p._version, opt.state[p]["exp_avg"].numpy().copy(),
             opt.state[p]["exp_avg_sq"].numpy().copy(), opt.state[p]["exp_avg"]._version,
             opt.state[p]["exp_avg_sq"]._version) for p in ps]


@pytest.mark.parametrize("dtype", [llgrad.float32, llgrad.float64])
@pytest.mark.parametrize("kind", sorted(NATIVE_MAKERS))
def test_the_native_loop_matches_the_tensor_calls_bit_for_bit(kind, dtype, monkeypatch):
    """A parameter of 4096 elements or more runs one native loop (codegen/eager_adam.py):
    the same bits, moments and version counts as the tensor calls and the NumPy passes."""
    ran = []
    real = _eager_adam._native
    monkeypatch.setattr(_eager_adam, "_native", lambda *a: ran.append(real(*a)) or ran[-1])
    _big_run(NATIVE_MAKERS[kind], dtype, True, True, steps=1)
    eager_builds.wait()     # (LLGRAD_COMPILE=background: the loop is built before the run)
    ran.clear()
    native = _big_run(NATIVE_MAKERS[kind], dtype, True, True)
    assert ran and all(ran)
    ran.clear()
    passes = _big_run(NATIVE_MAKERS[kind], dtype, True, False)
    assert ran and not any(ran)
    calls = _big_run(NATIVE_MAKERS[kind], dtype, False, False)
    for a, b, c in zip(native, passes, calls):
        for x, y, z in zip(a, b, c):
            np.testing.assert_array_equal(x, y)
            np.testing.assert_array_equal(x, z)


def test_in_the_background_mode_the_passes_serve_until_the_loop_is_built(monkeypatch,
                                                                       cold_kernels):
    ran = []
    real = _eager_adam._native
    monkeypatch.setattr(_eager_adam, "_native", lambda *a: ran.append(real(*a)) or ran[-1])
    p = llgrad.ones(100, 50, requires_grad=True)
    opt = optim.Adam([p], lr=0.1)
    p.grad = llgrad.ones(100, 50)
    opt.step()                  # (the build is queued: NumPy's passes run this step)
    eager_native.wait()
    opt.step()
    assert ran == [False, True]
    want = llgrad.ones(100, 50, requires_grad=True)
    slow = optim.Adam([want], lr=0.1)
    want.grad = llgrad.ones(100, 50)
    _eager_adam.ENABLED = False
    try:
        slow.step()
        slow.step()
    finally:
        _eager_adam.ENABLED = True
    np.testing.assert_array_equal(p.detach().numpy(), want.detach().numpy())
