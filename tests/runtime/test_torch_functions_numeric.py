"""Square-matrix functions (inverse, det, logdet, slogdet and their torch.linalg names),
counting (bincount, histc, unique_consecutive), torch.range, the window functions and the
random fills and samplers (random_, exponential_, geometric_, log_normal_, cauchy_, normal,
randint_like) against PyTorch: values, dtypes, gradients, errors; the random ones by their
distributions (llgrad's generator is not PyTorch's) and by compiled == eager replay."""
import warnings

import numpy as np
import pytest

from torch_compare import compare, compare_error

torch = pytest.importorskip("torch")
import llgrad  # noqa: E402

rng = np.random.default_rng(41)
A = rng.standard_normal((3, 3)) + 3 * np.eye(3)
BATCH = rng.standard_normal((2, 4, 4))
NEGDET = np.array([[1.0, 2.0], [3.0, 4.0]])
SINGULAR = np.array([[1.0, 2.0], [2.0, 4.0]])

MATRIX = [lambda lib, a: lib.inverse(a), lambda lib, a: a.inverse(),
          lambda lib, a: lib.linalg.inv(a), lambda lib, a: lib.det(a), lambda lib, a: a.det(),
          lambda lib, a: lib.linalg.det(a), lambda lib, a: lib.logdet(a),
          lambda lib, a: a.logdet(), lambda lib, a: lib.slogdet(a), lambda lib, a: a.slogdet(),
          lambda lib, a: lib.linalg.slogdet(a)]


@pytest.mark.parametrize("k", range(len(MATRIX)))
def test_matrix_functions(k):
    for x in (A, BATCH, NEGDET, A.astype(np.float32), np.zeros((0, 0)), np.zeros((2, 0, 0))):
        compare(MATRIX[k], x, rtol=1e-5, grad=x.size > 0)


def test_matrix_singular_and_errors():
    compare(lambda lib, a: lib.det(a), SINGULAR)              # (gradient 0, as PyTorch's)
    compare(lambda lib, a: lib.logdet(a), SINGULAR, grad=False)
    compare(lambda lib, a: lib.slogdet(a), SINGULAR, grad=False)
    compare(lambda lib, a: lib.inverse(a), np.full((2, 2), np.nan), grad=False)
    for bad in (lambda lib: lib.inverse(lib.tensor(SINGULAR)),
                lambda lib: lib.inverse(lib.stack([lib.tensor(NEGDET), lib.tensor(SINGULAR)])),
                lambda lib: lib.inverse(lib.tensor([[1., 1., 1.], [1., 1., 1.], [1., 2., 3.]])),
                lambda lib: lib.inverse(lib.zeros(2, 3)), lambda lib: lib.inverse(lib.zeros(3)),
                lambda lib: lib.det(lib.tensor([[1, 2], [3, 4]])),
                lambda lib: lib.det(lib.zeros(2, 3)), lambda lib: lib.logdet(lib.zeros(3)),
                lambda lib: lib.slogdet(lib.zeros(2, 3)),
                lambda lib: lib.det(lib.zeros(2, 2, dtype=lib.float16))):
        compare_error(bad)
    assert issubclass(llgrad.linalg.LinAlgError, RuntimeError)
    r = repr(llgrad.slogdet(llgrad.tensor(NEGDET)))
    assert r.startswith("llgrad.return_types.slogdet(\nsign=tensor(-1.")


def test_inverse_compiled_checks_singularity():
    """Compiled, inverse still raises for a singular input (the info is read: a guard)."""
    f = llgrad.compile(lambda a: a.inverse().sum())
    assert abs(f(llgrad.tensor(A)).item() - np.linalg.inv(A).sum()) < 1e-12
    with pytest.raises(RuntimeError, match="singular"):
        f(llgrad.tensor(np.zeros((3, 3))))


# ---- counting, range, windows --------------------------------------------------------------

