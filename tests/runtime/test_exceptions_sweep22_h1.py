"""Exception parity with torch, sweep 22 (H1), shapes: mismatched matmul / mm / bmm / linear /
conv operands, view / reshape / expand / cat / stack / broadcasting (in place too), indices out
of range (indexing, gather, scatter, index_select, embedding, loss targets, narrow, select,
unbind), dims out of range, permute with repeats (harness: exceptions_sweep22_h1_harness.py).
Fixed here: conv2d / conv1d of out_channels not divisible by groups (a message naming neither:
torch's "expected weight to be divisible by" now)."""
import pytest

torch = pytest.importorskip("torch")

from exceptions_sweep22_h1_harness import check  # noqa: E402

def _noncontig(L):
    return L.ones(2, 3).t()

CASES = [
    ("mm_inner", lambda L: L.mm(L.ones(2, 3), L.ones(4, 5))),
    ("mm_1d", lambda L: L.mm(L.ones(3), L.ones(3, 2))),
    ("mm_3d", lambda L: L.mm(L.ones(2, 2, 2), L.ones(2, 2))),
    ("matmul_inner", lambda L: L.matmul(L.ones(2, 3), L.ones(4, 5))),
    ("matmul_vec", lambda L: L.matmul(L.ones(3), L.ones(4))),
    ("matmul_0d", lambda L: L.matmul(L.ones(()), L.ones(3))),
    ("matmul_batch", lambda L: L.matmul(L.ones(2, 3, 4), L.ones(3, 4, 5))),
    ("matmul_mv", lambda L: L.matmul(L.ones(2, 3), L.ones(4))),
    ("matmul_vm", lambda L: L.ones(4) @ L.ones(3, 2)),
    ("bmm_batch", lambda L: L.bmm(L.ones(2, 3, 4), L.ones(3, 4, 5))),
    ("bmm_inner", lambda L: L.bmm(L.ones(2, 3, 4), L.ones(2, 5, 5))),
    ("bmm_2d", lambda L: L.bmm(L.ones(3, 4), L.ones(4, 5))),
    ("mv_shape", lambda L: L.mv(L.ones(2, 3), L.ones(4))),
    ("dot_len", lambda L: L.dot(L.ones(3), L.ones(4))),
    ("dot_2d", lambda L: L.dot(L.ones(2, 2), L.ones(2, 2))),
    ("dot_dtype", lambda L: L.dot(L.ones(3), L.ones(3, dtype=L.float64))),
    ("mm_dtype", lambda L: L.mm(L.ones(2, 2), L.ones(2, 2, dtype=L.float64))),
    ("mm_int_float", lambda L: L.mm(L.ones(2, 2, dtype=L.long), L.ones(2, 2))),
    ("outer_2d", lambda L: L.outer(L.ones(2, 2), L.ones(2))),
    ("linear_in", lambda L: L.nn.functional.linear(L.ones(2, 5), L.ones(3, 4))),
    ("linear_bias", lambda L: L.nn.functional.linear(L.ones(2, 4), L.ones(3, 4), L.ones(5))),
    ("Linear_in_features", lambda L: L.nn.Linear(4, 3)(L.ones(2, 5))),
    ("Linear_scalar", lambda L: L.nn.Linear(4, 3)(L.ones(()))),
    ("Linear_int_input", lambda L: L.nn.Linear(4, 3)(L.ones(2, 4, dtype=L.long))),
    ("Linear_double_input", lambda L: L.nn.Linear(4, 3)(L.ones(2, 4, dtype=L.float64))),
    ("conv2d_channels", lambda L: L.nn.functional.conv2d(L.ones(1, 2, 8, 8), L.ones(4, 3, 3, 3))),
    ("conv2d_3d_input_mismatch", lambda L:
        L.nn.functional.conv2d(L.ones(2, 8, 8), L.ones(4, 3, 3, 3))),
    ("conv2d_5d_input", lambda L:
        L.nn.functional.conv2d(L.ones(1, 1, 1, 8, 8), L.ones(4, 1, 3, 3))),
    ("conv2d_kernel_too_big", lambda L:
        L.nn.functional.conv2d(L.ones(1, 1, 2, 2), L.ones(1, 1, 3, 3))),
    ("conv2d_groups", lambda L:
        L.nn.functional.conv2d(L.ones(1, 4, 5, 5), L.ones(3, 2, 3, 3), groups=2)),
    ("conv2d_stride0", lambda L:
        L.nn.functional.conv2d(L.ones(1, 1, 5, 5), L.ones(1, 1, 3, 3), stride=0)),
    ("conv2d_neg_padding", lambda L:
        L.nn.functional.conv2d(L.ones(1, 1, 5, 5), L.ones(1, 1, 3, 3), padding=-1)),
    ("conv2d_dtype", lambda L:
        L.nn.functional.conv2d(L.ones(1, 1, 5, 5, dtype=L.float64), L.ones(1, 1, 3, 3))),
    ("Conv2d_channels", lambda L: L.nn.Conv2d(3, 4, 3)(L.ones(1, 2, 8, 8))),
    ("Conv2d_small_input", lambda L: L.nn.Conv2d(1, 1, 5)(L.ones(1, 1, 3, 3))),
    ("Conv2d_padding_string_stride", lambda L: L.nn.Conv2d(1, 1, 3, stride=2, padding="same")),
    ("Conv2d_bad_padding_string", lambda L: L.nn.Conv2d(1, 1, 3, padding="full")),
    ("Conv2d_groups_div", lambda L: L.nn.Conv2d(3, 4, 3, groups=2)),
    ("conv1d_channels", lambda L: L.nn.functional.conv1d(L.ones(1, 2, 8), L.ones(4, 3, 3))),
    ("conv1d_4d_input", lambda L: L.nn.functional.conv1d(L.ones(1, 1, 8, 8), L.ones(4, 1, 3))),
    ("conv1d_kernel_too_big", lambda L: L.nn.functional.conv1d(L.ones(1, 1, 2), L.ones(1, 1, 3))),
    ("Conv1d_channels", lambda L: L.nn.Conv1d(3, 4, 3)(L.ones(1, 2, 8))),
    ("conv_transpose2d_channels", lambda L:
        L.nn.functional.conv_transpose2d(L.ones(1, 2, 4, 4), L.ones(3, 1, 3, 3))),
    ("max_pool2d_kernel_too_big", lambda L: L.nn.functional.max_pool2d(L.ones(1, 1, 2, 2), 3)),
    ("max_pool2d_pad_too_big", lambda L:
        L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), 2, padding=2)),
    ("avg_pool2d_2d_input", lambda L: L.nn.functional.avg_pool2d(L.ones(4, 4), 2)),
    ("view_noncontig", lambda L: _noncontig(L).view(6)),
    ("view_numel", lambda L: L.ones(2, 3).view(4, 2)),
    ("view_two_minus1", lambda L: L.ones(2, 3).view(-1, -1)),
    ("view_neg_size", lambda L: L.ones(2, 3).view(-2, 3)),
    ("view_dtype_size", lambda L: L.ones(3, dtype=L.float32).view(L.float64)),
    ("reshape_numel", lambda L: L.ones(2, 3).reshape(4, 2)),
    ("reshape_infer", lambda L: L.ones(2, 3).reshape(-1, 4)),
    ("reshape_two_minus1", lambda L: L.ones(2, 3).reshape(-1, -1)),
    ("reshape_zero_infer", lambda L: L.ones(0, 3).reshape(0, -1)),
    ("flatten_dims", lambda L: L.ones(2, 3, 4).flatten(2, 1)),
    ("unflatten_sizes", lambda L: L.ones(2, 6).unflatten(1, (4, 2))),
    ("expand_smaller", lambda L: L.ones(2, 3).expand(2)),
    ("expand_mismatch", lambda L: L.ones(2, 3).expand(3, 3)),
    ("expand_minus1_new_dim", lambda L: L.ones(3).expand(-1, 3)),
    ("expand_as", lambda L: L.ones(2, 3).expand_as(L.ones(3, 2))),
    ("repeat_fewer_dims", lambda L: L.ones(2, 3).repeat(2)),
    ("repeat_negative", lambda L: L.ones(2).repeat(-1)),
    ("cat_shapes", lambda L: L.cat([L.ones(2, 3), L.ones(2, 4)])),
    ("cat_empty_list", lambda L: L.cat([])),
    ("cat_ndim", lambda L: L.cat([L.ones(2, 3), L.ones(3)])),
    ("cat_dim_range", lambda L: L.cat([L.ones(2, 3), L.ones(2, 3)], dim=2)),
    ("cat_zero_dim", lambda L: L.cat([L.ones(()), L.ones(())])),
    ("stack_shapes", lambda L: L.stack([L.ones(2, 3), L.ones(3, 2)])),
    ("stack_empty_list", lambda L: L.stack([])),
    ("stack_dim_range", lambda L: L.stack([L.ones(2), L.ones(2)], dim=3)),
    ("hstack_empty", lambda L: L.hstack([])),
    ("vstack_shapes", lambda L: L.vstack([L.ones(2, 3), L.ones(2, 4)])),
    ("add_broadcast", lambda L: L.ones(2, 3) + L.ones(4)),
    ("mul_broadcast", lambda L: L.ones(2, 3) * L.ones(3, 2)),
    ("sub_broadcast", lambda L: L.ones(5) - L.ones(4)),
    ("div_broadcast", lambda L: L.ones(2, 3) / L.ones(2)),
    ("pow_broadcast", lambda L: L.ones(2, 3) ** L.ones(2)),
    ("eq_broadcast", lambda L: L.ones(2, 3) == L.ones(2)),
    ("lt_broadcast", lambda L: L.ones(2, 3) < L.ones(2)),
    ("maximum_broadcast", lambda L: L.maximum(L.ones(2, 3), L.ones(2))),
    ("where_broadcast", lambda L: L.where(L.ones(2, 3) > 0, L.ones(2), L.ones(3))),
    ("add__broadcast_up", lambda L: L.ones(3).add_(L.ones(2, 3))),
    ("mul__broadcast_up", lambda L: L.ones(1, 3).mul_(L.ones(2, 3))),
    ("sub__mismatch", lambda L: L.ones(3).sub_(L.ones(4))),
    ("div__broadcast_up", lambda L: L.ones(3).div_(L.ones(2, 3))),
    ("copy__broadcast", lambda L: L.ones(3).copy_(L.ones(2, 3))),
    ("iadd_broadcast_up", lambda L: _iadd(L, L.ones(3), L.ones(2, 3))),
    ("setitem_shape", lambda L: _setitem(L.ones(2, 3), slice(None), L.ones(4))),
    ("masked_fill_shape", lambda L: L.ones(2).masked_fill(L.ones(3, dtype=L.bool), 0.)),
    ("masked_fill_float_mask", lambda L: L.ones(2).masked_fill(L.ones(2), 0.)),
    ("index_oob", lambda L: L.ones(3)[3]),
    ("index_neg_oob", lambda L: L.ones(3)[-4]),
    ("index_2d_oob", lambda L: L.ones(2, 3)[0, 5]),
    ("index_too_many", lambda L: L.ones(2, 3)[0, 0, 0]),
    ("index_0d", lambda L: L.ones(())[0]),
    ("index_tensor_oob", lambda L: L.ones(3)[L.tensor([0, 3])]),
    ("index_float_tensor", lambda L: L.ones(3)[L.tensor([0., 1.])]),
    ("index_float", lambda L: L.ones(3)[1.0]),
    ("index_bool_mask_shape", lambda L: L.ones(3)[L.tensor([True, False])]),
    ("setitem_oob", lambda L: _setitem(L.ones(3), 3, 1.)),
    ("setitem_tensor_oob", lambda L: _setitem(L.ones(3), L.tensor([5]), 1.)),
    ("gather_oob", lambda L: L.ones(2, 3).gather(1, L.tensor([[0], [3]]))),
    ("gather_neg", lambda L: L.ones(2, 3).gather(1, L.tensor([[0], [-1]]))),
    ("gather_float_index", lambda L: L.ones(2, 3).gather(1, L.tensor([[0.], [1.]]))),
    ("gather_ndim", lambda L: L.ones(2, 3).gather(1, L.tensor([0, 1]))),
    ("gather_dim", lambda L: L.ones(2, 3).gather(2, L.tensor([[0], [1]]))),
    ("scatter_oob", lambda L: L.zeros(2, 3).scatter(1, L.tensor([[3]]), 1.)),
    ("scatter_src_dtype", lambda L:
        L.zeros(2, 3).scatter(1, L.tensor([[0]]), L.ones(1, 1, dtype=L.float64))),
    ("scatter__oob", lambda L: L.zeros(2, 3).scatter_(1, L.tensor([[3]]), 1.)),
    ("scatter_add_oob", lambda L: L.zeros(3).scatter_add(0, L.tensor([4]), L.ones(1))),
    ("index_select_oob", lambda L: L.ones(2, 3).index_select(0, L.tensor([2]))),
    ("index_select_float", lambda L: L.ones(2, 3).index_select(0, L.tensor([0., 1.]))),
    ("index_select_2d_index", lambda L: L.ones(2, 3).index_select(0, L.tensor([[0]]))),
    ("index_add_oob", lambda L: L.zeros(3).index_add(0, L.tensor([3]), L.ones(1))),
    ("index_put_oob", lambda L: L.zeros(3).index_put_((L.tensor([3]),), L.ones(1))),
    ("take_oob", lambda L: L.ones(2, 3).take(L.tensor([6]))),
    ("embedding_oob", lambda L: L.nn.functional.embedding(L.tensor([1, 5]), L.ones(5, 2))),
    ("embedding_neg", lambda L: L.nn.functional.embedding(L.tensor([-1]), L.ones(5, 2))),
    ("embedding_float_idx", lambda L: L.nn.functional.embedding(L.tensor([1.]), L.ones(5, 2))),
    ("Embedding_oob", lambda L: L.nn.Embedding(4, 2)(L.tensor([4]))),
    ("Embedding_padding_idx", lambda L: L.nn.Embedding(4, 2, padding_idx=5)),
    ("cross_entropy_oob", lambda L: L.nn.functional.cross_entropy(L.ones(2, 3), L.tensor([0, 3]))),
    ("cross_entropy_neg", lambda L: L.nn.functional.cross_entropy(L.ones(2, 3), L.tensor([0, -2]))),
    ("cross_entropy_batch", lambda L:
        L.nn.functional.cross_entropy(L.ones(2, 3), L.tensor([0, 1, 2]))),
    ("cross_entropy_float_target_shape", lambda L:
        L.nn.functional.cross_entropy(L.ones(2, 3), L.ones(2, 4))),
    ("cross_entropy_int_input", lambda L:
        L.nn.functional.cross_entropy(L.ones(2, 3, dtype=L.long), L.tensor([0, 1]))),
    ("nll_loss_oob", lambda L: L.nn.functional.nll_loss(L.ones(2, 3), L.tensor([0, 3]))),
    ("nll_loss_float_target", lambda L: L.nn.functional.nll_loss(L.ones(2, 3), L.ones(2))),
    ("nll_loss_batch", lambda L: L.nn.functional.nll_loss(L.ones(2, 3), L.tensor([0]))),
    ("nll_loss_weight_shape", lambda L:
        L.nn.functional.nll_loss(L.ones(2, 3), L.tensor([0, 1]), weight=L.ones(2))),
    ("narrow_oob", lambda L: L.ones(5).narrow(0, 3, 3)),
    ("narrow_neg_len", lambda L: L.ones(5).narrow(0, 0, -1)),
    ("narrow_dim", lambda L: L.ones(5).narrow(1, 0, 1)),
    ("narrow_start_oob", lambda L: L.ones(5).narrow(0, 6, 0)),
    ("select_oob", lambda L: L.ones(2, 3).select(1, 3)),
    ("select_dim", lambda L: L.ones(2, 3).select(2, 0)),
    ("select_0d", lambda L: L.ones(()).select(0, 0)),
    ("unbind_dim", lambda L: L.ones(2, 3).unbind(2)),
    ("unbind_neg_dim", lambda L: L.ones(2, 3).unbind(-3)),
    ("chunk_zero", lambda L: L.ones(4).chunk(0)),
    ("split_sizes", lambda L: L.ones(4).split([1, 2])),
    ("split_zero", lambda L: L.ones(4).split(0)),
    ("sum_dim", lambda L: L.ones(2, 3).sum(2)),
    ("sum_neg_dim", lambda L: L.ones(2, 3).sum(-3)),
    ("sum_repeat_dim", lambda L: L.ones(2, 3).sum((0, 0))),
    ("mean_dim", lambda L: L.ones(2, 3).mean(5)),
    ("softmax_dim", lambda L: L.ones(2, 3).softmax(-3)),
    ("log_softmax_dim", lambda L: L.nn.functional.log_softmax(L.ones(2, 3), dim=2)),
    ("argmax_dim", lambda L: L.ones(2, 3).argmax(2)),
    ("max_dim", lambda L: L.ones(2, 3).max(2)),
    ("max_empty", lambda L: L.ones(0).max()),
    ("argmax_empty", lambda L: L.ones(0).argmax()),
    ("max_dim_empty", lambda L: L.ones(2, 0).max(1)),
    ("cumsum_dim", lambda L: L.ones(2, 3).cumsum(2)),
    ("squeeze_dim", lambda L: L.ones(2, 3).squeeze(2)),
    ("unsqueeze_dim", lambda L: L.ones(2, 3).unsqueeze(4)),
    ("unsqueeze_neg_dim", lambda L: L.ones(2, 3).unsqueeze(-4)),
    ("transpose_dim", lambda L: L.ones(2, 3).transpose(0, 2)),
    ("t_3d", lambda L: L.ones(2, 3, 4).t()),
    ("permute_repeat", lambda L: L.ones(2, 3).permute(0, 0)),
    ("permute_count", lambda L: L.ones(2, 3).permute(0)),
    ("permute_range", lambda L: L.ones(2, 3).permute(0, 2)),
    ("movedim_range", lambda L: L.ones(2, 3).movedim(0, 2)),
    ("flip_dim", lambda L: L.ones(2, 3).flip(2)),
    ("roll_dim", lambda L: L.ones(2, 3).roll(1, 2)),
    ("topk_k", lambda L: L.ones(3).topk(4)),
    ("kthvalue_k", lambda L: L.ones(3).kthvalue(4)),
    ("diagonal_dims", lambda L: L.ones(2, 3).diagonal(0, 0, 0)),
    ("tril_1d", lambda L: L.ones(3).tril()),
    ("norm_dim", lambda L: L.ones(2, 3).norm(dim=2)),
    ("tensordot_dims", lambda L: L.tensordot(L.ones(2, 3), L.ones(4, 5), dims=1)),
    ("einsum_shapes", lambda L: L.einsum("ij,jk->ik", L.ones(2, 3), L.ones(4, 5))),
    ("einsum_ops_count", lambda L: L.einsum("ij,jk->ik", L.ones(2, 3))),
    ("layer_norm_shape", lambda L: L.nn.functional.layer_norm(L.ones(2, 3), (4,))),
    ("LayerNorm_shape", lambda L: L.nn.LayerNorm(4)(L.ones(2, 3))),
    ("BatchNorm1d_features", lambda L: L.nn.BatchNorm1d(3)(L.ones(4, 5))),
    ("BatchNorm2d_3d_input", lambda L: L.nn.BatchNorm2d(3)(L.ones(3, 4, 4))),
    ("BatchNorm1d_4d_input", lambda L: L.nn.BatchNorm1d(3)(L.ones(2, 3, 4, 4))),
    ("pad_too_many", lambda L: L.nn.functional.pad(L.ones(2, 3), (1, 1, 1, 1, 1, 1))),
    ("pad_odd", lambda L: L.nn.functional.pad(L.ones(2, 3), (1,))),
    ("pad_reflect_too_big", lambda L: L.nn.functional.pad(L.ones(1, 1, 3), (3, 3), mode="reflect")),
    ("interpolate_no_size", lambda L: L.nn.functional.interpolate(L.ones(1, 1, 4, 4))),
    ("one_hot_oob", lambda L: L.nn.functional.one_hot(L.tensor([3]), 3)),
    ("one_hot_float", lambda L: L.nn.functional.one_hot(L.tensor([1.]), 3)),
    ("one_hot_neg", lambda L: L.nn.functional.one_hot(L.tensor([-1]), 3)),
    ("bincount_neg", lambda L: L.bincount(L.tensor([-1, 0]))),
    ("multinomial_many", lambda L: L.multinomial(L.ones(3), 4)),
    ("multinomial_neg", lambda L: L.multinomial(L.tensor([1., -1.]), 1)),
    ("item_many", lambda L: L.ones(2).item()),
    ("bool_many", lambda L: bool(L.ones(2))),
    ("int_many", lambda L: int(L.ones(2))),
    ("float_many", lambda L: float(L.ones(2))),
    ("len_0d", lambda L: len(L.ones(()))),
    ("iter_0d", lambda L: iter(L.ones(()))),
    ("tolist_ok_then_index", lambda L: L.ones(()).tolist()[0]),
]


def _iadd(L, a, b):
    a += b
    return a


def _setitem(t, k, v):
    t[k] = v
    return t


# cases where llgrad's first line is its own (torch's class, its own words)
_OWN_WORDS = {"view_neg_size"}


@pytest.mark.parametrize("name,fn", CASES, ids=[n for n, _ in CASES])
def test_raises_as_torch(name, fn):
    check(fn, torch, own_words=name in _OWN_WORDS)
