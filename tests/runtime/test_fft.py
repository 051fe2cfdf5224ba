"""llgrad.fft and stft / istft: values against NumPy's transforms written out, gradients
against float64 finite differences, and both against PyTorch when installed (every norm,
n / s given or not, one- and two-sided, odd and even lengths)."""
import numpy as np
import pytest

import llgrad as L


def _data(shape, cplx, seed=0):
    r = np.random.RandomState(seed)
    a = r.randn(*shape)
    return a + 1j * r.randn(*shape) if cplx else a


# (name, input shape, complex input, llgrad call, torch call) -- calls take (module, x)
def _cases():
    out = []
    for norm in (None, "ortho", "forward"):
        out += [
            (f"fft-{norm}", (3, 8), True, lambda m, x, n=norm: m.fft.fft(x, norm=n)),
            (f"fft-real-{norm}", (3, 8), False, lambda m, x, n=norm: m.fft.fft(x, norm=n)),
            (f"ifft-n10-{norm}", (3, 8), True, lambda m, x, n=norm: m.fft.ifft(x, n=10, norm=n)),
            (f"rfft-{norm}", (3, 8), False, lambda m, x, n=norm: m.fft.rfft(x, norm=n)),
            (f"rfft-n7-{norm}", (3, 8), False, lambda m, x, n=norm: m.fft.rfft(x, n=7, norm=n)),
            (f"irfft-{norm}", (3, 5), True, lambda m, x, n=norm: m.fft.irfft(x, norm=n)),
            (f"irfft-n9-{norm}", (3, 5), True, lambda m, x, n=norm: m.fft.irfft(x, n=9, norm=n)),
            (f"rfft2-{norm}", (2, 6, 8), False, lambda m, x, n=norm: m.fft.rfft2(x, norm=n)),
            (f"irfft2-{norm}", (2, 6, 5), True,
             lambda m, x, n=norm: m.fft.irfft2(x, s=(6, 8), norm=n)),
            (f"fftn-dims-{norm}", (4, 3, 5), True,
             lambda m, x, n=norm: m.fft.fftn(x, dim=(0, 2), norm=n)),
            (f"hfft-{norm}", (3, 5), True, lambda m, x, n=norm: m.fft.hfft(x, norm=n)),
            (f"ihfft-{norm}", (3, 8), False, lambda m, x, n=norm: m.fft.ihfft(x, norm=n)),
            (f"hfft2-{norm}", (2, 4, 5), True, lambda m, x, n=norm: m.fft.hfft2(x, norm=n)),
            (f"hfftn-s-{norm}", (4, 3, 5), True,
             lambda m, x, n=norm: m.fft.hfftn(x, s=(3, 7), dim=(0, 2), norm=n)),
            (f"ihfft2-{norm}", (2, 4, 6), False, lambda m, x, n=norm: m.fft.ihfft2(x, norm=n)),
            (f"ihfftn-{norm}", (3, 4, 5), False, lambda m, x, n=norm: m.fft.ihfftn(x, norm=n)),
        ]
    out += [("fftshift", (4, 5), True, lambda m, x: m.fft.fftshift(x)),
            ("ifftshift-dim1", (4, 5), True, lambda m, x: m.fft.ifftshift(x, dim=1))]
    return out


CASES = _cases()
IDS = [c[0] for c in CASES]


def _loss(y, w):
    return (y * w).real.sum() if y.dtype.is_complex else (y * w).sum()


def _weights(y, seed=5):
    r = np.random.RandomState(seed)
    w = r.randn(*y.shape)
    return w + 1j * r.randn(*y.shape) if y.dtype.is_complex else w


def test_values_against_numpy():
    x = _data((3, 8), True)
    np.testing.assert_allclose(L.fft.fft(L.tensor(x)).numpy(), np.fft.fft(x), atol=1e-12)
    np.testing.assert_allclose(L.fft.rfft(L.tensor(x.real), norm="ortho").numpy(),
                               np.fft.rfft(x.real, norm="ortho"), atol=1e-12)
    np.testing.assert_allclose(L.fft.irfft(L.tensor(x), n=9).numpy(), np.fft.irfft(x, n=9),
                               atol=1e-12)
    assert L.fft.rfft(L.randn(8)).dtype == L.complex64
    assert L.fft.irfft(L.randn(5, dtype=L.cfloat)).dtype == L.float32
    assert L.fft.fft(L.arange(4)).dtype == L.complex64          # (ints: the default float's)


