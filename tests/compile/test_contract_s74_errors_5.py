"""Compile-contract s74, errors and bad input (5): data-dependent errors the native code must
check at every call (integer division by zero, normal's negative std, bernoulli's p,
singular inv and solve, a distribution's validation, take / index_add / index_fill out of
range, negative repeats, multinomial), argument errors (kthvalue, setitem shapes, mask
dtype, log_softmax of long, a ragged list, arange's zero step, bitwise of float, dropout's
p, too many indices, a 0-d tensor's len and iteration), each followed by a draw (the RNG
state after the error): torch, llgrad eager and llgrad.compile
(test_contract_s74_errors.three), the failing call first and after good compiled calls."""
import pytest
from test_contract_s74_errors import _try, three

torch = pytest.importorskip("torch")


def seq(T, C, see, fn, vals, mk):
    s = C(fn)
    for v in vals:
        _try(see, s, *mk(T, v))
        see(T.rand(2))


def int_floordiv_zero(T, C, see):
    seq(T, C, see, lambda a, b: (a // b) + 1, [[1, 0], [1, 2], [3, 4], [0, 5], [5, 0]],
        lambda T, v: (T.tensor([7, 8]), T.tensor(v)))


def int_rem_zero(T, C, see):
    seq(T, C, see, lambda a, b: (a % b) + T.remainder(a, b), [[1, 0], [1, 2], [3, 4], [0, 5]],
        lambda T, v: (T.tensor([7, 8]), T.tensor(v)))


def normal_neg_std(T, C, see):
    seq(T, C, see, lambda m, s: T.normal(m, s) * 0 + 1,
        [[-1.0, 1.0], [1.0, 1.0], [0.5, 2.0], [1.0, -0.5], [1.0, 1.0]],
        lambda T, v: (T.zeros(2), T.tensor(v)))


def bernoulli_p(T, C, see):
    seq(T, C, see, lambda p: T.bernoulli(p) + 1,
        [[1.5, 0.5], [0.2, 0.5], [0.3, 0.9], [0.5, -0.1], [0.5, 0.5]],
        lambda T, v: (T.tensor(v),))


def inv_singular(T, C, see):
    seq(T, C, see, lambda a: T.linalg.inv(a) * 2, [0.0, 1.0, 2.0, 0.0, 3.0],
        lambda T, v: (T.tensor([[1.0, 2.0], [1.0, 2.0 + v]]),))


def solve_singular(T, C, see):
    seq(T, C, see, lambda a, b: T.linalg.solve(a, b), [0.0, 1.0, 2.0, 0.0, 3.0],
        lambda T, v: (T.tensor([[1.0, 2.0], [1.0, 2.0 + v]]), T.ones(2)))


def distribution_validate(T, C, see):
    seq(T, C, see, lambda loc, sc: T.distributions.Normal(loc, sc).log_prob(T.zeros(2)),
        [-1.0, 1.0, 2.0, -0.5, 3.0],
        lambda T, v: (T.zeros(2), T.tensor([1.0, v])))


def take_oob(T, C, see):
    seq(T, C, see, lambda x, i: T.take(x, i) * 2, [7, 1, 2, -5, 3, 4],
        lambda T, v: (T.arange(4.0), T.tensor([0, v])))


def index_add_oob(T, C, see):
    seq(T, C, see, lambda x, i: x.clone().index_add_(0, i, T.ones(2)), [4, 1, 2, 4, -5, 3],
        lambda T, v: (T.arange(4.0), T.tensor([0, v])))


def repeat_interleave_neg(T, C, see):
    seq(T, C, see, lambda x, r: x.repeat_interleave(r) * 2,
        [[1, -1], [1, 2], [2, 1], [-2, 5], [1, 1]],
        lambda T, v: (T.arange(2.0), T.tensor(v)))


def multinomial_too_many(T, C, see):
    seq(T, C, see, lambda p, n: T.multinomial(p, n) + 1, [3, 1, 2, 3, 2],
        lambda T, v: (T.tensor([0.5, 0.5]), v))


def multinomial_zero_sum(T, C, see):
    seq(T, C, see, lambda p: T.multinomial(p, 1) + 1, [0.0, 1.0, 2.0, 0.0, 1.0],
        lambda T, v: (T.tensor([v, v]),))


def index_fill_oob(T, C, see):
    seq(T, C, see, lambda x, i: x.index_fill(0, i, -1.0), [5, 1, 2, 4, 3],
        lambda T, v: (T.arange(4.0), T.tensor([v])))


def kthvalue(T, C, see):
    seq(T, C, see, lambda x, k: T.kthvalue(x, k).values * 2, [5, 1, 2, 4, 0, 3],
        lambda T, v: (T.arange(4.0), v))


def setitem_shape(T, C, see):
    def f(x, v):
        y = x.clone()
        y[1:3] = v
        return y
    seq(T, C, see, f, [3, 2, 2, 1, 4, 2], lambda T, v: (T.arange(4.0), T.ones(v)))


def masked_fill_mask_dtype(T, C, see):
    seq(T, C, see, lambda x, m: x.masked_fill(m, 0.0),
        ["float32", "bool", "bool", "int64", "bool"],
        lambda T, v: (T.arange(4.0), T.tensor([1, 0, 1, 0]).to(getattr(T, v))))


def log_softmax_long(T, C, see):
    seq(T, C, see, lambda x: x.log_softmax(0), ["int64", "float32", "float32", "int64"],
        lambda T, v: (T.arange(4).to(getattr(T, v)),))


def ragged_tensor(T, C, see):
    seq(T, C, see, lambda x, l: T.tensor(l) * x,
        [[[1, 2], [3]], [[1, 2], [3, 4]], [[1, 2], [5, 4]], [[1], [3, 4]]],
        lambda T, v: (T.ones(2), v))


def arange_step_zero(T, C, see):
    seq(T, C, see, lambda s: T.arange(0, 4, s.item()), [0.0, 1.0, 2.0, 0.0, 0.5],
        lambda T, v: (T.tensor(v),))


def bitwise_float(T, C, see):
    seq(T, C, see, lambda a: a & 3, ["float32", "int64", "int64", "float32", "int32"],
        lambda T, v: (T.arange(4).to(getattr(T, v)),))


def dropout_p(T, C, see):
    seq(T, C, see, lambda a, p: T.nn.functional.dropout(a, p), [1.5, 0.5, 0.2, -0.1, 0.5],
        lambda T, v: (T.ones(4), v))


def too_many_indices(T, C, see):
    seq(T, C, see, lambda a: a[0, 1] * 2, [1, 2, 2, 1, 3], lambda T, v: (T.ones([2] * v),))


def zero_dim_iter(T, C, see):
    seq(T, C, see, lambda a: sum(x for x in a) * 2, [0, 1, 1, 0, 1],
        lambda T, v: (T.ones([2] * v),))


def zero_dim_len(T, C, see):
    seq(T, C, see, lambda a: a * len(a), [0, 1, 1, 0, 1], lambda T, v: (T.ones([2] * v),))


PROGRAMS = [int_floordiv_zero, int_rem_zero, normal_neg_std, bernoulli_p, inv_singular,
            solve_singular, distribution_validate, take_oob, index_add_oob,
            repeat_interleave_neg, multinomial_too_many, multinomial_zero_sum,
            index_fill_oob, kthvalue, setitem_shape, masked_fill_mask_dtype,
            log_softmax_long, ragged_tensor, arange_step_zero, bitwise_float, dropout_p,
            too_many_indices, zero_dim_iter, zero_dim_len]
NOT_TORCH = set()
UNFIXED = {bernoulli_p: (
    "RNG state after the error: torch's bernoulli(p) draws for the elements before the first "
    "p outside [0, 1] and then raises; llgrad checks p first and draws nothing (eager and "
    "compiled alike), so the next draw differs from torch's")}


@pytest.mark.parametrize("prog", [pytest.param(p, marks=pytest.mark.xfail(
    strict=True, reason=UNFIXED[p])) if p in UNFIXED else p for p in PROGRAMS],
    ids=lambda p: p.__name__)
def test_error_program_equals_eager_and_torch(prog):
    three(prog, with_torch=prog not in NOT_TORCH)

# (the per-case comparisons take 14-20 s a file: the slow set; _3.py runs by default)
pytestmark = pytest.mark.slow
