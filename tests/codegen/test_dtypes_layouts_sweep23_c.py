"""Two-operand ops on pairs of different dtypes (test_dtypes_layouts_sweep23_b.py's cases;
its slow test has every layout pair), and the type-promotion rules where an operand that
does not decide the result dtype holds a value the result dtype cannot: PyTorch casts every
operand to the common dtype first, so a 0-d int16 tensor holding 256 beside an int8 tensor
is 0 (logical_and is False, floor division by it raises ZeroDivisionError). And clamp's
-0.0 at a tie in float16, whose NumPy maximum keeps the other operand."""
import numpy as np
import pytest

import llgrad
from test_dtypes_layouts_sweep23_b import LAYOUT_PAIRS, MIXED, check

torch = pytest.importorskip("torch")


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("pair", MIXED, ids="-".join)
def test_binary_mixed_dtypes_layouts_by_turns(pair):
    check(pair, LAYOUT_PAIRS, None)


def _both(fn, *make):
    """fn's results in torch and llgrad (eager, and compiled on its second call), or the
    type of the exception each raised."""
    out = []
    for m in (torch, llgrad, "compiled"):
        mod = llgrad if m == "compiled" else m
        f = llgrad.compile(lambda *xs: fn(llgrad, *xs)) if m == "compiled" else \
            (lambda *xs, mod=mod: fn(mod, *xs))
        try:
            for _ in range(2 if m == "compiled" else 1):
                r = f(*[mk(mod) for mk in make])
            out.append((str(r.dtype).split(".")[-1], r.tolist()))
        except Exception as e:    # noqa: BLE001 (compared across the three)
            out.append(type(e).__name__)
    return out


WRAPPED_ZERO = [("int8", "int16", 256), ("int8", "int16", -32768), ("uint8", "int16", 512),
                ("int32", "int64", 2 ** 32)]


@pytest.mark.parametrize("dt,zdt,value", WRAPPED_ZERO)
@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_xor"])
def test_logical_ops_cast_a_0d_operand_to_the_common_dtype(op, dt, zdt, value):
    def fn(m, x, z):
        return getattr(m, op)(x, z)
    got = _both(fn, lambda m: m.tensor([-5, 0, 3, 100], dtype=getattr(m, dt)),
                lambda m: m.tensor(value, dtype=getattr(m, zdt)))
    assert got[1] == got[2] == got[0]


@pytest.mark.filterwarnings("ignore")
def test_logical_ops_cast_a_0d_float64_to_float16():
    """1e-10 is 0 in float16: PyTorch's logical_and of a float16 1.0 with it is False."""
    got = _both(lambda m, x, z: m.logical_and(x, z),
                lambda m: m.tensor([1.0, 0.0], dtype=m.float16),
                lambda m: m.tensor(1e-10, dtype=m.float64))
    assert got[0] == got[1] == got[2] == ("bool", [False, False])


@pytest.mark.parametrize("dt,zdt,value", WRAPPED_ZERO)
@pytest.mark.parametrize("mode", ["//", "floor", "trunc"])
def test_integer_division_by_a_0d_tensor_that_wraps_to_zero_raises(mode, dt, zdt, value):
    """The divisor is cast to the dividend's dtype before the zero check, as PyTorch's
    kernel sees it: 256 as int8 is 0, and x // 0 raises (it returned x, dividing by 1)."""
    def fn(m, x, z):
        return x // z if mode == "//" else m.div(x, z, rounding_mode=mode)
    got = _both(fn, lambda m: m.tensor([-5, 0, 3, 100], dtype=getattr(m, dt)),
                lambda m: m.tensor(value, dtype=getattr(m, zdt)))
    assert got == ["RuntimeError"] * 3


def test_in_range_0d_divisor_still_divides():
    got = _both(lambda m, x, z: x // z, lambda m: m.tensor([-5, 0, 3, 100], dtype=m.int8),
                lambda m: m.tensor(-3, dtype=m.int64))
    assert got[0] == got[1] == got[2] == ("int8", [1, 0, -1, -34])
    assert np.array_equal(np.floor_divide([-5, 0, 3, 100], -3), [1, 0, -1, -34])


def test_a_0d_float64_tensor_does_not_promote_a_float32_tensor():
    got = _both(lambda m, x, z: x + z, lambda m: m.tensor([1.0, 2.0], dtype=m.float32),
                lambda m: m.tensor(1e-9, dtype=m.float64))
    assert got[0] == got[1] == got[2] and got[0][0] == "float32"


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_clamp_and_hardtanh_keep_negative_zero_at_a_tie(dtype):
    """clamp(-0.0, min=0) is -0.0 (x kept at a tie) in every float dtype, eagerly and
    compiled: NumPy's float16 maximum keeps its first operand there, the bound (+0.0)."""
    def fn(m, x):
        return (m.clamp(x, min=0), m.clamp(x, max=-0.0), m.clamp(x, min=x * 0),
                m.nn.functional.hardtanh(x, 0, 2), m.nn.functional.relu6(x))
    xs = [-0.0, 0.0, -1.0, 3.0, 7.0, float("nan")]
    want = fn(torch, torch.tensor(xs).to(getattr(torch, dtype)))
    cf = llgrad.compile(lambda x: fn(llgrad, x))
    x = llgrad.tensor(xs).to(getattr(llgrad, dtype))
    cf(x)
    for got in (fn(llgrad, x), cf(x)):
        for g, w in zip(got, want):
            gv, wv = np.array(g.float().tolist()), np.array(w.float().tolist())
            np.testing.assert_array_equal(gv, wv)
            real = ~np.isnan(wv)        # (the sign of a NaN is torch's conversions')
            assert np.signbit(gv[real]).tolist() == np.signbit(wv[real]).tolist()


@pytest.mark.xfail(strict=True, reason="PyTorch's float16 mul/div/floor-divide kernels read a "
                   "0-d float32 second operand at full precision (opmath, uncast); llgrad casts "
                   "it to float16 first, as its dtype rule says, so x / y is 1.0, not 0.9995")
def test_float16_divided_by_a_0d_float32_tensor_uses_its_full_precision():
    got = _both(lambda m, x, y: m.div(x, y, rounding_mode="trunc"),
                lambda m: m.tensor([-2.7], dtype=m.float16), lambda m: m.tensor(-2.7))
    assert got[0] == got[1] == got[2] == ("float16", [0.0])


@pytest.mark.filterwarnings("ignore")
def test_compiled_division_by_a_0d_tensor_wrapping_to_zero_after_tracing_raises():
    cf = llgrad.compile(lambda x, z: (x // z, llgrad.logical_and(x, z), x % z))
    x = llgrad.tensor([5, -7, 3], dtype=llgrad.int8)
    for _ in range(2):
        cf(x, llgrad.tensor(3, dtype=llgrad.int16))
    cf.wait()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        cf(x, llgrad.tensor(256, dtype=llgrad.int16))
    q, both, r = cf(x, llgrad.tensor(257, dtype=llgrad.int16))      # (257 is int8 1)
    assert (q.tolist(), both.tolist(), r.tolist()) == ([5, -7, 3], [True] * 3, [0, 0, 0])
