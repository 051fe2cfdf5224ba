"""Sweep 15 (helper F), part 2: the checks of PyTorch's numerics tests (test_reductions,
test_sort_and_select, test_binary_ufuncs, test_unary_ufuncs, test_type_promotion) that llgrad
already met, kept as regression checks against torch: reductions over empty tensors and empty
dims (value or error), nan handling and ties in the selections and scans, integer division and
remainders by zero and negative numbers, integer overflow, pow of integers to negative powers,
shifts by large amounts, clamp with nan and crossed bounds, comparisons across dtypes, the
result dtype of binary ops over 0-d, n-d tensors and Python numbers, and gradients at ties and
at the kinks (max / amax / norm / abs / clamp / where with nan in the unused branch)."""
import pytest

from test_torch_suite_sweep15_f import same

pytest.importorskip("torch")


# ---- reductions over empty tensors and empty dims -----------------------------------------------

_EMPTY = ["t.zeros(0)", "t.zeros(0, 3)", "t.zeros(3, 0)"]
_REDUCE_ALL = ["sum", "prod", "mean", "amax", "max", "argmax", "std", "var", "norm", "nansum",
               "nanmean", "median", "nanmedian", "all", "any", "count_nonzero", "aminmax"]


@pytest.mark.parametrize("op", _REDUCE_ALL)
def test_reduce_all_of_empty(op):
    for x in _EMPTY:
        same(f"r = t.{op}({x})")


@pytest.mark.parametrize("x", _EMPTY[1:])
@pytest.mark.parametrize("op", ["sum", "prod", "mean", "amax", "amin", "max", "argmin", "std",
                                "logsumexp", "median", "mode", "cummax", "logcumsumexp"])
@pytest.mark.parametrize("dim", [0, -1])
def test_reduce_along_dim_of_empty(x, op, dim):
    same(f"r = t.{op}({x}, {dim})")


@pytest.mark.parametrize("src", [
    "r = t.zeros(2, 0).sum(dim=())", "r = t.ones(2, 3).sum(dim=())",
    "r = t.ones(2, 3).amax(dim=())",
    "r = t.ones(2, 3).sum(dim=(0, -2))", "r = t.ones(2, 3).amax(dim=(0, 0))",
    "r = t.ones(2, 3).std(dim=())", "r = t.tensor(3.).sum(-1)", "r = t.tensor(3.).sum(1)",
    "r = t.tensor(3.).max(0)", "r = t.tensor(3.).std()", "r = t.tensor(3.).kthvalue(1)",
    "r = t.ones(3).std(correction=3)", "r = t.ones(1).var(0)",
    "r = t.zeros(0).norm(p=float('inf'))", "r = t.zeros(0, 3).norm(p=float('inf'), dim=1)",
    "r = t.zeros(0, 3).quantile(0.5, dim=1)", "r = t.zeros(0).quantile(0.5)",
    "r = t.zeros(0).topk(0)", "r = t.zeros(0).topk(1)", "r = t.zeros(0).kthvalue(1)",
    "r = t.zeros(2, 0).aminmax(dim=1)", "r = t.zeros(0, dtype=t.int64).sum()",
    "r = t.zeros(0, dtype=t.int64).prod()", "r = t.zeros(0, dtype=t.int64).mean()",
    "r = t.zeros(0).unique(return_counts=True, return_inverse=True)",
])
def test_reduce_edge_cases(src):
    same(src)


# ---- nan handling, ties, signed zeros -----------------------------------------------------------

_VALUES = ["t.tensor([1., nan, 3., nan, -inf])", "t.tensor([[1., nan], [nan, 2.], [inf, -inf]])",
           "t.tensor([2., 1., 2., 1., 2.])", "t.tensor([[3., 3., 1.], [2., 2., 2.]])",
           "t.tensor([-0., 0., -0.])"]


@pytest.mark.parametrize("op", [
    "max()", "argmax()", "argmin(0, keepdim=True)", "amin()", "sort(stable=True)",
    "sort(stable=True, descending=True)", "argsort(descending=True, stable=True)", "median(0)",
    "nanmedian(0)", "mode(0)", "unique(return_counts=True, return_inverse=True)", "cummax(0)",
    "cummin(0)", "nanmean()", "nansum()", "nanquantile(0.5)",
    "quantile(0.3, interpolation='lower')",
    "logsumexp(0)", "logcumsumexp(0)", "unique_consecutive(return_counts=True)", "aminmax()",
    "clamp(min=0)", "sign()", "signbit()", "nan_to_num(1., 2., 3.)", "fmax(t.tensor(1.))",
    "maximum(t.tensor(1.))", "minimum(t.tensor(nan))", "heaviside(t.tensor(0.5))",
    "histc(bins=3)",
])
def test_nan_ties_and_zeros(op):
    for x in _VALUES:
        same(f"x = {x}\nr = x.{op}")


