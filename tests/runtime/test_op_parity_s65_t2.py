"""Op-level parity with torch found by the s65 t2 sweep over PyTorch's OpInfo samples and
error_inputs (tests/runtime/opinfo_s65_t2_driver.py, run by hand):

- remainder of two Python numbers raises PyTorch's TypeError (no overload takes two
  numbers); it returned a 0-d tensor.  A number by a tensor stays valid;
- complex / polar with out= of another dtype than the result's raise PyTorch's error (a
  complex64 out of a float64 pair was silently written rounded);
- linalg.pinv differentiates as PyTorch's pinv_backward (its gradient was the SVD's, wrong
  where singular values repeat, nan at second order: silent);
- matrix_rank / pinv with tensor atol / rtol apply one tolerance per matrix (they raised,
  or silently mixed tolerances when the batch was as long as the singular values)."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("a, b", [(2, 3), (2.5, 3), (7, -2.0)])
def test_remainder_of_two_numbers_raises_as_torch(a, b):
    with pytest.raises(TypeError) as t_err:
        torch.remainder(a, b)
    with pytest.raises(TypeError) as l_err:
        llgrad.remainder(a, b)
    assert str(l_err.value).split(" - ")[0] == str(t_err.value).split(" - ")[0]


@pytest.mark.parametrize("a, b", [(2, [3, -4, 5]), (-7.5, [2.0, -3.0]), ([5, -6], 4),
                                  ([5.5, -6.0], -2.5), ([3, 4], [2, -3])])
def test_remainder_with_a_tensor_still_works(a, b):
    ta, la = (torch.tensor(a), llgrad.tensor(a)) if isinstance(a, list) else (a, a)
    tb, lb = (torch.tensor(b), llgrad.tensor(b)) if isinstance(b, list) else (b, b)
    t, l_ = torch.remainder(ta, tb), llgrad.remainder(la, lb)
    assert str(l_.dtype) == str(t.dtype).replace("torch", "llgrad")
    assert l_.tolist() == t.tolist()


@pytest.mark.parametrize("fn", ["complex", "polar"])
@pytest.mark.parametrize("src, dst", [("float64", "complex64"), ("float64", "float64"),
                                      ("float32", "complex128"), ("float64", "complex128"),
                                      ("float32", "complex64")])
def test_complex_out_dtype_must_be_the_results(fn, src, dst):
    x = [0.5, -1.25, 2.0]
    tr, ti = (torch.tensor(x, dtype=getattr(torch, src)) for _ in range(2))
    lr, li = (llgrad.tensor(x, dtype=getattr(llgrad, src)) for _ in range(2))
    to, lo = torch.empty(3, dtype=getattr(torch, dst)), llgrad.empty(3, dtype=getattr(llgrad, dst))
    try:
        getattr(torch, fn)(tr, ti, out=to)
    except RuntimeError as e:
        with pytest.raises(RuntimeError) as err:
            getattr(llgrad, fn)(lr, li, out=lo)
        assert str(err.value) == str(e)
        return
    getattr(llgrad, fn)(lr, li, out=lo)
    assert str(lo.dtype) == str(to.dtype).replace("torch", "llgrad")
    np.testing.assert_allclose(lo.numpy(), to.numpy(), rtol=1e-6)    # (float32 cos: an ulp)


def _orthonormal_product(seed, m=3, n=3, k=2):
    # a @ b.mT of two orthonormal m x k / n x k: singular values 1, 1 (repeated) and 0s, as
    # the OpInfo's linalg.pinv "singular" samples
    rs = np.random.RandomState(seed)
    a = np.linalg.qr(rs.randn(m, k))[0]
    b = np.linalg.qr(rs.randn(n, k))[0]
    return a @ b.T


@pytest.mark.parametrize("seed, m, n", [(0, 3, 3), (1, 3, 5), (2, 5, 3)])
def test_pinv_gradient_at_repeated_singular_values(seed, m, n):
    # the gradient came from the SVD's, which is not pinv's where singular values repeat
    # (silently other numbers); PyTorch differentiates pinv itself (pinv_backward)
    x = _orthonormal_product(seed, m, n)
    w = np.random.RandomState(seed + 10).randn(n, m)
    t = torch.tensor(x, requires_grad=True)
    tg = torch.autograd.grad((torch.linalg.pinv(t) * torch.tensor(w)).sum(), t)[0]
    l_ = llgrad.tensor(x, requires_grad=True)
    lg = llgrad.autograd.grad((llgrad.linalg.pinv(l_) * llgrad.tensor(w)).sum(), l_)[0]
    np.testing.assert_allclose(lg.numpy(), tg.numpy(), rtol=1e-7, atol=1e-9)


def test_pinv_gradient_at_repeated_singular_values_compiled():
    x = _orthonormal_product(0)
    t = torch.tensor(x, requires_grad=True)
    torch.linalg.pinv(t).sum().backward()
    cf = llgrad.compile(lambda a: llgrad.linalg.pinv(a).sum())
    for _ in range(2):
        l_ = llgrad.tensor(x, requires_grad=True)
        cf(l_).backward()
        np.testing.assert_allclose(l_.grad.numpy(), t.grad.numpy(), rtol=1e-7, atol=1e-9)


def test_pinv_double_backward_against_torch():
    x = _orthonormal_product(3, 3, 4)
    t = torch.tensor(x, requires_grad=True)
    l_ = llgrad.tensor(x, requires_grad=True)
    (tg,) = torch.autograd.grad(torch.linalg.pinv(t).pow(2).sum(), t, create_graph=True)
    (lg,) = llgrad.autograd.grad(llgrad.linalg.pinv(l_).pow(2).sum(), l_, create_graph=True)
    np.testing.assert_allclose(lg.detach().numpy(), tg.detach().numpy(), rtol=1e-7, atol=1e-9)
    (tgg,) = torch.autograd.grad(tg.sum(), t)
    (lgg,) = llgrad.autograd.grad(lg.sum(), l_)
    np.testing.assert_allclose(lgg.numpy(), tgg.numpy(), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("fn", ["matrix_rank", "pinv"])
@pytest.mark.parametrize("shape", [(3, 5, 2), (2, 2, 2), (2, 4, 4)])
@pytest.mark.parametrize("which", ["atol", "rtol", "both"])
def test_tensor_tolerances_are_per_matrix(fn, shape, which):
    # a tensor atol / rtol has A's batch shape: it broadcast against the singular values'
    # dim (raised, or for a batch as long as that dim silently mixed the matrices' tolerances)
    rs = np.random.RandomState(sum(shape))
    x = rs.randn(*shape)
    tols = {"atol": rs.uniform(0, 2, shape[0]), "rtol": rs.uniform(0, 1, shape[0])}
    keys = ("atol", "rtol") if which == "both" else (which,)
    t = getattr(torch.linalg, fn)(torch.tensor(x), **{k: torch.tensor(tols[k]) for k in keys})
    l_ = getattr(llgrad.linalg, fn)(llgrad.tensor(x), **{k: llgrad.tensor(tols[k]) for k in keys})
    assert str(l_.dtype) == str(t.dtype).replace("torch", "llgrad")
    np.testing.assert_allclose(l_.numpy(), t.numpy(), rtol=1e-10, atol=1e-12)
