"""SGD's eager update without the dispatcher (llgrad/optim/_eager_sgd.py): bit for bit the
tensor calls' parameters, momentum buffers and version counters, over contiguous and strided
parameters and gradients, float32 and float64, with and without the native loop, for every
option; the cases it does not serve still take the tensor calls; the optimiser's state is
what torch.optim.SGD keeps; and a few steps agree with torch."""
import numpy as np
import pytest

import llgrad
import llgrad.optim as optim
from llgrad.compile import eager_native, eager_optim
from llgrad.optim import _eager_sgd


def _params(dtype):
    rng = np.random.default_rng(7)      # (the same parameters for every run)
    a = rng.standard_normal((6, 5))
    b = rng.standard_normal((5, 6))
    c = rng.standard_normal((7,))
    d = rng.standard_normal((4, 3)) * 1e-3
    e = rng.standard_normal((70, 60))
    ps = [llgrad.tensor(a, dtype=dtype), llgrad.tensor(b, dtype=dtype).t(),    # (strided)
          llgrad.tensor(c, dtype=dtype), llgrad.tensor(d, dtype=dtype)[:, ::2],
          llgrad.tensor(e, dtype=dtype)]
    return [p.detach().requires_grad_() for p in ps]


def _grads(ps, k):
    rng = np.random.default_rng(100 + k)
    gs = []
    for i, p in enumerate(ps):
        g = llgrad.tensor(rng.standard_normal(tuple(p.shape)[::-1]), dtype=p.dtype).t() \
            if i == 0 else llgrad.tensor(rng.standard_normal(tuple(p.shape)), dtype=p.dtype)
        if i == 4:
            g[0, :4] = llgrad.tensor([0.0, 1e30, -1e-30, 5e-39])   # (a subnormal in float32)
        gs.append(g if i != 3 else g * 0)
    return gs


def _run(make, dtype, fast, native, steps=4):
    ps = _params(dtype)
    opt = make(ps)
    saved = _eager_sgd.ENABLED, eager_native.ENABLED
    _eager_sgd.ENABLED, eager_native.ENABLED = fast, native
    try:
        for k in range(steps):
            for p, g in zip(ps, _grads(ps, k)):
                p.grad = g
            if k == 2:
                ps[2].grad = None       # (a parameter without a gradient this step)
            opt.step()
    finally:
        _eager_sgd.ENABLED, eager_native.ENABLED = saved
    bufs = [opt.state[p]["momentum_buffer"] for p in ps if "momentum_buffer" in opt.state[p]]
    return ([p.detach().numpy().copy() for p in ps], [p._version for p in ps],
            [(b.numpy().copy(), b._version) for b in bufs], len(opt.state))


MAKERS = {
    "plain": lambda ps: optim.SGD(ps, lr=0.1),
    "momentum": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9),
    "dampening": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.8, dampening=0.3),
    "nesterov_decay": lambda ps: optim.SGD(ps, lr=0.01, momentum=0.9, nesterov=True,
                                           weight_decay=1e-2),
    "maximize": lambda ps: optim.SGD(ps, lr=0.02, momentum=0.5, maximize=True),
    "decay_only": lambda ps: optim.SGD(ps, lr=1, weight_decay=1),
    "groups": lambda ps: optim.SGD([{"params": ps[:2]}, {"params": ps[2:], "lr": 0.3,
                                                         "momentum": 0.1}], lr=1e-3),
    "infinite_lr": lambda ps: optim.SGD(ps, lr=float("inf"), momentum=0.9),
}


@pytest.mark.parametrize("dtype", [llgrad.float32, llgrad.float64])
@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_matches_the_tensor_calls_bit_for_bit(kind, dtype):
    with np.errstate(all="ignore"):
        native = _run(MAKERS[kind], dtype, True, True)
        passes = _run(MAKERS[kind], dtype, True, False)
        calls = _run(MAKERS[kind], dtype, False, False)
    for run in (native, passes):
        for a, b in zip(run[0], calls[0]):
            np.testing.assert_array_equal(a, b)
        assert run[1] == calls[1]
        for (x, vx), (y, vy) in zip(run[2], calls[2]):
            np.testing.assert_array_equal(x, y)
            assert vx == vy
        assert run[3] == calls[3]


@pytest.mark.parametrize("kw", [{"lr": 1e39}, {"lr": 0.1, "momentum": 0.9, "nesterov": True,
                                                 "weight_decay": 1e39}])
def test_an_alpha_float32_cannot_hold_raises_after_the_same_writes(kw):
    """PyTorch's error for add's alpha out of float32's range, raised after the buffer's
    writes as the tensor calls raise it (the update does not write the parameter first)."""
    runs = []
    for fast, native in ((True, True), (True, False), (False, False)):
        saved = _eager_sgd.ENABLED, eager_native.ENABLED
        _eager_sgd.ENABLED, eager_native.ENABLED = fast, native
        try:
            p = llgrad.ones(300, requires_grad=True)
            opt = optim.SGD([p], **{"lr": 0.1, "momentum": 0.9, **kw})
            for _ in range(3):
                p.grad = llgrad.ones(300)
                with pytest.raises(RuntimeError, match="cannot be converted to type float"):
                    opt.step()
            buf = opt.state[p].get("momentum_buffer")
            runs.append((p.detach().numpy().copy(), p._version,
                         None if buf is None else (buf.numpy().copy(), buf._version)))
        finally:
            _eager_sgd.ENABLED, eager_native.ENABLED = saved
    for run in runs[:2]:
        np.testing.assert_array_equal(run[0], runs[2][0])
        assert run[1] == runs[2][1]
        assert (run[2] is None) == (runs[2][2] is None)
        if run[2] is not None:
            np.testing.assert_array_equal(run[2][0], runs[2][2][0])
            assert run[2][1] == runs[2][2][1]


