"""Accuracy of the special functions (llgrad/ir/special_kernels.py): native code
(codegen/lowerings/vecmath_special.py) and eager (the op table's NumPy implementations, the
same methods on arrays) against references computed in higher precision (NumPy's long double,
Python's math module, mpmath when installed), in ulps of the dtype, over every magnitude; the
special values (inf, nan, signed zeros, poles) exactly; and the code is inline IR (no libm
calls) that vectorises."""
import math

import numpy as np
import pytest

from llgrad.codegen.lower import lower
from llgrad.ir import OPS, Builder, TensorType

FLOATS = ("float32", "float64")


def _ulps(got, ref, dt):
    """|got - ref| in ulps of the dtype at ref (subnormals: the smallest subnormal)."""
    ref = np.asarray(ref, np.float64)
    tiny = np.finfo(dt).smallest_subnormal
    spacing = np.maximum(np.spacing(np.abs(ref.astype(dt))).astype(np.float64), tiny)
    return np.abs(got.astype(np.float64) - ref) / spacing


def _native(name, arrays, attrs=None):
    bld = Builder("special")
    ins = [bld.input(TensorType(a.dtype.name, a.shape)) for a in arrays]
    (out,) = lower(bld.ret(bld.add(name, ins, attrs or {})))(arrays)
    return out


def _eager(name, arrays, attrs=None):
    with np.errstate(all="ignore"):
        return np.asarray(OPS[name].impl(*arrays, **(attrs or {})))


RUN = {"native": _native, "eager": _eager}


def _magnitudes(rng, n, lo, hi):
    return rng.uniform(-1, 1, n) * 10.0 ** rng.uniform(lo, hi, n)


def _mp(fn, xs):
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    return np.array([float(fn(mp, mp.mpf(float(v)))) for v in xs])


# name: (inputs(rng), reference on float64 values (higher precision inside), max ulps in
# float64). Not near the negative roots of digamma and lgamma (x = -0.504, -2.457, ...): their
# formulas cancel there (relative accuracy lost, the absolute error stays an ulp of 1), as
# PyTorch's. (Python's math.lgamma is no reference: 0.2% off near its root at 2.)
def _ld(f):
    return lambda x: f(x.astype(np.longdouble)).astype(np.float64)


def _cat(*parts):
    return np.concatenate([np.asarray(p, np.float64) for p in parts])


def _near(one, rng, n):
    """one -+ 10^-15 .. 10^-1 (towards 0)."""
    return one - np.sign(one) * 10.0 ** rng.uniform(-15.9, -1, n)


CASES = {
    "asin": (lambda r: _cat(r.uniform(-1, 1, 4000), _magnitudes(r, 2000, -12, 0),
                            _near(1.0, r, 500)), _ld(np.arcsin), 2),
    "acos": (lambda r: _cat(r.uniform(-1, 1, 4000), _magnitudes(r, 2000, -12, 0),
                            _near(-1.0, r, 500)), _ld(np.arccos), 2),
    "atan": (lambda r: _cat(_magnitudes(r, 6000, -12, 12), r.uniform(-3, 3, 2000)),
             _ld(np.arctan), 2),
    "erfc": (lambda r: _cat(r.uniform(-6, 28, 6000), r.uniform(0.4, 3, 2000),
                            _magnitudes(r, 1000, -10, 0)),
             lambda x: np.array([math.erfc(v) for v in x.tolist()]), 4),
    "erfinv": (lambda r: _cat(r.uniform(-1, 1, 1500), _magnitudes(r, 500, -12, 0),
                              _near(1.0, r, 800)),
               lambda x: _mp(lambda mp, v: mp.erfinv(v), x), 3),
    "lgamma": (lambda r: _cat(r.uniform(0.01, 20, 3000), 10.0 ** r.uniform(-8, 300, 1500),
                              r.uniform(-0.5, 0.5, 1000), [1.0, 2.0, 1 + 2.0 ** -40,
                                                           2 - 2.0 ** -40]),
               lambda x: _mp(lambda mp, v: mp.loggamma(v).real, x), 4),
    "digamma": (lambda r: _cat(r.uniform(0.01, 20, 1500), 10.0 ** r.uniform(-8, 100, 500),
                               r.uniform(-0.3, 0.49, 500), [1.4616321449683622]),
                lambda x: _mp(lambda mp, v: mp.digamma(v), x), 4),
    "polygamma": (lambda r: _cat(r.uniform(0.01, 20, 1500), 10.0 ** r.uniform(-8, 100, 500),
                                 r.uniform(-0.5, 0.5, 500)),
                  lambda x: _mp(lambda mp, v: mp.psi(1, v), x), 4),
}


