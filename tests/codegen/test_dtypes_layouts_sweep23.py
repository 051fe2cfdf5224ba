"""One-operand ops and casts compiled on every dtype (float64 ... bool, float16/bfloat16 in
the interpreter) and layout (contiguous, transposed, stepped, expanded, 0-d, zero-size, at a
storage offset), against eager and torch: result dtype, shape and values (exact for
integers and bools), with nan/inf/-0.0 and integer min/max among the values, integer
division and remainder by negative numbers, Python-scalar operands and wrap-around.

The default run gives each case one layout, by turns (every layout meets every kind of op
on every dtype), and special values to every other case; the slow run has every layout,
with and without special values. Machinery: sweep23_harness.py."""
import pytest

import sweep23_harness as H

torch = pytest.importorskip("torch")


def _dim(f):
    """f on operands with dims; a 0-d operand passes through (ops that need a dim)."""
    return lambda m, x: f(m, x) if x.dim() else x + 0


CASES = {
    "neg": lambda m, x: -x if x.dtype != m.bool else ~x,
    "abs": lambda m, x: m.abs(x), "exp": lambda m, x: m.exp(x), "log": lambda m, x: m.log(x),
    "sqrt": lambda m, x: m.sqrt(x), "sin": lambda m, x: m.sin(x), "tanh": lambda m, x: m.tanh(x),
    "sigmoid": lambda m, x: m.sigmoid(x), "relu": lambda m, x: m.relu(x),
    "floor": lambda m, x: m.floor(x), "ceil": lambda m, x: m.ceil(x),
    "round": lambda m, x: m.round(x), "trunc": lambda m, x: m.trunc(x),
    "sign": lambda m, x: m.sign(x), "reciprocal": lambda m, x: m.reciprocal(x),
    "rsqrt": lambda m, x: m.rsqrt(x), "isnan": lambda m, x: m.isnan(x),
    "isfinite": lambda m, x: m.isfinite(x), "bitwise_not": lambda m, x: m.bitwise_not(x),
    "logical_not": lambda m, x: m.logical_not(x), "frac": lambda m, x: m.frac(x),
    "erf": lambda m, x: m.erf(x), "expm1": lambda m, x: m.expm1(x),
    "log1p": lambda m, x: m.log1p(x), "clone": lambda m, x: x.clone(),
    "square": lambda m, x: x * x, "cube_wraps": lambda m, x: x * x * x,
    "to_f32": lambda m, x: x.to(m.float32), "to_f64": lambda m, x: x.to(m.float64),
    "to_i64": lambda m, x: x.to(m.int64), "to_i32": lambda m, x: x.to(m.int32),
    "to_i8": lambda m, x: x.to(m.int8), "to_u8": lambda m, x: x.to(m.uint8),
    "to_bool": lambda m, x: x.to(m.bool),
    "clamp": lambda m, x: m.clamp(x, -2, 2), "clamp_min": lambda m, x: m.clamp(x, min=1),
    "add_int": lambda m, x: x + 3, "add_float": lambda m, x: x + 2.5,
    "add_wraps": lambda m, x: x + 300, "mul_int": lambda m, x: x * 3,
    "mul_float": lambda m, x: x * 0.5, "div_int": lambda m, x: x / 3,
    "floordiv": lambda m, x: x // 3, "floordiv_neg": lambda m, x: x // -3,
    "rem": lambda m, x: x % 3, "rem_neg": lambda m, x: x % -3,
    "floordiv_float_neg": lambda m, x: x // -2.5, "rem_float_neg": lambda m, x: x % -2.5,
    "fmod_neg": lambda m, x: m.fmod(x, -3), "remainder_neg": lambda m, x: m.remainder(x, -3),
    "floor_divide_neg": lambda m, x: m.floor_divide(x, -3),
    "div_trunc_neg": lambda m, x: m.div(x, -3, rounding_mode="trunc"),
    "div_floor_neg": lambda m, x: m.div(x, -3, rounding_mode="floor"),
    "pow2": lambda m, x: x ** 2, "rpow": lambda m, x: 2 ** x,
    "sub": lambda m, x: x - 1, "rsub": lambda m, x: 1 - x,
    "eq": lambda m, x: x == 1, "lt_float": lambda m, x: x < 0.5, "gt_wraps": lambda m, x: x > 300,
    "where": lambda m, x: m.where(x > 0, x, 0), "flip": _dim(lambda m, x: x.flip(0)),
    "contiguous": lambda m, x: x.contiguous(), "masked_fill": lambda m, x: x.masked_fill(x > 1, 0),
    "lshift": lambda m, x: x << 1, "rshift": lambda m, x: x >> 1,
    "and": lambda m, x: x & 3, "xor": lambda m, x: x ^ 5,
    "maximum": lambda m, x: m.maximum(x, x.flip(-1) if x.dim() else x),
    "leaky_relu": lambda m, x: m.nn.functional.leaky_relu(x),
    "atan2": lambda m, x: m.atan2(x, x + 1), "lerp": lambda m, x: m.lerp(x, x * 2, 0.3),
    "nan_to_num": lambda m, x: m.nan_to_num(x), "gcd": lambda m, x: m.gcd(x, x + 3),
}

# (op, dtypes) whose graphs fall back to the interpreter by design (H.ALLOWED_FALLBACKS)
FALLBACK = {"floor": H.INTS, "ceil": H.INTS, "round": H.INTS, "trunc": H.INTS,
            "sign": ("bool",), "maximum": ("bool",), "clamp": ("bool",),
            "clamp_min": ("bool",), "pow2": ("bool",), "rpow": ("bool",)}


def _falls_back(dtype):
    return lambda name: dtype in FALLBACK.get(name.split("[", 1)[0], ())


def _cases(dtype, layouts, special):
    seed = H.DTYPES.index(dtype)
    out = []
    for k, (name, f) in enumerate(CASES.items()):
        layout = layouts[(k + seed) % len(layouts)]
        sp = special if special is not None else bool((k + seed) % 2)
        a = H.values(dtype, H.SHAPE, seed=k, special=sp)
        out.append((f"{name}[{dtype},{layout},{sp}]", f, [(dtype, layout, a)]))
    return out


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("dtype", H.DTYPES)
def test_unary_ops_layouts_by_turns(dtype):
    cases = _cases(dtype, tuple(H.LAYOUTS), None)
    assert H.run_batch(torch, cases, [dtype], falls_back=_falls_back(dtype)) == []


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("layout", list(H.LAYOUTS))
@pytest.mark.parametrize("dtype", H.DTYPES)
def test_unary_ops_every_layout(dtype, layout, special):
    cases = _cases(dtype, (layout,), special)
    assert H.run_batch(torch, cases, [dtype], falls_back=_falls_back(dtype)) == []
