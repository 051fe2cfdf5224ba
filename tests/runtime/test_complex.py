"""Complex tensors: dtypes and promotion, creation, printing, the ops that take them and
their gradients (PyTorch's convention: dL/dRe + i dL/dIm), against float64 finite
differences on the real view and against PyTorch when installed; ops without a complex
version raise; a compiled function that meets one runs eagerly with a warning."""
import warnings

import numpy as np
import pytest

import llgrad as L

RS = np.random.RandomState(0)


def _c(shape, seed=0):
    r = np.random.RandomState(seed)
    return r.randn(*shape) + 1j * r.randn(*shape)


# (name, function of one complex128 tensor returning a tensor); the same code runs on torch
CASES = [
    ("mul", lambda x: x * (x + 1j)),
    ("div", lambda x: (x + 2) / (x.conj() + 1j)),
    ("exp_log_sqrt", lambda x: x.exp() + (x + 3).log() + (x * 1j + 2).sqrt()),
    ("reciprocal_pow", lambda x: x.reciprocal() + x ** 3 + x.pow(2.5)),
    ("sin_cos", lambda x: x.sin() * x.cos()),
    ("abs_angle", lambda x: x.abs() + x.angle()),
    ("sgn", lambda x: x.sgn()),
    ("real_imag", lambda x: x.real * 2 + x.imag * x.real),
    ("sum_mean", lambda x: x.sum(0) * x.mean()),
    ("cat_flip_index", lambda x: x.flip(0)[::2] * x[1:3].sum()),
]
MATRIX_CASES = [
    ("matmul", lambda x: x @ x.mT),
    ("mm_mH", lambda x: x.mm(x.mH)),
    ("mv_dot", lambda x: x[0].dot(x[1]) * x.mv(x[0])),
]


def _loss(y, w):
    return (y * w).real.sum() if y.dtype.is_complex else (y * w).sum()


def _fd_grad(fn, a, eps=1e-6):
    """dL/dRe + i dL/dIm by central differences, L = Re(sum(fn(a) * w)) for a fixed w."""
    y = fn(L.tensor(a))
    w = L.tensor(_c(tuple(y.shape), 7) if y.dtype.is_complex else np.random.RandomState(7)
                 .randn(*y.shape))
    grad = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        for unit in (1, 1j):
            hi, lo = a.copy(), a.copy()
            hi[i] += eps * unit
            lo[i] -= eps * unit
            d = (_loss(fn(L.tensor(hi)), w).item() - _loss(fn(L.tensor(lo)), w).item()) / (2 * eps)
            grad[i] += d * unit
    return grad, w


