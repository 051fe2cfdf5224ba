"""Type promotion and signed zeros against torch: 0-d tensors beside n-d ones (category
rules), Python scalars of each kind, float64 0-d with float32, int with 0-d float,
complex-free mixes; -0.0 against 0.0 in max/argmax/sort/unique/eq/sign; torch, llgrad eager
and llgrad.compile (adversarial_harness_s69_a10.check)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case; the fast regressions are in
# test_adversarial_regressions_s69_a10.py)

F = np.array([[1.5, -2.25, 0.0], [-0.0, 3.0, -1.0]], np.float32)
I = np.array([[1, -2, 0], [7, 3, -9]], np.int64)
Z = np.array([[0.0, -0.0, 0.0], [-0.0, -0.0, 0.0]], np.float32)


def zero_dim_float64_with_float32(torch, x):
    s = torch.tensor(2.5, dtype=torch.float64)
    return x * s, s + x, torch.maximum(x, s), torch.where(x > 0, x, s), x.clamp(min=s)


def zero_dim_int_with_float(torch, x):
    i = torch.tensor(3)
    return x + i, x // i, i * x, torch.maximum(i, x), x.pow(i)


def float_zero_dim_with_int(torch, x):
    i = x.long()
    s = torch.tensor(0.5, dtype=torch.float64)
    h = torch.tensor(0.5, dtype=torch.float16)
    return i * s, i + h, i / torch.tensor(2), i.float() * torch.tensor(1, dtype=torch.int8)


def int_dims_beat_zero_dim(torch, x):
    i8 = x.to(torch.int8)
    return i8 + torch.tensor(1000), i8 * torch.tensor(300, dtype=torch.int32), i8 + 300, i8.to(torch.uint8) + torch.tensor(-1)


def scalars_of_each_kind(torch, x):
    i = x.long()
    return i + 1, i + 1.0, i + True, x + 1, x * True, i > 1.5, i == 1.0, x.half() + 1e5


def where_scalars(torch, x):
    i = x.long()
    return (torch.where(i > 0, i, 1.5), torch.where(i > 0, 2, 3), torch.where(x > 0, 1, x),
            torch.where(i > 0, i, torch.tensor(2.0, dtype=torch.float64)))


def cat_stack_promotion(torch, x):
    i = x.long()
    return torch.cat([i, x]), torch.stack([x.half(), x]), torch.cat([i.bool(), i]), torch.cat([x, x.double()])


def result_type_api(torch, x):
    i = x.long()
    return (torch.result_type(i, 1.0) == torch.float32, torch.promote_types(torch.int8, torch.uint8) == torch.int16,
            torch.can_cast(torch.float32, torch.int32), torch.result_type(x, torch.tensor(1.0, dtype=torch.float64)) == torch.float32)


def inplace_promotion_ok(torch, x):
    y = x * 1
    y.add_(torch.tensor(2, dtype=torch.int64)).mul_(torch.tensor(0.5, dtype=torch.float64))
    y += 1
    return y


def inplace_int_float_raises(torch, x):
    i = x.long()
    i.mul_(0.5)
    return i


def inplace_int_div_raises(torch, x):
    i = x.long()
    i /= 2
    return i


def signed_zero_order(torch, z):
    return (z.max(1), z.argmax(1), z.argmin(0), z.sort(dim=1, stable=True), z.amax(0),
            torch.maximum(z, z.flip(1)), z.sign(), 1 / z, z == 0, torch.unique(z.detach()))


def signed_zero_math(torch, z):
    return z + 0.0, z * -1, z - z, -z, z.abs(), z.sqrt(), torch.atan2(z, z.flip(0) - 1), z.neg().log(), z.clamp(min=0.0)


def signed_zero_topk(torch, z):
    return z.topk(2, 1), z.kthvalue(1, 1), z.median(1), z.cummax(1)


# float16 values are not lowered to LLVM: the graph runs on the IR interpreter, with a warning
_INTERPRETED = {float_zero_dim_with_int: "float16", scalars_of_each_kind: "float16",
                cat_stack_promotion: "float16"}

CASES = [zero_dim_float64_with_float32, zero_dim_int_with_float, float_zero_dim_with_int,
         int_dims_beat_zero_dim, scalars_of_each_kind, where_scalars, cat_stack_promotion,
         result_type_api, inplace_promotion_ok, inplace_int_float_raises, inplace_int_div_raises]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_promotion(fn):
    check(fn, F, compiled_warns=_INTERPRETED.get(fn))


@pytest.mark.parametrize("fn", [zero_dim_float64_with_float32, zero_dim_int_with_float,
                                inplace_promotion_ok, where_scalars], ids=lambda f: f.__name__)
def test_promotion_gradients(fn):
    # (floor_divide has no derivative: torch's backward raises; compile leaves it to eager)
    check(fn, ("grad", F), compiled_warns="no derivative" if fn is zero_dim_int_with_float else None)


@pytest.mark.parametrize("fn", [signed_zero_order, signed_zero_math, signed_zero_topk],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("grad", [False, True])
def test_signed_zeros(fn, grad):
    check(fn, ("grad", Z) if grad else Z)