@pytest.mark.parametrize("how", sorted(RUN))
@pytest.mark.parametrize("dt", ["float32", pytest.param("float64", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", sorted(CASES))
def test_special_ulps(name, dt, how):
    """float64 within a few ulps of a higher-precision reference; float32 (evaluated in
    float64) within one."""
    make, ref, limit64 = CASES[name]
    rng = np.random.default_rng(11)
    with np.errstate(all="ignore"):
        x = make(rng).astype(dt)
    x = x[np.isfinite(x)]
    if how == "eager" and name in ("asin", "acos", "atan") and dt == "float32":
        pytest.skip("NumPy's float32 libm functions: not llgrad's method")
    attrs = {"n": 1} if name == "polygamma" else None
    got = RUN[how](name, [x], attrs)
    assert got.dtype == x.dtype
    with np.errstate(over="ignore"):
        want = ref(x.astype(np.float64))
        rounded = want.astype(dt)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[np.isinf(rounded)], rounded[np.isinf(rounded)])
    fin = np.isfinite(rounded)
    d = _ulps(got[fin], want[fin], dt)
    k = int(np.argmax(d))
    limit = 1 if dt == "float32" else limit64
    assert d[k] <= limit, (name, dt, how, x[fin][k], got[fin][k], want[fin][k], d[k])


@pytest.mark.parametrize("dt", FLOATS)
def test_atan2_ulps_and_quadrants(dt):
    rng = np.random.default_rng(12)
    y = np.concatenate([_magnitudes(rng, 4000, -10, 10), rng.standard_normal(2000)])
    x = np.concatenate([_magnitudes(rng, 4000, -10, 10), rng.standard_normal(2000)])
    with np.errstate(all="ignore"):
        y, x = y.astype(dt), x.astype(dt)
    got = _native("atan2", [y, x])
    want = np.arctan2(y.astype(np.longdouble), x.astype(np.longdouble)).astype(np.float64)
    assert _ulps(got, want, dt).max() <= (1 if dt == "float32" else 3)
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -1.5, 5e-324], dt)
    yy, xx = np.repeat(sp, len(sp)), np.tile(sp, len(sp))
    got = _native("atan2", [yy, xx])
    want = np.arctan2(yy.astype(np.longdouble), xx.astype(np.longdouble)).astype(dt)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[ok]), np.signbit(want[ok]))
    np.testing.assert_array_equal(got[want == 0], want[want == 0])
    assert _ulps(got[ok], want[ok], dt).max() <= (1 if dt == "float32" else 0)


SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, -3.0, 1e-310,
           -1e-310, 1.7e308, -1.7e308, 1.25, -0.75]


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_special_values_exact(name, dt):
    """At infinities, NaN, zeros, poles and the domain's ends native code gives eager's values
    (infinities, NaNs and the sign of zero exactly)."""
    with np.errstate(all="ignore"):
        x = np.array(SPECIAL).astype(dt)
    attrs = {"n": 1} if name == "polygamma" else None
    got, want = _native(name, [x], attrs), _eager(name, [x], attrs)
    assert np.array_equal(np.isnan(got), np.isnan(want)), (got, want)
    inf = np.isinf(want) | np.isinf(got)
    np.testing.assert_array_equal(got[inf], want[inf])
    zero = want == 0
    assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero]))
    fin = np.isfinite(want) & ~zero
    assert _ulps(got[fin], want[fin], dt).max() <= 4


def test_known_values():
    """A few exact values as PyTorch gives them."""
    x = np.array([1.0, 2.0, 0.0, -0.0, -1.0, -2.5], np.float64)
    np.testing.assert_array_equal(_native("lgamma", [x])[:5], [0.0, 0.0, np.inf, np.inf, np.inf])
    d = _native("digamma", [x])
    assert d[2] == -np.inf and d[3] == np.inf and np.isnan(d[4])
    e = _native("erfinv", [np.array([1.0, -1.0, 0.0, -0.0, 1.5])])
    np.testing.assert_array_equal(e[:4], [np.inf, -np.inf, 0.0, -0.0])
    assert np.signbit(e[3]) and np.isnan(e[4])
    np.testing.assert_array_equal(_native("erfc", [np.array([-np.inf, np.inf, 30.0, -30.0])]),
                                  [2.0, 0.0, 0.0, 2.0])


def test_special_math_is_inline_ir():
    """No libm calls, and the loop vectorises (the tables are read by gathers)."""
    bld = Builder("special")
    v = bld.input(TensorType("float64", (256,)))
    out = v
    for name in ("asin", "atan", "erfc", "erfinv", "lgamma", "digamma"):
        out = bld.add(name, [out])
    k = lower(bld.ret(out))
    calls = [ln for ln in k.ir_after.splitlines() if " call " in ln and "@llvm." not in ln
             and "@llgrad" not in ln]
    assert not calls, calls
    assert "<4 x double>" in k.ir_after or "<8 x double>" in k.ir_after or \
        "<2 x double>" in k.ir_after
