"""The elementwise functions llgrad writes as compositions (llgrad/runtime/functions_math.py,
functions_predicates.py) against PyTorch: values, dtypes, shapes, gradients, the in-place
forms and errors for bad input; edge cases (nan, inf, -0.0, empty, integer dtypes)."""
import math

import numpy as np
import pytest

from torch_compare import compare, compare_error

torch = pytest.importorskip("torch")
import llgrad  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

rng = np.random.default_rng(7)
X = rng.uniform(0.2, 3.0, (3, 4)).astype(np.float32)
Y = rng.standard_normal((3, 4)).astype(np.float32)
Y64 = rng.standard_normal((2, 3))
P = rng.uniform(0.05, 0.95, (5,)).astype(np.float32)
SPECIAL = np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan], dtype=np.float32)
INTS = np.array([[-3, 0, 2], [7, -1, 5]], dtype=np.int64)
EMPTY = np.zeros((0, 3), dtype=np.float32)

UNARY = ["log2", "log10", "exp2", "rad2deg", "deg2rad", "sinc", "logit", "nan_to_num",
         "signbit", "isinf", "isposinf", "isneginf", "isreal", "tan", "sinh", "cosh", "asinh",
         "arcsinh", "atanh", "arctanh", "acosh", "arccosh", "positive", "angle", "sgn"]


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("data", ["pos", "normal", "f64", "ints", "empty"])
def test_unary_functions_and_methods(name, data):
    x = {"pos": X, "normal": Y, "f64": Y64, "ints": INTS, "empty": EMPTY}[data]
    if name in ("acosh", "arccosh") and data in ("pos", "normal", "f64"):
        x = (np.abs(x) + 1).astype(x.dtype)
    if name in ("atanh", "arctanh", "logit") and data in ("pos", "normal", "f64"):
        x = (np.tanh(x) * 0.9).astype(x.dtype) if name != "logit" else \
            (1 / (1 + np.exp(-x))).astype(x.dtype)
    compare(lambda lib, t: getattr(lib, name)(t), x, rtol=2e-5)
    compare(lambda lib, t: getattr(t, name)(), x, rtol=2e-5)


@pytest.mark.parametrize("name", UNARY)
def test_unary_special_values(name):
    compare(lambda lib, t: getattr(lib, name)(t), SPECIAL, grad=False)


def test_exact_powers_are_exact():
    x = llgrad.tensor([1.0, 2.0, 8.0, 1024.0, 0.5], dtype=llgrad.float64)
    assert llgrad.log2(x).tolist() == [0.0, 1.0, 3.0, 10.0, -1.0]
    assert llgrad.log10(llgrad.tensor([1000.0, 1e-3], dtype=llgrad.float64)).tolist() == \
        [3.0, -3.0]
    assert llgrad.log10(llgrad.tensor([1000.0])).item() == 3.0
    assert llgrad.exp2(llgrad.tensor([3, 10])).tolist() == [8.0, 1024.0]
    g = llgrad.tensor([8.0], dtype=llgrad.float64, requires_grad=True)
    llgrad.log2(g).sum().backward()
    assert g.grad.item() == pytest.approx(1 / (8 * math.log(2)))


def test_logit_eps_and_nan_to_num_arguments():
    compare(lambda lib, t: lib.logit(t, eps=0.1), np.array([0.0, 0.05, 0.5, 1.0], np.float32))
    compare(lambda lib, t: lib.logit(t, 1e-6), P)
    compare(lambda lib, t: lib.nan_to_num(t, nan=1.5, posinf=9.0, neginf=-9.0), SPECIAL)
    compare(lambda lib, t: lib.nan_to_num(t), SPECIAL.astype(np.float16), grad=False)