@pytest.mark.parametrize("src", ["r = t.tensor([2., 1., 2., 1., 2.]).topk(2)",
                                 "r = t.tensor([[3., 3., 1.], [2., 2., 2.]]).kthvalue(2)"])
def test_tie_index_of_quickselect(src):
    same(src)


# ---- integer division, remainder, overflow, pow ------------------------------------------------

@pytest.mark.parametrize("dtype", ["int64", "int8", "uint8", "float32", "float16"])
@pytest.mark.parametrize("op", ["t.div(a, b, rounding_mode='floor')",
                                "t.div(a, b, rounding_mode='trunc')", "t.floor_divide(a, b)",
                                "t.remainder(a, b)", "t.fmod(a, b)", "a // -3", "a % -3",
                                "a / b", "t.remainder(a, 2.5)", "-7 // a"])
@pytest.mark.parametrize("den", ["[2, 2, -2, -2, 3, -3]", "[0, 1, 0, -1, 0, 2]"])
def test_integer_division(dtype, op, den):
    same(f"a = t.tensor([7, -7, 7, -7, 0, 5], dtype=t.{dtype})\n"
         f"b = t.tensor({den}, dtype=t.{dtype})\nr = {op}")


@pytest.mark.parametrize("src", [
    "r = t.tensor([-9223372036854775808]) // -1", "r = t.tensor([-128], dtype=t.int8) // -1",
    "r = t.tensor([-128], dtype=t.int8).abs()", "r = -t.tensor([5], dtype=t.uint8)",
    "r = t.tensor([9223372036854775807]) + 1", "r = t.tensor([100, 100], dtype=t.int8).sum()",
    "r = t.tensor([100, 100], dtype=t.int8).cumsum(0)", "r = t.tensor([200], dtype=t.uint8) * 2",
    "r = t.tensor([100, 100], dtype=t.uint8).sum(dtype=t.uint8)",
    "r = t.tensor([2, -1, 1, 0]) ** -1", "r = t.tensor([2, -1, 1, 0]) ** t.tensor(-1)",
    "r = t.pow(t.tensor([2, 1]), t.tensor([-1, 1]))", "r = t.tensor([2, 3]) ** 64",
    "r = 2 ** t.tensor([2, -1, 0])", "r = t.tensor([2, -1], dtype=t.int8).pow_(2)",
    "r = t.tensor([0., -0., 1., -1., nan, inf, -inf]) ** -0.5",
    "r = t.tensor([0., -0., -1., -inf]) ** t.tensor([-1., -1., inf, -1.])",
    "r = (-8.) ** t.tensor([1/3, 2.])", "r = t.float_power(t.tensor([2, -1]), -1)",
])
def test_integer_overflow_and_pow(src):
    same(src)


# ---- shifts, bitwise ops, clamp, comparisons ---------------------------------------------------

@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8"])
@pytest.mark.parametrize("s", [0, 7, 8, 31, 32, 63, 64, 100, -1])
def test_shifts_by_large_amounts(dtype, s):
    same(f"x = t.tensor([1, -1, 5, 127, 0], dtype=t.{dtype})\n"
         f"r = (x << {s}, x >> {s}, t.bitwise_left_shift(x, t.tensor({s})))")


@pytest.mark.parametrize("bounds", ["nan, None", "None, nan", "0., nan", "2., 1.", "1., 1.",
                                    "-0., 0.", "t.tensor(nan), None", "t.tensor(3.), t.tensor(1.)",
                                    "t.tensor([0., nan, 1., 0., 0., 0., 5., nan]), t.tensor(2.)"])
def test_clamp_with_nan_and_crossed_bounds(bounds):
    same(f"x = t.tensor([-2., -0., 0., 1., 3., nan, inf, -inf])\n"
         f"r = (x.clamp({bounds}), t.clip(x, {bounds}))")


