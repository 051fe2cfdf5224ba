"""Views share storage and cost no copy; advanced indexing and reshape-that-must-copy do
copy. Expected values are derived by hand (PyTorch's documented semantics), not by torch."""
import numpy as np
import pytest

import llgrad as torch


def grid():
    """[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]] as float32 in its own storage."""
    return torch.tensor([[0., 1., 2., 3.], [4., 5., 6., 7.], [8., 9., 10., 11.]])


def assert_view(v, base, shape, stride, offset):
    """v is a zero-copy view of base: same storage, given geometry, _base points back."""
    assert tuple(v.shape) == shape
    assert v.stride() == stride
    assert v.storage_offset() == offset
    assert v.data_ptr() == base.data_ptr() + offset * base.element_size()
    assert v.untyped_storage() is base.untyped_storage()
    assert v._base is base


# ---- reshaping views ------------------------------------------------------------------------

def test_view_shares_storage_and_writes_go_both_ways():
    a = grid()
    v = a.view(4, 3)
    assert_view(v, a, (4, 3), (3, 1), 0)
    assert v.is_contiguous()
    v[1:2].fill_(-1.)                       # elements 3, 4, 5 of the storage
    assert a.tolist()[0] == [0., 1., 2., -1.]
    assert a.tolist()[1][:2] == [-1., -1.]
    a[2:3].mul_(0.)
    assert v.tolist()[3] == [0., 0., 0.]
    assert v.view(-1).tolist() == [0., 1., 2., -1., -1., -1., 6., 7., 0., 0., 0., 0.]


def test_view_of_view_keeps_the_original_base():
    a = grid()
    v = a.view(12).view(2, 6)
    assert_view(v, a, (2, 6), (6, 1), 0)


def test_view_incompatible_strides_raises():
    with pytest.raises(RuntimeError, match="view size is not compatible with input tensor's "
                                           "size and stride"):
        grid().t().view(12)


def test_reshape_is_a_view_when_strides_allow():
    a = grid()
    r = a.reshape(2, 6)
    assert_view(r, a, (2, 6), (6, 1), 0)
    r[1:2].add_(100.)
    assert a.tolist()[2] == [108., 109., 110., 111.]


def test_reshape_copies_when_strides_do_not_allow():
    a = grid()
    r = a.t().reshape(12)
    assert r.tolist() == [0., 4., 8., 1., 5., 9., 2., 6., 10., 3., 7., 11.]
    assert r.is_contiguous()
    assert r.untyped_storage() is not a.untyped_storage()
    assert not np.shares_memory(r._data, a._data)
    r.zero_()
    assert a.tolist()[0] == [0., 1., 2., 3.]         # the copy is independent
    assert a._version == 0


def test_reshape_copy_has_no_base():
    assert grid().t().reshape(12)._base is None


def test_flatten_and_unflatten_are_views():
    a = grid()
    f = a.flatten()
    assert_view(f, a, (12,), (1,), 0)
    u = a.unflatten(1, (2, 2))
    assert_view(u, a, (3, 2, 2), (4, 2, 1), 0)
    u[2:3, 1:2].fill_(7.)                      # row 2, columns 2..3
    assert a.tolist()[2] == [8., 9., 7., 7.]
    assert f.tolist()[-4:] == [8., 9., 7., 7.]


def test_flatten_of_non_contiguous_copies():
    a = grid()
    f = a.t().flatten()
    assert f.untyped_storage() is not a.untyped_storage()
    assert f.tolist()[:3] == [0., 4., 8.]


def test_squeeze_unsqueeze_are_views():
    a = grid()
    u = a.unsqueeze(1)
    assert_view(u, a, (3, 1, 4), (4, 4, 1), 0)
    s = u.squeeze(1)
    assert_view(s, a, (3, 4), (4, 1), 0)
    s2 = a.view(1, 3, 1, 4).squeeze()
    assert_view(s2, a, (3, 4), (4, 1), 0)
    u.select(1, 0)[0:1].fill_(-5.)           # row 0
    assert a.tolist()[0] == [-5.] * 4


# ---- permuting views ---------------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda a: a.t(), lambda a: a.transpose(0, 1),
                                  lambda a: a.transpose(-1, -2), lambda a: a.mT,
                                  lambda a: a.permute(1, 0), lambda a: a.T],
                         ids=["t", "transpose", "transpose_neg", "mT", "permute", "T"])
def test_transposes_are_views(make):
    a = grid()
    v = make(a)
    assert_view(v, a, (4, 3), (1, 4), 0)
    assert not v.is_contiguous()
    assert v.tolist()[1] == [1., 5., 9.]
    v[3:4].fill_(0.)                          # column 3 of a
    assert [row[3] for row in a.tolist()] == [0., 0., 0.]


