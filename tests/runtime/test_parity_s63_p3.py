"""Sweep 63 (p3), a differential adversary of scans, losses, einsum and grad_fn names against
torch, eager and compiled. Each case runs one function with `L` bound to torch and to llgrad
and compares values, dtypes, shapes, grad_fn names, gradients and errors. The cases that
differed before their fix:

- logcumsumexp's gradient at an input of +inf, and where the result is -inf (an all -inf
  prefix along dim), was a finite number (the scan's logaddexp of two equal infinities
  passed 1 there); PyTorch's reverse-logcumsumexp formula gives nan
  (runtime/functions_reduce.logcumsumexp): a silent wrong gradient;
- binary_cross_entropy with a weight of another dtype than input raised "Found dtype ...";
  PyTorch multiplies by it in place and returns input's dtype (nn/functional_loss);
- ctc_loss in a compiled call skipped the lengths checks (a trace reads no lengths), so an
  input length over T gave a number where eager raises; the checks are now one value
  guard (nn/functional_ctc);
- linear of a non-2-d input with a non-contiguous 1-d bias took the flattened addmm path
  (ViewBackward0) where PyTorch adds the bias (AddBackward0) (nn/functional_linear);
- combinations' grad_fn was ViewBackward0 (PyTorch's StackBackward0), and r=0 gave a
  result on the graph where PyTorch's is off it (runtime/functions_shape);
- einsum with summed subscripts that one operand holds as size 1 ("ij,ij->i" of (3, 1) and
  (1, 4)) ended in MulBackward0 / PermuteBackward0 where PyTorch's last step is a view
  (ViewBackward0) (runtime/einsum);
- broadcast_tensors expanded every tensor (a new ExpandBackward0 view) where PyTorch returns
  a tensor already of the broadcast shape itself, and raised NumPy's ValueError for shapes
  that do not broadcast where PyTorch raises its RuntimeError (runtime/functions)."""
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
    if str(t.dtype).endswith("bfloat16"):
        t = t.float()
    return np.asarray(t.numpy())


def _leaves(o):
    return [x for e in o for x in _leaves(e)] if isinstance(o, (tuple, list)) else [o]


def _inputs(L, arrays, grad):
    out = []
    for a in arrays:
        t = L.tensor(a[0]).to(getattr(L, a[1])) if isinstance(a, tuple) else L.tensor(a)
        out.append(t.requires_grad_(grad and t.dtype.is_floating_point))
    return out


def _run(L, fn, arrays, grad, compiled):
    ins = _inputs(L, arrays, grad)
    if compiled:
        cf = llgrad.compile(lambda *xs: fn(llgrad, *xs))
        cf(*_inputs(L, arrays, grad))   # (the trace; the next call runs the compiled graphs)
        out = cf(*ins)
    else:
        out = fn(L, *ins)
    outs = _leaves(out)
    if grad:
        rng = np.random.default_rng(1)
        loss = sum((o.double() * L.tensor(rng.standard_normal(tuple(o.shape)))).sum()
                   for o in outs if o.requires_grad)
        if isinstance(loss, L.Tensor):
            loss.backward()
    return outs, [x.grad for x in ins if x.requires_grad]


def _same(fn, arrays, grad=True, compiled=False, rtol=1e-6):
    want, wgrads = _run(torch, fn, arrays, grad, False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, ggrads = _run(llgrad, fn, arrays, grad, compiled)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape) and str(g.dtype)[7:] == str(w.dtype)[6:], \
            (g.shape, w.shape, g.dtype, w.dtype)
        assert g.requires_grad == w.requires_grad
        if not compiled:
            assert type(g.grad_fn).__name__ == type(w.grad_fn).__name__, (g.grad_fn, w.grad_fn)
        np.testing.assert_allclose(_np(g), _np(w), rtol=rtol, atol=1e-12, equal_nan=True)
    for g, w in zip(ggrads, wgrads):
        assert (g is None) == (w is None)
        if w is not None:
            np.testing.assert_allclose(_np(g), _np(w), rtol=rtol, atol=1e-12)