def test_the_native_loop_serves_contiguous_parameters(monkeypatch):
    # (the loop built before the call that wants it, as a warm cache gives it: in the
    # background mode that call runs the tensor calls while the build is queued)
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    ran = []
    real = _eager_sgd._native
    monkeypatch.setattr(_eager_sgd, "_native", lambda *a: ran.append(real(*a)) or ran[-1])
    ps = _params(llgrad.float32)
    opt = optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True)
    for k in range(3):
        for p, g in zip(ps, _grads(ps, k)):
            p.grad = g
        opt.step()
    # the first step makes the buffers with the tensor calls; then the contiguous
    # parameters with contiguous gradients (2, 4) take the loop, the strided ones do not
    assert ran == [False, False, True, False, True] * 2


def test_unserved_cases_take_the_tensor_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(_eager_sgd, "update", lambda *a: calls.append(a) or False)
    p = llgrad.ones(4, requires_grad=True)
    opt = optim.SGD([p], lr=llgrad.tensor(0.1), momentum=0.9)     # (a tensor lr)
    p.grad = llgrad.ones(4)
    opt.step()
    opt.step()
    assert calls == []
    np.testing.assert_allclose(p.detach().numpy(), 1 - 0.1 - 0.1 * 1.9, rtol=1e-6)


def test_without_momentum_no_state_is_kept_as_in_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, llgrad):
        p = lib.nn.Parameter(lib.ones(3))
        opt = lib.optim.SGD([p], lr=0.1)
        p.grad = lib.ones(3)
        opt.step()
        assert opt.state_dict()["state"] == {}, lib.__name__


def test_a_few_steps_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    init = [rng.standard_normal((50, 40)).astype(np.float32),
            rng.standard_normal(40).astype(np.float32)]
    for kw in ({"momentum": 0.9, "nesterov": True, "weight_decay": 1e-3},
               {"momentum": 0.9, "dampening": 0.1}, {}):
        lp = [llgrad.tensor(a.copy(), requires_grad=True) for a in init]
        tp = [torch.tensor(a.copy(), requires_grad=True) for a in init]
        lo, to = optim.SGD(lp, lr=0.05, **kw), torch.optim.SGD(tp, lr=0.05, **kw)
        for k in range(5):
            gs = [np.random.default_rng(k).standard_normal(a.shape).astype(np.float32)
                  for a in init]
            for p, q, g in zip(lp, tp, gs):
                p.grad, q.grad = llgrad.tensor(g), torch.tensor(g)
            lo.step()
            to.step()
        for p, q in zip(lp, tp):
            # (PyTorch's add with an alpha is one fused multiply-add, NumPy's two roundings)
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                       atol=1e-6)
        for p, q in zip(lp, tp):
            if kw:
                np.testing.assert_allclose(lo.state[p]["momentum_buffer"].numpy(),
                                           to.state[q]["momentum_buffer"].numpy(), rtol=1e-5,
                                           atol=1e-6)


def test_in_the_background_mode_the_passes_serve_until_the_loop_is_built(monkeypatch,
                                                                       cold_kernels):
    ran = []
    real = _eager_sgd._native
    monkeypatch.setattr(_eager_sgd, "_native", lambda *a: ran.append(real(*a)) or ran[-1])
    p = llgrad.ones(100, 50, requires_grad=True)
    opt = optim.SGD([p], lr=0.1, maximize=True)
    p.grad = llgrad.ones(100, 50)
    opt.step()                  # (the build is queued: NumPy's passes run this step)
    eager_native.wait()
    opt.step()
    assert ran == [False, True]
    np.testing.assert_array_equal(p.detach().numpy(), np.float32(1.2))


def test_a_compiled_step_equals_the_eager_one_as_lr_and_momentum_change():
    def make():
        llgrad.manual_seed(0)
        m = llgrad.nn.Sequential(llgrad.nn.Linear(8, 16), llgrad.nn.ReLU(),
                                 llgrad.nn.Linear(16, 1))
        return m, optim.SGD(m.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                            weight_decay=1e-4)
    x, y = llgrad.randn(32, 8), llgrad.randn(32, 1)
    runs = []
    for compiled in (False, True):
        m, opt = make()

        def step():
            opt.zero_grad()
            loss = llgrad.nn.functional.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            return loss
        step = llgrad.compile(step) if compiled else step
        losses = []
        for k in range(6):
            if k == 3:          # (a schedule's write between calls: the next steps read it)
                opt.param_groups[0]["lr"] = 0.02
                opt.param_groups[0]["momentum"] = 0.5
            losses.append(step().item())
        runs.append((losses, [p.detach().numpy().copy() for p in m.parameters()]))
    # (the compiled step's products and sums round in their own order)
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-6)
    for a, b in zip(runs[0][1], runs[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