@pytest.mark.parametrize("case", CASES[::3], ids=IDS[::3])
def test_gradients_against_finite_differences(case):
    _, shape, cplx, call = case
    a = _data(shape, cplx)
    w = L.tensor(_weights(call(L, L.tensor(a))))
    x = L.tensor(a, requires_grad=True)
    _loss(call(L, x), w).backward()
    eps, want = 1e-6, np.zeros_like(a)
    for i in np.ndindex(a.shape):
        for unit in ((1, 1j) if cplx else (1,)):
            hi, lo = a.copy(), a.copy()
            hi[i] += eps * unit
            lo[i] -= eps * unit
            want[i] += unit * (_loss(call(L, L.tensor(hi)), w).item()
                               - _loss(call(L, L.tensor(lo)), w).item()) / (2 * eps)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_against_torch(case):
    torch = pytest.importorskip("torch")
    _, shape, cplx, call = case
    a = _data(shape, cplx)
    xl, xt = L.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    yl, yt = call(L, xl), call(torch, xt)
    assert str(yl.dtype).split(".")[-1] == str(yt.dtype).split(".")[-1]
    assert type(yl.grad_fn).__name__ == type(yt.grad_fn).__name__
    w = _weights(yt)
    _loss(yl, L.tensor(w)).backward()
    _loss(yt, torch.tensor(w)).backward()
    np.testing.assert_allclose(yl.detach().numpy(), yt.detach().resolve_conj().numpy(),
                               atol=1e-12)
    np.testing.assert_allclose(xl.grad.numpy(), xt.grad.resolve_conj().numpy(), atol=1e-12)


def test_frequencies_match_torch_bit_for_bit():
    torch = pytest.importorskip("torch")
    for n, d in ((7, 0.5), (8, 1.0), (10, 0.1)):
        assert (L.fft.fftfreq(n, d).numpy() == torch.fft.fftfreq(n, d).numpy()).all()
        assert (L.fft.rfftfreq(n, d).numpy() == torch.fft.rfftfreq(n, d).numpy()).all()


STFT = [((400,), dict(n_fft=64)),
        ((2, 300), dict(n_fft=32, hop_length=8, window="hann")),
        ((2, 300), dict(n_fft=32, hop_length=10, win_length=20, window="hann", center=False,
                        normalized=True)),
        ((200,), dict(n_fft=16, window="hamming", pad_mode="constant", onesided=False))]


@pytest.mark.parametrize("shape,kw", STFT, ids=range(len(STFT)))
def test_stft_and_istft_against_torch(shape, kw):
    torch = pytest.importorskip("torch")
    a = _data(shape, False)
    args = {}
    for m in (L, torch):
        k = dict(kw, return_complex=True)
        if "window" in kw:
            k["window"] = getattr(m, kw["window"] + "_window")(kw.get("win_length", kw["n_fft"]),
                                                                dtype=m.float64)
        args[m] = k
    xl, xt = L.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    with pytest.warns(UserWarning) if "window" not in kw else _nothing():
        yl = L.stft(xl, **args[L])
    yt = torch.stft(xt, **args[torch])
    w = _weights(yt)
    _loss(yl, L.tensor(w)).backward()
    _loss(yt, torch.tensor(w)).backward()
    np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), atol=1e-12)
    if kw.get("onesided", True) and kw.get("center", True):
        keep = {k: v for k, v in args[L].items() if k in ("hop_length", "win_length", "window")}
        back = L.istft(yl.detach(), kw["n_fft"], length=shape[-1], **keep)
        np.testing.assert_allclose(back.numpy(), a, atol=1e-12)


def test_stft_wants_return_complex_for_real_input():
    with pytest.raises(RuntimeError, match="return_complex"):
        L.stft(L.randn(100), 16, window=L.hann_window(16))


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
