"""Integer and bool semantics against torch: floor_divide/remainder/fmod with negatives,
integer wrap-around, true division of ints, shifts and bitwise ops, uint8 arithmetic, int
tensors with float scalars, int64 compared with float32, float -> int truncation, .to(bool),
half/bfloat16 rounding; llgrad eager and llgrad.compile (adversarial_harness_s69_a10.check)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case; the fast regressions are in
# test_adversarial_regressions_s69_a10.py)

I64 = np.array([[-7, 7, -8, 0], [5, -5, 3, -1], [2**62, -2**63, 2**63 - 1, 9]], np.int64)
I32 = np.array([[-7, 7, -8, 0], [5, -5, 3, -1], [2**30, -2**31, 2**31 - 1, 9]], np.int32)
U8 = np.array([[0, 1, 127, 128], [200, 255, 3, 17]], np.uint8)
I8 = np.array([[-128, 127, -1, 0], [100, -100, 3, 17]], np.int8)
BOOL = np.array([[True, False, True, True], [False, False, True, False]])
FL = np.array([[-2.5, -1.5, -0.5, 0.5], [1.5, 2.5, -0.0, 1e10], [-1e10, 3.99, -3.99, 7.0]],
              np.float32)
DIV = np.array([[3, -3, 3, -3], [2, 2, -2, -2], [7, 1, -1, 5]], np.int64)


def floor_div_rem(torch, x):
    d = torch.tensor([[3, -3, 3, -3], [2, 2, -2, -2], [7, 1, -1, 5]], dtype=x.dtype)
    return x // d, torch.floor_divide(x, d), x % d, torch.remainder(x, d), torch.fmod(x, d)


def scalar_div_rem(torch, x):
    return x // 3, x // -3, x % -3, torch.fmod(x, -3), torch.remainder(x, 5), x.div(3, rounding_mode="trunc"), x.div(-3, rounding_mode="floor")


def true_div(torch, x):
    return x / 3, torch.true_divide(x, 2), x / x.flip(0).clamp(min=1), torch.div(x, 4)


def div_by_zero_int(torch, x):
    return x // torch.zeros_like(x)


def rem_by_zero_int(torch, x):
    return x % torch.zeros_like(x)


def wrap_around(torch, x):
    return x + x, x * 3, x - x.flip(1), -x, x.abs(), x.sum(1), x.prod(1), x.cumsum(1)


def shifts(torch, x):
    return x << 3, x >> 2, torch.bitwise_left_shift(x, 1), torch.bitwise_right_shift(x, x.abs() % 5)


def big_shifts(torch, x):
    return x << 70, x >> 70, x >> 63, x << 63


def bitwise(torch, x):
    return x & 6, x | 9, x ^ x.flip(1), ~x, torch.bitwise_not(x), torch.bitwise_and(x, x.flip(0))


def int_float_scalar(torch, x):
    return x * 1.5, x + 0.5, x - 2.0, x / 2.0, x ** 2, x ** 0.5, 2 ** x.clamp(0, 5), x * True


def int_pow_negative(torch, x):
    return x.clamp(1, 4) ** 2, torch.pow(x.clamp(1, 4), 3)


def int_pow_negative_exponent(torch, x):
    return x ** -1


def compare_with_float(torch, x):
    f = torch.tensor([[-7.5, 7.0, -8.0, 0.1], [5.0, -5.0, 3.0, -1.0], [1e18, -1e18, 1e19, 9.0]])
    return x < f, x == f, x >= f, torch.maximum(x, f), torch.eq(x, 7.0), x > 2.5


def int_float_promotion(torch, x):
    f = torch.ones(4, dtype=torch.float16)
    return x + f, x * torch.ones(4), x.float() + x, torch.where(x > 0, x, 0.5)


def uint8_arith(torch, x):
    return x + 200, x - 1, x * 2, x + x, -x, x // 3, x % 7, x.sum(), x.sum(0).dtype == torch.int64, x.cumsum(1)


def uint8_with_int8(torch, x):
    y = torch.tensor([[-128, 127, -1, 0], [100, -100, 3, 17]], dtype=torch.int8)
    return x + y, x * y, x > y, torch.maximum(x, y)


def int8_ops(torch, x):
    return x + 100, x * x, x.abs(), -x, x // -1, x.sum(), x.mean(dtype=torch.float32), x.max(), x.argmax()


def bool_arith(torch, x):
    return x + x, x * 3, x & x.flip(1), x | True, x ^ x, ~x, x.sum(), x.int() - 1, x.float().mean()


def bool_sub_raises(torch, x):
    return x - x


def bool_neg_raises(torch, x):
    return -x


def bool_compares(torch, x):
    return x > 0, x == 1, x < 0.5, x.logical_not(), torch.logical_xor(x, x.flip(0)), x.any(1), x.all(0)


def float_to_int(torch, x):
    return x.long(), x.int(), x.to(torch.int16), x.short(), x.to(torch.int8), x.byte()


def float_to_int_in_range(torch, x):
    y = x.clamp(-100, 100)
    return y.long(), y.int(), y.to(torch.int8), y.abs().byte(), y.round().long()


def float_to_bool(torch, x):
    return x.bool(), x.to(torch.bool), (x * 0).bool(), x.bool().long()


def half_rounding(torch, x):
    y = x * 1.0001 + 0.1
    return y.half(), y.bfloat16(), y.half().float(), y.bfloat16().float(), y.half() + y.half(), y.bfloat16() * 3


def half_overflow(torch, x):
    return (x * 1e5).half(), (x * 1e38).bfloat16(), x.half().sum(), x.bfloat16().cumsum(0)


def half_int_mix(torch, x):
    i = torch.tensor([1, 2, 3, 4])
    return x.half() + i, x.bfloat16() * i, x.half() + x.bfloat16()


def float_rounding(torch, x):
    return x.round(), x.round(decimals=1), torch.round(x * 10) / 10, x.trunc(), x.fix(), x.floor(), x.ceil()


def float_floor_div(torch, x):
    return x // 0.7, x % 0.7, torch.fmod(x, -0.7), torch.remainder(x, -1.5), x // -x.flip(1)


def float_div_modes(torch, x):
    return x.div(x.flip(0), rounding_mode="floor"), x.div(-2.0, rounding_mode="trunc"), x / 0.0


# compiled code has no bfloat16 values: these run eagerly with a warning naming the reason
_FALLBACK = {half_rounding: "bfloat16", half_overflow: "bfloat16", half_int_mix: "bfloat16"}

INT_CASES = [floor_div_rem, scalar_div_rem, true_div, wrap_around, shifts, bitwise,
             int_float_scalar, int_pow_negative, compare_with_float, int_float_promotion]


@pytest.mark.parametrize("fn", INT_CASES + [div_by_zero_int, rem_by_zero_int, int_pow_negative_exponent, big_shifts], ids=lambda f: f.__name__)
@pytest.mark.parametrize("data", [I64, I32], ids=["int64", "int32"])
def test_integer_semantics(fn, data):
    # (float16 constants are not lowered to LLVM: the interpreter runs that graph, with a warning)
    check(fn, data, compiled_warns="interpreter" if fn is int_float_promotion else None)


@pytest.mark.parametrize("fn", [uint8_arith, uint8_with_int8, int8_ops, bitwise, shifts,
                                scalar_div_rem, bool_compares], ids=lambda f: f.__name__)
@pytest.mark.parametrize("data", [U8, I8], ids=["uint8", "int8"])
def test_small_integers(fn, data):
    check(fn, data)


@pytest.mark.parametrize("fn", [bool_arith, bool_sub_raises, bool_neg_raises, bool_compares,
                                int_float_scalar], ids=lambda f: f.__name__)
def test_bool_semantics(fn):
    check(fn, BOOL)


@pytest.mark.parametrize("fn", [float_to_int, float_to_int_in_range, float_to_bool, half_rounding,
                                half_overflow, half_int_mix, float_rounding, float_floor_div,
                                float_div_modes], ids=lambda f: f.__name__)
def test_float_conversions(fn):
    check(fn, FL if fn is not half_int_mix else FL[0], compiled_warns=_FALLBACK.get(fn))


@pytest.mark.parametrize("fn", [half_rounding, float_rounding, float_floor_div, float_div_modes],
                         ids=lambda f: f.__name__)
def test_float_conversions_gradients(fn):
    # (floor_divide has no derivative: torch's backward raises, so does the eager fallback)
    check(fn, ("grad", FL), compiled_warns="no derivative" if fn is float_floor_div else _FALLBACK.get(fn))