BINARY = ["logaddexp", "logaddexp2", "hypot", "fmod", "remainder", "copysign", "xlogy",
          "fmax", "fmin", "float_power", "floor_divide", "not_equal", "greater_equal",
          "less_equal", "ldexp"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_functions(name):
    a, b = Y, rng.standard_normal((4,)).astype(np.float32)
    if name in ("xlogy",):
        b = np.abs(b) + 0.1
    grad = name != "floor_divide"       # (PyTorch: "derivative ... not implemented")
    compare(lambda lib, x, y: getattr(lib, name)(x, y), a, b, rtol=1e-4, atol=1e-5, grad=grad)
    compare(lambda lib, x, y: getattr(x, name)(y), a, b, rtol=1e-4, atol=1e-5, grad=grad)


@pytest.mark.parametrize("name", BINARY)
def test_binary_special_values(name):
    a = np.repeat(SPECIAL, len(SPECIAL))
    b = np.tile(SPECIAL, len(SPECIAL))
    if name in ("floor_divide", "float_power", "ldexp"):
        b = np.where(np.isfinite(b) & (b != 0), b, 2.0).astype(np.float32)
    compare(lambda lib, x, y: getattr(lib, name)(x, y), a, b, grad=False)


@pytest.mark.parametrize("name", ["fmod", "remainder", "floor_divide", "fmax", "fmin",
                                  "copysign", "xlogy", "float_power", "not_equal",
                                  "greater_equal", "less_equal", "ldexp"])
def test_binary_integers_and_scalars(name):
    a = INTS
    b = np.array([2, -3, 4], dtype=np.int64)
    grad = name != "floor_divide"
    compare(lambda lib, x, y: getattr(lib, name)(x, y), a, b)
    if name not in ("fmax", "fmin", "ldexp"):          # (PyTorch: other must be a tensor)
        compare(lambda lib, x: getattr(lib, name)(x, 3), a)
        compare(lambda lib, x: getattr(lib, name)(x, -1.5), Y, grad=grad)


def test_scalar_first_operands():
    compare(lambda lib, y: lib.xlogy(2, y), X)
    compare(lambda lib, y: lib.remainder(-3, y), INTS[:, 1:] + 10)
    compare(lambda lib, y: lib.float_power(2, y), Y)


def test_fmod_and_remainder_are_exact_for_float32():
    a = np.array([1.0, 5.3, -5.3, 0.3, 7.0, 1e7], np.float32)
    b = np.array([0.1, 2.0, 2.0, 0.1, -0.7, 3.3], np.float32)
    compare(lambda lib, x, y: lib.fmod(x, y), a, b, exact=True, grad=False)
    compare(lambda lib, x, y: lib.remainder(x, y), a, b, exact=True, grad=False)
    # (the gradient of other, -trunc(a / b), is PyTorch's where a / b does not round to an
    # integer in float32: PyTorch takes the rounded quotient, llgrad the exact one)
    compare(lambda lib, x, y: lib.fmod(x, y), a[1:3], b[1:3], rtol=1e-5)


def test_hypot_does_not_overflow():
    big = np.array([1e20, 3e38, 1e-30], np.float32)
    compare(lambda lib, x, y: lib.hypot(x, y), big, big, grad=False)
    compare(lambda lib, x, y: lib.hypot(x, y), big.astype(np.float64) * 1e270,
            big.astype(np.float64), grad=False)


def test_heaviside():
    x = np.array([-1.5, 0.0, 2.0, np.nan], np.float32)
    compare(lambda lib, t, v: lib.heaviside(t, v), x, np.array([0.5], np.float32), grad=False)
    compare(lambda lib, t, v: t.heaviside(v), INTS, np.array([5], np.int64), grad=False)
    compare_error(lambda lib, t, v: lib.heaviside(t, v), x, np.array([1], np.int64))


def test_isin():
    compare(lambda lib, e, t: lib.isin(e, t), INTS, np.array([2.0, 7.0, 3.5], np.float32))
    compare(lambda lib, e, t: lib.isin(e, t, invert=True), INTS, np.array([0, 5]))
    compare(lambda lib, e: lib.isin(e, 2), INTS)
    compare(lambda lib, t: lib.isin(2, t), INTS)
    compare(lambda lib, e, t: lib.isin(e, t), SPECIAL, SPECIAL)
    compare(lambda lib, e, t: lib.isin(e, t), INTS, np.zeros(0, np.int64))


@pytest.mark.parametrize("name", ["log2_", "log10_", "exp2_", "rad2deg_", "deg2rad_", "sinc_",
                                  "logit_", "nan_to_num_", "tan_", "sinh_", "arcsinh_",
                                  "square_"])
def test_unary_in_place(name):
    def fn(lib, t):
        u = t * 1                       # (a non-leaf: in place keeps the graph)
        r = getattr(u, name)()
        assert r is u
        return u
    grad = name != "arcsinh_"           # (PyTorch: "derivative ... not implemented")
    compare(fn, P, grad=grad)
    compare(lambda lib, t: getattr(lib, name)(t * 1), P, grad=grad)


@pytest.mark.parametrize("name", ["hypot_", "fmod_", "remainder_", "copysign_", "xlogy_",
                                  "ldexp_", "eq_", "ne_", "lt_", "le_", "gt_", "ge_",
                                  "not_equal_", "greater_equal_", "less_equal_", "greater_",
                                  "less_", "floor_divide_"])
def test_binary_in_place(name):
    def fn(lib, t, o):
        u = t * 1
        assert getattr(u, name)(o) is u
        return u
    compare(fn, X, Y[0], rtol=1e-5, grad=name != "floor_divide_")
    compare(fn, INTS, INTS[0] + 10, grad=False) if name not in (
        "hypot_", "copysign_", "xlogy_", "ldexp_") else None


def test_in_place_dtype_and_shape_errors():
    compare_error(lambda lib, t: t.log2_(), INTS)
    compare_error(lambda lib, t, o: t.copysign_(o), INTS, INTS)
    compare_error(lambda lib, t, o: t.hypot_(o), X[0], X)
    compare_error(lambda lib, t: t.float_power_(2), X)
    compare(lambda lib, t: t.double().float_power_(2), X, grad=False)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        llgrad.tensor([1.0], requires_grad=True).log2_()


def test_errors_match():
    compare_error(lambda lib, a, b: lib.logaddexp(a, b), INTS, INTS)
    compare_error(lambda lib, a, b: lib.hypot(a, b), INTS, INTS)
    compare_error(lambda lib, a: lib.fmod(a, 0), INTS)
    compare_error(lambda lib, a: lib.floor_divide(a, 0), INTS)
    compare_error(lambda lib, a: lib.positive(a), np.array([True]))
    compare_error(lambda lib, a: lib.is_nonzero(a), EMPTY)
    compare_error(lambda lib, a: lib.is_nonzero(a), X)
    compare_error(lambda lib, a: lib.imag(a), X)
    compare_error(lambda lib, a: lib.adjoint(a), X[0])
    compare_error(lambda lib, a: a.mH, X[0])
    compare_error(lambda lib, a: a.H, X[None])


def test_predicates_and_real_tensor_no_ops():
    for name in ("is_complex", "is_conj", "is_neg", "is_signed", "is_floating_point"):
        for x in (X, INTS, np.array([1], np.uint8), np.array([True])):
            compare(lambda lib, t: getattr(lib, name)(t), x, grad=False)
    compare(lambda lib, t: t.is_signed(), np.array([1], np.uint8), grad=False)
    compare(lambda lib, t: lib.is_nonzero(t), np.array([[0.0]], np.float32), grad=False)
    compare(lambda lib, t: t.is_nonzero(), np.array([3]), grad=False)
    compare(lambda lib, a, b: lib.is_same_size(a, b), X, Y, grad=False)
    compare(lambda lib, a, b: a.is_same_size(b), X, Y[0], grad=False)
    for name in ("conj", "resolve_conj", "resolve_neg", "real", "conj_physical"):
        compare(lambda lib, t: getattr(lib, name)(t) * 2, X)
    compare(lambda lib, t: lib.adjoint(t), X)
    compare(lambda lib, t: t.real * 2, X)
    compare_error(lambda lib, t: t.imag, X)
    compare(lambda lib, t: (t.mH, t.H), X)
    compare(lambda lib, t: lib.rsub(t, 5, alpha=2), X)
    compare(lambda lib, t: lib.rsub(t, 5), INTS)


def test_gradients_at_special_points():
    zero = np.array([0.0, 0.0], np.float32)
    compare(lambda lib, t: lib.sinc(t), zero)
    compare(lambda lib, t: lib.sinh(t), zero)
    compare(lambda lib, t: lib.asinh(t), zero)
    compare(lambda lib, t, y: lib.xlogy(t, y), zero, np.array([0.5, 2.0], np.float32))
    compare(lambda lib, t, y: lib.logaddexp(t, y), zero, zero)
    compare(lambda lib, t, y: lib.logaddexp(t, y), np.array([-np.inf, 1.0], np.float32),
            np.array([0.0, 1.0], np.float32))
    compare(lambda lib, t, y: lib.fmax(t, y), np.array([1.0, np.nan, 2.0], np.float32),
            np.array([1.0, 3.0, np.nan], np.float32))
    compare(lambda lib, t, y: lib.copysign(t, y), np.array([0.0, 2.0, -3.0], np.float32),
            np.array([-1.0, -0.0, 4.0], np.float32))
    compare(lambda lib, t: lib.nan_to_num(t), SPECIAL)


def test_large_arguments_of_the_hyperbolic_functions():
    big = np.array([-400.0, -30.0, 30.0, 400.0, 1e200], np.float64)
    compare(lambda lib, t: lib.asinh(t), big, grad=False)
    compare(lambda lib, t: lib.acosh(t), np.abs(big), grad=False)
    compare(lambda lib, t: lib.sinh(t), big[:4], grad=False)
    compare(lambda lib, t: lib.cosh(t), big[:4], grad=False)
    compare(lambda lib, t: lib.tan(t), np.array([1.5707, -1.5707, 1e5], np.float32),
            grad=False, rtol=1e-4)


def test_float64_tensors_from_python_floats_keep_their_precision():
    # (the scalars these compositions wrap: xlogy(0.1, float64 tensor) and the like)
    assert llgrad.tensor([0.1], dtype=llgrad.float64).item() == 0.1
    assert llgrad.tensor(0.1, dtype=llgrad.float64).item() == 0.1
    assert llgrad.tensor([[0.1, 2]], dtype=llgrad.int64).tolist() == [[0, 2]]
    compare(lambda lib, y: lib.xlogy(0.1, y), Y64 ** 2)
