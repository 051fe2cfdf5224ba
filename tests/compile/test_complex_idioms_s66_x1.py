"""Small complex idioms in compiled functions (ir/complex_regions.py): each compiled (native
code around calls back into NumPy) equals eager and torch, result and gradients, with no
fallback warning; what still runs on the interpreter says so."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _mod(x):
    return torch if isinstance(x, torch.Tensor) else llgrad


def conj_angle(x, w):
    T = _mod(x)
    z = T.complex(x, w)
    return (z.conj() * z * 1j).imag.sum() + z.angle().mean()


def polar_exp(x, w):
    T = _mod(x)
    z = T.polar(x.abs() + 0.5, w)
    return T.view_as_real(z.exp() * z).pow(2).sum()


def real_imag_parts(x, w):
    T = _mod(x)
    z = T.fft.fft(x + 0j * w)
    return (z.real * w).sum() - (z.imag ** 2).mean() + z.abs().max()


def fft_roundtrip_ortho(x, w):
    T = _mod(x)
    spec = T.fft.rfft(x, norm="ortho") * T.fft.rfft(w, norm="ortho")
    return T.fft.irfft(spec, n=x.shape[-1], norm="ortho").tanh().sum()


def transposed_complex(x, w):
    T = _mod(x)
    z = T.fft.fft2(x)                    # (a transpose of a complex value, read natively)
    y = (z.t() * T.fft.fft(w).unsqueeze(-1)).abs()
    return (y * x.t()).sum()


def stft_istft(x, w):
    T = _mod(x)
    win = T.hann_window(8, dtype=T.float64)
    s = T.stft(x.reshape(1, -1), 8, hop_length=2, window=win, return_complex=True)
    back = T.istft(s * (1 + w.mean()), 8, hop_length=2, window=win, length=x.numel())
    return (back - x.reshape(1, -1)).pow(2).sum() + s.abs().sum()


IDIOMS = [conj_angle, polar_exp, real_imag_parts, fft_roundtrip_ortho, transposed_complex,
          stft_istft]


@pytest.mark.parametrize("fn", [pytest.param(f, id=f.__name__, marks=[pytest.mark.slow] if
                                f is stft_istft else []) for f in IDIOMS])    # (~2.4 s)
def test_idiom(fn):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((4, 4))
    ws = rng.standard_normal((4, 4)) if fn is not stft_istft else rng.standard_normal(4)
    cf = llgrad.compile(fn)
    runs = []
    for T, f in ((torch, fn), (llgrad, fn), (llgrad, cf), (llgrad, cf)):
        x, w = (T.tensor(a, dtype=T.float64, requires_grad=True) for a in (xs, ws))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            loss = f(x, w)
        loss.backward()
        runs.append([loss.detach().numpy(), x.grad.numpy(), w.grad.numpy()])
    for got, want in zip(runs[1], runs[0]):         # eager == torch
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-10)
    for run in runs[2:]:                            # compiled == eager
        for got, want in zip(run, runs[1]):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert cf.n_traces == 1
    cf.wait()           # (a background build may be under way: LLGRAD_COMPILE=background)
    (entry,) = cf.entries
    for which in ("forward", "backward"):
        k = entry.kernels.get(which)
        assert k is not None and not isinstance(k, str), (which, k)


def _writes(z, x):
    """Writes through views of another dtype: the real view of a complex input, the complex
    view of a real input (tracer/view_values.py)."""
    T = _mod(z)
    r = T.view_as_real(z)
    r[1:].mul_(2).add_(x[1:])
    c = T.view_as_complex(x)
    c[0] = c[0] * (1 + 2j)
    return r.sum() + c.abs().sum(), T.view_as_real(z).clone()


@pytest.mark.parametrize("backend", ["llvm", "interpret"])
def test_writes_through_views_of_another_dtype(backend):
    zs = np.array([1 + 2j, 3 - 1j, -0.5j], np.complex128)
    xs = np.arange(6.0).reshape(3, 2)
    cf = llgrad.compile(_writes, backend=backend)
    runs = []
    for T, f in ((torch, _writes), (llgrad, _writes), (llgrad, cf), (llgrad, cf)):
        z, x = T.tensor(zs), T.tensor(xs)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            s, parts = f(z, x)
        runs.append([s.numpy(), parts.numpy(), z.numpy(), x.numpy()])
    for run in runs[1:]:
        for got, want in zip(run, runs[0]):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("opt", ["SGD", "Adam", "AdamW"])
def test_optimizer_on_complex_parameter(opt):
    """An optimiser updates a complex parameter through its real view, inside the step."""
    def run(T, compiled):
        w = T.nn.Parameter(T.tensor(np.array([[1 + 2j, 3 - 1j], [0.5j, 2]], np.complex64)))
        x = T.tensor(np.array([[1.0, 2], [3, 4]], np.float32))
        o = getattr(T.optim, opt)([w], lr=0.1, **({"momentum": 0.9} if opt == "SGD" else {}))

        def step(x):
            o.zero_grad()
            loss = (x.to(T.complex64) @ w).abs().pow(2).sum()
            loss.backward()
            o.step()
            return loss.detach()
        if compiled:
            step = T.compile(step)
        return [float(step(x)) for _ in range(5)], w.detach().numpy().copy()

    (tl, tw), (el, ew) = run(torch, False), run(llgrad, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cl, cw = run(llgrad, True)
    np.testing.assert_allclose(el, tl, rtol=1e-5)
    np.testing.assert_allclose(ew, tw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cl, el, rtol=1e-6)
    np.testing.assert_allclose(cw, ew, rtol=1e-6, atol=1e-7)


def _returns_real_view_of_input(z):
    z.mul_(2)
    return _mod(z).view_as_real(z)


def _returns_value_and_real_view(z):
    w = z * 2
    return w, _mod(z).view_as_real(w)


@pytest.mark.filterwarnings("ignore:llgrad.compile")     # (aliased results: interpreted)
@pytest.mark.parametrize("backend", ["llvm", "interpret"])
@pytest.mark.parametrize("fn", [_returns_real_view_of_input, _returns_value_and_real_view])
def test_returned_real_views_share_memory_as_eager(fn, backend):
    """A returned view_as_real of an input, or of another result, is a view of it as eager's
    is: writing into it writes the input (the compiled call's view of the input is made in
    the result's dtype: ir/ops_shape.strided_view) or the other result."""
    cf = llgrad.compile(fn, backend=backend)
    for T, f in ((torch, fn), (llgrad, fn), (llgrad, cf), (llgrad, cf)):
        z = T.tensor([1 + 2j, 3j, -1 + 0.5j])
        out = f(z)
        view = out if fn is _returns_real_view_of_input else out[1]
        view.mul_(10)
        seen = [z.numpy().copy(), view.numpy().copy()] + \
            ([out[0].numpy().copy()] if fn is _returns_value_and_real_view else [])
        if T is torch:
            want = seen
        for a, b in zip(seen, want):
            np.testing.assert_array_equal(a, b)


def _complex_operand(x):
    z = llgrad.fft.rfft(x)
    if x.sum() > 0:
        y = z.abs()
    else:
        y = (z * z).real
    return y.sum()


def _complex_inside(x):
    if x.sum() > 0:
        y = llgrad.fft.rfft(x).abs()
    else:
        y = x[:4] * 2
    return y.sum()


@pytest.mark.parametrize("fn, note", [
    (_complex_operand, "left as Python (value guards)"),      # (control_ops.emit)
    (_complex_inside, "runs on the interpreter")], ids=["operand", "inside"])
def test_complex_values_in_tensor_dependent_control_flow(fn, note):
    """Complex operands of a tensor-dependent if leave it as Python (its gradient rules take
    real values; it had no gradient at all); complex values inside its branches keep the
    graph on the interpreter (a control-flow region is planned on its own): either way,
    saying so, with eager's numbers and gradients on both branches."""
    cf = llgrad.compile(fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for sign in (1, -1, 1, -1):
            xs = sign * (np.arange(6.0) + 1)
            x, xe = llgrad.tensor(xs, requires_grad=True), llgrad.tensor(xs, requires_grad=True)
            got, want = cf(x), fn(xe)
            got.backward()
            want.backward()
            assert got.item() == want.item()
            np.testing.assert_array_equal(x.grad.numpy(), xe.grad.numpy())
            cf.wait()   # (the next call runs native code, in the background mode too)
    notes = [str(w.message) for w in caught if "llgrad.compile" in str(w.message)]
    assert notes and all(note in n for n in notes), notes
