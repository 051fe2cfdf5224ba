"""Compiled training steps holding complex values (ir/complex_regions.py): an FNO spectral
layer (rfft2, complex weights, einsum, irfft2), rotary embeddings (polar, view_as_complex,
view_as_real) and a spectral loss (stft, abs) run as native code around one call back into
NumPy per run of complex ops, with no fallback warning; compiled == eager == torch, losses
and parameters over a few SGD steps."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _fno(T, compiled, steps=3):
    rng = np.random.default_rng(0)
    B, C, N, M = 3, 3, 8, 3
    lift = T.tensor(rng.standard_normal((C, 2)).astype(np.float32) * 0.5, requires_grad=True)
    w = (rng.standard_normal((2, C, C, M, M)) + 1j * rng.standard_normal((2, C, C, M, M)))
    w1 = T.tensor((w[0] * 0.2).astype(np.complex64), requires_grad=True)
    w2 = T.tensor((w[1] * 0.2).astype(np.complex64), requires_grad=True)
    x = T.tensor(rng.standard_normal((B, 2, N, N)).astype(np.float32))
    y = T.tensor(rng.standard_normal((B, C, N, N)).astype(np.float32))
    params = [lift, w1, w2]
    opt = T.optim.SGD(params, lr=0.1)

    def step(x, y):
        h = T.einsum("bixy,oi->boxy", x, lift)
        hf = T.fft.rfft2(h)
        out = T.zeros(B, C, N, N // 2 + 1, dtype=T.cfloat)
        out[:, :, :M, :M] = T.einsum("bixy,ioxy->boxy", hf[:, :, :M, :M], w1)
        out[:, :, -M:, :M] = T.einsum("bixy,ioxy->boxy", hf[:, :, -M:, :M], w2)
        z = T.tanh(T.fft.irfft2(out, s=(N, N)) + h)
        loss = T.nn.functional.mse_loss(z, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return _run(T, compiled, step, (x, y), params, steps)


def _rope(T, compiled, steps=3):
    rng = np.random.default_rng(1)
    lin = T.nn.Linear(8, 8)
    with T.no_grad():
        lin.weight.copy_(T.tensor(rng.standard_normal((8, 8)).astype(np.float32) * 0.3))
        lin.bias.copy_(T.tensor(rng.standard_normal(8).astype(np.float32) * 0.1))
    theta = T.tensor(rng.standard_normal((6, 4)).astype(np.float32), requires_grad=True)
    fixed = T.polar(T.ones(6, 4), T.tensor(rng.standard_normal((6, 4)).astype(np.float32)))
    x = T.tensor(rng.standard_normal((2, 6, 8)).astype(np.float32))
    target = T.tensor(rng.standard_normal((2, 6, 8)).astype(np.float32))
    params = [lin.weight, lin.bias, theta]
    opt = T.optim.SGD(params, lr=0.05)

    def step(x, target):
        q = lin(x)
        qc = T.view_as_complex(q.float().reshape(2, 6, 4, 2))
        freqs = T.polar(T.ones_like(theta), theta)
        rot = T.view_as_real(qc * freqs * fixed).flatten(2)
        loss = ((rot.softmax(-1) - target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return _run(T, compiled, step, (x, target), params, steps)


def _stft(T, compiled, steps=3):
    rng = np.random.default_rng(2)
    conv = T.nn.Conv1d(1, 1, 5, padding=2)
    with T.no_grad():
        conv.weight.copy_(T.tensor(rng.standard_normal((1, 1, 5)).astype(np.float32) * 0.4))
        conv.bias.zero_()
    x = T.tensor(rng.standard_normal((2, 256)).astype(np.float32))
    y = T.tensor(rng.standard_normal((2, 256)).astype(np.float32))
    win = T.hann_window(64)
    params = list(conv.parameters())
    opt = T.optim.SGD(params, lr=0.1)

    def spec(s):
        return T.stft(s, 64, hop_length=16, window=win, return_complex=True).abs()

    def step(x, y):
        mag, ref = spec(conv(x.unsqueeze(1)).squeeze(1)), spec(y)
        loss = (mag - ref).norm() / ref.norm() + \
            T.nn.functional.l1_loss(T.log(mag + 1e-5), T.log(ref + 1e-5))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return _run(T, compiled, step, (x, y), params, steps)


def _run(T, compiled, step, args, params, steps):
    if compiled:
        step = T.compile(step)
    losses = [float(step(*args)) for _ in range(steps)]
    return losses, [p.detach().numpy().copy() for p in params], step


def _region_ops(cf):
    """The ops of every native graph of cf (asserting each graph ran as native code)."""
    ops = set()
    cf.wait()           # (a background build may be under way: LLGRAD_COMPILE=background)
    (entry,) = cf.entries
    for which in ("forward", "backward") if entry.backward is not None else ("forward",):
        k = entry.kernels.get(which)
        assert k is not None and not isinstance(k, str), (which, k)
        ops |= {n.op for n in k.plan.graph.nodes}
    return ops


@pytest.mark.parametrize("program", [
    pytest.param(_fno, marks=pytest.mark.slow, id="fno"),   # (~8 s cold; _spectral is its
    pytest.param(_rope, id="rope"), pytest.param(_stft, id="stft")])    # fast variant)
def test_compiled_equals_eager_and_torch(program):
    expected, tparams, _ = program(torch, False)
    eager, eparams, _ = program(llgrad, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # (no fallback, no interpreted graph)
        got, cparams, cf = program(llgrad, True)
    assert cf.n_traces == 1
    assert "complex_region" in _region_ops(cf)
    # (stft's loss takes the log of magnitudes down to 1e-3 of their median: a bin's
    # rounding is amplified ~1000x in its gradient (llgrad's float32 gradient of the
    # signal is 1e-4 from float64's, torch's 2e-5), so after a step the two libraries part
    # by ~1e-4 (an AVX2 host); compiled == eager stays tight)
    loose = program is _stft
    np.testing.assert_allclose(eager, expected, rtol=2e-4 if loose else 2e-5, atol=1e-6)
    np.testing.assert_allclose(got, eager, rtol=2e-5, atol=1e-6)
    for c, e, t in zip(cparams, eparams, tparams):
        np.testing.assert_allclose(e, t, rtol=1e-3 if loose else 1e-4, atol=1e-5)
        np.testing.assert_allclose(c, e, rtol=1e-4, atol=1e-5)


def _spectral(x, w):
    """A 1-D spectral layer whose complex result is returned beside its real loss."""
    T = torch if isinstance(x, torch.Tensor) else llgrad
    xf = T.fft.rfft(x)
    out = T.zeros(x.shape[0], 5, dtype=T.cfloat)
    out[:, :3] = xf[:, :3] * w
    y = T.fft.irfft(out, n=8)
    return (y * y).sum() + out.abs().mean(), out


@pytest.mark.parametrize("backend", ["llvm", "interpret"])
def test_gradients_of_complex_inputs(backend):
    """A compiled forward and a separate backward: a complex leaf's gradient (dL/dRe +
    i dL/dIm, complex activations saved across) equals eager's and torch's; the complex
    result is laid out as eager's."""
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((4, 8)).astype(np.float32)
    ws = (rng.standard_normal(3) + 1j * rng.standard_normal(3)).astype(np.complex64)
    cf = llgrad.compile(_spectral, backend=backend)
    runs = []
    for T, f in ((torch, _spectral), (llgrad, _spectral), (llgrad, cf), (llgrad, cf)):
        x, w = T.tensor(xs, requires_grad=True), T.tensor(ws, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            loss, out = f(x, w)
        loss.backward()
        assert out.is_contiguous() and out.dtype == T.complex64
        runs.append([loss.detach().numpy(), out.detach().numpy(), x.grad.numpy(),
                     w.grad.numpy()])
    for run in runs[1:]:
        for got, want in zip(run, runs[0]):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for got, want in zip(runs[2], runs[1]):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert cf.n_traces == 1