def test_permute_3d_strides():
    a = torch.zeros(2, 3, 4)
    p = a.permute(2, 0, 1)
    assert_view(p, a, (4, 2, 3), (1, 12, 4), 0)
    assert a.mT.stride() == (12, 1, 4)


# ---- broadcasting views ----------------------------------------------------------------------

def test_expand_uses_stride_zero():
    a = grid()
    row = a[1:2]                               # [[4, 5, 6, 7]], offset 4
    e = row.expand(5, 4)
    assert_view(e, a, (5, 4), (0, 1), 4)
    assert e.tolist()[4] == [4., 5., 6., 7.]
    col = a[:, :1]
    e2 = col.expand_as(a)
    assert_view(e2, a, (3, 4), (4, 0), 0)
    assert e2.tolist()[2] == [8., 8., 8., 8.]
    e3 = a[2].broadcast_to((2, 4))
    assert_view(e3, a, (2, 4), (0, 1), 8)
    e4 = row.expand(2, 3, -1)                  # a new leading dim is stride 0 too
    assert_view(e4, a, (2, 3, 4), (0, 0, 1), 4)
    a[1:2].fill_(1.)
    assert e.tolist() == [[1.] * 4] * 5       # the expansion sees the write


def test_expand_errors():
    with pytest.raises(RuntimeError, match=r"The expanded size of the tensor \(3\) must match "
                                           r"the existing size \(4\) at non-singleton dimension 1"):
        grid().expand(3, 3)
    with pytest.raises(RuntimeError, match="the number of sizes provided"):
        grid().expand(4)


def test_expand_minus_one_in_new_leading_dim_raises():
    with pytest.raises(RuntimeError, match=r"The expanded size of the tensor \(-1\) isn't "
                                           r"allowed in a leading, non-existing dimension 0"):
        grid()[1:2].expand(-1, 1, 4)


def test_inplace_on_expanded_view_raises():
    e = torch.zeros(3).expand(2, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor "
                                           "refers to a single memory location"):
        e.add_(1.)


# ---- slicing views ---------------------------------------------------------------------------

def test_narrow_and_select():
    a = grid()
    n = a.narrow(1, 1, 2)
    assert_view(n, a, (3, 2), (4, 1), 1)
    assert n.tolist() == [[1., 2.], [5., 6.], [9., 10.]]
    s = a.select(1, 2)
    assert_view(s, a, (3,), (4,), 2)
    assert s.tolist() == [2., 6., 10.]
    r = a.select(0, -1)
    assert_view(r, a, (4,), (1,), 8)
    s.mul_(10.)
    assert [row[2] for row in a.tolist()] == [20., 60., 100.]
    assert n.tolist()[1] == [5., 60.]


def test_narrow_and_select_errors():
    with pytest.raises(RuntimeError, match=r"start \(3\) \+ length \(2\) exceeds dimension "
                                           r"size \(4\)"):
        grid().narrow(1, 3, 2)
    with pytest.raises(IndexError, match=r"select\(\): index 3 out of range for tensor of size "
                                         r"\[3, 4\] at dimension 0"):    # (PyTorch's words)
        grid().select(0, 3)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        grid()[3]


def test_unbind_gives_views():
    a = grid()
    cols = a.unbind(1)
    assert len(cols) == 4
    for j, c in enumerate(cols):
        assert_view(c, a, (3,), (4,), j)
    rows = a.unbind(0)
    for i, r in enumerate(rows):
        assert_view(r, a, (4,), (1,), 4 * i)
    a[0:1].fill_(9.)
    assert cols[3].tolist() == [9., 7., 11.]


def test_split_gives_views():
    a = grid()
    parts = a.split(3, 1)                      # sizes 3 and 1
    assert_view(parts[0], a, (3, 3), (4, 1), 0)
    assert_view(parts[1], a, (3, 1), (4, 1), 3)
    p = a.split([1, 2], 0)
    assert_view(p[0], a, (1, 4), (4, 1), 0)
    assert_view(p[1], a, (2, 4), (4, 1), 4)


def test_chunk_gives_views():
    a = grid()
    c = a.chunk(2, 1)
    assert_view(c[0], a, (3, 2), (4, 1), 0)
    assert_view(c[1], a, (3, 2), (4, 1), 2)
    c3 = a.chunk(2, 0)                         # ceil(3/2) = 2 rows, then 1
    assert [tuple(t.shape) for t in c3] == [(2, 4), (1, 4)]
    assert c3[1].storage_offset() == 8


