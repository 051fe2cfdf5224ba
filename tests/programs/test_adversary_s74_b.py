"""Indexing, scatter and type-promotion corners against torch: index tensors broadcasting
against each other, masks mixed with ints and slices, list and narrow-dtype indices,
x[idx] += v with repeated indices beside index_put_(accumulate=True), broadcast setitem on a
non-contiguous view, setitem converting dtypes, scatter_reduce's five reductions with and
without self, index_add/index_copy/index_fill/index_reduce, masked_scatter, take_along_dim,
put_; int / bool / int8 / uint8 arithmetic, division and remainder by negatives and zeros,
0-d tensors in promotion, where with scalar branches; and what s74 found llgrad doing
otherwise than torch (now fixed): a float16 tensor times / divided by a 0-d float32 tensor
(torch reads the number in float32, llgrad rounded it to float16 first), put_ accepting an
index below -numel (it wrapped around), scatter_reduce refusing torch's "max" / "min"
aliases, tensordot taking (int, int) dims torch refuses: torch, llgrad eager and
llgrad.compile (adversarial_harness_s69_a10.check)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

X = (np.arange(24, dtype=np.float32).reshape(4, 6) - 10) / 3
I = np.array([[-7, -1, 0, 5], [100, -128, 127, 3]], dtype=np.int64)
H = np.array([[100.0, 3.0, 2049.0, -7.0], [0.5, 1e4, -1e-3, 6e4]], dtype=np.float16)


# ---- indexing ---------------------------------------------------------------------------------

def idx_broadcast_pair(torch, x):
    i, j = torch.tensor([[0], [3], [-1]]), torch.tensor([1, -2])
    return x[i, j], x[..., None][i, j], x[None][0, torch.tensor([[1], [2]]), torch.tensor([0, 5])]


def mask_int_slice(torch, x):
    y = x.reshape(2, 2, 6)
    m = torch.tensor([True, True, False, False, True, False])
    return y[1, :, m], y[..., m][:, 0], y[None, 0, ..., m], y[:, torch.tensor(1), 1::2]


def zero_d_bool_index(torch, x):
    return x[torch.tensor(True)], x[torch.tensor(False)], x[None, ..., None, 2]


def list_and_narrow_indices(torch, x):
    return (x[[0, 2]], x[(0, 2)], x[[True, False, True, False]], x[:, [[5]]],
            x[torch.tensor([0, 3], dtype=torch.int32)],
            x[:, torch.tensor([1, -1], dtype=torch.int16)])


def iadd_repeated_vs_accumulate(torch, x):
    y = x * 1
    i = torch.tensor([0, 2, 0, 0])
    y[i] += 1.5                                 # (one write per index)
    z = (x * 1).index_put_((i,), torch.full((6,), 1.5), accumulate=True)
    w = x * 1
    w[i, torch.tensor([1, 1, 1, 2])] -= torch.tensor([1., 2., 3., 4.])
    return y, z, w


def setitem_broadcast_non_contiguous(torch, x):
    y = x * 1
    v = y.t()[::2]                              # (3, 4), strided
    v[:, 1:3] = torch.tensor([[7.], [8.], [9.]])
    v[torch.tensor([True, False, True])] = torch.tensor([1., 2., 3., 4.])
    return y


def setitem_empty_index(torch, x):
    y = x * 1
    y[torch.tensor([], dtype=torch.long)] = 5.0
    y[:, torch.zeros(6, dtype=torch.bool)] += 1.0
    return y, y[torch.tensor([], dtype=torch.long)].sum(0)


def setitem_dtypes(torch, x):
    y, i, b = x * 1, (x * 3).long(), x > 0
    y[0] = torch.arange(6, dtype=torch.float64) / 3
    y[1, :3] = torch.tensor([1, 2, 3])
    i[0] = x[0] * 1.7                           # (truncated toward zero)
    i[1, 1:] = -2.9
    b[2] = 5
    return y, i, b


def setitem_value_grads(torch, x):
    y = torch.zeros(4, 6)
    y[x > 0] = (x[0] * 2).sum()
    z = torch.zeros(4, 6)
    z[1:3] = x[:2] ** 2
    z[:, torch.tensor([0, 5])] = x[:, 2:4]
    return y, z


def masked_fill_tensor_value(torch, x):
    return (x.masked_fill(x > 1, x[0, 0] * 3), x.masked_fill(torch.tensor(True), x[1, 1]),
            x.masked_fill(x < 0, float("nan")))


# ---- scatter, gather and the index_* family ---------------------------------------------------

def scatter_reduce_all(torch, x):
    idx = torch.tensor([[0, 1, 0, 2, 2, 0]]).expand(4, 6)
    s = torch.ones(4, 3) * 0.5
    return [s.scatter_reduce(1, idx, x, reduce=r, include_self=inc)
            for r in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)]


def scatter_reduce_grads(torch, x):
    idx = torch.tensor([[0, 1, 0, 2, 2, 0]]).expand(4, 6)
    s = x[:, :3] * 1
    return (s.scatter_reduce(1, idx, x, reduce="mean", include_self=False),
            s.scatter_reduce(1, idx, x, reduce="sum"), s.scatter_add(1, idx, x * 2),
            s.scatter(1, idx[:, :3], x[:, 3:]))


def scatter_value_reduce(torch, x):
    i = torch.tensor([[0, 0, 1], [2, 2, 2]])
    return (x.scatter(1, i, 2.5), x.scatter(1, i, 2.0, reduce="multiply"),
            torch.zeros(3, 6).scatter_add(0, torch.tensor([[0, 1, 2, 0, 1, 2]]), x[:1]))


def gather_out_of_range(torch, x):
    return x.gather(1, torch.tensor([[6]]).expand(4, 1))


def gather_negative_raises(torch, x):
    return x.gather(1, torch.tensor([[-1]]).expand(4, 1))


def gather_small_index(torch, x):
    return (x.gather(1, torch.tensor([[0], [5]])), x.gather(0, torch.tensor([[3, 2, 1]])),
            x.gather(-1, torch.zeros(4, 0, dtype=torch.long)))


def index_add_copy_fill_grads(torch, x):
    return (x.index_add(0, torch.tensor([3, 0, 3]), x[:3] * 2, alpha=-0.5),
            x.index_copy(0, torch.tensor([2, 0, 1]), x[1:] * 3),
            x.index_fill(1, torch.tensor([-1, 0]), -2.0), x.index_select(-1, torch.tensor(2)))


def index_reduce_ops(torch, x):
    i = torch.tensor([0, 0, 2, 3, 3, 3])
    return (x.index_reduce(1, i, x * 2, "prod"),
            x.index_reduce(1, i, x, "amax", include_self=False), x.index_reduce(1, i, x, "mean"))


def masked_scatter_grads(torch, x):
    m = x > 0
    return x.masked_scatter(m, x * 10), torch.zeros(4, 6).masked_scatter(m[0], x)


def take_along_and_put(torch, x):
    i = x.argsort(1)
    y = (x * 1).put_(torch.tensor([0, 0, -1]), torch.tensor([1., 2., 3.]), accumulate=True)
    z = (x * 1).put_(torch.tensor([5, 23]), x[0, :2])
    return (torch.take_along_dim(x, i, 1), torch.take_along_dim(x, i[:1], 1),
            torch.take_along_dim(x, torch.tensor([3, 7])), y, z)


# ---- promotion and integer arithmetic (on I) -------------------------------------------------

def int_with_float_and_bool(torch, a):
    b = a > 0
    return (a * 1.5, a + True, a // 2.5, a / 4, a ** 2.0, b + b, b + 1, b * 2.5,
            b + torch.tensor(1, dtype=torch.int8), torch.tensor(3) / torch.tensor(2))


def small_int_wrap(torch, a):
    s, u = a.to(torch.int8), a.to(torch.uint8)
    return (s + 100, s * 3, -s, s.abs(), s.sum(), s.cumsum(0), s.sum(dtype=torch.int8),
            u - 1, u * 2, u + torch.tensor(-1), u - torch.tensor([1], dtype=torch.int8),
            s + torch.tensor(1000), s * torch.tensor(2.5))


def div_rem_negative(torch, a):
    b = torch.tensor([[3, -3, 2, -2], [-5, 7, -1, 4]])
    return (torch.floor_divide(a, b), torch.remainder(a, b), torch.fmod(a, b), a % -3,
            torch.fmod(a, -3), a.float() % -2.5, torch.fmod(a.float(), -2.5), a / 3,
            a.div(3, rounding_mode="floor"), a.div(-3, rounding_mode="trunc"))


def int_floor_divide_by_zero(torch, a):
    return torch.floor_divide(a, torch.zeros_like(a))


def int_remainder_by_zero(torch, a):
    return torch.remainder(a, 0)


def int_fmod_by_zero(torch, a):
    return torch.fmod(a, torch.zeros_like(a))


def float_by_zero(torch, a):
    f = a.float()
    z = torch.zeros_like(f)
    return (torch.floor_divide(f, z), torch.remainder(f, z), torch.fmod(f, z), f // -z,
            f.div(z, rounding_mode="trunc"))


def where_scalar_branches(torch, a):
    c = a > 0
    return (torch.where(c, 1, 0), torch.where(c, 1.5, 0), torch.where(c, a, 2.5),
            torch.where(c, a.to(torch.int8), 300), torch.where(c, True, False),
            torch.where(c, a.float(), a.double()), torch.where(c, 1, a.int()))


# ---- what s74 found ---------------------------------------------------------------------------

def half_times_zero_dim_float(torch, h):
    # (torch's mul / div kernel reads a 0-d second operand's own value in float32)
    s, d = torch.tensor(1.1), torch.tensor(0.3, dtype=torch.float64)
    return h * s, h / d, h.mul(s), h * 1.1, torch.tensor(1.1) * h, h + s, h * torch.tensor(3)


def put_below_minus_numel(torch, x):
    return (x * 1).put_(torch.tensor([-25]), torch.tensor([1.]))


def scatter_reduce_max_min_aliases(torch, x):
    idx = torch.tensor([[0, 1, 0, 2, 2, 0]]).expand(4, 6)
    s = torch.ones(4, 3) * 0.5
    return (s.scatter_reduce(1, idx, x.detach(), "max"),
            s.scatter_reduce(1, idx, x.detach(), "min", include_self=False))


def scatter_reduce_max_backward_raises(torch, x):
    return (x[:, :3] * 1).scatter_reduce(1, torch.tensor([[0, 0, 1]]).expand(4, 3), x[:, 3:], "max")


def tensordot_int_pair_raises(torch, x):
    return torch.tensordot(x, x, dims=(1, 1))


INDEXING = [idx_broadcast_pair, mask_int_slice, zero_d_bool_index, list_and_narrow_indices,
            iadd_repeated_vs_accumulate, setitem_broadcast_non_contiguous, setitem_empty_index,
            setitem_dtypes, setitem_value_grads, masked_fill_tensor_value, scatter_reduce_all,
            scatter_reduce_grads, scatter_value_reduce, gather_out_of_range,
            gather_negative_raises, gather_small_index, index_add_copy_fill_grads,
            index_reduce_ops, masked_scatter_grads, take_along_and_put]
INTEGERS = [int_with_float_and_bool, small_int_wrap, div_rem_negative, int_floor_divide_by_zero,
            int_remainder_by_zero, int_fmod_by_zero, float_by_zero, where_scalar_branches]
FOUND = [put_below_minus_numel, scatter_reduce_max_min_aliases,
         scatter_reduce_max_backward_raises, tensordot_int_pair_raises]
# (a backward through an op with no derivative: the compiled call runs eagerly, warned)
WARNS = {scatter_value_reduce: "running eagerly",
         scatter_reduce_max_backward_raises: "running eagerly"}


@pytest.mark.slow       # (a compile a case; what s74 found runs by default, below)
@pytest.mark.parametrize("fn", INDEXING, ids=lambda f: f.__name__)
def test_indexing_and_scatter(fn):
    check(fn, ("grad", X), rtol=1e-5, atol=1e-6, compiled_warns=WARNS.get(fn))


@pytest.mark.slow
@pytest.mark.parametrize("fn", INTEGERS, ids=lambda f: f.__name__)
def test_integer_promotion(fn):
    check(fn, I)


@pytest.mark.parametrize("fn", FOUND, ids=lambda f: f.__name__)
def test_found_s74(fn):
    check(fn, ("grad", X), rtol=1e-5, atol=1e-6, compiled_warns=WARNS.get(fn))


def test_half_times_zero_dim_float_keeps_the_number_in_float32():
    # (float16 graphs run on the interpreter, warned)
    check(half_times_zero_dim_float, H, compiled_warns="not lowered to LLVM yet")
