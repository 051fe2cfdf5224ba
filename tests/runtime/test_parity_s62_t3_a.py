"""Sweep 62 (H3), a differential adversary of indexing, views, type promotion and reductions
against torch, eager and compiled. Each case runs one function with `L` bound to torch and to
llgrad and compares values, dtypes, shapes, gradients and errors. The cases that differed
before their fix:

- take_along_dim broadcast a size-1 dim against a size-0 one to 1 (max of the two), so a
  (3, 0) input with (4, 1) indices raised where PyTorch gives a (4, 0) result
  (runtime/functions_shape.take_along_dim);
- squeeze((0, -1)) of a 1-d tensor (one dim named twice) squeezed where PyTorch raises
  "dim 0 appears multiple times" (runtime/methods_views.squeeze);
- an in-place op on a 0-d integer tensor whose result overflows (int8 100 += uint8 200)
  raised NumPy's OverflowError: a 0-d result is a NumPy scalar, which NumPy range-checks
  on assignment where an array wraps as PyTorch does (runtime/inplace.call_inplace);
- clamp with one tensor bound and one number bound: PyTorch reads a 0-d tensor that needs
  no grad as a number (int8.clamp(-2, int32 0-d) stays int8: llgrad promoted to int32, a
  silent dtype change) and raises TypeError for any other tensor (runtime/methods_clamp);
- median / nanmedian of an empty int8 / int16 / uint8 tensor gave the dtype's lowest value;
  PyTorch's is nan cast through int32, which wraps to 0 there (runtime/functions_reduce);
- norm / vector_norm of a 0-d tensor skipped the dim check: dim=1 or (0, -1) returned where
  PyTorch raises (runtime/linalg._dims);
- the out= form of a function PyTorch declares no derivative for (eq, lt, logical_and,
  argmax, searchsorted, isin, ...) raised "functions with out=... arguments don't support
  automatic differentiation" for an input that requires grad, where PyTorch computes
  (runtime/out_args._NO_DERIVATIVE)."""
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
        if isinstance(a, tuple):        # (values, dtype name)
            t = L.tensor(a[0]).to(getattr(L, a[1]))
        else:
            t = L.tensor(a)
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


