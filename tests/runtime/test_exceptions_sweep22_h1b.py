"""Exception parity with torch, sweep 22 (H1), dtypes and creation: integer tensors into ops
that need floats, bool arithmetic, requires_grad on integer tensors, in-place and out= result
types; ragged lists, negative sizes, arange / linspace / full arguments. Fixed here:
tensor([1, [2]]) (ValueError, torch's TypeError), tensor of complex numbers into a real dtype
(imaginary parts dropped silently), tensor of an object / str ndarray (RuntimeError, torch's
TypeError), randint of a negative size (NumPy's ValueError) or of float / str bounds (read as
ints), linspace / logspace of a str or None bound (read, or nan)."""
import pytest

torch = pytest.importorskip("torch")

from exceptions_sweep22_h1_harness import check  # noqa: E402

def _iadd(a, b):
    a += b
    return a


def _itruediv(a, b):
    a /= b
    return a


def _out_overlap(L):
    x = L.ones(4)
    return L.add(x[:3], 1, out=x[1:])


CASES = [
    ("mean_int64", lambda L: L.arange(4).mean()),
    ("mean_int_dim", lambda L: L.ones(2, 2, dtype=L.long).mean(0)),
    ("std_int", lambda L: L.arange(4).std()),
    ("var_int", lambda L: L.arange(4).var()),
    ("randn_int", lambda L: L.randn(3, dtype=L.long)),
    ("rand_int", lambda L: L.rand(3, dtype=L.int32)),
    ("rand_bool", lambda L: L.rand(3, dtype=L.bool)),
    ("normal__int", lambda L: L.zeros(3, dtype=L.long).normal_()),
    ("uniform__int", lambda L: L.zeros(3, dtype=L.long).uniform_()),
    ("softmax_int", lambda L: L.arange(3).softmax(0)),
    ("log_softmax_int", lambda L: L.nn.functional.log_softmax(L.arange(3), 0)),
    ("neg_bool", lambda L: -L.tensor([True, False])),
    ("neg_method_bool", lambda L: L.tensor([True]).neg()),
    ("sub_bool", lambda L: L.tensor([True]) - L.tensor([False])),
    ("rsub_bool", lambda L: L.rsub(L.tensor([True]), L.tensor([False]))),
    ("sub_bool_scalar", lambda L: L.tensor([True]) - True),
    ("invert_float", lambda L: ~L.ones(2)),
    ("and_float", lambda L: L.ones(2) & L.ones(2)),
    ("or_float_int", lambda L: L.ones(2) | L.ones(2, dtype=L.long)),
    ("xor_float", lambda L: L.ones(2) ^ L.ones(2)),
    ("lshift_float", lambda L: L.ones(2) << 1),
    ("bitwise_not_float", lambda L: L.bitwise_not(L.ones(2))),
    ("logical_not_ok", lambda L: L.logical_not(L.ones(2))),
    ("remainder_int_zero", lambda L: L.tensor([1, 2]) % L.tensor([0, 1])),
    ("floordiv_int_zero", lambda L: L.tensor([1, 2]) // L.tensor([1, 0])),
    ("div_floor_int_zero", lambda L: L.div(L.tensor([1]), 0, rounding_mode="floor")),
    ("div_trunc_int_zero", lambda L: L.div(L.tensor([1]), 0, rounding_mode="trunc")),
    ("div_bad_rounding", lambda L: L.div(L.ones(1), 2, rounding_mode="round")),
    ("req_grad_int", lambda L: L.ones(2, dtype=L.long).requires_grad_()),
    ("req_grad_int_attr", lambda L: setattr(L.ones(2, dtype=L.long), "requires_grad", True)),
    ("req_grad_int_ctor", lambda L: L.tensor([1, 2], requires_grad=True)),
    ("req_grad_int_zeros", lambda L: L.zeros(2, dtype=L.long, requires_grad=True)),
    ("req_grad_bool", lambda L: L.ones(2, dtype=L.bool).requires_grad_()),
    ("req_grad_arange", lambda L: L.arange(3, requires_grad=True)),
    ("Parameter_int", lambda L: L.nn.Parameter(L.ones(2, dtype=L.long))),
    ("int_add__float_scalar", lambda L: L.ones(2, dtype=L.long).add_(1.5)),
    ("int_mul__float", lambda L: L.ones(2, dtype=L.long).mul_(L.ones(2))),
    ("int_div__int", lambda L: L.ones(2, dtype=L.long).div_(2)),
    ("int_iadd_float", lambda L: _iadd(L.ones(2, dtype=L.long), L.ones(2))),
    ("int_itruediv", lambda L: _itruediv(L.ones(2, dtype=L.long), 2)),
    ("bool_add__int", lambda L: L.ones(2, dtype=L.bool).add_(1)),
    ("bool_mul__float", lambda L: L.ones(2, dtype=L.bool).mul_(1.5)),
    ("int_sqrt_", lambda L: L.ones(2, dtype=L.long).sqrt_()),
    ("int_exp_", lambda L: L.ones(2, dtype=L.long).exp_()),
    ("int_sigmoid_", lambda L: L.ones(2, dtype=L.long).sigmoid_()),
    ("int_clamp__float", lambda L: L.ones(2, dtype=L.long).clamp_(0.5)),
    ("int_pow__neg", lambda L: L.ones(2, dtype=L.long).pow_(-1)),
    ("int_pow_neg_int", lambda L: L.tensor([2, 3]) ** -1),
    ("float32_add__cdouble", lambda L: L.ones(2).add_(L.ones(2, dtype=L.complex64))),
    ("int_copy__float_ok", lambda L: L.ones(2, dtype=L.long).copy_(L.ones(2) * 1.5)),
    ("int_fill__float_ok", lambda L: L.ones(2, dtype=L.long).fill_(1.5)),
    ("int_masked_fill_ok", lambda L:
        L.ones(2, dtype=L.long).masked_fill(L.ones(2, dtype=L.bool), 1.5)),
    ("int_index_put_float", lambda L:
        L.ones(2, dtype=L.long).index_put_((L.tensor([0]),), L.ones(1))),
    ("int_scatter__float", lambda L: L.ones(2, dtype=L.long).scatter_(0, L.tensor([0]), L.ones(1))),
    ("out_dtype_add", lambda L: L.add(L.ones(2), L.ones(2), out=L.zeros(2, dtype=L.long))),
    ("out_dtype_mul_int", lambda L: L.mul(L.ones(2), 1.5, out=L.zeros(2, dtype=L.long))),
    ("out_dtype_sum", lambda L: L.sum(L.ones(2), 0, out=L.zeros((), dtype=L.long))),
    ("out_dtype_matmul", lambda L:
        L.matmul(L.ones(2, 2), L.ones(2, 2), out=L.zeros(2, 2, dtype=L.float64))),
    ("out_dtype_mm", lambda L: L.mm(L.ones(2, 2), L.ones(2, 2), out=L.zeros(2, 2, dtype=L.long))),
    ("out_dtype_cat", lambda L: L.cat([L.ones(2)], out=L.zeros(2, dtype=L.long))),
    ("out_dtype_exp", lambda L: L.exp(L.ones(2), out=L.zeros(2, dtype=L.long))),
    ("out_req_grad", lambda L: L.add(L.ones(2, requires_grad=True), 1, out=L.zeros(2))),
    ("out_leaf_req_grad", lambda L: L.add(L.ones(2), 1, out=L.zeros(2, requires_grad=True))),
    ("out_bool_from_float", lambda L: L.add(L.ones(2), 1, out=L.zeros(2, dtype=L.bool))),
    ("out_overlap", lambda L: _out_overlap(L)),
    ("matmul_int_float", lambda L: L.ones(2, 2, dtype=L.long) @ L.ones(2, 2)),
    ("bmm_int_float", lambda L: L.bmm(L.ones(1, 2, 2, dtype=L.long), L.ones(1, 2, 2))),
    ("linear_int_weight", lambda L:
        L.nn.functional.linear(L.ones(2, 2), L.ones(2, 2, dtype=L.long))),
    ("embedding_int_weight_ok", lambda L:
        L.nn.functional.embedding(L.tensor([0]), L.ones(2, 2, dtype=L.long))),
    ("mse_int", lambda L:
        L.nn.functional.mse_loss(L.ones(2, dtype=L.long), L.ones(2, dtype=L.long))),
    ("cross_entropy_int_target_float_probs", lambda L:
        L.nn.functional.cross_entropy(L.ones(2, 3), L.ones(2, 3, dtype=L.long))),
    ("where_cond_float", lambda L: L.where(L.ones(2), L.ones(2), L.zeros(2))),
    ("lerp_dtype", lambda L: L.lerp(L.ones(2), L.ones(2, dtype=L.float64), 0.5)),
    ("addmm_dtype", lambda L: L.addmm(L.ones(2, 2), L.ones(2, 2), L.ones(2, 2, dtype=L.float64))),
    ("erf_int_ok", lambda L: L.erf(L.tensor([1]))),
    ("isnan_ok", lambda L: L.isnan(L.tensor([1]))),
    ("sort_bool_ok", lambda L: L.tensor([True, False]).sort()),
    ("cumsum_bool_ok", lambda L: L.tensor([True, False]).cumsum(0)),
    ("to_bad_dtype", lambda L: L.ones(2).to("floaty")),
    ("type_bad_string", lambda L: L.ones(2).type("torch.Floaty")),
    ("tensor_ragged", lambda L: L.tensor([[1, 2], [3]])),
    ("tensor_ragged_deep", lambda L: L.tensor([[[1, 2]], [[3]]])),
    ("tensor_ragged_scalar_list", lambda L: L.tensor([1, [2]])),
    ("tensor_str", lambda L: L.tensor("abc")),
    ("tensor_list_str", lambda L: L.tensor(["a"])),
    ("tensor_none", lambda L: L.tensor(None)),
    ("tensor_dict", lambda L: L.tensor({1: 2})),
    ("tensor_of_tensors_multi", lambda L: L.tensor([L.ones(2), L.ones(2)])),
    ("tensor_overflow_int8", lambda L: L.tensor([300], dtype=L.int8)),
    ("tensor_float_to_int_ok", lambda L: L.tensor([1.7], dtype=L.long)),
    ("zeros_neg", lambda L: L.zeros(-1)),
    ("zeros_neg_2d", lambda L: L.zeros(2, -3)),
    ("ones_neg", lambda L: L.ones(-2)),
    ("empty_neg", lambda L: L.empty(-1)),
    ("randn_neg", lambda L: L.randn(-1)),
    ("rand_neg", lambda L: L.rand(2, -1)),
    ("randint_neg", lambda L: L.randint(0, 5, (-1,))),
    ("randint_low_high", lambda L: L.randint(5, 5, (2,))),
    ("randint_float_dtype_ok", lambda L: L.randint(0, 5, (2,), dtype=L.float32).shape),
    ("randperm_neg", lambda L: L.randperm(-1)),
    ("full_neg", lambda L: L.full((-1,), 1.)),
    ("eye_neg", lambda L: L.eye(-1)),
    ("zeros_float_size", lambda L: L.zeros(2.5)),
    ("zeros_str_size", lambda L: L.zeros("2")),
    ("zeros_tuple_float", lambda L: L.zeros((2, 1.5))),
    ("arange_step0", lambda L: L.arange(0, 5, 0)),
    ("arange_wrong_sign", lambda L: L.arange(0, 5, -1)),
    ("arange_inf", lambda L: L.arange(0, float("inf"))),
    ("arange_nan", lambda L: L.arange(0, float("nan"))),
    ("arange_int_dtype_float_step_ok", lambda L: L.arange(0, 2, 0.5, dtype=L.long)),
    ("linspace_neg_steps", lambda L: L.linspace(0, 1, -1)),
    ("linspace_no_steps", lambda L: L.linspace(0, 1)),
    ("logspace_neg_steps", lambda L: L.logspace(0, 1, -2)),
    ("full_bool_value_float_dtype_ok", lambda L: L.full((2,), True, dtype=L.float32)),
    ("full_float_into_int", lambda L: L.full((2,), 1.5, dtype=L.long)),
    ("full_float_into_bool", lambda L: L.full((2,), 1.5, dtype=L.bool)),
    ("full_int_into_uint8_overflow", lambda L: L.full((2,), 300, dtype=L.uint8)),
    ("full_neg_into_uint8", lambda L: L.full((2,), -1, dtype=L.uint8)),
    ("full_like_float_into_int", lambda L: L.full_like(L.ones(2, dtype=L.long), 1.5)),
    ("full_nan_into_int", lambda L: L.full((2,), float("nan"), dtype=L.long)),
    ("full_inf_into_int", lambda L: L.full((2,), float("inf"), dtype=L.int32)),
    ("fill__inf_into_int", lambda L: L.zeros(2, dtype=L.long).fill_(float("inf"))),
    ("zeros_like_bad", lambda L: L.zeros_like([1, 2])),
    ("from_numpy_list", lambda L: L.from_numpy([1, 2])),
    ("as_tensor_ragged", lambda L: L.as_tensor([[1], [2, 3]])),
    ("eye_float", lambda L: L.eye(2.5)),
    ("tensor_bad_dtype", lambda L: L.tensor([1], dtype=int)),
    ("manual_seed_str", lambda L: L.manual_seed("a")),
    ("manual_seed_neg_ok", lambda L: L.manual_seed(-1) and "ok"),
    ("manual_seed_big", lambda L: L.manual_seed(2 ** 70)),
    ("normal_neg_std", lambda L: L.normal(L.zeros(2), -1.)),
    ("normal_neg_std_scalar", lambda L: L.normal(0., -1., (2,))),
    ("bernoulli_p", lambda L: L.bernoulli(L.ones(2) * 2)),
    ("empty_strided_neg", lambda L: L.empty_strided((2,), (-1,))),
    ("as_strided_oob", lambda L: L.ones(4).as_strided((3,), (2,))),
]


# cases where llgrad's first line is its own (torch's class, its own words)
_OWN_WORDS = {"empty_strided_neg", "eye_float", "linspace_no_steps", "randperm_neg",
              "to_bad_dtype", "zeros_tuple_float"}


@pytest.mark.parametrize("name,fn", CASES, ids=[n for n, _ in CASES])
def test_raises_as_torch(name, fn):
    check(fn, torch, own_words=name in _OWN_WORDS)
