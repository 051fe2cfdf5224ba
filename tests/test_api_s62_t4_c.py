"""torch.linalg.eig / eigvals (llgrad/ir/ops_linalg_spectral.py's linalg_eig): complex
eigenvalues and unit eigenvectors of real and complex matrices, batched, with PyTorch's
gradients (phase-invariant losses), dtypes, checks and errors; against torch and float64
gradcheck."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _matrices(seed, shape, complex_=False):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if complex_:
        x = x + 1j * rng.standard_normal(shape)
    return x


def _loss(m, w, v):
    """A loss of the eigenvalues and of the eigenvectors' moduli (phase-invariant)."""
    n = w.shape[-1]
    return ((w.real * m.arange(1.0, n + 1)).sum() + (w.imag ** 2).sum()
            + (v.abs() * m.arange(1.0, n * n + 1).reshape(n, n)).sum())


@pytest.mark.parametrize("shape,complex_,dtype", [
    ((3, 3), False, "float64"), ((2, 4, 4), False, "float64"), ((3, 3), True, "complex128"),
    ((5, 5), False, "float32"), ((2, 3, 3), True, "complex64")])
def test_eig_values_vectors_and_gradients_match_torch(shape, complex_, dtype):
    x = _matrices(sum(shape), shape, complex_)
    out = []
    for m in (torch, llgrad):
        a = m.tensor(x, dtype=getattr(m, dtype), requires_grad=True)
        w, v = m.linalg.eig(a)
        _loss(m, w, v).backward()
        out.append((w.detach().numpy(), v.detach().numpy(), a.grad.numpy(),
                    str(w.dtype).split(".")[1], str(v.dtype).split(".")[1],
                    str(a.grad.dtype).split(".")[1], w.grad_fn.name()))
    tol = 1e-4 if dtype in ("float32", "complex64") else 1e-10
    (tw, tv, tg, *tmeta), (lw, lv, lg, *lmeta) = out
    assert lmeta == tmeta
    np.testing.assert_allclose(lw, tw, rtol=tol, atol=tol)      # (LAPACK's order in both)
    np.testing.assert_allclose(np.abs(lv), np.abs(tv), rtol=tol, atol=tol)
    np.testing.assert_allclose(lg, tg, rtol=10 * tol, atol=10 * tol)


def test_eig_decomposes_the_matrix():
    x = _matrices(7, (2, 5, 5))
    w, v = llgrad.linalg.eig(llgrad.tensor(x))
    av = llgrad.tensor(x).to(llgrad.complex128) @ v
    np.testing.assert_allclose(av.numpy(), (v * w.unsqueeze(-2)).numpy(), atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(v.numpy(), axis=-2), 1.0, atol=1e-12)


def test_eig_gradcheck_and_gradgradcheck_float64():
    x = llgrad.tensor(_matrices(3, (3, 3)), requires_grad=True)
    for f in (lambda a: llgrad.view_as_real(llgrad.linalg.eigvals(a)),
              lambda a: llgrad.linalg.eig(a).eigenvectors.abs()):
        assert llgrad.autograd.gradcheck(f, (x,))
        assert llgrad.autograd.gradgradcheck(f, (x,))
    z = llgrad.tensor(_matrices(4, (3, 3), True), requires_grad=True)
    assert llgrad.autograd.gradcheck(lambda a: llgrad.linalg.eigvals(a).abs(), (z,))


def test_eigvals_as_torch_and_its_node():
    x = _matrices(11, (4, 4))
    res = []
    for m in (torch, llgrad):
        a = m.tensor(x, requires_grad=True)
        w = m.linalg.eigvals(a)
        (w.real.sum() + 2 * w.imag.abs().sum()).backward()
        res.append((w.detach().numpy(), a.grad.numpy(), w.grad_fn.name(), str(w.dtype)))
        assert m.linalg.eigvals(m.tensor(x, dtype=m.float32)).dtype == m.complex64
    np.testing.assert_allclose(res[1][0], res[0][0], atol=1e-6)
    np.testing.assert_allclose(res[1][1], res[0][1], atol=1e-10)
    assert res[1][2] == res[0][2] == "LinalgEigBackward0"


def test_eig_out():
    x = llgrad.tensor(_matrices(2, (3, 3)))
    w, v = llgrad.empty(3, dtype=llgrad.complex128), llgrad.empty(3, 3, dtype=llgrad.complex128)
    r = llgrad.linalg.eig(x, out=(w, v))
    assert r[0] is w and r[1] is v
    assert np.allclose(w.numpy(), np.linalg.eigvals(x.numpy()))
    e = llgrad.empty(3, dtype=llgrad.complex128)
    assert llgrad.linalg.eigvals(x, out=e) is e


def test_eig_phase_dependent_loss_is_refused_as_torch():
    x = _matrices(5, (3, 3), True)
    for m in (torch, llgrad):
        a = m.tensor(x, requires_grad=True)
        v = m.linalg.eig(a).eigenvectors
        with pytest.raises(RuntimeError, match="specified up to multiplication by e\\^{i phi}"):
            v.real.sum().backward()


@pytest.mark.parametrize("make", [
    lambda m: m.ones(3), lambda m: m.ones(2, 3), lambda m: m.ones(2, 2, dtype=m.int64),
    lambda m: m.tensor([[1.0, float("nan")], [0.0, 1.0]]), lambda m: [[1.0]],
    lambda m: m.ones(2, 2, dtype=m.float16), lambda m: m.ones(2, 2, dtype=m.bfloat16)])
def test_eig_errors_as_torch(make):
    errors = []
    for m in (torch, llgrad):
        with pytest.raises((RuntimeError, TypeError, NotImplementedError)) as info:
            m.linalg.eig(make(m))
        errors.append((type(info.value), str(info.value)))
    assert errors[1] == errors[0]


def test_eig_empty_and_autocast_as_torch():
    for shape in ((0, 0), (2, 0, 0)):
        w, v = llgrad.linalg.eig(llgrad.ones(shape))
        assert w.shape == shape[:-1] and v.shape == shape and w.dtype == llgrad.complex64
    a = llgrad.tensor(_matrices(9, (3, 3)), dtype=llgrad.bfloat16)
    with llgrad.autocast("cpu", dtype=llgrad.bfloat16):
        assert llgrad.linalg.eig(a).eigenvalues.dtype == llgrad.complex64


def test_eig_in_a_compiled_function():
    """Complex eigenvalues in a compiled function: its complex ops are called back from
    native code (ir/complex_regions.py), with eager's numbers and no warning."""
    x = llgrad.tensor(_matrices(13, (3, 3)), requires_grad=True)
    ref = llgrad.linalg.eigvals(x).abs().sum()
    ref_grad, = llgrad.autograd.grad(ref, x)

    @llgrad.compile
    def f(a):
        return llgrad.linalg.eigvals(a).abs().sum()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            y = f(x)
            g, = llgrad.autograd.grad(y, x)
            # (the backward's real products run natively: eager's to rounding)
            np.testing.assert_allclose(y.item(), ref.item(), rtol=1e-13)
            np.testing.assert_allclose(g.numpy(), ref_grad.numpy(), rtol=1e-12, atol=1e-14)
    assert f.n_traces == 1