X = np.array([1, 3, 1, 0, 3])
W = np.array([0.5, 1.0, 2.0, 1.0, 1.0], np.float32)


def test_bincount():
    for x in (X, X.astype(np.int32), X.astype(np.uint8)):
        compare(lambda lib, a: lib.bincount(a), x)
        compare(lambda lib, a: a.bincount(minlength=7), x)
    for w in (W, W.astype(np.float64), W.astype(np.int32)):
        compare(lambda lib, a, b: lib.bincount(a, b), X, w, grad=False)
    compare(lambda lib: lib.bincount(lib.tensor([], dtype=lib.long)))
    for bad in (lambda lib: lib.bincount(lib.tensor([-1])),
                lambda lib: lib.bincount(lib.tensor([[1]])),
                lambda lib: lib.bincount(lib.tensor([1.0])),
                lambda lib: lib.bincount(lib.tensor([True])),
                lambda lib: lib.bincount(lib.tensor([1]), minlength=-1),
                lambda lib: lib.bincount(lib.tensor([1, 2]), lib.ones(3))):
        compare_error(bad)


def test_histc():
    for kw in (dict(bins=4), dict(bins=4, min=0, max=3), dict(bins=3, min=1, max=2),
               dict(bins=4, min=0, max=5)):
        compare(lambda lib, a: lib.histc(a, **kw), W, grad=False)
        compare(lambda lib, a: a.histc(**kw), W.astype(np.float64), grad=False)
    compare(lambda lib: lib.histc(lib.tensor([]), 4))
    compare(lambda lib: lib.histc(lib.tensor([2.0, 2.0]), 4))
    compare(lambda lib: lib.histc(lib.tensor([1.0, 5.0]), 4, 0, 5))
    for bad in (lambda lib: lib.histc(lib.tensor([1, 2]), 3),
                lambda lib: lib.histc(lib.tensor([1.0]), -1),
                lambda lib: lib.histc(lib.tensor([1.0, 2.0]), 4, 3, 1),
                lambda lib: lib.histc(lib.tensor([1.0, float("inf")]), 4)):
        compare_error(bad)


@pytest.mark.parametrize("kw", [{}, dict(return_inverse=True), dict(return_counts=True),
                                dict(return_inverse=True, return_counts=True)])
def test_unique_consecutive(kw):
    u, m = np.array([1, 1, 2, 2, 3, 1, 1]), np.array([[1, 1], [1, 1], [2, 3]])
    compare(lambda lib, a: lib.unique_consecutive(a, **kw), u)
    compare(lambda lib, a: a.unique_consecutive(**kw), u.astype(np.float32), grad=False)
    compare(lambda lib, a: lib.unique_consecutive(a, dim=0, **kw), m)
    compare(lambda lib, a: lib.unique_consecutive(a, dim=1, **kw), m)
    compare(lambda lib: lib.unique_consecutive(lib.tensor(3), **kw))
    compare(lambda lib: lib.unique_consecutive(lib.tensor([1.0, float("nan"), float("nan")]),
                                               **kw))
    compare_error(lambda lib: lib.unique_consecutive(lib.tensor([1, 2]), dim=3))


def test_range():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for args in ((1, 4), (0, 1, 0.25), (4, 1, -1), (1.0, 2.5), (0, 10, 3)):
            compare(lambda lib: lib.range(*args))
            compare(lambda lib: lib.range(*args, dtype=lib.float64))
        compare(lambda lib: lib.range(1, 4, dtype=lib.long))
        compare(lambda lib: lib.range(1, 4, requires_grad=True), grad=False)
    assert any(str(w.message).startswith("torch.range is deprecated") for w in caught)
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        llgrad.range(0, 2)
    for bad in (lambda lib: lib.range(1, 4, 0), lambda lib: lib.range(1, 4, -1)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compare_error(bad)


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window",
                                  "bartlett_window", "kaiser_window"])
