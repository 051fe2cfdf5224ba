"""torch.amp on llgrad, against PyTorch: autocast and GradScaler for "cuda" disable
themselves with PyTorch's warnings (no CUDA here), disabled ones pass everything through
(CPU autocast itself: tests/runtime/test_bfloat16.py); GradScaler("cpu") scales, unscales, skips the
step after an inf, backs off and grows its scale as PyTorch's does, with its errors and
state dict, eagerly and inside a compiled training step."""
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.cuda.amp import GradScaler as CudaGradScaler, autocast as cuda_autocast

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _warned(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, sorted(str(c.message) for c in caught)


def test_cuda_autocast_and_scaler_disable_themselves_as_torch():
    for make in (lambda L: L.autocast(device_type="cuda"),
                 lambda L: L.amp.autocast("cuda", dtype=L.float16),
                 lambda L: L.amp.GradScaler("cuda"),
                 lambda L: L.amp.GradScaler()):
        (ours, ours_w), (theirs, theirs_w) = _warned(lambda: make(llgrad)), \
            _warned(lambda: make(torch))
        assert ours_w == theirs_w
    _, w = _warned(lambda: CudaGradScaler())
    assert any("deprecated" in m for m in w) and any("Disabling" in m for m in w)
    _, w = _warned(lambda: cuda_autocast())
    assert any("deprecated" in m for m in w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with llgrad.autocast("cuda"):
            assert not llgrad.is_autocast_enabled()
        s = llgrad.amp.GradScaler("cuda")
    assert not s.is_enabled() and s.get_scale() == 1.0 and s.state_dict() == {}
    x = llgrad.ones(2)
    assert s.scale(x) is x


def test_disabled_cpu_autocast_changes_nothing():
    with llgrad.autocast("cpu", enabled=False):
        y = llgrad.ones(2, 2) @ llgrad.ones(2, 2)
    assert y.dtype == llgrad.float32 and not llgrad.is_autocast_enabled("cpu")

    @llgrad.autocast("cpu", enabled=False)
    def f(a):
        return a * 2
    assert f(llgrad.ones(1)).tolist() == [2.0]


def _train(lib, steps=7, interval=2, bad_step=3):
    w0 = np.array([[0.5, -1.0, 0.25], [1.5, 0.1, -0.3]], dtype=np.float32)
    w = lib.tensor(w0, requires_grad=True)
    opt = lib.optim.SGD([w], lr=0.05, momentum=0.9)
    scaler = lib.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=interval)
    x = lib.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    out = []
    for k in range(steps):
        opt.zero_grad()
        loss = (x @ w.t()).pow(2).mean()
        if k == bad_step:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        norm = lib.nn.utils.clip_grad_norm_([w], 5.0)
        scaler.step(opt)
        scaler.update()
        out += [scaler.get_scale(), float(norm), w.detach().numpy().copy()]
    return out + [scaler.state_dict()]


def test_scaler_steps_skips_backs_off_and_grows_as_torch():
    ours, theirs = _train(llgrad), _train(torch)
    assert ours[-1] == theirs[-1]
    for a, b in zip(ours[:-1], theirs[:-1]):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_scaler_errors_and_state_dict_as_torch():
    for lib in (torch, llgrad):
        w = lib.ones(2, requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1)
        s = lib.amp.GradScaler("cpu")
        s.scale((w * 3).sum()).backward()
        s.unscale_(opt)
        with pytest.raises(RuntimeError, match="already been called on this optimizer"):
            s.unscale_(opt)
        s.step(opt)
        with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
            s.step(opt)
        with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
            s.step(opt, closure=lambda: 0)
        s.update()
        t = lib.amp.GradScaler("cpu", init_scale=4.0)
        t.load_state_dict(s.state_dict())
        assert t.get_scale() == s.get_scale() == 65536.0
        with pytest.raises(RuntimeError, match="saved from a disabled instance"):
            t.load_state_dict({})


def test_a_compiled_step_with_a_scaler_equals_eager():
    results = []
    for compiled in (False, True):
        w = llgrad.tensor([[0.5, -1.0, 0.25], [1.5, 0.1, -0.3]], requires_grad=True)
        opt = llgrad.optim.AdamW([w], lr=0.01)
        scaler = llgrad.amp.GradScaler("cpu", init_scale=256.0, growth_interval=3)
        x = llgrad.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))

        def step(x):
            opt.zero_grad()
            loss = (x @ w.t()).pow(2).mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            return loss.detach()
        f = llgrad.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            losses = [f(x).item() for _ in range(8)]
        results.append((losses, scaler.get_scale(), w.detach().numpy().copy(),
                        f.n_traces if compiled else None))
    (l0, s0, w0, _), (l1, s1, w1, traces) = results
    np.testing.assert_allclose(l1, l0, rtol=1e-6)
    assert s1 == s0 == 256.0 * 4 and traces <= 3
    np.testing.assert_allclose(w1, w0, rtol=1e-6)