def _both_raise(fn, exc, match):
    for L in (torch, llgrad):
        with pytest.raises(exc, match=match):
            fn(L)


# ---- logcumsumexp's gradient at infinities ----------------------------------------------------

INF = np.inf
LCSE = np.array([[1., -INF, 2, 3], [-INF, -INF, 1, 2], [INF, 0, 1, 2], [2, INF, 1, INF],
                 [np.nan, 1, 2, 3], [-INF, np.nan, 1, 2], [-INF, -INF, -INF, -INF]])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_logcumsumexp_gradient_at_infinities(dim):
    _same(lambda L, x: L.logcumsumexp(x, dim), [LCSE])
    _same(lambda L, x: x.logcumsumexp(dim)[..., -1:], [LCSE])     # (a zero incoming grad too)
    _same(lambda L, x: L.logcumsumexp(x, dim), [(LCSE, "float32")], rtol=1e-5)


def test_logcumsumexp_gradient_at_infinities_half_and_compiled():
    _same(lambda L, x: L.logcumsumexp(x, 1), [(LCSE, "float16")], rtol=2e-2)  # (the nans)
    _same(lambda L, x: L.logcumsumexp(x, 0), [LCSE], compiled=True)


def test_logcumsumexp_gradient_of_finite_inputs_is_unchanged():
    rng = np.random.default_rng(0)
    _same(lambda L, x: L.logcumsumexp(x, 1), [rng.standard_normal((3, 9))])
    _same(lambda L, x: L.logcumsumexp(x, 0), [np.array([[0., -30.], [5., -31.]])])


# ---- binary_cross_entropy with a weight of another dtype ----------------------------------

BCE_WEIGHTS = [("float64", "float32"), ("float32", "float64"), ("float32", "int64"),
               ("float32", "bool"), ("float64", "bfloat16"), ("float32", "float32")]


@pytest.mark.parametrize("idt,wdt", BCE_WEIGHTS)
def test_binary_cross_entropy_weight_of_another_dtype(idt, wdt):
    p, y = np.array([[0.3, 0.6, 0.9]]), np.array([[1., 0., 1.]])
    w = np.array([1, 0, 2]) if wdt in ("int64", "bool") else np.array([0.5, 2.0, 1.5])
    for red in ("mean", "none"):
        _same(lambda L, p, y, w: L.nn.functional.binary_cross_entropy(
            p, y.detach(), weight=w.detach(), reduction=red),
            [(p, idt), (y, idt), (w, wdt)], rtol=1e-5)


def test_binary_cross_entropy_still_checks_target_dtype_and_weight_grad():
    p = np.array([0.3, 0.6])
    _both_raise(lambda L: L.nn.functional.binary_cross_entropy(
        L.tensor(p), L.tensor(p, dtype=L.float32)), RuntimeError, "Found dtype Float but "
                                                                   "expected Double")
    _both_raise(lambda L: L.nn.functional.binary_cross_entropy(
        L.tensor(p, dtype=L.float32), L.tensor(p, dtype=L.float32),
        weight=L.ones(2, dtype=L.float64, requires_grad=True)), RuntimeError,
        "not differentiable with respect to argument 'weight'")


# ---- ctc_loss's lengths checks in a compiled call -------------------------------------------