def test_windows(name):
    for n in (0, 1, 2, 5, 8):
        for periodic in (True, False):
            compare(lambda lib: getattr(lib, name)(n, periodic), atol=1e-6)
            compare(lambda lib: getattr(lib, name)(n, periodic=periodic, dtype=lib.float64),
                    atol=1e-12)
    compare(lambda lib: getattr(lib, name)(4, requires_grad=True), grad=False)
    compare_error(lambda lib: getattr(lib, name)(-1))
    compare_error(lambda lib: getattr(lib, name)(4, dtype=lib.long))
    compare_error(lambda lib: getattr(lib, name)(4.0))


def test_window_parameters():
    compare(lambda lib: lib.hamming_window(5, False, 0.5, 0.5))
    compare(lambda lib: lib.kaiser_window(7, False, 5.0))
    compare(lambda lib: lib.kaiser_window(6, True, beta=2.5, dtype=lib.float64), atol=1e-12)


# ---- random fills and samplers ---------------------------------------------------------------

N = 200_000


def _draws(lib, fill, dtype="float32"):
    lib.manual_seed(17)
    x = lib.zeros(N, dtype=getattr(lib, dtype))
    return fill(x).double().numpy()


@pytest.mark.parametrize("fill,stat", [
    (lambda x: x.random_(7), lambda v: (v.min(), v.max(), round(v.mean(), 1))),
    (lambda x: x.random_(-3, 5), lambda v: (v.min(), v.max(), round(v.mean(), 1))),
    (lambda x: x.exponential_(2.0), lambda v: (round(v.mean(), 2), v.min() >= 0)),
    (lambda x: x.geometric_(0.3), lambda v: (v.min(), round(v.mean(), 1))),
    (lambda x: x.log_normal_(0.5, 0.25), lambda v: round(np.log(v).mean(), 2)),
    (lambda x: x.cauchy_(1.0, 2.0), lambda v: round(np.median(v), 1))])
def test_random_fill_distributions(fill, stat):
    assert stat(_draws(llgrad, fill)) == stat(_draws(torch, fill))


def test_random_fill_defaults_and_dtypes():
    v = llgrad.zeros(N).random_().numpy()
    assert v.min() >= 0 and v.max() <= 2 ** 24 and v.max() > 2 ** 23
    v = llgrad.zeros(N, dtype=llgrad.uint8).random_().numpy()
    assert v.min() == 0 and v.max() == 255
    assert set(llgrad.zeros(1000, dtype=llgrad.bool).random_().tolist()) == {False, True}
    assert llgrad.zeros(5, dtype=llgrad.int64).random_(10).dtype == llgrad.int64
    assert llgrad.zeros(5, dtype=llgrad.int64).geometric_(0.5).min().item() >= 1
    x = llgrad.zeros(3, requires_grad=True) * 1
    for fill, node in ((lambda t: t.random_(), "RandomBackward2"),
                       (lambda t: t.random_(5), "RandomBackward1"),
                       (lambda t: t.random_(2, 5), "RandomBackward0"),
                       (lambda t: t.exponential_(), "ExponentialBackward0"),
                       (lambda t: t.geometric_(0.3), "GeometricBackward0"),
                       (lambda t: t.log_normal_(), "LogNormalBackward0"),
                       (lambda t: t.cauchy_(), "CauchyBackward0")):
        assert type(fill(x.clone()).grad_fn).__name__ == node


def test_random_fill_errors():
    for bad in (lambda lib: lib.zeros(3).random_(5, 3),
                lambda lib: lib.zeros(3).exponential_(-1),
                lambda lib: lib.zeros(3).exponential_(0),
                lambda lib: lib.zeros(3).geometric_(1.5),
                lambda lib: lib.zeros(3).geometric_(0),
                lambda lib: lib.zeros(3).log_normal_(1, -2),
                lambda lib: lib.zeros(3).cauchy_(0, -1),
                lambda lib: lib.zeros(3, dtype=lib.long).exponential_(),
                lambda lib: lib.zeros(3, dtype=lib.long).cauchy_(),
                lambda lib: lib.zeros(3, dtype=lib.long).log_normal_(),
                lambda lib: lib.zeros(3, dtype=lib.uint8).random_(-1, 5),
                lambda lib: lib.randint_like(lib.zeros(2), 5, 3),
                lambda lib: lib.randint_like(lib.zeros(2), 0)):
        compare_error(bad)
    with pytest.warns(UserWarning, match="out of bounds"):
        llgrad.zeros(3).random_(2 ** 25)


