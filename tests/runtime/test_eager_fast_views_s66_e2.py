"""The eager hot paths made leaner at stop 66 (helper e2): views made without Tensor._from_array
(runtime/tensor_view.py), x[a:b] / x[:, i] / unsqueeze / select straight to the dispatcher,
the dispatcher's one loop over the operands for NumPy scalars and special dtypes, and the
index range check on the ufuncs. Each is held to PyTorch: values, grad_fn names, the base
and version counter a view shares, the creation mode of views made under no_grad /
inference_mode, and the errors."""
import numpy as np
import pytest

import llgrad
from llgrad.ir.index_bounds import check_index_range

torch = pytest.importorskip("torch")


def _both(fn, *arrays, grad=True):
    outs = []
    for lib in (llgrad, torch):
        ts = [lib.tensor(a, requires_grad=grad) for a in arrays]
        outs.append((fn(lib, *ts), ts))
    return outs


@pytest.mark.parametrize("view", [
    lambda x: x[2:5], lambda x: x[1:6:2], lambda x: x[-3:], lambda x: x[:, 1],
    lambda x: x[1], lambda x: x[:, None], lambda x: x[None, 1:3, 2],
    lambda x: x.unsqueeze(-1), lambda x: x.unsqueeze(0), lambda x: x.select(1, -1),
    lambda x: x[:, 1:3][1:][0],
])
def test_views_match_torch_values_names_and_gradients(view):
    a = np.arange(24, dtype=np.float32).reshape(6, 4) / 7
    w = np.random.default_rng(0).standard_normal(view(torch.tensor(a)).shape).astype(np.float32)
    (ly, (lx,)), (ty, (tx,)) = _both(lambda lib, x: view(x), a)
    assert ly.shape == tuple(ty.shape) and ly.stride() == ty.stride()
    np.testing.assert_array_equal(ly.detach().numpy(), ty.detach().numpy())
    assert type(ly.grad_fn).__name__ == type(ty.grad_fn).__name__
    assert ly._base is lx and ty._base is tx
    (ly * llgrad.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(lx.grad.numpy(), tx.grad.numpy())


def test_a_view_shares_its_base_and_version_counter():
    x = llgrad.zeros(4, 3)
    v = x[1:3][:, 2]
    assert v._base is x and v._storage is x._storage
    v.add_(1)                       # (a write through the view is the base's)
    assert x._version == v._version == 1 and x[1, 2].item() == 1.0
    r = x.clone().requires_grad_()
    y = r.exp()
    y[0].mul_(2)                    # y's in-place write (through a view) after exp saved it
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_views_made_under_no_grad_or_inference_mode_keep_their_creation_mode(mode):
    seen = []
    for lib in (llgrad, torch):
        x = lib.ones(5, requires_grad=True).clone()
        with getattr(lib, mode)():
            v = x[1:3].unsqueeze(0)
            w = x.select(0, 1)
        refused = []
        for t in (v, w):
            try:
                t.mul_(2)
            except RuntimeError:
                refused.append(True)
        seen.append((v.requires_grad, v.grad_fn is None, v.is_leaf, w.requires_grad, refused))
    assert seen[0] == seen[1] and seen[0][-1] == [True, True]


def test_a_view_of_a_multi_output_view_is_refused_in_place_as_in_torch():
    for lib in (llgrad, torch):
        x = lib.ones(6, requires_grad=True).clone()
        a, _ = x.split(3)
        with pytest.raises(RuntimeError):
            a[1:].mul_(2)


def test_views_of_inference_tensors_are_inference_tensors():
    for lib in (llgrad, torch):
        with lib.inference_mode():
            x = lib.ones(4)
        assert x[1:3].is_inference() and x.unsqueeze(0).is_inference()


def test_special_operands_and_dtypes_take_their_paths():
    # a NumPy scalar operand (read as a Python number), a 0-d tensor, complex and bfloat16
    # tensors (their own implementations), a bool tensor: torch's values and dtypes
    cases = [
        (lambda lib, x: x * np.float64(2.5), np.arange(4, dtype=np.float32)),
        (lambda lib, x: x + np.int64(3), np.arange(4, dtype=np.int64)),
        (lambda lib, x: (x.to(lib.bfloat16) * 3).float(), np.arange(4, dtype=np.float32) / 3),
        (lambda lib, x: (x.to(lib.complex64) * (1 + 2j)).imag, np.arange(4, dtype=np.float32)),
        (lambda lib, x: x[1:3].to(lib.bfloat16).unsqueeze(1).float(),
         np.arange(4, dtype=np.float32) / 3),
    ]
    for fn, a in cases:
        lr = fn(llgrad, llgrad.tensor(a))
        tr = fn(torch, torch.tensor(a))
        assert str(lr.dtype).split(".")[-1] == str(tr.dtype).split(".")[-1]
        np.testing.assert_array_equal(lr.numpy(), tr.numpy())
    for lib in (llgrad, torch):                  # (past int64 and uint64: torch's overflow)
        with pytest.raises(OverflowError, match="too big"):
            lib.tensor([1, 2]) + (1 << 70)


def test_index_range_check_raises_torch_errors():
    w = llgrad.randn(5, 3)
    for bad in ([0, 5], [-1, 2]):
        with pytest.raises(IndexError):
            llgrad.nn.functional.embedding(llgrad.tensor(bad), w)
        with pytest.raises((IndexError, RuntimeError)):
            torch.nn.functional.embedding(torch.tensor(bad), torch.randn(5, 3))
        with pytest.raises(IndexError, match="out of bounds for dimension with size 5"):
            check_index_range(np.array(bad), 5)     # (the op impls' own check)
    for ok in (np.array([[4, 0], [2, 2]]), np.array(3), np.zeros(0, np.int64)):
        check_index_range(ok, 5)
    idx = np.array([4, 0, 2, 2])
    np.testing.assert_array_equal(
        llgrad.nn.functional.embedding(llgrad.tensor(idx), w).numpy(), w.numpy()[idx])