def test_diagonal_is_a_view():
    a = grid()
    d = a.diagonal()
    assert_view(d, a, (3,), (5,), 0)
    assert d.tolist() == [0., 5., 10.]
    d1 = a.diagonal(1)
    assert_view(d1, a, (3,), (5,), 1)
    assert d1.tolist() == [1., 6., 11.]
    dm = a.diagonal(-1)
    assert_view(dm, a, (2,), (5,), 4)
    assert dm.tolist() == [4., 9.]
    d.fill_(-1.)
    assert a.tolist() == [[-1., 1., 2., 3.], [4., -1., 6., 7.], [8., 9., -1., 11.]]


def test_as_strided_is_a_view():
    a = grid()
    s = a.as_strided((2, 2), (1, 4), 1)        # [[1, 5], [2, 6]]
    assert_view(s, a, (2, 2), (1, 4), 1)
    assert s.tolist() == [[1., 5.], [2., 6.]]
    s.add_(100.)
    assert a.tolist()[0] == [0., 101., 102., 3.]
    assert a.tolist()[1] == [4., 105., 106., 7.]
    # storage offsets are absolute: as_strided of a view still addresses the storage
    v = a[1:]
    w = v.as_strided((2,), (1,), 0)
    assert w.tolist() == [0., 101.]


def test_as_strided_out_of_bounds_raises():
    with pytest.raises(RuntimeError, match=r"setStorage: sizes \[3, 3\], strides \[1, 1\], "
                                           r"storage offset 0, and itemsize 4 requiring a "
                                           r"storage size of 20 are out of bounds for storage "
                                           r"of size 16"):
        torch.zeros(2, 2).as_strided((3, 3), (1, 1), 0)


# ---- basic indexing ------------------------------------------------------------------------------

def test_int_index_is_a_view():
    a = grid()
    r = a[1]
    assert_view(r, a, (4,), (1,), 4)
    r2 = a[-1]
    assert_view(r2, a, (4,), (1,), 8)
    c = a[..., 1]
    assert_view(c, a, (3,), (4,), 1)
    assert c.tolist() == [1., 5., 9.]
    r[1:3].fill_(0.)
    assert a.tolist()[1] == [4., 0., 0., 7.]


def test_slices_with_steps_are_views():
    a = grid()
    s = a[:, ::2]
    assert_view(s, a, (3, 2), (4, 2), 0)
    assert s.tolist() == [[0., 2.], [4., 6.], [8., 10.]]
    s2 = a[-1, 1::2]
    assert_view(s2, a, (2,), (2,), 9)
    assert s2.tolist() == [9., 11.]
    s3 = a[1:, 1:3]
    assert_view(s3, a, (2, 2), (4, 1), 5)
    s4 = a[::2, ::3]
    assert_view(s4, a, (2, 2), (8, 3), 0)
    assert s4.tolist() == [[0., 3.], [8., 11.]]
    s.mul_(-1.)
    assert a.tolist()[2] == [-8., 9., -10., 11.]


def test_none_and_ellipsis_are_views():
    a = grid()
    n = a[None]
    assert tuple(n.shape) == (1, 3, 4)
    assert n.data_ptr() == a.data_ptr() and n._base is a
    m = a[None, 1:, ...]
    assert_view(m, a, (1, 2, 4), (12, 4, 1), 4)    # unsqueeze(0) gives stride 3 * 4
    e = a[..., None]
    assert tuple(e.shape) == (3, 4, 1) and e.data_ptr() == a.data_ptr()
    whole = a[...]
    assert_view(whole, a, (3, 4), (4, 1), 0)
    assert whole is not a
    full = a[:]
    assert full.data_ptr() == a.data_ptr()
    m[0:1, 1:2].fill_(3.)                        # row 2 of a
    assert a.tolist()[2] == [3., 3., 3., 3.]


def test_setitem_with_basic_index_writes_in_place():
    a = grid()
    v = a.view(12)
    ptr = a.data_ptr()
    a[1:2, ::2] = 0.
    a[:, 3:] = torch.tensor([[-1.], [-2.], [-3.]])
    assert a.data_ptr() == ptr
    assert a.tolist() == [[0., 1., 2., -1.], [0., 5., 0., -2.], [8., 9., 10., -3.]]
    assert v.tolist()[4:8] == [0., 5., 0., -2.]
    assert a._version == 2 and v._version == 2


def test_index_to_0d_is_a_view():
    a = grid()
    e = a[1, 2]
    assert_view(e, a, (), (), 6)
    assert a.select(0, 2).select(0, 3).storage_offset() == 11
    e.fill_(-1.)
    assert a.tolist()[1][2] == -1.