@pytest.mark.parametrize("name,fn", CASES + MATRIX_CASES, ids=[c[0] for c in CASES + MATRIX_CASES])
def test_gradient_against_finite_differences(name, fn):
    a = _c((4, 4) if (name, fn) in MATRIX_CASES else (5,))
    expected, w = _fd_grad(fn, a)
    x = L.tensor(a, requires_grad=True)
    _loss(fn(x), w).backward()
    assert x.grad.dtype == L.complex128
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,fn", CASES + MATRIX_CASES, ids=[c[0] for c in CASES + MATRIX_CASES])
def test_values_and_gradients_against_torch(name, fn):
    torch = pytest.importorskip("torch")
    a = _c((4, 4) if (name, fn) in MATRIX_CASES else (5,))
    xl, xt = L.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    yl, yt = fn(xl), fn(xt)
    w = _c(tuple(yt.shape), 3) if yt.is_complex() else RS.randn(*yt.shape)
    _loss(yl, L.tensor(w)).backward()
    _loss(yt, torch.tensor(w)).backward()
    np.testing.assert_allclose(yl.detach().numpy(), yt.detach().resolve_conj().numpy(),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(xl.grad.numpy(), xt.grad.resolve_conj().numpy(),
                               rtol=1e-12, atol=1e-12)


def test_a_real_input_gets_the_real_part_of_its_gradient():
    x = L.tensor([1.0, -2.0], dtype=L.float64, requires_grad=True)
    c = L.tensor([1 + 2j, 3 - 1j], dtype=L.complex128)
    (x * c).abs().sum().backward()
    # d|x c|/dx = |c| sign(x)
    np.testing.assert_allclose(x.grad.numpy(), np.abs([1 + 2j, 3 - 1j]) * np.sign([1.0, -2.0]))
    assert x.grad.dtype == L.float64


def test_promotion_follows_pytorch():
    f64, f32, i64 = L.ones(2, dtype=L.float64), L.ones(2), L.ones(2, dtype=L.int64)
    assert (f64 * L.tensor(1j, dtype=L.complex64)).dtype == L.complex128   # 0-d keeps f64's
    assert (f32 * 1j).dtype == L.complex64 and (f64 * 1j).dtype == L.complex128
    assert (i64 * 1j).dtype == L.complex64
    assert (L.ones(2, dtype=L.complex64) + f64).dtype == L.complex128
    assert (L.ones(2, dtype=L.complex64) * 2.5).dtype == L.complex64
    assert L.tensor([1 + 2j, 3]).dtype == L.complex64 and L.tensor(1j).dtype == L.complex64
    assert L.full((2,), 1 + 2j).dtype == L.complex64
    with pytest.raises(RuntimeError, match="without overflow"):
        L.full((2,), 1 + 2j, dtype=L.float32)
    assert L.complex64.is_complex and not L.complex64.is_floating_point


def test_views_share_memory_both_ways():
    x = L.zeros(3, 2)
    z = L.view_as_complex(x)
    z[1] = 2 + 3j
    assert x[1].tolist() == [2.0, 3.0]
    L.view_as_real(z)[0, 1] = 5.0
    assert z[0].item() == 5j
    z.real.mul_(2)
    assert z.tolist() == [10j * 0 + 5j, 4 + 3j, 0j]
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        L.view_as_complex(L.zeros(3))
    with pytest.raises(RuntimeError, match="stride 1"):
        L.view_as_complex(L.zeros(2, 3).t())


def test_printing_matches_torch():
    torch = pytest.importorskip("torch")
    for data in ([1 + 2j, 3.5 - 1j], [[1 + 2j, 3.5 - 1j], [0j, 1e-5j]], [1j * k for k in range(30)],
                 1 + 1j, [-0.0 + 0j, 2 - 0j]):
        assert repr(L.tensor(data)) == repr(torch.tensor(data)).replace("torch.", "llgrad.")
    d = [1.5 + 2j]
    assert repr(L.tensor(d, dtype=L.complex128)) == \
        repr(torch.tensor(d, dtype=torch.complex128)).replace("torch.", "llgrad.")


def test_ops_without_a_complex_version_raise():
    z = L.randn(3, dtype=L.cfloat)
    for fn in (lambda: z.relu(), lambda: z < z, lambda: z.max(), lambda: z.clamp(0, 1),
               lambda: z.floor()):
        with pytest.raises((NotImplementedError, RuntimeError, TypeError)):
            fn()
    with pytest.raises(NotImplementedError, match="relu is not implemented for complex"):
        z.relu_()


def test_randn_parts_have_half_variance():
    L.manual_seed(0)
    z = L.randn(20000, dtype=L.cfloat)
    assert z.dtype == L.complex64
    assert abs(z.real.var().item() - 0.5) < 0.03 and abs(z.imag.var().item() - 0.5) < 0.03


def test_complex_to_real_cast_warns_and_keeps_the_real_part():
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        r = L.tensor([1 + 2j, -3j]).to(L.float32)
    assert r.tolist() == [1.0, 0.0]


@pytest.mark.parametrize("opt", ["SGD", "Adam", "AdamW"])
def test_optimisers_update_complex_parameters_as_two_reals(opt):
    def run(lib):
        w = lib.tensor(_c((3,), 1).astype(np.complex64), requires_grad=True)
        o = getattr(lib.optim, opt)([w], lr=0.1)
        for _ in range(3):
            o.zero_grad()
            (w * w.conj() * (1 + 2j)).real.sum().backward()
            o.step()
        return w.detach().numpy()
    # the real-view update: the same optimiser on the two real parameters
    a = _c((3,), 1).astype(np.complex64)
    r = L.tensor(np.stack([a.real, a.imag], -1), requires_grad=True)
    o = getattr(L.optim, opt)([r], lr=0.1)
    for _ in range(3):
        o.zero_grad()
        z = L.view_as_complex(r)
        (z * z.conj() * (1 + 2j)).real.sum().backward()
        o.step()
    got = run(L)
    np.testing.assert_allclose(got, r.detach().numpy()[:, 0] + 1j * r.detach().numpy()[:, 1],
                               rtol=1e-6)
    torch = pytest.importorskip("torch")
    np.testing.assert_allclose(got, run(torch), rtol=1e-5, atol=1e-6)


def test_compiled_function_with_complex_values_gives_the_same_numbers():
    """Compiled with its complex ops called back from native code (ir/complex_regions.py):
    no warning, eager's numbers (the real sum after them native, to rounding)."""
    def f(x, w):
        z = L.view_as_complex(x.reshape(-1, 2))
        return L.view_as_real(z * w).pow(2).sum()
    x, w = L.randn(8, requires_grad=True), L.randn(4, dtype=L.complex64)
    cf = L.compile(f)
    want = f(x, w)
    want.backward()
    g = x.grad.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            x.grad = None
            got = cf(x, w)
            got.backward()
            np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
            np.testing.assert_allclose(x.grad.numpy(), g.numpy(), rtol=1e-6, atol=1e-7)
    assert cf.n_traces == 1


@pytest.mark.parametrize("case", ["returned", "shape", "in_place", "captured", "drawn"])
def test_every_way_a_compiled_function_meets_complex_values_compiles(case):
    z, x = L.randn(4, dtype=L.cfloat), L.randn(4)
    captured = L.tensor([1 + 1j, 2j, 3, -1j])
    fn = {"returned": lambda z, x: z,
          "shape": lambda z, x: x * z.shape[0],
          "in_place": lambda z, x: z.mul_(2),
          "captured": lambda z, x: captured,
          "drawn": lambda z, x: L.randn(2, dtype=L.cfloat)}[case]
    cf = L.compile(fn)
    with warnings.catch_warnings():         # (compiled: ir/complex_regions.py)
        warnings.simplefilter("error")
        for _ in range(3):
            L.manual_seed(0)
            zw = z.clone()
            want, rng_want = fn(zw, x), L.randn(3)       # (the generator's state after)
            L.manual_seed(0)
            zg = z.clone()
            got, rng_got = cf(zg, x), L.randn(3)
            for a, b in ((got, want), (zg, zw), (rng_got, rng_want)):
                np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert cf.n_traces == 1 and cf.entries
