"""Reductions as torch 2.13 takes them:
- var / std along dims of slices whose values are all equal are exactly 0 (PyTorch's Welford
  variance), so std's gradient there is masked to 0 (it came out large and finite from the
  two-pass mean's rounding), eager and native code alike;
- sum / mean / prod / max / min / median / nanmedian with keepdim but no dim are TypeErrors
  (max ignored keepdim), and prod / max / min / median / nanmedian take no dim=None;
- logsumexp over dim=() of a non-empty tensor of one or more dims is PyTorch's RuntimeError;
- where (and remainder, bitwise_*, bucketize) with a Python number and out= are TypeErrors;
- median / nanmedian / kthvalue of bools: PyTorch's kernel names, after its dim / k checks."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _constant_rows(dtype, n=7, rows=40):
    rs = np.random.RandomState(0)
    a = np.broadcast_to(rs.randn(rows, 1), (rows, n)).astype(dtype).copy()
    a[::3] = rs.randn(len(a[::3]), n)       # (some rows not constant)
    return a


def _moments(m, x, short=False):
    x = x.detach().requires_grad_()
    s = m.std(x, 1)
    vd = m.var(x.reshape(-1, 1, x.shape[1]), (1, 2), correction=0)
    rs = (s, vd) if short else (s, vd, m.var(x, 1, keepdim=True),
                                m.std_mean(x.t(), 0)[0])    # (along dim 0 of a view)
    sum(r.sum() for r in rs).backward()
    return [r.detach() for r in rs] + [x.grad]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_std_var_of_constant_rows_are_zero_with_masked_grad_as_torch(dtype):
    a = _constant_rows(dtype)
    want = [t.numpy() for t in _moments(torch, torch.tensor(a))]
    got = [t.numpy() for t in _moments(llgrad, llgrad.tensor(a))]
    for k, (g, w) in enumerate(zip(got, want)):
        if k < 4:           # (the results; var's gradient is 2 (x - mean) / dof, mean rounded)
            np.testing.assert_array_equal(g == 0, w == 0)
        np.testing.assert_allclose(g, w, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-7)
    for m in (llgrad, torch):       # (std's alone: 0 over the constant rows)
        x = m.tensor(a, requires_grad=True)
        x.std(1).sum().backward()
        g = x.grad.numpy()
        assert (g[1::3] == 0).all() and (g[2::3] == 0).all() and (g[::3] != 0).all()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_compiled_std_var_of_constant_rows_equal_eager(dtype):
    a = _constant_rows(dtype)
    cf = llgrad.compile(lambda x: _moments(llgrad, x, short=True))
    x = llgrad.tensor(a)
    cf(x)
    cf.wait()
    got = [t.numpy() for t in cf(x)]
    want = [t.numpy() for t in _moments(llgrad, x, short=True)]
    for k, (g, w) in enumerate(zip(got, want)):
        if k < 2:
            np.testing.assert_array_equal(g == 0, w == 0)
        # (native sums are reassociated: a few ulps of eager's; var's gradient over a constant
        # row is 2 (x - mean) / dof, an ulp of x or 0 as the mean rounds)
        np.testing.assert_allclose(g, w, rtol=1e-5 if dtype == "float32" else 1e-12,
                                   atol=1e-6 if dtype == "float32" else 1e-12)
    assert (got[0][1::3] == 0).all() and (got[0][2::3] == 0).all() and (got[0][::3] != 0).all()
    assert cf.n_traces == 1


def test_var_of_random_rows_unchanged_and_one_result_stays_two_pass():
    # a reduction to one value is two-pass in PyTorch too: a constant tensor's variance is
    # its rounding there, not 0 (eager's NumPy value, the op's as before)
    a = np.full((1, 10), 0.1)
    np.testing.assert_array_equal(llgrad.tensor(a).var(1).numpy(),
                                  np.var(a, axis=1, ddof=1))
    r = np.random.RandomState(1).randn(30, 17)
    np.testing.assert_array_equal(llgrad.tensor(r).var(1).numpy(), np.var(r, axis=1, ddof=1))


def _outcome(fn):
    try:
        r = fn()
    except Exception as e:          # noqa: BLE001 (the error's type and words compared)
        return type(e), str(e).split("\n")[0].split(", but expected")[0]
    return "ok", np.asarray(r if not isinstance(r, tuple) else r[0])


def _same(fn):
    g, w = _outcome(lambda: fn(llgrad)), _outcome(lambda: fn(torch))
    assert g[0] == w[0], (g, w)
    if g[0] == "ok":
        np.testing.assert_allclose(g[1], w[1].astype(g[1].dtype))
    elif g[0] is not TypeError:     # (the argument parser's words are not copied)
        assert g[1] == w[1]


_X = np.arange(1.0, 7.0).reshape(2, 3)
REDUCTIONS = ["sum", "mean", "prod", "max", "min", "median", "nanmedian"]


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("call", [
    lambda m, f: getattr(m.tensor(_X), f)(keepdim=True),
    lambda m, f: getattr(m, f)(m.tensor(_X), keepdim=True),
    lambda m, f: getattr(m.tensor(_X), f)(keepdim=False),
    lambda m, f: getattr(m.tensor(_X), f)(None, keepdim=True),
    lambda m, f: getattr(m.tensor(_X), f)(dim=None),
    lambda m, f: getattr(m.tensor(_X), f)(),
    lambda m, f: getattr(m.tensor(_X), f)(1, keepdim=True)])
def test_keepdim_without_dim_as_torch(name, call):
    _same(lambda m: call(m, name))


@pytest.mark.parametrize("name", ["sum", "max", "median"])
def test_compiled_keepdim_without_dim_raises_as_eager(name):
    cf = llgrad.compile(lambda x: getattr(x, name)(keepdim=True))
    with pytest.raises(TypeError, match="invalid combination"):
        cf(llgrad.tensor(_X))


@pytest.mark.parametrize("shape", [(3,), (2, 3, 4), (0,), (2, 0), ()])
@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp_over_no_dims_as_torch(shape, keepdim):
    a = np.linspace(-1, 2, int(np.prod(shape))).reshape(shape)
    _same(lambda m: m.logsumexp(m.tensor(a), (), keepdim=keepdim))
    _same(lambda m: m.tensor(a).long().logsumexp([], keepdim))


def test_compiled_logsumexp_over_no_dims_raises_as_eager():
    cf = llgrad.compile(lambda x: x.logsumexp(()))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        cf(llgrad.tensor(_X))


_C = _X > 2
_I = np.arange(6).reshape(2, 3)


@pytest.mark.parametrize("call", [
    lambda m: m.where(m.tensor(_C), m.tensor(_X), 0.0, out=m.empty(2, 3)),
    lambda m: m.where(m.tensor(_C), 0.0, m.tensor(_X), out=m.empty(2, 3)),
    lambda m: m.where(m.tensor(_C), 1, 0, out=m.empty(2, 3)),
    lambda m: m.where(m.tensor(_C), m.tensor(_X), m.tensor(_X), out=m.empty(2, 3)),
    lambda m: m.where(m.tensor(_C), m.tensor(_X), 0.0),
    lambda m: m.remainder(2.0, m.tensor(_X), out=m.empty(2, 3)),
    lambda m: m.remainder(m.tensor(_X), 2.0, out=m.empty(2, 3)),
    lambda m: m.bitwise_and(2, m.tensor(_I), out=m.empty(2, 3, dtype=m.int64)),
    lambda m: m.bitwise_xor(m.tensor(_I), 2, out=m.empty(2, 3, dtype=m.int64)),
    lambda m: m.bitwise_left_shift(2, m.tensor(_I), out=m.empty(2, 3, dtype=m.int64)),
    lambda m: m.bucketize(2.0, m.tensor(_X[0]), out=m.empty((), dtype=m.int64))])
def test_python_numbers_with_out_as_torch(call):
    _same(call)


_B = np.array([[True, False, True], [False, False, True]])


@pytest.mark.parametrize("call", [
    lambda m: m.median(m.tensor(_B)), lambda m: m.median(m.tensor(_B), 1),
    lambda m: m.nanmedian(m.tensor(_B)), lambda m: m.tensor(_B).nanmedian(0),
    lambda m: m.median(m.tensor(np.zeros(0, bool))),
    lambda m: m.nanmedian(m.tensor(np.zeros(0, bool))),
    lambda m: m.median(m.tensor(np.zeros((2, 0), bool)), 1),
    lambda m: m.median(m.tensor(np.zeros((0, 2), bool)), 1),
    lambda m: m.median(m.tensor(True), 0),
    lambda m: m.kthvalue(m.tensor(_B), 1), lambda m: m.tensor(_B).kthvalue(4),
    lambda m: m.kthvalue(m.tensor(_B), 1, 5), lambda m: m.kthvalue(m.tensor(True), 1),
    lambda m: m.argmax(m.tensor(_B), 5), lambda m: m.tensor(_B).argmin()])
def test_bool_order_statistics_errors_as_torch(call):
    _same(call)
