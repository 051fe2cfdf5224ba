"""Sweep 15 (C): tensor semantics checked the way PyTorch's own view / indexing / torch
suites check them, each call run on torch and on llgrad and compared: which ops return views
(_is_view, _base, shared storage, offsets, strides), shape-op edge cases and their errors,
writes through views and advanced indexing, and (at the end) the same under llgrad.compile."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _norm(r):
    """A comparable summary of a result: tensors by dtype, shape, strides, offset, values."""
    if isinstance(r, (torch.Tensor, llgrad.Tensor)):
        return ("T", str(r.dtype).split(".")[-1], tuple(r.shape), tuple(r.stride()),
                r.storage_offset(), r.tolist())
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


def _same(fn):
    want, got = _outcome(fn, torch), _outcome(fn, llgrad)
    assert got == want


def A(L, *shape, dtype=None):
    """arange reshaped: distinct values to see where each element went."""
    return L.arange(int(np.prod(shape)), dtype=dtype or L.float32).reshape(*shape)


def _shares(base, v):
    """PyTorch's is_view_of: v is a view whose _base is base, over the same memory."""
    return (v._is_view(), v._base is base,
            v.untyped_storage().data_ptr() == base.untyped_storage().data_ptr())


def _set(a, idx, v):
    a[idx] = v
    return a


