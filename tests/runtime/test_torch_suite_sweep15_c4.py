"""Sweep 15 (C, part 4), compared with torch: tensor creation edge cases (nested lists of
mixed types, empty shapes, requires_grad on integers, memory shared by as_tensor / from_numpy
/ numpy(), clone's memory formats, new_*), repr, item / tolist / bool / index / len / iter,
copy_'s broadcasting, conversions and argument types, and writes into overlapping memory."""
import operator
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _norm(r):
    if isinstance(r, (torch.Tensor, llgrad.Tensor)):
        return ("T", str(r.dtype).split(".")[-1], tuple(r.shape), tuple(r.stride()), r.tolist())
    if isinstance(r, (list, tuple)):
        return [_norm(x) for x in r]
    if isinstance(r, str):
        return r.replace("torch", "X").replace("llgrad", "X")
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


def _write(t, idx, v):
    t[idx] = v
    return t


CREATE = {
    "mixed_int_float_bool": lambda L: L.tensor([1, 2.5, True]),
    "bool_and_int": lambda L: L.tensor([True, 2]),
    "ragged": lambda L: L.tensor([[1, 2], [3]]),
    "ragged_scalar": lambda L: L.tensor([[1, 2], 3]),
    "empty_nested": lambda L: (L.tensor([[], []]).shape, L.tensor([[[]]]).shape),
    "list_of_0d_tensors": lambda L: L.tensor([L.tensor(1.), L.tensor(2.)]),
    "list_of_1d_tensors": lambda L: L.tensor([L.tensor([1.]), L.tensor([2.])]),
    "numpy_scalars": lambda L: L.tensor([np.float64(1.), np.int32(2)]),
    "numpy_float16": lambda L: L.tensor(np.array([1., 2.], dtype=np.float16)),
    "int_too_big": lambda L: L.tensor([2 ** 63]),
    "wrap_into_uint8": lambda L: L.tensor([-1, 256], dtype=L.uint8),
    "truncate_into_int": lambda L: L.tensor([1.7, -1.7], dtype=L.int32),
    "strings": lambda L: L.tensor(["a"]),
    "none": lambda L: L.tensor([None]),
    "requires_grad_int": lambda L: L.tensor([1, 2], requires_grad=True),
    "zeros_requires_grad_long": lambda L: L.zeros(2, dtype=L.long, requires_grad=True),
    "requires_grad__int": lambda L: L.ones(2, dtype=L.long).requires_grad_(),
    "requires_grad_false_non_leaf": lambda L: (L.ones(2, requires_grad=True) * 2).requires_grad_(False),
    "range_data": lambda L: L.tensor(range(3)),
    "as_tensor_shares_numpy": lambda L: (lambda n: (L.as_tensor(n).__setitem__(0, 9.), n.tolist())[1])(
        np.array([1., 2.])),
    "as_tensor_dtype_copies": lambda L: (lambda n: (L.as_tensor(n, dtype=L.float32).__setitem__(0, 9.),
                                                    n.tolist())[1])(np.array([1., 2.])),
    "as_tensor_identity": lambda L: (lambda t: (L.as_tensor(t) is t, L.as_tensor(t, dtype=L.float64) is t))(
        A(L, 3)),
    "from_numpy_shares": lambda L: (lambda n: (L.from_numpy(n).add_(1), n.tolist())[1])(np.array([1, 2])),
    "from_numpy_negative_strides": lambda L: L.from_numpy(np.arange(3)[::-1]),
    "from_numpy_transposed": lambda L: L.from_numpy(np.arange(6.).reshape(2, 3).T),
    "from_numpy_list": lambda L: L.from_numpy([1, 2]),
    "numpy_shares": lambda L: (lambda t: (t.numpy().__setitem__(0, 5), t)[1])(A(L, 3)),
    "numpy_requires_grad": lambda L: L.ones(2, requires_grad=True).numpy(),
    "clone_preserves_permuted": lambda L: A(L, 2, 3, 4, 5).permute(0, 2, 3, 1).clone().stride(),
    "clone_nondense": lambda L: A(L, 4, 6)[:, ::2].clone().stride(),
    "clone_channels_last": lambda L: A(L, 2, 3, 4, 5).clone(memory_format=L.channels_last).stride(),
    "clone_channels_last_3d": lambda L: A(L, 2, 3, 4, 5, 6).clone(
        memory_format=L.channels_last_3d).stride(),
    "clone_channels_last_rank3": lambda L: A(L, 2, 3, 4).clone(memory_format=L.channels_last),
    "contiguous_preserve": lambda L: A(L, 2, 3).contiguous(memory_format=L.preserve_format),
    "empty_like_transposed": lambda L: L.empty_like(A(L, 4, 6).t()).stride(),
    "new_zeros": lambda L: A(L, 2, dtype=L.int32).new_zeros(3, 2),
    "new_full_long": lambda L: A(L, 2, dtype=L.long).new_full((2,), 2.5),
    "new_empty_strided": lambda L: A(L, 2).new_empty_strided((2, 3), (1, 2)).stride(),
    "new_tensor": lambda L: A(L, 2, dtype=L.int32).new_tensor([1.5, 2]),
    "zeros_negative": lambda L: L.zeros(-1),
    "zeros_float_size": lambda L: L.zeros(2.0),
    "zeros_0d_tensor_size": lambda L: L.zeros(L.tensor(2)).shape,
    "full_bool_int": lambda L: (L.full((2,), True), L.full((2,), 3)),
    "full_long_float_value": lambda L: L.full((2,), 3.7, dtype=L.long),
    "arange_bad_step": lambda L: (L.arange(0, 5, -1)),
    "arange_tensor_float": lambda L: L.arange(L.tensor(2.5)),
    "linspace_counts": lambda L: (L.linspace(0, 1, 1), L.linspace(0, 1, 0),
                                  L.linspace(0, 10, 4, dtype=L.long)),
    "eye_negative": lambda L: L.eye(-1),
    "tril_triu_indices": lambda L: (L.tril_indices(3, 2, 1), L.triu_indices(3, 3, -1)),
}

