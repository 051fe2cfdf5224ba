"""Complex tensors in the programs people write, against PyTorch: every optimiser on a
complex parameter, nn.init and nn.Linear(dtype=cfloat) (PyTorch's numbers for a seed),
checkpoints with PyTorch's conjugate bit, RoPE / Fourier-layer / STFT-loss steps, complex(),
t.real = / t.imag =, and clear errors for the linalg functions with no complex version."""
import io
import warnings

import numpy as np
import pytest

import llgrad as L

torch = pytest.importorskip("torch")

Z0 = np.array([1 + 2j, -0.5 + 0.3j, 2 - 1j])


def _np(t):
    t = t.detach()
    return t.resolve_conj().numpy() if isinstance(t, torch.Tensor) else t.numpy()


OPTIMISERS = [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1)),
              ("Adam", dict(lr=0.1, amsgrad=True)), ("AdamW", dict(lr=0.1, maximize=True)),
              ("RMSprop", dict(lr=0.01)),
              ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5, weight_decay=0.1)),
              ("Adagrad", dict(lr=0.1)), ("Adamax", dict(lr=0.1)), ("NAdam", dict(lr=0.1)),
              ("RAdam", dict(lr=0.1)), ("Adadelta", dict(lr=1.0)), ("ASGD", dict(lr=0.1)),
              ("Rprop", dict(lr=0.1))]


@pytest.mark.parametrize("name,kw", OPTIMISERS, ids=[f"{n}{i}" for i, (n, _) in
                                                     enumerate(OPTIMISERS)])
def test_optimisers_update_complex_parameters_as_torch(name, kw):
    """PyTorch's optimisers update a complex parameter through view_as_real (its real and
    imaginary parts as two reals): RMSprop's sqrt of a complex square was silently wrong,
    Adagrad / Adadelta / Adamax / NAdam / RAdam / Rprop raised."""
    out = []
    for m in (torch, L):
        p = m.nn.Parameter(m.tensor(Z0))
        opt = getattr(m.optim, name)([p], **kw)
        for _ in range(3):
            opt.zero_grad()
            loss = (p * p.conj()).real.sum() + (p.real * 3).sum() + (p.imag ** 3).sum()
            loss.backward()
            opt.step()
        out.append(_np(p))
    np.testing.assert_allclose(out[1], out[0], rtol=1e-12, atol=1e-12)


def test_init_and_complex_linear_draw_torchs_numbers():
    """uniform_ / normal_ of a complex tensor fill its real view (normal: std / sqrt(2)
    per part), so nn.init and Linear(dtype=cfloat) give PyTorch's values for a seed."""
    res = []
    for m in (torch, L):
        got = []
        m.manual_seed(0)
        got.append(_np(m.nn.Linear(3, 2, dtype=m.cfloat).weight))
        for init, args in (("normal_", (1, 2)), ("uniform_", (-1, 2)), ("xavier_normal_", ()),
                           ("kaiming_uniform_", ())):
            w = m.empty(4, 3, dtype=m.cfloat)
            getattr(m.nn.init, init)(w.t(), *args)
            got.append(_np(w))
        res.append(got)
    for a, b in zip(*res):
        assert b.dtype == a.dtype
        np.testing.assert_array_equal(b, a)
    with pytest.raises(NotImplementedError, match="complex"):
        L.nn.init.orthogonal_(L.empty(3, 3, dtype=L.cfloat))


def test_torch_checkpoint_with_conjugate_and_negative_bits():
    """torch.save keeps a conj() view's memory and a 'conj' flag: the values are the
    conjugates (they loaded unconjugated); a complex tensor that requires grad loads."""
    z = torch.tensor([1 + 2j, 3 - 4j])
    buf = io.BytesIO()
    torch.save({"c": z.conj(), "n": -z.conj().imag, "p": torch.nn.Parameter(z.conj()),
                "g": torch.tensor([1j], requires_grad=True)}, buf)
    buf.seek(0)
    want = torch.load(buf)
    buf.seek(0)
    got = L.load(buf)
    for k in want:
        np.testing.assert_array_equal(_np(got[k]), _np(want[k]))
        assert got[k].requires_grad == want[k].requires_grad


