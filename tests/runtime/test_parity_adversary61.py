"""Sweep 61 (H3), a differential adversary of the tensor ops against torch, eager and
compiled: each case runs the same function with `L` bound to torch and to llgrad and compares
values, dtypes, gradients (and strides, errors where the case says). The cases that failed
before their fix, plus a few random ones of the same kind:

- the SVD's gradient at a zero singular value of a non-square matrix (svdvals, the nuclear
  norm of the zero matrix) was nan: gU / S with gU = 0 (ops_linalg_spectral._over_s);
- an elementwise op over broadcast operands, one a permute with size-1 dims, was laid out
  row-major: PyTorch's fast set-up needs equal shapes, else its dim sort counts those dims'
  strides (ops_copy.rows_plainly);
- einsum over a summed subscript of size 1 in one operand raised on mixed or bool dtypes:
  PyTorch sums it out of each and multiplies (runtime/einsum._size_one_summed);
- sum / prod / cumsum / cumprod with an integer dtype= of a tensor that requires grad gave a
  detached result: PyTorch raises "Autograd not support dtype" (runtime/reduce_dtype.py);
- logit's gradient outside [0, 1] was finite (PyTorch: nan) and nan at 0 and 1 (inf)
  (runtime/functions_math.logit);
- logaddexp / logaddexp2's gradient where both are the same infinity was (1, 0), not
  PyTorch's nan (runtime/functions_math._logaddexp);
- bincount of int8 / uint8 / int16 values inside llgrad.compile raised (index_add_'s
  index dtype) where eager counts (runtime/functions_counts._traced_bincount)."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")


def _np(t):
    t = t.detach()
    if t.dtype in (torch.bfloat16, llgrad.bfloat16):
        t = t.float()
    return np.asarray(t.numpy())


def _leaves(o):
    return [x for e in o for x in _leaves(e)] if isinstance(o, (tuple, list)) else [o]


def _run(L, fn, arrays, grad, compiled):
    def make():
        return [L.tensor(a).requires_grad_(grad and a.dtype.kind == "f") for a in arrays]
    ins = make()
    if compiled:
        cf = llgrad.compile(lambda *xs: fn(llgrad, *xs))
        cf(*make())                     # (the trace; the next call runs the compiled graphs)
        out = cf(*ins)
    else:
        out = fn(L, *ins)
    outs = _leaves(out)
    if grad:
        rng = np.random.default_rng(1)
        loss = sum((o.double() * L.tensor(rng.standard_normal(tuple(o.shape)))).sum()
                   for o in outs if o.requires_grad)
        loss.backward()
    return outs, [x.grad for x in ins if x.requires_grad]


def _same(fn, arrays, grad=True, compiled=False, strides=False):
    want, wgrads = _run(torch, fn, arrays, grad, False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, ggrads = _run(llgrad, fn, arrays, grad, compiled)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape) and str(g.dtype)[7:] == str(w.dtype)[6:], \
            (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(_np(g), _np(w), rtol=1e-6, atol=1e-12, equal_nan=True)
        if strides:
            big = [d for d in range(w.dim()) if w.shape[d] > 1]
            assert [g.stride()[d] for d in big] == [w.stride()[d] for d in big], \
                (g.stride(), w.stride())
    for g, w in zip(ggrads, wgrads):
        assert (g is None) == (w is None)
        if w is not None:
            np.testing.assert_allclose(_np(g), _np(w), rtol=1e-6, atol=1e-12, equal_nan=True)


# ---- the SVD's gradient at a zero singular value --------------------------------------------

def _svd_cases():
    rng = np.random.default_rng(61)
    cases = [np.zeros((4, 1)), np.zeros((2, 3)), np.zeros((3, 2)), np.zeros((4, 3)),
             np.array([[1., 0, 0], [0, 0, 0]]), np.array([[0., 2], [0, 0], [0, 0]])]
    for _ in range(3):          # random non-square ones with a zero singular value
        m, n = rng.integers(2, 5, 2)
        a = rng.standard_normal((m, n))
        a[:, 0] = 0 if n < m else a[:, 0]
        a[0] = 0 if m < n else a[0]
        cases.append(a)
    return cases


SVD_FNS = {"nuc": lambda L, x: L.linalg.matrix_norm(x, "nuc"),
           "norm_nuc": lambda L, x: L.norm(x, p="nuc"),
           "svdvals": lambda L, x: L.linalg.svdvals(x),
           "svd_S": lambda L, x: L.linalg.svd(x, full_matrices=False)[1]}


@pytest.mark.parametrize("k", range(len(_svd_cases())))
@pytest.mark.parametrize("name", list(SVD_FNS))
def test_svd_gradient_at_a_zero_singular_value(name, k):
    _same(SVD_FNS[name], [_svd_cases()[k]])


def test_svd_gradient_at_a_zero_singular_value_compiled():
    _same(SVD_FNS["nuc"], [np.zeros((4, 3))], compiled=True)
    _same(SVD_FNS["svdvals"], [np.zeros((2, 3))], compiled=True)


# ---- the layout of an elementwise result over broadcast permuted operands ------------------

LAYOUTS = [((1, 1, 4), (2, 0, 1), (4, 1, 1), (1, 0, 2)),
           ((1, 1, 3), (2, 0, 1), (3, 1, 1), (1, 0, 2)),
           ((4, 1, 1), (1, 0, 2), (1, 1, 4), (2, 0, 1)),
           ((1, 3, 1), (2, 1, 0), (2, 1, 1), (0, 1, 2)),
           ((1, 2, 3), (0, 2, 1), (2, 1, 1), (1, 2, 0))]
LAYOUT_OPS = {"mul": lambda L, a, b: a * b, "add": lambda L, a, b: a + b,
              "where": lambda L, a, b: L.where(b > 0, a, b),
              "maximum": lambda L, a, b: L.maximum(a, b)}


@pytest.mark.parametrize("op", list(LAYOUT_OPS))
@pytest.mark.parametrize("case", LAYOUTS)
def test_broadcast_permuted_layout(case, op):
    sa, pa, sb, pb = case
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    _same(lambda L, x, y: LAYOUT_OPS[op](L, x.permute(pa), y.permute(pb)), [a, b],
          grad=False, strides=True)


@pytest.mark.parametrize("backend", ["llvm", "interpret"])
def test_broadcast_permuted_layout_compiled(backend):
    a, b = np.random.default_rng(1).standard_normal((1, 1, 4)), np.ones((4, 1, 1))
    cf = llgrad.compile(lambda x, y: x.permute(2, 0, 1) * y.permute(1, 0, 2), backend=backend)
    for _ in range(2):
        r = cf(llgrad.tensor(a), llgrad.tensor(b))
    want = torch.tensor(a).permute(2, 0, 1) * torch.tensor(b).permute(1, 0, 2)
    assert r.stride() == want.stride() == (1, 4, 16)
    np.testing.assert_array_equal(r.numpy(), want.numpy())


# ---- einsum over a size-1 summed subscript ----------------------------------------------------

EINSUM = [("ij,jk", (1, 1), (1, 4)), ("ij,jk", (3, 1), (1, 4)), ("ij,jk->ik", (3, 2), (1, 4)),
          ("bij,bjk->bik", (2, 3, 1), (2, 1, 2)), ("ij,ij->i", (2, 1), (2, 1))]


@pytest.mark.parametrize("dtypes", [("int64", "float32"), ("bool", "bool"), ("int32", "int64"),
                                    ("float64", "float64")])
@pytest.mark.parametrize("eq,sa,sb", EINSUM)
def test_einsum_size_one_contraction_promotes(eq, sa, sb, dtypes):
    rng = np.random.default_rng(3)

    def arr(shape, dt):
        return (rng.standard_normal(shape) > 0) if dt == "bool" else \
            rng.integers(-3, 4, shape).astype(dt)
    a, b = arr(sa, dtypes[0]), arr(sb, dtypes[1])
    _same(lambda L, x, y: L.einsum(eq, x, y), [a, b], grad=dtypes[0] == "float64")


def test_einsum_size_one_contraction_compiled():
    rng = np.random.default_rng(4)
    _same(lambda L, x, y: L.einsum("bij,bjk->bik", x, y),
          [rng.standard_normal((2, 3, 1)), rng.standard_normal((2, 1, 4))], compiled=True)
    _same(lambda L, x, y: L.einsum("ij,jk", x, y),
          [rng.integers(-3, 4, (3, 1)), rng.standard_normal((1, 4)).astype(np.float32)],
          grad=False, compiled=True)


def test_einsum_real_contraction_still_raises_on_mixed_dtypes():
    for L in (torch, llgrad):
        with pytest.raises(RuntimeError, match="expected scalar type Long but found Float"):
            L.einsum("ij,jk", L.ones(2, 3, dtype=L.int64), L.ones(3, 2))


# ---- an integer dtype= of a reduction over a tensor that requires grad ----------------------

REDUCE_DTYPE = {"sum": lambda L, x: x.sum(dtype=L.int64), "sum_dim": lambda L, x: L.sum(x, 0, dtype=L.int8),
                "prod": lambda L, x: x.prod(dtype=L.int64),
                "cumsum": lambda L, x: x.cumsum(0, dtype=L.int32),
                "cumprod": lambda L, x: L.cumprod(x, 1, dtype=L.int64),
                "nansum": lambda L, x: L.nansum(x, dtype=L.int64),
                "sum_bool": lambda L, x: x.sum(0, dtype=L.bool)}


@pytest.mark.parametrize("name", list(REDUCE_DTYPE))
def test_reduction_to_an_integer_dtype_of_a_grad_tensor_raises(name):
    fn = REDUCE_DTYPE[name]
    for L in (torch, llgrad):
        x = L.ones(2, 3, requires_grad=True)
        with pytest.raises(RuntimeError, match="Autograd not support dtype: "
                           + {"sum_dim": "Char", "cumsum": "Int", "sum_bool": "Bool"}.get(name, "Long")):
            fn(L, x)
        with L.no_grad():
            r = fn(L, x)
        assert not r.requires_grad
        assert fn(L, x.detach()).dtype == r.dtype
    np.testing.assert_array_equal(fn(llgrad, llgrad.ones(2, 3).requires_grad_()[0:1].detach()).numpy(),
                                  fn(torch, torch.ones(1, 3)).numpy())


def test_reduction_to_an_integer_dtype_raises_in_a_compiled_call():
    cf = llgrad.compile(lambda x: x.sum(dtype=llgrad.int64) + 1)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="Autograd not support dtype: Long"):
            cf(llgrad.ones(3, requires_grad=True))


# ---- logit's gradient -----------------------------------------------------------------------

LOGIT_X = np.array([-0.5, 0.3, 1.5, 0.0, 1.0, np.nan, 0.999999, 1e-9, np.inf, -np.inf, 0.1, 0.9])


@pytest.mark.parametrize("eps", [None, 0.1, 0.0, 0.3, 0.5])
@pytest.mark.parametrize("how", ["function", "method", "inplace", "special"])
def test_logit_gradient(eps, how):
    fn = {"function": lambda L, x: L.logit(x, eps), "method": lambda L, x: x.logit(eps),
          "inplace": lambda L, x: (x * 1).logit_(eps),
          "special": lambda L, x: L.special.logit(x, eps)}[how]
    # (a nan with eps: PyTorch's vectorised loop gives 0, its scalar tail nan)
    x = LOGIT_X if eps is None else LOGIT_X[~np.isnan(LOGIT_X)]
    _same(fn, [x])
    _same(fn, [x.astype(np.float32)])


@pytest.mark.parametrize("eps", [None, 0.2])
def test_logit_gradient_compiled(eps):
    x = np.concatenate([LOGIT_X if eps is None else LOGIT_X[~np.isnan(LOGIT_X)],
                        np.random.default_rng(0).uniform(-0.5, 1.5, 20)])
    _same(lambda L, t: L.logit(t, eps), [x], compiled=True)


def test_logit_random_inside():
    x = np.random.default_rng(5).uniform(0.01, 0.99, (3, 4))
    _same(lambda L, t: L.logit(t.t()), [x])
    _same(lambda L, t: L.logit(t, 1e-3), [x], compiled=True)


# ---- logaddexp's gradient at a == b == +-inf ------------------------------------------------

INF = np.inf
LAE_A = np.array([INF, INF, -INF, -INF, 1., INF, 0., np.nan, -INF, 2., -3.])
LAE_B = np.array([INF, 1., -INF, 1., -INF, -INF, 0., -INF, np.nan, 2., 5.])


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
@pytest.mark.parametrize("compiled", [False, True])
def test_logaddexp_gradient_at_equal_infinities(name, compiled):
    """PyTorch's gradient is nan for both where a == b == +-inf (it was 1 for a, 0 for b)."""
    fn = lambda L, a, b: getattr(L, name)(a, b)      # noqa: E731
    _same(fn, [LAE_A, LAE_B], compiled=compiled)
    _same(fn, [LAE_A.astype(np.float32), LAE_B.astype(np.float32)])
    rng = np.random.default_rng(2)
    _same(fn, [rng.standard_normal((3, 4)), rng.standard_normal(4)])


# ---- bincount of small integer dtypes inside compile --------------------------------------

@pytest.mark.parametrize("dt", ["uint8", "int8", "int16", "int32", "int64"])
def test_bincount_small_ints_compiled(dt):
    x = np.array([0, 3, 3, 1, 5], dtype=dt)
    w = np.array([0.5, 1, 2, 3, -1], dtype=np.float32)
    _same(lambda L, a, b: (L.bincount(a), L.bincount(a, b, minlength=8)), [x, w],
          grad=False, compiled=True)