def test_compiled_ctc_loss_checks_lengths_as_eager():
    F = llgrad.nn.functional
    lp = llgrad.randn(6, 2, 5, dtype=llgrad.float64).log_softmax(2)
    padded, concat = llgrad.tensor([[1, 2, 2], [3, 1, 0]]), llgrad.tensor([1, 2, 2, 3, 1])
    cf = llgrad.compile(lambda x, il, tl, tg: F.ctc_loss(x, tg, il, tl))
    cases = [([6, 5], [3, 2], padded), ([7, 5], [3, 2], padded), ([6, 5], [3, 2], padded),
             ([7, 5], [3, 2], padded), ([6, -1], [3, 2], padded), ([6, 5], [3, 4], padded),
             ([6, 5], [3, -1], padded), ([6, 5], [3, 2], concat), ([6, 5], [3, 1], concat),
             ([6, 5], [3, 2], concat)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for il, tl, tg in cases:
            args = (lp, llgrad.tensor(il), llgrad.tensor(tl), tg)
            try:
                want = F.ctc_loss(lp, tg, args[1], args[2])
            except RuntimeError as e:
                with pytest.raises(RuntimeError, match=str(e)[:40]):
                    cf(*args)
            else:
                assert float(cf(*args)) == pytest.approx(float(want), rel=1e-12)


def test_ctc_loss_lengths_errors_as_torch():
    lp = np.random.default_rng(0).standard_normal((6, 2, 5))
    _both_raise(lambda L: L.nn.functional.ctc_loss(
        L.tensor(lp).log_softmax(2), L.tensor([[1, 2, 2], [3, 1, 0]]), L.tensor([7, 5]),
        L.tensor([3, 2])), RuntimeError, "Expected input_lengths to have value at most 6")


# ---- linear's grad_fn with a non-contiguous bias --------------------------------------------

@pytest.mark.parametrize("xshape", [(4,), (2, 4), (2, 2, 4), (2, 3, 2, 4)])
def test_linear_with_a_non_contiguous_bias(xshape):
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal(xshape), rng.standard_normal((3, 4)), rng.standard_normal(6)
    _same(lambda L, x, w, b: L.nn.functional.linear(x, w, b[::2]), [x, w, b])
    _same(lambda L, x, w, b: L.nn.functional.linear(x, w, b[:1].expand(3)), [x, w, b])
    _same(lambda L, x, w, b: L.nn.functional.linear(x, w, b[:3]), [x, w, b])


# ---- combinations' node and its r=0 result ---------------------------------------------------

@pytest.mark.parametrize("r", [0, 1, 2, 3, 5])
def test_combinations_grad_fn_and_empty_results(r):
    x = np.array([0.5, -1.5, 2.0, 3.25])
    for wr in (False, True):
        _same(lambda L, x: L.combinations(x, r, wr), [x])
    _same(lambda L, x: L.combinations(x, r), [(np.arange(4), "int32")], grad=False)
    _same(lambda L, x: L.combinations(x, r), [np.zeros(0)])


def test_combinations_compiled():
    _same(lambda L, x: L.combinations(x, 2, True), [np.array([0.5, -1.5, 2.0])], compiled=True)


# ---- einsum's last node when subscripts were summed -------------------------------------------

EINSUM = [("ij,ij->i", (3, 1), (1, 4)), ("ij,ij->", (3, 1), (1, 3)), ("i,ij", (1,), (3, 4)),
          ("...i,...i", (2, 1, 3), (4, 3)), ("ij,jk->ik", (2, 1), (1, 3)),
          ("ij,kj->ik", (2, 1), (3, 1)), ("ij,j->i", (2, 1), (3,)), ("ij,jk->ik", (2, 3), (3, 4)),
          ("i,j->ij", (3,), (4,)), ("ab,ab->ab", (2, 3), (2, 3)), ("ii->i", (3, 3), None),
          ("ij->", (2, 3), None), ("bij,bjk->bik", (2, 2, 3), (2, 3, 4))]


@pytest.mark.parametrize("eq,s1,s2", EINSUM)
def test_einsum_grad_fn_with_size_one_summed_subscripts(eq, s1, s2):
    rng = np.random.default_rng(0)
    ops = [rng.standard_normal(s) for s in (s1, s2) if s is not None]
    _same(lambda L, *xs: L.einsum(eq, *xs), ops)


def test_einsum_size_one_summed_compiled():
    rng = np.random.default_rng(0)
    _same(lambda L, a, b: L.einsum("ij,ij->i", a, b),
          [rng.standard_normal((3, 1)), rng.standard_normal((1, 4))], compiled=True)


# ---- broadcast_tensors returns a tensor of the broadcast shape itself ------------------------

BCAST = [((2, 3), (3,)), ((3,), (2, 3)), ((), ()), ((1,), ()), ((0, 3), (1,)), ((2, 1), (1, 3))]


@pytest.mark.parametrize("s1,s2", BCAST)
def test_broadcast_tensors_returns_same_shaped_tensors_themselves(s1, s2):
    rng = np.random.default_rng(0)
    _same(lambda L, a, b: L.broadcast_tensors(a, b), [rng.standard_normal(s1),
                                                      rng.standard_normal(s2)])
    for L in (torch, llgrad):
        a, b = L.ones(s1), L.ones(s2)
        r = L.broadcast_tensors(a, b)
        assert (r[0] is a, r[1] is b) == (tuple(r[0].shape) == s1, tuple(r[1].shape) == s2)


def test_broadcast_tensors_mismatch_raises_as_torch():
    _both_raise(lambda L: L.broadcast_tensors(L.ones(2), L.ones(3)), RuntimeError,
                r"tensor a \(2\) must match the size of tensor b \(3\) at non-singleton "
                r"dimension 0")
    _both_raise(lambda L: L.broadcast_tensors(L.ones(2, 1), L.ones(3), L.ones(3, 1, 2)),
                RuntimeError, r"tensor a \(3\) must match the size of tensor b \(2\) at "
                              r"non-singleton dimension 2")


def test_broadcast_tensors_compiled():
    _same(lambda L, a, b: [x * 2 for x in L.broadcast_tensors(a, b)],
          [np.ones((2, 3)), np.arange(3.)], compiled=True)


# ---- searchsorted past a NaN boundary, or unsorted boundaries ---------------------------------

NAN = np.nan
SEARCH = [np.array([0., 1, 2, 3, NAN]), np.array([NAN, 0, 1]), np.array([3., 1, 2, 0, 5, 4]),
          np.array([0., 1, 1, 1, 2]), np.array([1.]), np.zeros(0), np.array([NAN, NAN])]
VALUES = np.array([[NAN, 1, 3, NAN, -INF, 3], [2, NAN, 2, 1, INF, 0]])


@pytest.mark.parametrize("k", range(len(SEARCH)))
def test_searchsorted_is_pytorchs_binary_search(k):
    for right in (False, True):
        _same(lambda L, s, v: (L.searchsorted(s, v, right=right),
                               L.searchsorted(s, v, side="right" if right else "left",
                                              out_int32=True),
                               L.bucketize(v, s, right=right),
                               L.searchsorted(s, v, sorter=s.argsort(stable=True))),
              [SEARCH[k], VALUES], grad=False)


def test_searchsorted_nd_boundaries_with_nan():
    _same(lambda L, s, v: L.searchsorted(s, v, right=True),
          [np.array([[0., 1, NAN], [2, 2, 3]]), np.array([[NAN, 1, 3, 0.5], [2, NAN, 2.5, 9]])],
          grad=False)


@pytest.mark.parametrize("k", [0, 2])
def test_searchsorted_compiled(k):
    _same(lambda L, s, v: L.searchsorted(s, v, right=True) * 2, [SEARCH[k], VALUES],
          grad=False, compiled=True)


# ---- prod / cumprod gradients where a zero meets an inf or nan ---------------------------

# (cumprod's gradient leaves out the products past a slice's first zero as PyTorch's does
# since stop 69: [nan, inf, 0] here, torch's; prod's takes exclusive cumprods from both
# ends once the tensor holds a zero, as PyTorch's, since stop 70: [0, inf, nan])
@pytest.mark.parametrize("which", ["prod", "prod_dim", "cumprod"])
def test_prod_gradient_where_a_zero_meets_an_infinity(which):
    fn = {"prod": lambda L, x: x.prod(), "prod_dim": lambda L, x: x.prod(0),
          "cumprod": lambda L, x: x.cumprod(0)}[which]
    _same(fn, [np.array([np.inf, 0., 3.])])