def _rope(m, xq_np, compiled=False):
    dim, seq = 8, 5
    freqs = 1.0 / (10000 ** (m.arange(0, dim, 2)[: dim // 2].float() / dim))
    freqs = m.outer(m.arange(seq, dtype=m.float32), freqs)
    freqs_cis = m.polar(m.ones_like(freqs), freqs)
    xq = m.tensor(xq_np, requires_grad=True)

    def f(xq):
        xc = m.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        return m.view_as_real(xc * freqs_cis.view(1, seq, 1, dim // 2)).flatten(3).type_as(xq)
    if compiled:
        f = L.compile(f)
    out = f(xq)
    w = m.tensor(np.arange(out.numel()).reshape(tuple(out.shape)) % 7, dtype=m.float32)
    (out * w).sum().backward()
    return _np(out), _np(xq.grad)


def test_rope_as_llama_writes_it():
    x = np.random.RandomState(0).randn(2, 5, 3, 8).astype(np.float32)
    want = _rope(torch, x)
    with warnings.catch_warnings():         # (compiled: ir/complex_regions.py)
        warnings.simplefilter("error")
        compiled = _rope(L, x, compiled=True)
    for got in (_rope(L, x), compiled):
        for a, b in zip(want, got):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def _fourier_layer(m, steps=3):
    rs = np.random.RandomState(1)
    x = m.tensor(rs.randn(2, 3, 8, 8).astype(np.float32))
    w0 = (rs.randn(3, 4, 4, 3) + 1j * rs.randn(3, 4, 4, 3)).astype(np.complex64) * 0.1
    w = m.nn.Parameter(m.tensor(w0))
    opt = m.optim.AdamW([w], lr=1e-2)
    losses = []
    for _ in range(steps):
        xf = m.fft.rfft2(x)
        out_ft = m.zeros(2, 4, 8, 5, dtype=m.cfloat)
        out_ft[:, :, :4, :3] = m.einsum("bixy,ioxy->boxy", xf[:, :, :4, :3], w)
        y = m.fft.irfft2(out_ft, s=(8, 8))
        loss = (y ** 2).mean() + (m.fft.rfft2(y).abs() - 1).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses), _np(w)


def test_fourier_neural_operator_layer_trains_as_torch():
    want, got = _fourier_layer(torch), _fourier_layer(L)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-6)


def _stft_loss(m):
    x = m.tensor(np.random.RandomState(2).randn(2, 256), requires_grad=True)
    s = m.stft(x, 64, hop_length=16, window=m.hann_window(64, dtype=m.float64),
               return_complex=True)
    loss = (s.abs().clamp(min=1e-7).log() ** 2).mean() + m.angle(s).sin().mean() + \
        m.log10(s + 1).abs().mean() + s.var()
    loss.backward()
    return _np(loss), _np(x.grad)


def test_spectral_loss_through_stft():
    for a, b in zip(_stft_loss(torch), _stft_loss(L)):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12)


def test_scalar_conversion_and_part_setters():
    for m in (torch, L):
        x = m.tensor([1 + 2j, 3 - 1j])
        x.imag = m.tensor([5.0, 6.0])
        x.real = 0
        y = m.ones(2)
        y.real = m.tensor([3.0, 4.0])
        got = [_np(x), _np(y), complex(x[1])]
        if m is torch:
            want = got
        with pytest.raises(RuntimeError):
            y.imag = m.zeros(2)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert got[2] == want[2] == 6j


@pytest.mark.parametrize("fn", [lambda m, a: m.linalg.inv(a), lambda m, a: m.linalg.det(a),
                                lambda m, a: m.linalg.solve(a, a),
                                lambda m, a: m.linalg.qr(a)])
def test_linalg_without_a_complex_version_says_so(fn):
    """(their message said 'Expected a floating point or complex tensor ... Got
    ComplexDouble')"""
    with pytest.raises(NotImplementedError, match="not implemented for complex"):
        fn(L, L.eye(2, dtype=L.cdouble))


def test_lerp_with_a_real_end_names_the_complex_dtype():
    for m in (torch, L):
        with pytest.raises(RuntimeError, match=r"c10::complex<float> for `end`"):
            m.lerp(m.tensor([1j]), m.ones(1), 0.5)


def _views_functions_and_modules(m):
    # a view of a base changed in place takes the base's new history (it kept the old one)
    x = m.tensor(Z0, requires_grad=True)
    b = x * 1
    v = b[0:2]
    b.mul_(2j)
    (v * m.tensor([1, 1j])).real.sum().backward()
    out = [_np(x.grad)]

    # a custom Function's complex output is differentiable (it had no grad_fn)
    class Square(m.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return t * t

        @staticmethod
        def backward(ctx, g):
            t, = ctx.saved_tensors
            return g * 2 * t.conj()
    x = m.tensor(Z0, requires_grad=True)
    (Square.apply(x) * 1j).real.sum().backward()
    out.append(_np(x.grad))
    # Module.to(a complex dtype) (it raised), and back to a real one
    m.manual_seed(0)
    lin = m.nn.Linear(2, 2).to(m.cfloat)
    lin(m.ones(1, 2, dtype=m.cfloat)).abs().sum().backward()
    out += [_np(lin.weight), _np(lin.weight.grad), str(lin.to(m.float64).bias.dtype)[-7:]]
    return out


@pytest.mark.filterwarnings("ignore:Complex modules", "ignore:Casting complex values")
def test_inplace_views_custom_functions_and_module_to():
    want, got = _views_functions_and_modules(torch), _views_functions_and_modules(L)
    for a, b in zip(want[:-1], got[:-1]):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)
    assert want[-1] == got[-1] == "float64"


def test_forward_mode_on_complex_says_it_is_not_implemented():
    """(it said 'Expected primal to be floating point or complex, but got complex128')"""
    fwd = L.autograd.forward_ad
    with fwd.dual_level():
        with pytest.raises(NotImplementedError, match="forward-mode AD .* complex"):
            fwd.make_dual(L.tensor(Z0), L.tensor(Z0))


def test_dtype_to_real_and_to_complex():
    for name in ("float16", "float32", "float64", "complex64", "complex128", "int64"):
        t, lt = getattr(torch, name), getattr(L, name)
        assert str(lt.to_real()).split(".")[1] == str(t.to_real()).split(".")[1]
        if name == "int64":
            with pytest.raises(RuntimeError, match="Unknown Complex ScalarType for Long"):
                lt.to_complex()
        else:
            assert str(lt.to_complex()).split(".")[1] == str(t.to_complex()).split(".")[1]


def test_embedding_with_complex_weights():
    w = np.array([[1 + 2j, 3j], [2, -1j], [0.5 + 0.5j, 1]])
    idx = [[0, 2], [2, 1]]
    for m in (torch, L):
        got = _np(m.nn.functional.embedding(m.tensor(idx), m.tensor(w), padding_idx=1))
        if m is torch:
            want = got
    np.testing.assert_array_equal(got, want)
    # (PyTorch has no complex gradient here; llgrad's against finite differences)
    t = L.tensor(w, requires_grad=True)
    assert L.autograd.gradcheck(lambda a: L.nn.functional.embedding(L.tensor(idx), a) * 1j, (t,))


@pytest.mark.parametrize("fn", [lambda m: m.complex(m.ones(1), m.ones(1, dtype=m.float64)),
                                lambda m: m.polar(m.ones(1), m.ones(1, dtype=m.float64)),
                                lambda m: m.complex(m.ones(1, dtype=m.int64),
                                                    m.ones(1, dtype=m.int64))])
def test_complex_and_polar_dtype_errors_in_torchs_words(fn):
    with pytest.raises(RuntimeError) as want:
        fn(torch)
    with pytest.raises(RuntimeError) as got:
        fn(L)
    assert str(got.value) == str(want.value)