def test_normal_overloads():
    m = llgrad.tensor([0.0, 1.0], requires_grad=True)
    s = llgrad.tensor([1.0, 2.0], requires_grad=True)
    for out, node in ((llgrad.normal(m, s), "NormalBackward3"),
                      (llgrad.normal(m, 2.0), "NormalBackward1"),
                      (llgrad.normal(0.5, s), "NormalBackward2"),
                      (llgrad.normal(m), "NormalBackward1")):
        assert type(out.grad_fn).__name__ == node
        out.sum().backward()
    assert m.grad.tolist() == [0.0, 0.0] and s.grad.tolist() == [0.0, 0.0]   # (PyTorch's)
    r = llgrad.normal(0.5, 2.0, (2, 3))
    assert r.shape == (2, 3) and r.grad_fn is None and not r.requires_grad
    assert llgrad.normal(0.0, 1.0, (2,), dtype=llgrad.float64).dtype == llgrad.float64
    assert llgrad.normal(0.0, 1.0, (2,), requires_grad=True).requires_grad
    assert llgrad.normal(llgrad.zeros(2, 1), llgrad.ones(3)).shape == (2, 3)
    big = llgrad.normal(llgrad.full((N,), 3.0), 2.0).numpy()
    assert round(float(big.mean()), 1) == 3.0 and round(float(big.std()), 1) == 2.0
    for bad in (lambda lib: lib.normal(lib.tensor([1.0]), -1.0),
                lambda lib: lib.normal(1.0, -1.0, (2,)),
                lambda lib: lib.normal(lib.tensor([1, 2]), 1.0),
                lambda lib: lib.normal(lib.zeros(2), lib.ones(3)),
                lambda lib: lib.normal(1.0, 2.0),
                lambda lib: lib.normal(lib.zeros(2), lib.tensor([-1.0, 1.0]))):
        compare_error(bad)


def test_randint_like():
    x = llgrad.zeros(2, 2)
    r = llgrad.randint_like(x, 5)
    assert r.dtype == llgrad.float32 and r.shape == (2, 2) and 0 <= r.min() and r.max() < 5
    assert llgrad.randint_like(x, 3, 5).min() >= 3
    assert llgrad.randint_like(llgrad.zeros(2, dtype=llgrad.int32), 10).dtype == llgrad.int32
    assert llgrad.randint_like(x, low=1, high=3).max() < 3
    assert llgrad.randint_like(x, 5, dtype=llgrad.int64).dtype == llgrad.int64


def test_random_fills_compiled_replay_eager():
    """A compiled function draws eager's numbers (the fills are ops of traced draws)."""
    def f(x, m):
        return (x.clone().random_(-3, 9), x.clone().exponential_(2.0), x.clone().geometric_(0.3),
                x.clone().log_normal_(0.5, 0.25), x.clone().cauchy_(1.0, 2.0),
                llgrad.normal(m, 2.0), llgrad.normal(m, m.abs() + 1))
    cf = llgrad.compile(f)
    for dt in (llgrad.float32, llgrad.float64):
        x, m = llgrad.zeros(6, dtype=dt), llgrad.arange(6, dtype=dt)
        for _ in range(2):
            llgrad.manual_seed(5)
            want = f(x, m)
            llgrad.manual_seed(5)
            got = cf(x, m)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)
    notes = [k for e in cf.entries for k in e.kernels.values() if isinstance(k, str)]
    assert not notes, notes
