"""The inverse trigonometric and special functions (llgrad/ir/ops_special.py) and the bitwise
functions and operators (ops_bitwise.py, runtime/functions_bitwise.py) against PyTorch:
values, dtypes and promotion, broadcasting, gradients, in-place forms, special values and the
errors for bad input."""
import math

import numpy as np
import pytest

from torch_compare import compare, compare_error

torch = pytest.importorskip("torch")
import llgrad  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

rng = np.random.default_rng(31)
U32 = rng.uniform(-0.95, 0.95, (3, 4)).astype(np.float32)
U64 = rng.uniform(-0.95, 0.95, (2, 3))
R32 = (rng.standard_normal((3, 4)) * 2).astype(np.float32)
R64 = rng.standard_normal((4,)) * 3
P32 = rng.uniform(0.2, 6.0, (3, 4)).astype(np.float32)
P64 = rng.uniform(0.2, 30.0, (5,))
NEG = -rng.integers(0, 5, (4,)) - rng.uniform(0.2, 0.8, (4,))
INTS = np.array([[-3, 0, 2], [7, -1, 5]], dtype=np.int64)
BOOLS = np.array([True, False, True])
SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 1e-30, 30.0, np.inf, -np.inf,
                    np.nan], dtype=np.float64)

UNARY = {"asin": U32, "arcsin": U64, "acos": U32, "arccos": U64, "atan": R32, "arctan": R64,
         "erfc": R32, "erfinv": U32, "lgamma": P32, "digamma": P32}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_functions_methods_inplace(name):
    x = UNARY[name]
    compare(lambda lib, t: getattr(lib, name)(t), x, rtol=2e-6)
    compare(lambda lib, t: getattr(t, name)(), x.astype(np.float64), rtol=1e-10, atol=1e-12)
    compare(lambda lib, t: getattr(t * 1, name + "_")(), x, rtol=2e-6)
    compare(lambda lib, t: getattr(lib, name)(t), INTS if name not in ("asin", "arcsin", "acos",
                                                                      "arccos", "erfinv")
            else INTS // 10, grad=False)                # (integers: float32 results)
    compare(lambda lib, t: getattr(lib, name)(t), BOOLS, grad=False)
    compare(lambda lib, t: getattr(lib, name)(t), np.zeros((0, 3), np.float32))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_values(name):
    compare(lambda lib, t: getattr(lib, name)(t), SPECIAL, grad=False, rtol=1e-12, atol=0)
    compare(lambda lib, t: getattr(lib, name)(t), SPECIAL.astype(np.float32), grad=False,
            rtol=2e-6, atol=0)


def test_gamma_family_negative_and_large():
    for x in (NEG, P64, np.array([1e3, 1e10, 1e200, 170.5, 171.7])):
        compare(lambda lib, t: t.lgamma(), x, rtol=1e-12)
        compare(lambda lib, t: t.digamma(), x, rtol=1e-11, atol=1e-12)
    compare(lambda lib, t: t.erfc(), np.array([-6.0, 0.49, 0.51, 5.0, 26.0, 27.5]), rtol=1e-13,
            atol=0)
    compare(lambda lib, t: t.erfinv(),
            np.array([0.999999, -0.9999999999, 1 - 2.0 ** -52, 1e-300]), rtol=1e-13)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_polygamma(n):
    compare(lambda lib, t: lib.polygamma(n, t), P64, rtol=1e-8)
    compare(lambda lib, t: t.polygamma(n), P32, rtol=1e-5)
    compare(lambda lib, t: (t * 1).polygamma_(n), P64, rtol=1e-8)
    compare(lambda lib, t: lib.special.polygamma(n, t) if lib is torch else lib.polygamma(n, t),
            NEG, rtol=1e-7, grad=n < 3)
    compare(lambda lib, t: lib.polygamma(n, t), np.abs(INTS) + 1, grad=False, rtol=1e-6)


def test_polygamma_errors():
    compare_error(lambda lib: lib.polygamma(-1, lib.tensor([1.0])))
    compare_error(lambda lib: lib.tensor([1.0]).polygamma(-1))
    compare_error(lambda lib: lib.polygamma(1.5, lib.tensor([1.0])))
    compare_error(lambda lib: lib.polygamma(1, 2.0))
    compare_error(lambda lib: lib.tensor([1, 2]).polygamma_(1))


def test_atan2_promotion_broadcast_grad():
    compare(lambda lib, y, x: lib.atan2(y, x), R32, R64[:4].astype(np.float32))
    compare(lambda lib, y, x: lib.arctan2(y, x), R32, np.abs(R32[:1]) - 0.5)
    compare(lambda lib, y, x: y.atan2(x), R32, R64[:4])                   # float32, float64
    compare(lambda lib, y, x: y.arctan2(x), INTS, INTS[::-1].copy(), grad=False)   # ints: float32
    compare(lambda lib, y, x: lib.atan2(y, x), BOOLS, BOOLS[::-1].copy(), grad=False)
    compare(lambda lib, y, x: (y * 1).atan2_(x), R32, R32[:1])
    compare(lambda lib, y, x: (y * 1).arctan2_(x), R64, R64[::-1].copy())
    sp = SPECIAL[:12]
    compare(lambda lib, y, x: lib.atan2(y, x), np.repeat(sp, len(sp)), np.tile(sp, len(sp)),
            rtol=1e-15, atol=0)
    zeros = np.array([0.0, -0.0, 1e-200, 0.0])
    compare(lambda lib, y, x: lib.atan2(y, x), zeros, zeros[::-1].copy())   # origin: grad 0


def test_atan2_errors():
    compare_error(lambda lib: lib.atan2(lib.tensor([1.0]), 2.0))
    compare_error(lambda lib: lib.tensor([1.0]).atan2(2))
    compare_error(lambda lib: lib.tensor([1, 2]).atan2_(lib.tensor([1.0, 2.0])))


# ---- bitwise ------------------------------------------------------------------------------

A = np.array([[5, -3, 12], [0, 7, -128]], dtype=np.int64)
B = np.array([3, 6, -1], dtype=np.int64)
SH = np.array([[-1, 0, 3], [63, 64, 70]], dtype=np.int64)
M1, M2 = np.array([True, False, True, False]), np.array([True, True, False, False])


@pytest.mark.parametrize("name,sym", [("bitwise_and", "&"), ("bitwise_or", "|"),
                                      ("bitwise_xor", "^")])
def test_bitwise_binary(name, sym):
    op = eval(f"lambda a, b: a {sym} b")                     # noqa: S307
    for a, b in ((A, B), (A, A[::-1].copy()), (A.astype(np.int32), B),
                 (A.astype(np.int8), B.astype(np.int8)), (M1, M2), (M1, M2.astype(np.int64)),
                 (A.astype(np.uint8), B.astype(np.uint8))):
        compare(lambda lib, x, y: getattr(lib, name)(x, y), a, b)
        compare(lambda lib, x, y: getattr(x, name)(y), a, b)
        compare(lambda lib, x, y: op(x, y), a, b)
    compare(lambda lib, x: op(x, 6), A)
    compare(lambda lib, x: op(6, x), A)
    compare(lambda lib, x: op(x, True), M1)
    compare(lambda lib, x: getattr(lib, name)(True, x), M1)
    compare(lambda lib, x, y: getattr(x.clone(), name + "_")(y), A, B)
    compare(lambda lib, x, y: eval(f"x.clone().__i{name[8:]}__(y)"), A, B)   # noqa: S307


@pytest.mark.parametrize("name,sym", [("bitwise_left_shift", "<<"),
                                      ("bitwise_right_shift", ">>")])
def test_shifts(name, sym):
    op = eval(f"lambda a, b: a {sym} b")                     # noqa: S307
    for a, b in ((A, SH), (A.astype(np.int32), SH.astype(np.int32)),
                 (A.astype(np.int8), (SH % 9).astype(np.int8)),
                 (A.astype(np.uint8), (SH % 10).astype(np.uint8)), (A.astype(np.int16), SH)):
        compare(lambda lib, x, y: getattr(lib, name)(x, y), a, b)
        compare(lambda lib, x, y: op(x, y), a, b)
    compare(lambda lib, x: op(x, 3), A)
    compare(lambda lib, x: op(x, -1), A)
    compare(lambda lib, x: op(100, x), SH % 8)
    compare(lambda lib, x: op(x, 1), M1)                     # bool >> 1: int64
    compare(lambda lib, x, y: getattr(x.clone(), name + "_")(y), A, SH[0])


def test_bitwise_not_and_invert():
    for a in (A, A.astype(np.int32), A.astype(np.uint8), M1):
        compare(lambda lib, x: lib.bitwise_not(x), a)
        compare(lambda lib, x: ~x, a)
        compare(lambda lib, x: x.clone().bitwise_not_(), a)


@pytest.mark.parametrize("name", ["gcd", "lcm"])
def test_gcd_lcm(name):
    info = np.iinfo(np.int64)
    edge = np.array([info.min, info.min, 0, 0, 2 ** 62, -4, 7], dtype=np.int64)
    other = np.array([0, 6, 0, -3, 3, 6, info.min], dtype=np.int64)
    for a, b in ((A, B), (edge, other), (A.astype(np.int8), B.astype(np.int8)),
                 (A.astype(np.int32), B), (A.astype(np.uint8), B.astype(np.uint8))):
        compare(lambda lib, x, y: getattr(lib, name)(x, y), a, b)
        compare(lambda lib, x, y: getattr(x, name)(y), a, b)
        compare(lambda lib, x, y: getattr(x.clone(), name + "_")(y), a, b)
    compare(lambda lib, x: getattr(lib, name + "_")(x.clone(), lib.tensor(4)), A)


def test_bitwise_errors():
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
                 "bitwise_right_shift", "gcd", "lcm"):
        compare_error(lambda lib: getattr(lib, name)(lib.tensor([1.0]), lib.tensor([1.0])))
        compare_error(lambda lib: getattr(lib, name)(lib.tensor([1]), lib.tensor([1.5])))
        compare_error(lambda lib: getattr(lib.tensor([1]), name + "_")(lib.tensor([1.5])))
        compare_error(lambda lib: getattr(lib.tensor([1.0]), name + "_")(lib.tensor([1])))
    compare_error(lambda lib: lib.bitwise_and(2, 3))
    compare_error(lambda lib: lib.tensor([3]).bitwise_and("a"))
    compare_error(lambda lib: lib.tensor([1.0]) & 1)
    compare_error(lambda lib: 1.5 << lib.tensor([1]))
    compare_error(lambda lib: lib.tensor([True]) << lib.tensor([True]))
    compare_error(lambda lib: ~lib.tensor([1.5]))
    compare_error(lambda lib: lib.bitwise_not(lib.tensor([1.5])))
    compare_error(lambda lib: lib.gcd(lib.tensor([4]), 6))
    compare_error(lambda lib: lib.tensor([4]).lcm(6))
    compare_error(lambda lib: lib.gcd(lib.tensor([True]), lib.tensor([True])))
    with pytest.raises(TypeError):
        llgrad.tensor([3]) & None
    assert llgrad.tensor([3]).__and__("a") is NotImplemented


def test_bitwise_compiles_natively():
    """The bitwise ops and the special functions run as native code (no interpreter note)."""
    def f(a, b, x, y):
        return ((a & b) ^ (a << 3) | ~b, llgrad.gcd(a, b), llgrad.lcm(a, b), a >> b,
                x.asin(), x.acos(), y.atan(), llgrad.atan2(x, y), y.erfc(), x.erfinv(),
                y.abs().lgamma(), (y.abs() + 0.5).digamma(), (y.abs() + 0.5).polygamma(3))
    cf = llgrad.compile(f, backend="llvm", fullgraph=True)
    args = (llgrad.tensor(A), llgrad.tensor(np.abs(B) % 5), llgrad.tensor(U64[0]),
            llgrad.tensor(R64[:3]))
    want = f(*args)
    for _ in range(2):
        got = cf(*args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-13)
    notes = [k for e in cf.entries for k in e.kernels.values() if isinstance(k, str)]
    assert not notes, notes
    assert math.isfinite(float(got[-1].sum()))
