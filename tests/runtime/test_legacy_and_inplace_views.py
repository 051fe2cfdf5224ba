"""Eager idioms of the classic PyTorch tutorials (tests/programs) that llgrad lacked: a
`range` as an index, the legacy constructors (torch.Tensor(data), torch.LongTensor(...)),
and the in-place view ops (x.unsqueeze_(d), squeeze_, t_, transpose_)."""
import numpy as np
import pytest

import llgrad


def _torch():
    return pytest.importorskip("torch")


# ---- a range as an index ---------------------------------------------------------------------
def test_range_index_reads_and_writes_as_a_list():
    x = llgrad.arange(12.0).view(3, 4).requires_grad_()
    y = x[range(3), [0, 1, 3]]                  # the tutorial's nll: input[range(n), target]
    np.testing.assert_array_equal(y.detach().numpy(), [0, 5, 11])
    y.sum().backward()
    assert x.grad.sum().item() == 3 and x.grad[2, 3].item() == 1
    assert x.detach()[range(0)].shape == (0, 4)                 # an empty range: int64
    assert x.detach()[:, range(1, 3)].shape == (3, 2)
    z = llgrad.zeros(2, 3)
    z[range(2), [0, 2]] = 7.0
    np.testing.assert_array_equal(z.numpy(), [[7, 0, 0], [0, 0, 7]])
    assert llgrad.zeros(2, 3)[[]].shape == (0, 3)


def test_range_index_matches_torch():
    torch = _torch()
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for lib in (torch, llgrad):
        x = lib.tensor(a)
        assert x[range(2), [1, 2]].tolist() == [1.0, 6.0]
        assert tuple(x[range(0)].shape) == (0, 4) and tuple(x[[]].shape) == (0, 4)


# ---- legacy constructors -----------------------------------------------------------------------
def test_tensor_constructor_of_sizes_data_and_tensors():
    assert llgrad.Tensor().shape == (0,) and llgrad.Tensor().dtype is llgrad.float32
    assert llgrad.Tensor(2, 3).shape == (2, 3)
    assert llgrad.Tensor(llgrad.Size([4])).shape == (4,)
    t = llgrad.Tensor([1, 2])
    assert t.dtype is llgrad.float32 and t.tolist() == [1.0, 2.0]
    assert llgrad.Tensor((2, 3)).tolist() == [2.0, 3.0]         # a tuple is data
    base = llgrad.arange(3.0, requires_grad=True) * 2
    alias = llgrad.Tensor(base)                                 # an alias, with history
    assert alias.data_ptr() == base.data_ptr() and type(alias.grad_fn).__name__ == \
        "AliasBackward0"
    with pytest.raises(TypeError, match="data must be a sequence"):
        llgrad.Tensor(2.5)
    with pytest.raises(TypeError, match="tuple of ints"):
        llgrad.Tensor(2, 3.0)
    assert isinstance(llgrad.nn.Parameter(llgrad.ones(2)), llgrad.Tensor)


def test_typed_tensor_classes():
    assert llgrad.LongTensor([1.7, -1.7]).tolist() == [1, -1]    # truncated, as in torch
    assert llgrad.LongTensor(2, 3).dtype is llgrad.int64
    assert llgrad.BoolTensor([1, 0]).tolist() == [True, False]
    assert [c([1]).dtype for c in (llgrad.FloatTensor, llgrad.DoubleTensor, llgrad.IntTensor,
                                   llgrad.ByteTensor, llgrad.HalfTensor)] == \
        [llgrad.float32, llgrad.float64, llgrad.int32, llgrad.uint8, llgrad.float16]
    assert isinstance(llgrad.zeros(2, dtype=llgrad.long), llgrad.LongTensor)
    assert not isinstance(llgrad.zeros(2), llgrad.LongTensor)
    assert llgrad.zeros(2).type(llgrad.LongTensor).dtype is llgrad.int64
    assert llgrad.zeros(2).type() == "llgrad.FloatTensor"
    with pytest.raises(TypeError, match="dtype llgrad.int64"):
        llgrad.LongTensor(llgrad.zeros(2))
    assert repr(llgrad.LongTensor) == "<class 'llgrad.LongTensor'>"


# ---- in-place view ops ---------------------------------------------------------------------------
VIEW_OPS = [("unsqueeze_", (0,), None), ("squeeze_", (), None), ("squeeze_", (0,), None),
            ("t_", (), (2, 1)), ("transpose_", (0, 1), None), ("swapdims_", (0, 1), None),
            ("swapaxes_", (0, 1), None)]


@pytest.mark.parametrize("name,args,shape", VIEW_OPS)
def test_inplace_view_ops_match_torch(name, args, shape):
    torch = _torch()
    results = []
    for lib in (torch, llgrad):
        b = lib.tensor(np.arange(2, dtype=np.float32).reshape(1, 2, 1), requires_grad=True)
        x = b * 1 if shape is None else (b * 1).view(*shape)
        v0 = x._version
        out = getattr(x, name)(*args)
        w = lib.tensor(np.arange(1, 3, dtype=np.float32).reshape(tuple(x.shape)))
        (x * w).sum().backward()
        results.append((out is x, type(x.grad_fn).__name__, tuple(x.shape), x.stride(),
                        x._version - v0, x.is_leaf, b.grad.flatten().tolist()))
    assert results[1] == results[0]


def test_inplace_view_op_rules():
    a = llgrad.zeros(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        a.unsqueeze_(0)
    with llgrad.no_grad():
        a.unsqueeze_(0)
    assert a.shape == (1, 2, 3) and a.is_leaf and a._version == 1
    b = llgrad.ones(3, requires_grad=True)
    x = b * 2
    y = x * x                     # saves x
    x.unsqueeze_(0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    base = llgrad.arange(6.0).view(2, 3)
    row = base[0]
    row.unsqueeze_(0)
    assert row.shape == (1, 3) and base.shape == (2, 3)
    row.mul_(10)                  # still a view of base
    assert base[0].tolist() == [0.0, 10.0, 20.0]