@pytest.mark.parametrize("src", [
    "r = t.tensor([1, 2, 3], dtype=t.uint8).clamp(-1, 300)", "r = t.tensor([1, 2, 3]).clamp(1.5)",
    "r = t.tensor([1., 2.]).half().clamp(1e6)", "r = t.tensor([True, False]).clamp(0, 1)",
    "r = t.tensor([1, 2, 255], dtype=t.uint8) == -1",
    "r = t.tensor([-1, 0, 1], dtype=t.int8) < 255",
    "r = t.tensor([2**53 + 1, 3]) == float(2**53)",
    "r = t.tensor([16777217], dtype=t.int32) == 16777216.",
    "r = t.tensor([0.5, 1.]) > t.tensor([1., 1.5]).half()", "r = t.tensor([True, False]) == 1.5",
    "r = t.maximum(t.tensor([1, 2, 255], dtype=t.uint8), t.tensor([-1, 0, 1], dtype=t.int8))",
    "r = t.tensor([1, 0, 1], dtype=t.bool) ^ t.tensor([3])", "r = ~t.tensor([1, -1], dtype=t.int8)",
    "r = t.tensor([1.5]) & 1",
])
def test_clamp_and_comparisons_across_dtypes(src):
    same(src)


# ---- result dtypes: 0-d, n-d, Python numbers; out= ---------------------------------------------

_LEFT = ["t.tensor([1], dtype=t.uint8)", "t.tensor(1, dtype=t.int8)",
         "t.tensor([1], dtype=t.float16)", "t.tensor(1.)", "t.tensor([True])"]
_RIGHT = ["t.tensor(2)", "t.tensor([2], dtype=t.int8)", "2.5", "True",
          "t.tensor(2., dtype=t.float64)", "t.tensor([2], dtype=t.int32)"]


@pytest.mark.parametrize("op", ["t.add", "t.div", "t.floor_divide", "t.remainder", "t.atan2",
                                "t.maximum", "t.eq", "t.pow", "t.copysign"])
def test_binary_result_dtype(op):
    for a in _LEFT:
        for b in _RIGHT:
            if op in ("t.atan2", "t.maximum", "t.copysign") and not b.startswith("t."):
                b = f"t.tensor({b})"
            same(f"r = {op}({a}, {b})")


@pytest.mark.parametrize("op", ["add(a, b, out=o)", "div(a, b, out=o)", "eq(a, b, out=o)",
                                "sqrt(a, out=o)", "sum(a.reshape(1, 2), 0, out=o)",
                                "div(a, b, rounding_mode='floor', out=o)", "cumsum(a, 0, out=o)"])
@pytest.mark.parametrize("ab", ["t.tensor([1., 2.]), t.tensor([3., 4.])",
                                "t.tensor([1, 2]), t.tensor([3, 4])"])
def test_out_dtype_rules(op, ab):
    for out in ("t.empty(2, dtype=t.int64)", "t.empty(2, dtype=t.float16)", "t.empty(0)",
                "t.empty(5)", "t.empty(2, dtype=t.bool)"):
        same(f"a, b = {ab}\no = {out}\nr0 = t.{op}\nr = (o, r0 is o)")


# ---- gradients at ties and kinks -----------------------------------------------------------------

_KINKS = ["t.tensor([1., 3., 3., 2.])", "t.tensor([0., -0., 1., -1.])",
          "t.tensor([[2., 2.], [1., 5.]])", "t.tensor([inf, 1., inf])", "t.tensor([0., 0., 0.])"]


@pytest.mark.parametrize("f", [
    "x.max()", "x.amax()", "x.amin()", "x.max(0).values", "x.amax(0)", "x.norm()",
    "x.norm(p=1)", "x.norm(p=float('inf'))", "x.norm(p=3)", "x.abs()", "x.clamp(1., 3.)",
    "x.clamp(t.tensor(1.), t.tensor(3.))", "t.where(x > 0, x.log(), x)",
    "t.where(x > 1, x, (x - 1).sqrt())", "x.median()", "x.sort().values", "x.cummax(0).values",
    "t.maximum(x, x.flip(0))", "t.fmax(x, x.flip(0))", "x.logsumexp(0)",
    "x.std()", "x.relu()", "x.pow(0.5)", "x.nanmean()",
])
def test_gradients_at_ties_and_kinks(f):
    for x in _KINKS:
        same(f"x = {x}.requires_grad_()\ny = {f}\nr = (y, t.autograd.grad(y.sum(), x)[0])")