def test_setitem_scalar_index_writes_through():
    a = torch.zeros(3)
    a[1] = 5.
    assert a.tolist() == [0., 5., 0.]


# ---- advanced indexing copies --------------------------------------------------------------------

def test_int_tensor_index_copies():
    a = grid()
    g = a[torch.tensor([0, 2])]
    assert g.tolist() == [[0., 1., 2., 3.], [8., 9., 10., 11.]]
    assert g._base is None
    assert not np.shares_memory(g._data, a._data)
    g.fill_(-1.)
    assert a.tolist()[0] == [0., 1., 2., 3.]
    pts = a[torch.tensor([0, 1]), torch.tensor([2, 0])]
    assert pts.tolist() == [2., 4.]
    lst = a[[2, 2]]
    assert lst.tolist()[1] == [8., 9., 10., 11.] and lst._base is None


def test_bool_mask_index_copies():
    a = grid()
    m = a[a > 8.]
    assert m.tolist() == [9., 10., 11.]
    assert m._base is None and not np.shares_memory(m._data, a._data)
    m.zero_()
    assert a.tolist()[2] == [8., 9., 10., 11.]
    rows = a[torch.tensor([True, False, True])]
    assert rows.tolist() == [[0., 1., 2., 3.], [8., 9., 10., 11.]]


def test_advanced_setitem_writes_in_place():
    a = grid()
    ptr = a.data_ptr()
    a[a > 8.] = 0.
    a[torch.tensor([0]), torch.tensor([1])] = 50.
    assert a.data_ptr() == ptr
    assert a.tolist() == [[0., 50., 2., 3.], [4., 5., 6., 7.], [8., 0., 0., 0.]]
    assert a._version == 2


# ---- NumPy interop and contiguity ----------------------------------------------------------------

def test_from_numpy_shares_memory():
    n = np.arange(6.).reshape(2, 3)
    t = torch.from_numpy(n)
    assert t.dtype is torch.float64
    assert t.data_ptr() == n.__array_interface__["data"][0]
    n[0, 0] = 100.
    assert t.tolist()[0][0] == 100.
    t[1:].fill_(7.)
    assert n[1].tolist() == [7., 7., 7.]


def test_numpy_is_a_view():
    t = torch.zeros(2, 3)
    n = t.numpy()
    assert np.shares_memory(n, t._data)
    n[0, 1] = 5.
    assert t.tolist()[0] == [0., 5., 0.]
    t[1:].fill_(2.)
    assert n[1].tolist() == [2., 2., 2.]
    tv = t.t().numpy()                          # the view's strides carry over
    assert tv.strides == (4, 12)


def test_numpy_of_tensor_requiring_grad_raises():
    x = torch.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires grad\. "
                                           r"Use tensor.detach\(\).numpy\(\) instead\."):
        x.numpy()
    assert np.shares_memory(x.detach().numpy(), x._data)


def test_contiguous_and_is_contiguous():
    a = grid()
    assert a.is_contiguous()
    assert a.contiguous() is a
    t = a.t()
    assert not t.is_contiguous()
    c = t.contiguous()
    assert c.is_contiguous() and c.stride() == (3, 1)
    assert c.data_ptr() != a.data_ptr() and c._base is None
    assert c.tolist() == t.tolist()
    c.fill_(0.)
    assert a.tolist()[0][1] == 1.
    assert not a[:, ::2].is_contiguous()
    assert a[1:].is_contiguous()                 # offset does not matter
    assert a[:, :1].expand(3, 4).is_contiguous() is False
    assert torch.zeros(3, 1).expand(3, 1).is_contiguous()   # size-1 dims' strides ignored


def test_views_share_the_version_counter():
    a = grid()
    v = a[1:]
    t = a.t()
    assert (a._version, v._version, t._version) == (0, 0, 0)
    v.add_(1.)
    assert (a._version, v._version, t._version) == (1, 1, 1)
    a.mul_(2.)
    assert v._version == 2
    d = a.detach()                               # detach also shares it
    d.zero_()
    assert a._version == 3 and a.tolist()[0] == [0.] * 4


def test_unbind_output_inplace_raises_with_grad():
    a = torch.ones(2, 2, requires_grad=True)
    u = (a * 1).unbind(0)
    with pytest.raises(RuntimeError, match="Output 0 of Unbind is a view and is being "
                                           "modified inplace. This view is the output of a "
                                           "function that returns multiple views."):
        u[0].mul_(2.)