VIEWS = {
    "conj_is_self": lambda L: (lambda t: t.conj() is t)(L.ones(3)),
    "tensor_split": lambda L: (lambda a: [_shares(a, x) for x in a.tensor_split(3, 1)])(A(L, 4, 7)),
    "hsplit_sees_write": lambda L: (lambda t: (_set(t, (1, 2, 1), 7.),
                                               L.hsplit(t, 2)[1][1, 0, 1].item()))(A(L, 2, 4, 2)),
    "dsplit_strides": lambda L: [x.stride() for x in L.dsplit(A(L, 2, 2, 4), 2)],
    "dsplit_1d": lambda L: L.dsplit(A(L, 4), 2),
    "vsplit_uneven": lambda L: L.vsplit(A(L, 5, 2), 2),
    "diagonal": lambda L: (lambda a: (_shares(a, a.diagonal()), a.diagonal(1).storage_offset(),
                                      a.diagonal(-1, 0, 1).stride()))(A(L, 3, 4)),
    "diagonal_write": lambda L: (lambda a: (a.diagonal().fill_(-1), a)[1])(A(L, 3, 3)),
    "diagonal_same_dims": lambda L: A(L, 2, 3).diagonal(0, 1, 1),
    "diagonal_1d": lambda L: A(L, 3).diagonal(),
    "select": lambda L: (lambda a: (_shares(a, a.select(1, -1)),
                                    a.select(1, -1).storage_offset()))(A(L, 3, 4)),
    "select_oob": lambda L: A(L, 3, 4).select(1, 4),
    "select_0d": lambda L: L.tensor(1.).select(0, 0),
    "unbind": lambda L: (lambda a: [_shares(a, x) for x in a.unbind(1)])(A(L, 3, 2)),
    "unbind_0d": lambda L: L.tensor(1.).unbind(),
    "expand": lambda L: (lambda a: (_shares(a, a.expand(3, 3)), a.expand(3, 3).stride()))(A(L, 3, 1)),
    "expand_minus1_new_dim": lambda L: A(L, 3, 1).expand(-1, 3, 1),
    "expand_fewer_sizes": lambda L: A(L, 3, 2).expand(2),
    "expand_twice": lambda L: A(L, 5).expand(1, 5).expand(2, 2, 5).stride(),
    "expand_noncontig": lambda L: A(L, 5, 2, 1, 3)[:, 0].expand(2, 5, 4, 3).stride(),
    "view_noncontig": lambda L: A(L, 3, 4).t().view(12),
    "view_split_dim_ok": lambda L: A(L, 3, 4, 2).transpose(0, 1).view(4, 3, 2, 1).stride(),
    "view_two_minus1": lambda L: A(L, 3, 4).view(-1, -1),
    "view_empty_infer": lambda L: A(L, 0, 3).view(-1, 0),
    "reshape_view_or_copy": lambda L: (lambda a: (a.reshape(12)._is_view(),
                                                  a.t().reshape(12)._is_view()))(A(L, 3, 4)),
    "reshape_empty": lambda L: (lambda e: (e.reshape(-1).shape, e.reshape([1, -1]).shape))(
        L.tensor([])),
    "reshape_0d_to_2": lambda L: L.tensor(1.).reshape(2),
    "reshape_empty_infer": lambda L: L.zeros(0, 6).reshape(0, -1),
    "flatten_identity": lambda L: (lambda a: (a.flatten() is a, a.flatten(0, 0) is a))(A(L, 12)),
    "flatten_0d": lambda L: L.tensor(3.).flatten().shape,
    "flatten_start_after_end": lambda L: A(L, 3, 4).flatten(1, 0),
    "flatten_groups": lambda L: (lambda t: (lambda v: (v.shape, v.stride(),
                                                       v.flatten(1, 3).stride()))(
        t.flatten(0, 1)))(L.ones(720).as_strided((2, 3, 2, 3, 5, 4), (6, 2, 15, 5, 1, 0))),
    "unflatten": lambda L: (lambda a: (a.unflatten(1, (2, -1)).shape,
                                       a.unflatten(1, (2, -1))._is_view()))(A(L, 3, 4)),
    "unflatten_bad": lambda L: A(L, 3, 4).unflatten(1, (3, -1)),
    "narrow_negative_start": lambda L: [A(L, 3, 3).narrow(d, s, n).tolist()
                                        for d, s, n in ((0, -2, 2), (-1, -1, 1), (-2, -1, 1))],
    "narrow_oob": lambda L: A(L, 3, 4).narrow(1, 3, 2),
    "narrow_tensor_start": lambda L: A(L, 3, 4).narrow(1, L.tensor(1), 2),
    "unfold": lambda L: (lambda a: (_shares(a, a.unfold(1, 2, 1)), a.unfold(1, 2, 2).stride()))(
        A(L, 3, 4)),
    "unfold_too_big": lambda L: A(L, 3, 4).unfold(1, 5, 1),
    "unfold_step0": lambda L: A(L, 3, 4).unfold(1, 2, 0),
    "as_strided": lambda L: (lambda a: _shares(a, a.as_strided((2, 2), (1, 2), 1)))(A(L, 6)),
    "as_strided_oob": lambda L: A(L, 6).as_strided((3, 3), (1, 3)),
    "as_strided_outside_view": lambda L: A(L, 6, 2)[3:].as_strided([3, 2], [2, 1], 0),
    "movedim": lambda L: (lambda a: (_shares(a, a.movedim(0, -1)),
                                     a.movedim((0, 1), (2, 0)).stride()))(A(L, 2, 3, 4)),
    "movedim_repeated": lambda L: A(L, 2, 3, 4).movedim((0, 0), (1, 2)),
    "split_views": lambda L: (lambda a: [_shares(a, x) for x in a.split(2)])(A(L, 5, 2)),
    "split_sizes_short": lambda L: A(L, 5, 2).split([2, 2]),
    "chunk_shapes": lambda L: [x.shape for x in A(L, 6).chunk(4)],
    "chunk_empty": lambda L: [x.shape for x in A(L, 0, 2).chunk(3)],
    "chunk_zero": lambda L: A(L, 6).chunk(0),
    "mT": lambda L: (lambda a: (_shares(a, a.mT), a.mT.stride()))(A(L, 2, 3, 4)),
    "mT_1d": lambda L: A(L, 3).mT,
    "H_3d": lambda L: A(L, 2, 3, 4).H,
    "t_3d": lambda L: A(L, 2, 3, 4).t(),
    "T_H_mT_mH_write": lambda L: [(lambda t: (_set(getattr(t, op), (0, 1), -1.), t[1, 0].item()))(
        A(L, 2, 2))[1] for op in ("T", "H", "mT", "mH")],
    "permute_repeated": lambda L: A(L, 2, 3).permute(0, 0),
    "squeeze_dims": lambda L: (lambda a: (_shares(a, a.squeeze()), a.squeeze((0, 2)).shape))(
        A(L, 1, 3, 1)),
    "unsqueeze_oob": lambda L: A(L, 2, 3).unsqueeze(3),
    "inplace_view_methods": lambda L: [_shares(t, getattr(t.view_as(t), m)(*a)) for t in [
        A(L, 2, 1, 2)] for m, a in (("swapdims_", (0, 2)), ("transpose_", (0, 1)),
                                    ("squeeze_", ()), ("unsqueeze_", (1,)),
                                    ("as_strided_", ((4,), (1,))))],
    "detach_not_view": lambda L: (lambda a: (a.detach()._is_view(), a.detach()._base))(A(L, 2)),
    "contiguous_self": lambda L: (lambda a: (a.contiguous() is a,
                                             a.t().contiguous()._is_view()))(A(L, 2, 3)),
    "basic_index_views": lambda L: (lambda a: [_shares(a, x) for x in (
        a[0], a[...], a[:, None], a[1:, ::2], a[None])])(A(L, 3, 4)),
    "advanced_index_copies": lambda L: (lambda a: [x._is_view() for x in (
        a[[0]], a[a > 2], a[L.tensor([1])])])(A(L, 3, 4)),
    "imag_of_real": lambda L: A(L, 3).imag,
    "view_dtype": lambda L: (lambda a: (a.view(L.int16).stride(), a.view(L.int64).shape))(
        A(L, 2, 4, dtype=L.int32)),
    "view_dtype_0d": lambda L: L.tensor(1, dtype=L.int32).view(L.int16),
    "view_dtype_stride": lambda L: A(L, 2, 4, dtype=L.int32).t().view(L.int16),
    "view_dtype_offset": lambda L: A(L, 2, 4, dtype=L.int32)[:, 1:3].view(L.int64),
    "ravel": lambda L: (lambda a: (a.ravel()._base is a, a.t().ravel()._base is a,
                                   L.tensor(3).ravel().shape))(A(L, 3, 4)),
    "view_copy_not_view": lambda L: L.view_copy(A(L, 4), (2, 2))._is_view(),
    "split_copy_out": lambda L: (lambda o1, o2: (L.split_copy(A(L, 4), 2, out=(o1, o2)), o1, o2)[1:])(
        L.empty(2), L.empty(2)),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_and_shape_ops(name):
    _same(VIEWS[name])


ERRORS_FIXED = {
    # (llgrad: an IndexError from tuple indexing)
    "select_0d_message": lambda L: L.tensor(1.).select(0, 0),
    # (llgrad took a float start as TypeError and a 1-element start as an int)
    "narrow_float_start": lambda L: A(L, 3, 3).narrow(0, L.tensor(0.), 1),
    "narrow_1d_start": lambda L: A(L, 3, 3).narrow(0, L.tensor([0]), 1),
    "narrow_bool_start": lambda L: A(L, 3, 3).narrow(0, L.tensor(True), 1),
    # (llgrad split [8, -1] as a 7-row and an empty piece)
    "split_negative_size": lambda L: A(L, 7, 4).split([8, -1]),
    "split_negative_size_bad_sum": lambda L: A(L, 7).split([-1, 9]),
}


@pytest.mark.parametrize("name", sorted(ERRORS_FIXED))
def test_errors_with_pytorch_words(name):
    msgs = []
    for L in (torch, llgrad):
        with pytest.raises(Exception) as info:
            ERRORS_FIXED[name](L)
        msgs.append((type(info.value).__name__, str(info.value)))
    assert msgs[1] == msgs[0]


def test_narrow_small_int_tensor_start():
    assert A(llgrad, 3, 3).narrow(0, llgrad.tensor(1, dtype=llgrad.int8), 1).tolist() == \
        A(torch, 3, 3).narrow(0, torch.tensor(1, dtype=torch.int8), 1).tolist()