REPR = {
    "floats": lambda L: repr(L.tensor([1., 2.5, -3.])),
    "sci": lambda L: repr(L.tensor([1e10, 1.])),
    "nan_inf": lambda L: repr(L.tensor([float("nan"), float("inf"), -float("inf"), 1.])),
    "int32": lambda L: repr(L.tensor([1, -20], dtype=L.int32)),
    "empty_2d_double": lambda L: repr(L.zeros(2, 0, dtype=L.float64)),
    "grad_fn": lambda L: repr(L.tensor([1.], requires_grad=True) * 2),
    "summarized": lambda L: repr(L.arange(1200.).reshape(40, 30)),
    "wrapped_line": lambda L: repr(L.arange(30.) * 1.123),
    "float16_0d": lambda L: repr(L.tensor(1.5, dtype=L.float16)),
    "parameter": lambda L: repr(L.nn.Parameter(L.tensor([1.]))),
    "precision_option": lambda L: (L.set_printoptions(precision=2), repr(L.tensor([1.23456])),
                                   L.set_printoptions(profile="default"))[1],
    "format_spec": lambda L: f"{L.tensor(2.5):.3f}",
    "format_spec_1d": lambda L: f"{L.tensor([2.5]):.3f}",
}

PY = {
    "item_many": lambda L: A(L, 2).item(),
    "item_empty": lambda L: A(L, 0).item(),
    "item_types": lambda L: [type(x.item()).__name__ for x in (
        L.tensor(1), L.tensor(1.), L.tensor(True), L.tensor(1, dtype=L.uint8))],
    "tolist_types": lambda L: [type(L.tensor([1], dtype=d).tolist()[0]).__name__
                               for d in (L.int8, L.float16, L.bool)],
    "bool_many": lambda L: bool(A(L, 2)),
    "bool_empty": lambda L: bool(A(L, 0)),
    "bool_nan": lambda L: bool(L.tensor(float("nan"))),
    "index_float": lambda L: [0, 1, 2][L.tensor(1.)],
    "index_1d": lambda L: [0, 1, 2][L.tensor([1])],
    "index_bool": lambda L: [0, 1, 2][L.tensor(True)],
    "operator_index_2d": lambda L: operator.index(L.tensor([[1]])),
    "int_many": lambda L: int(A(L, 2)),
    "len_0d": lambda L: len(L.tensor(1.)),
    "iter_0d": lambda L: list(iter(L.tensor(1.))),
    "iter_empty": lambda L: list(A(L, 0, 2)),
    "contains": lambda L: (2. in A(L, 3), 5 in A(L, 3), L.tensor([1., 9.]) in A(L, 3)),
    "contains_str": lambda L: "a" in A(L, 3),
    "round_builtin": lambda L: round(L.tensor(2.567), 2),
}

