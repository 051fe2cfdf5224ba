"""Sweep 15 (C, part 2): indexing and writes through indices (getitem / setitem with int
tensors of each dtype, masks, None, Ellipsis, empty and out-of-range indices; index_put_
with duplicates and accumulate; gather / scatter / masked_fill / where edge cases), each
compared with torch, plus as_strided's gradient through an overlapping (expanded) input."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _norm(r):
    if isinstance(r, (torch.Tensor, llgrad.Tensor)):
        return ("T", str(r.dtype).split(".")[-1], tuple(r.shape), r.tolist())
    if isinstance(r, (list, tuple)):
        return [_norm(x) for x in r]
    return r


def _outcome(fn, L):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return "ok", _norm(fn(L))
        except Exception as e:     # (the exception type is compared)
            return "err", type(e).__name__


def A(L, *shape, dtype=None):
    return L.arange(int(np.prod(shape)), dtype=dtype or L.float32).reshape(*shape)


def S(a, idx, v):
    a[idx] = v
    return a


GET = {
    **{f"int_index_{d}": (lambda L, d=d: A(L, 5, 2)[L.tensor([0, 4, -1], dtype=getattr(L, d))])
       for d in ("int8", "int16", "int32", "int64")},
    "uint8_index_is_mask": lambda L: A(L, 3)[L.tensor([1, 0, 1], dtype=L.uint8)],
    "float_index": lambda L: A(L, 5)[L.tensor([1.])],
    "empty_long_index": lambda L: A(L, 5, 2)[L.tensor([], dtype=L.long)],
    "empty_list_index": lambda L: A(L, 5, 2)[[]],
    "empty_float_index": lambda L: A(L, 5, 2)[L.tensor([])],
    "index_oob": lambda L: A(L, 5, 2)[L.tensor([5])],
    "index_oob_negative": lambda L: A(L, 5, 2)[L.tensor([-6])],
    "index_into_empty_dim": lambda L: A(L, 0, 3)[L.tensor([0])],
    "int_oob": lambda L: A(L, 5, 2)[0, 2],
    "too_many_indices": lambda L: A(L, 5, 2)[0, 0, 0],
    "0d_int": lambda L: L.tensor(3.)[0],
    "0d_true_false": lambda L: (L.tensor(3.)[True].shape, L.tensor(3.)[False].shape),
    "0d_index_0d": lambda L: L.tensor(5.)[L.tensor(0)],
    "step_zero": lambda L: A(L, 5)[::0],
    "negative_step": lambda L: A(L, 5)[::-1],
    "mask_wrong_shape": lambda L: A(L, 3, 2)[L.tensor([True, False])],
    "mask_leading_dims": lambda L: A(L, 3, 2, 2)[A(L, 3, 2) > 2],
    "mask_then_int": lambda L: A(L, 3, 2)[L.tensor([True, False, True]), 1],
    "bool_weirdness": lambda L: (L.ones(2, 3, 4)[False, True, ...].shape,
                                 L.ones(2, 3, 4)[True, [0, 1], True, True, [1], [[2]]].shape,
                                 L.ones(2, 3, 4)[L.tensor(False), [0, 1], ...].shape),
    "bool_all_dims_none": lambda L: A(L, 3, 3)[L.ones(3, 3, dtype=L.bool), None].shape,
    "three_masks": lambda L: A(L, 2, 2, 2)[L.tensor([True, False]), L.tensor([True, True]),
                                             L.tensor([False, True])],
    "list_of_bools": lambda L: (A(L, 2, 3)[[True, False]].shape, A(L, 3)[[True, 1]].tolist()),
    "separated_advanced": lambda L: A(L, 2, 3, 4)[[0, 1], :, [1, 2]],
    "adjacent_advanced": lambda L: A(L, 2, 3, 4)[:, [0, 1], [1, 2]],
    "broadcast_indices": lambda L: A(L, 3, 4)[L.tensor([[0], [2]]), L.tensor([1, 3])],
    "indices_do_not_broadcast": lambda L: A(L, 3, 4)[L.tensor([0, 1, 2]), L.tensor([1, 3])],
    "none_around_advanced": lambda L: A(L, 3, 4)[None, [0, 1], None, 1],
    "ellipsis_then_tensor": lambda L: A(L, 3, 3)[..., L.tensor([0, 2])],
    "tensor_slice_bounds": lambda L: A(L, 8)[L.tensor(1):L.tensor(7):L.tensor(2)],
    "numpy_indices": lambda L: (A(L, 3, 2)[np.int64(1)], A(L, 3, 2)[np.array([1, 0])],
                                A(L, 3, 2)[np.array([True, False, True])]),
    "str_index": lambda L: A(L, 3, 2)["a"],
    "float_scalar_index": lambda L: A(L, 3)[..., 0.5],
    "float_slice": lambda L: A(L, 3)[0.5:2],
    "duplicates": lambda L: A(L, 3)[[0, 0, 2, 2]],
    "slice_past_end": lambda L: A(L, 3)[5:10],
    "scalars_give_views": lambda L: (lambda a: (a[()] is a, a[()]._base is a, a[...] is a))(
        A(L, 3)),
}

SET = {
    "scalar": lambda L: S(A(L, 3, 2), 1, 7),
    "list": lambda L: S(A(L, 3, 2), 1, [7, 8]),
    "tuple": lambda L: S(A(L, 3), slice(None), (1, 2, 3)),
    "numpy_value": lambda L: S(A(L, 3), slice(None), np.array([1, 2, 3])),
    "broadcast_row": lambda L: S(A(L, 3, 2), slice(None), L.tensor([7., 8.])),
    "shape_mismatch": lambda L: S(A(L, 3, 2), slice(None), L.tensor([7., 8., 9.])),
    "extra_leading_ones": lambda L: S(A(L, 3, 2), 0, L.ones(1, 1, 2)),
    "extra_leading_non_one": lambda L: S(A(L, 3, 2), 0, L.ones(2, 2)),
    "value_too_many_dims": lambda L: S(A(L, 2, 3), slice(None), L.ones(3, 2, 3)),
    "none": lambda L: S(A(L, 3, 2), None, 1.),
    "ellipsis": lambda L: S(A(L, 3, 2), Ellipsis, L.tensor([1., 2.])),
    "reversed": lambda L: S(A(L, 3, 2), slice(None, None, -1), 1.),
    "mask_broadcast_value": lambda L: S(A(L, 3, 2), L.tensor([True, False, True]),
                                        L.tensor([5., 6.])),
    "mask_values": lambda L: S(A(L, 3, 2), A(L, 3, 2) > 2, L.tensor([5., 6., 7.])),
    "mask_too_few_values": lambda L: S(A(L, 3, 2), A(L, 3, 2) > 2, L.tensor([5., 6.])),
    "mask_0d_value": lambda L: S(A(L, 3, 2), A(L, 3, 2) > 2, L.tensor(9.)),
    "mask_0d_true": lambda L: S(A(L, 2), L.tensor(True), 5.),
    "empty_mask_empty_value": lambda L: S(A(L, 3), A(L, 3) > 10, L.tensor([])),
    "duplicate_index_last_wins": lambda L: S(L.zeros(3), L.tensor([0, 0, 1]),
                                             L.tensor([1., 2., 3.])),
    "float_into_long": lambda L: S(A(L, 3, dtype=L.long), 0, 2.7),
    "float_tensor_into_long": lambda L: S(A(L, 3, dtype=L.long), slice(None),
                                          L.tensor([2.7, -1.5, 3.9])),
    "double_into_float": lambda L: S(A(L, 3), L.tensor([0, 1]),
                                     L.tensor([1.5, 2.5], dtype=L.float64)),
    "int32_into_float": lambda L: S(A(L, 3), L.tensor([0]), L.tensor([1], dtype=L.int32)),
    "float_into_bool": lambda L: S(L.zeros(3, dtype=L.bool), 0, 0.5),
    "negative_into_uint8": lambda L: S(L.zeros(3, dtype=L.uint8), 0, -1),
    "overflow_into_int8": lambda L: S(L.zeros(3, dtype=L.int8), 0, 300),
    "oob": lambda L: S(A(L, 3), 3, 1.),
    "advanced_oob": lambda L: S(A(L, 3), [0, 3], 1.),
    "leaf_requiring_grad": lambda L: S(L.ones(3, requires_grad=True), 0, 1.),
    "overlapping_self": lambda L: (lambda a: S(a, slice(1, None), a[:-1]))(A(L, 5)),
    "expanded_target": lambda L: S(L.zeros(1).expand(3), 0, 1.),
    "through_view_advanced": lambda L: (lambda a: (S(a[1:3, 1:3], ([0, 1], [1, 0]), -1.), a)[1])(
        A(L, 4, 4)),
    "string_value": lambda L: S(A(L, 3), 0, "a"),
    "none_value": lambda L: S(A(L, 3), 0, None),
    "0d_with_int": lambda L: S(L.tensor(1.), 0, 5),
    "0d_bools_none_ellipsis": lambda L: [S(L.tensor(5.), x, L.tensor(float(i))).tolist()
                                         for i, x in enumerate((True, None, Ellipsis, False))],
    "broadcast_subspace": lambda L: S(L.zeros(5, 5), (L.arange(5)[:, None], slice(None)),
                                      L.arange(5.)[:, None]),
}

PUT = {
    "index_put_acc_dup": lambda L: L.zeros(3).index_put_((L.tensor([0, 0, 2, 0]),),
                                                         L.tensor([1., 2., 3., 4.]), accumulate=True),
    "index_put_acc_0d_value": lambda L: L.zeros(3).index_put_((L.tensor([0, 0]),), L.tensor(1.5),
                                                              accumulate=True),
    "index_put_acc_2d": lambda L: L.zeros(2, 3).index_put_(
        (L.tensor([0, 0, 1]), L.tensor([1, 1, 2])), L.tensor([1., 2., 3.]), accumulate=True),
    "index_put_acc_mask": lambda L: L.ones(4).index_put_((L.tensor([True, False, True, True]),),
                                                         L.tensor(2.), accumulate=True),
    "index_put_acc_bool": lambda L: L.zeros(3, dtype=L.bool).index_put_(
        (L.tensor([1, 1]),), L.tensor([True, True]), accumulate=True),
    "index_put_acc_expanded_value": lambda L: L.zeros(4, 3).index_put_(
        (L.tensor([0, 3]),), L.tensor([1., 2., 3.]).expand(2, 3), accumulate=True),
    "index_put_acc_transposed": lambda L: (lambda a: (a.t().index_put_(
        (L.tensor([0, 0]),), L.tensor(1.), accumulate=True), a)[1])(L.zeros(3, 2)),
    "index_put_value_dtype": lambda L: L.zeros(3).index_put_((L.tensor([1]),),
                                                             L.tensor([5], dtype=L.float64)),
    "index_put_list_indices": lambda L: L.zeros(3).index_put_([L.tensor([1])], L.tensor([5.])),
    "index_put_oob": lambda L: L.zeros(3).index_put_((L.tensor([3]),), L.tensor([5.]),
                                                     accumulate=True),
    "index_put_float_index": lambda L: L.zeros(3).index_put_((L.tensor([1.]),), L.tensor([5.])),
    "index_put_out_of_place": lambda L: (lambda a: (a.index_put((L.tensor([1]),), L.tensor(5.)),
                                                    a))(L.zeros(3)),
    "index_add_dup_alpha": lambda L: L.zeros(3).index_add_(0, L.tensor([0, 0, 1]),
                                                           L.tensor([1., 2., 3.]), alpha=2),
    "index_copy_length": lambda L: L.zeros(2, 3).index_copy_(1, L.tensor([2]),
                                                             L.tensor([[1., 2.], [3., 4.]])),
    "index_fill_1d_value": lambda L: A(L, 2, 3).index_fill_(1, L.tensor([0, 2]), L.tensor([-1.])),
    "index_select_2d_index": lambda L: A(L, 3, 4).index_select(0, L.tensor([[2]])),
    "index_select_0d": lambda L: L.tensor(5.).index_select(0, L.tensor([0])),
    "gather_smaller_index": lambda L: A(L, 3, 4).gather(0, L.tensor([[2], [1]])),
    "gather_index_too_big": lambda L: A(L, 3, 4).gather(1, L.tensor([[0] * 5] * 3)),
    "gather_int32_index": lambda L: A(L, 3, 4).gather(1, L.tensor([[1]], dtype=L.int32)),
    "scatter_src_too_small": lambda L: L.zeros(3).scatter_(0, L.tensor([0, 1]), L.tensor([1.])),
    "scatter_reduce_mean_int": lambda L: L.ones(3, dtype=L.long).scatter_reduce_(
        0, L.tensor([0, 0, 2]), L.tensor([1, 2, 4]), "mean"),
    "scatter_reduce_amax_no_self": lambda L: L.full((3,), 9.).scatter_reduce_(
        0, L.tensor([0, 0, 2]), L.tensor([1., 2., 3.]), "amax", include_self=False),
    "scatter_multiply_scalar": lambda L: L.full((3,), 2.).scatter_(
        0, L.tensor([0, 0]), 3., reduce="multiply"),
    "masked_fill_uint8_mask": lambda L: A(L, 2, 3).masked_fill(L.tensor([1, 0, 1], dtype=L.uint8), 1.),
    "masked_fill_1d_value": lambda L: A(L, 2, 3).masked_fill(L.tensor([True, False, True]),
                                                             L.tensor([-1.])),
    "masked_fill_float_into_long": lambda L: A(L, 3, dtype=L.long).masked_fill(
        L.tensor([True, False, True]), L.tensor(2.5)),
    "masked_fill_inplace_broadcasts_self": lambda L: A(L, 3).masked_fill_(
        L.ones(2, 3, dtype=L.bool), 1.),
    "masked_scatter_too_few": lambda L: L.zeros(2, 3).masked_scatter(
        L.tensor([True, False, True]), A(L, 3)),
    "where_int_and_float_scalar": lambda L: L.where(L.tensor([True, False]),
                                                    A(L, 2, dtype=L.long), 2.5),
    "where_uint8_condition": lambda L: L.where(L.tensor([1, 0], dtype=L.uint8), A(L, 2), A(L, 2)),
    "where_0d_double_and_float": lambda L: L.where(L.tensor([True, False]),
                                                   L.tensor(1., dtype=L.float64), A(L, 2)),
    "take_oob": lambda L: A(L, 2, 3).take(L.tensor([6])),
    "put_accumulate": lambda L: A(L, 2, 3).put_(L.tensor([0, 0, 5]), L.tensor([1., 2., 3.]),
                                                accumulate=True),
    "take_along_dim_flat": lambda L: A(L, 2, 3).take_along_dim(L.tensor([5, 0])),
}


@pytest.mark.parametrize("table,name", [(t, n) for t, d in (("GET", GET), ("SET", SET),
                                                             ("PUT", PUT)) for n in sorted(d)])
def test_indexing_matches_torch(table, name):
    fn = {"GET": GET, "SET": SET, "PUT": PUT}[table][name]
    assert _outcome(fn, llgrad) == _outcome(fn, torch)


BYTE_AND_DTYPE = {
    # (llgrad's index_put read uint8 indices as positions: wrong elements written)
    "index_put_uint8_mask": lambda L: L.zeros(3).index_put(
        (L.tensor([1, 0, 1], dtype=L.uint8),), L.tensor([5., 6.])),
    "index_put_uint8_mask_accumulate": lambda L: L.zeros(3).index_put_(
        (L.tensor([1, 0, 1], dtype=L.uint8),), L.tensor([5., 6.]), accumulate=True),
    "index_put_uint8_short_mask": lambda L: L.zeros(3).index_put(
        (L.tensor([2], dtype=L.uint8),), L.tensor([1.])),
    "index_put_uint8_mask_one_value": lambda L: L.zeros(3).index_put(
        (L.tensor([1, 0, 1], dtype=L.uint8),), L.tensor(1.)),
    "index_put_uint8_then_long": lambda L: L.zeros(2, 3).index_put(
        (L.tensor([1, 0], dtype=L.uint8), L.tensor([2])), L.tensor(1.)),
    **{f"put_{d}_index": (lambda L, d=d: A(L, 3).put(L.tensor([1, 0], dtype=getattr(L, d)),
                                                     L.ones(2)))
       for d in ("int32", "int16", "uint8", "bool")},
    **{f"repeat_interleave_{d}": (lambda L, d=d: (A(L, 2).repeat_interleave(
        L.tensor([1, 2], dtype=getattr(L, d)))))
       for d in ("int16", "int8", "uint8", "bool", "float32", "int32")},
    "repeat_interleave_indices_float": lambda L: L.repeat_interleave(L.tensor([1., 2.])),
}


@pytest.mark.parametrize("name", sorted(BYTE_AND_DTYPE))
def test_byte_masks_and_index_dtypes(name):
    fn = BYTE_AND_DTYPE[name]
    assert _outcome(fn, llgrad) == _outcome(fn, torch)