def _same(fn, arrays, grad=True, compiled=False):
    want, wgrads = _run(torch, fn, arrays, grad, False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, ggrads = _run(llgrad, fn, arrays, grad, compiled)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape) and str(g.dtype)[7:] == str(w.dtype)[6:], \
            (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(_np(g), _np(w), rtol=1e-6, atol=1e-12, equal_nan=True)
    for g, w in zip(ggrads, wgrads):
        assert (g is None) == (w is None)
        if w is not None:
            np.testing.assert_allclose(_np(g), _np(w), rtol=1e-6, atol=1e-12)


def _both_raise(fn, exc, match):
    for L in (torch, llgrad):
        with pytest.raises(exc, match=match):
            fn(L)


# ---- take_along_dim: a size-1 dim broadcast against a size-0 one -----------------------------

TAKE = [((3, 0), (4, 1), 0), ((3, 1), (4, 0), 0), ((0, 1), (1, 3), 1), ((2, 1, 4), (2, 0, 2), 2),
        ((3, 1), (4, 5), 0), ((1, 4), (2, 1), 1)]


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("xs,ish,dim", TAKE)
def test_take_along_dim_broadcasts_size_one_against_zero(xs, ish, dim, compiled):
    rng = np.random.default_rng(0)
    idx = rng.integers(0, max(xs[dim], 1), ish)
    _same(lambda L, x, i: L.take_along_dim(x, i, dim), [rng.standard_normal(xs), idx],
          compiled=compiled)


# ---- squeeze of a dim named twice -------------------------------------------------------------

def test_squeeze_of_a_repeated_dim_raises():
    _both_raise(lambda L: L.ones(6).squeeze((0, -1)), RuntimeError, "dim 0 appears multiple")
    _both_raise(lambda L: L.ones(1, 1).squeeze((1, -1)), RuntimeError, "dim 1 appears multiple")
    _same(lambda L, x: x.squeeze((0, -1)), [np.ones((1, 1))])
    _same(lambda L, x: x.squeeze(()), [np.ones((1, 1))])


# ---- an overflowing in-place op on a 0-d integer tensor wraps ----------------------------------

WRAP = {"add_": lambda L, a, b: a.clone().add_(b), "mul_": lambda L, a, b: a.clone().mul_(b),
        "sub_": lambda L, a, b: a.clone().sub_(b, alpha=3),
        "addcmul_": lambda L, a, b: a.clone().addcmul_(b, b),
        "iadd_int16": lambda L, a, b: a.clone().__iadd__(b.to(L.int16))}


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("name", list(WRAP))
def test_zero_dim_integer_inplace_overflow_wraps(name, compiled):
    for a, b in [(100, 200), (-100, 250), (127, 1)]:
        _same(WRAP[name], [(np.array(a), "int8"), (np.array(b), "uint8")], grad=False,
              compiled=compiled)


# ---- clamp with one tensor bound and one number bound ---------------------------------------

CLAMP_DTYPES = [("int8", "int32"), ("int64", "bfloat16"), ("bool", "int32"), ("uint8", "int64"),
                ("bfloat16", "float16"), ("int16", "float64"), ("float32", "int64")]


@pytest.mark.parametrize("xdt,bdt", CLAMP_DTYPES)
def test_clamp_reads_a_zero_dim_bound_beside_a_number_as_a_number(xdt, bdt):
    x, b = (np.array([1, -5, 7, 0]), xdt), (np.array(-2), bdt)
    _same(lambda L, x, b: L.clamp(x, b, 3), [x, b], grad=False)
    _same(lambda L, x, b: x.clip(-1.5, b), [x, b], grad=False)
    if xdt == "float32":
        _same(lambda L, x, b: x.clone().clamp_(b, 0.5), [x, b], grad=False)


def test_clamp_of_a_zero_dim_bound_beside_a_number_compiled():
    _same(lambda L, x, b: L.clamp(x, -1, b), [(np.array([1, -5, 7]), "int8"),
                                             (np.array(2), "int32")], grad=False, compiled=True)


def test_clamp_with_a_tensor_bound_beside_a_number_raises_otherwise():
    _both_raise(lambda L: L.clamp(L.ones(3), L.zeros(3), 0.5), TypeError,
                "invalid combination of arguments")
    _both_raise(lambda L: L.ones(3).clamp(-1, L.zeros(1)), TypeError,
                "invalid combination of arguments")
    _both_raise(lambda L: L.ones(3).clamp_(L.zeros(1), 2.0), TypeError,
                "invalid combination of arguments")
    _both_raise(lambda L: L.ones(3).clamp(L.zeros((), requires_grad=True), 2.0), TypeError,
                "invalid combination of arguments")
    # (two tensors, or a tensor and None, stay the tensor overload: promoted as tensors)
    _same(lambda L, x, lo: x.clamp(lo, None), [(np.array([1, -5, 7]), "int8"),
                                               (np.array(-2.5), "float32")])


# ---- the median of an empty integer tensor ---------------------------------------------------

@pytest.mark.parametrize("dt", ["int8", "uint8", "int16", "int32", "int64"])
def test_median_of_an_empty_integer_tensor(dt):
    _same(lambda L, x: (x.median(), x.nanmedian()), [(np.zeros((3, 0)), dt)], grad=False)


# ---- the norm of a 0-d tensor checks its dim -------------------------------------------------

def test_norm_of_a_zero_dim_tensor_checks_dims():
    _both_raise(lambda L: L.norm(L.tensor(2.), dim=(0, -1)), RuntimeError, "appears multiple")
    _both_raise(lambda L: L.linalg.vector_norm(L.tensor(2.), dim=1), IndexError,
                "Dimension out of range")
    _both_raise(lambda L: L.norm(L.tensor(2.), dim=(-2,)), IndexError, "Dimension out of range")
    for dim in (0, -1, (0,), (-1,)):
        _same(lambda L, x: (L.norm(x, dim=dim), L.linalg.vector_norm(x, 3, dim, True)),
              [np.array(-2.5)])


# ---- out= of a function without a derivative takes inputs that require grad -----------------

NO_DERIVATIVE_OUT = {
    "eq": lambda L, a, b: L.eq(a, b, out=L.empty(0)),
    "less_equal": lambda L, a, b: L.less_equal(a, b, out=L.empty(0, dtype=L.bool)),
    "logical_xor": lambda L, a, b: L.logical_xor(a, b, out=L.empty(0)),
    "logical_not": lambda L, a, b: L.logical_not(a, out=L.empty(3)),
    "argmin": lambda L, a, b: L.argmin(a, 0, out=L.empty(0, dtype=L.int64)),
    "searchsorted": lambda L, a, b: L.searchsorted(b.sort().values, a,
                                                   out=L.empty(0, dtype=L.int64)),
    "bucketize": lambda L, a, b: L.bucketize(a, b.sort().values, out=L.empty(0, dtype=L.int64)),
    "isin": lambda L, a, b: L.isin(a, b, out=L.empty(0, dtype=L.bool)),
    "nonzero": lambda L, a, b: L.nonzero(a, out=L.empty(0, dtype=L.int64)),
}


@pytest.mark.parametrize("name", list(NO_DERIVATIVE_OUT))
def test_out_of_a_function_without_a_derivative_takes_grad_inputs(name):
    _same(NO_DERIVATIVE_OUT[name], [np.array([1.5, -2., 0.]), np.array([1.5, 2., -3.])])


def test_out_of_a_differentiable_function_still_raises_for_grad_inputs():
    for name in ("mul", "maximum", "add"):
        _both_raise(lambda L: getattr(L, name)(L.ones(3, requires_grad=True), L.ones(3),
                                               out=L.empty(0)),
                    RuntimeError, "don't support automatic differentiation")