COPY = {
    "broadcast": lambda L: L.zeros(2, 3).copy_(L.tensor([1., 2., 3.])),
    "bad_broadcast": lambda L: L.zeros(2, 3).copy_(L.tensor([1., 2.])),
    "source_bigger": lambda L: L.zeros(3).copy_(L.ones(2, 3)),
    "float_to_long": lambda L: L.zeros(3, dtype=L.long).copy_(L.tensor([1.9, -1.9, 2.5])),
    "float_to_bool": lambda L: L.zeros(3, dtype=L.bool).copy_(L.tensor([0., 0.1, -2.])),
    "long_to_uint8": lambda L: L.zeros(2, dtype=L.uint8).copy_(L.tensor([-1, 256])),
    "overlapping": lambda L: (lambda a: (a[1:].copy_(a[:-1]), a)[1])(A(L, 5)),
    "expanded_destination": lambda L: L.zeros(1).expand(3).copy_(L.ones(3)),
    "python_number": lambda L: L.zeros(3).copy_(2.),
    "numpy_number": lambda L: L.zeros(3).copy_(np.float32(2.)),
    # (llgrad copied a list or an array in; PyTorch takes only a tensor or a number)
    "numpy_array": lambda L: L.zeros(3).copy_(np.array([1., 2., 3.])),
    "list": lambda L: L.zeros(3).copy_([1., 2., 3.]),
    "leaf_requiring_grad": lambda L: L.zeros(3, requires_grad=True).copy_(L.ones(3)),
    "version": lambda L: (lambda a: (a.copy_(L.ones(3)), a._version)[1])(L.zeros(3)),
}

OVERLAP = {
    "expanded_add_": lambda L: L.zeros(1).expand(3).add_(1),
    "expanded_fill_": lambda L: L.zeros(1).expand(3).fill_(2),
    "expanded_out": lambda L: L.add(L.ones(3), 1, out=L.zeros(1).expand(3)),
    "partial_overlap_add_": lambda L: (lambda a: (a[1:].add_(a[:-1]), a)[1])(A(L, 5)),
    "partial_overlap_out": lambda L: (lambda a: (L.add(a[:-1], 1, out=a[1:]), a)[1])(A(L, 5)),
    "transposed_self": lambda L: (lambda a: (a.add_(a.t()), a)[1])(A(L, 3, 3)),
    "index_put_from_self": lambda L: (lambda a: (a.index_put_((L.tensor([0, 1]),), a[1:3]), a)[1])(
        A(L, 4)),
    "gather_out_is_input": lambda L: (lambda a: (L.gather(a, 0, L.tensor([1, 0, 2, 3]), out=a),
                                                 a)[1])(A(L, 4)),
    "cat_out_is_input": lambda L: (lambda a: (L.cat([a[:2], a[:2]], out=a), a)[1])(A(L, 4)),
    "iadd_duplicate_indices": lambda L: (lambda a: (a.__setitem__([0, 0, 1], a[[0, 0, 1]] + 1.),
                                                    a)[1])(L.zeros(3)),
    "nan_into_int": lambda L: _write(L.zeros(3, dtype=L.int32), 0, float("nan")),
    "negative_indices_everywhere": lambda L: (
        A(L, 2, 3).index_fill(-1, L.tensor([-1]), 0.), L.zeros(3).index_copy(0, L.tensor([-1]),
                                                                            L.tensor([1.])),
        A(L, 3).gather(0, L.tensor([-1])), A(L, 3).take(L.tensor([-1])),
        A(L, 3).index_put((L.tensor([-1]),), L.tensor(9.))),
    "index_reduce_mean_no_self": lambda L: L.ones(3).index_reduce(
        0, L.tensor([0, 0]), L.tensor([2., 3.]), "mean", include_self=False),
    "nonzero_0d": lambda L: (L.tensor(5.).nonzero(), L.tensor(5.).nonzero(as_tuple=True)),
}

TABLES = {"CREATE": CREATE, "REPR": REPR, "PY": PY, "COPY": COPY, "OVERLAP": OVERLAP}


@pytest.mark.parametrize("table,name", [(t, n) for t, d in TABLES.items() for n in sorted(d)])
def test_matches_torch(table, name):
    fn = TABLES[table][name]
    assert _outcome(fn, llgrad) == _outcome(fn, torch)


@pytest.mark.parametrize("call", [
    lambda L: L.zeros(1).expand(3).index_put_((L.tensor([0]),), L.tensor(1.)),
    lambda L: L.zeros(1).expand(3).masked_fill_(L.tensor([True, False, True]), 1.),
    lambda L: L.zeros(1).expand(3).index_fill_(0, L.tensor([1]), 1.),
    # (PyTorch writes the addressed elements, so every alias of them)
    lambda L: L.zeros(2, 1).expand(2, 3).index_fill_(1, L.tensor([1]), L.tensor(2.)),
    lambda L: L.zeros(1, 3).expand(2, 3).index_fill_(-1, L.tensor([0, 2]), 3),
    lambda L: L.zeros(1, 3).expand(2, 3).index_fill_(0, L.tensor([1]), 4.),
    lambda L: L.zeros(1).expand(3).index_fill_(1, L.tensor([1]), 1.),
])
def test_expanded_index_put_and_masked_fill(call):
    assert _outcome(call, llgrad) == _outcome(call, torch)
