"""The eager paths a greedy matcher's loop takes (DETR's, bench/untuned_models_twentyfirst.py):
k = C.argmin(); r, c = k // n, k % n; C[r, :] = inf; C[:, c] = inf. A 0-d integer tensor
index takes getitem's tuple fast path, a number filled into a strided view (a column)
inplace_fast's write, inf skips fill_value_fits' range check, a positive 0-d integer divisor
div_int's errstate. Each gives torch's values and version counters, and the general path's
bits; what a cell shared by two elements or grad mode needs still goes the general way."""
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime import inplace, inplace_fast

torch = pytest.importorskip("torch")


def _matcher(lib, cost):
    C = lib.tensor(cost)
    rows, cols, versions = [], [], []
    with lib.no_grad():
        for _ in range(min(cost.shape)):
            k = C.argmin()
            r, c = k // C.shape[1], k % C.shape[1]
            rows.append(r)
            cols.append(c)
            C[r, :] = float("inf")
            C[:, c] = float("-inf") if len(rows) % 2 else float("inf")
            versions.append(C._version)
            C[:, c] = float("inf")
    return lib.stack(rows), lib.stack(cols), C, versions


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_greedy_matcher_loop_as_torch_and_the_general_path(dtype, monkeypatch):
    cost = np.random.default_rng(0).random((7, 4)).astype(dtype)
    want = _matcher(torch, cost)
    got = _matcher(llgrad, cost)
    monkeypatch.setattr(inplace, "fast_write", lambda *a: False)
    general = _matcher(llgrad, cost)
    for w, g, s in zip(want[:3], got[:3], general[:3]):
        assert g.dtype == s.dtype and str(g.dtype)[7:] == str(w.dtype)[6:]
        np.testing.assert_array_equal(g.numpy(), w.numpy())
        np.testing.assert_array_equal(g.numpy(), s.numpy())
    assert got[3] == want[3] == general[3]


def test_a_column_fill_takes_the_fast_path_an_overlapping_view_does_not(monkeypatch):
    hits = []
    real = inplace_fast.write

    def counted(op, t, inputs, attrs):
        done = real(op, t, inputs, attrs)
        hits.append((op.name, done))
        return done
    monkeypatch.setattr(inplace, "fast_write", counted)
    x = llgrad.zeros(4, 6)
    x[:, 2] = 5.0                               # a column: a cell per element
    x[1:3, ::2].fill_(float("nan"))
    x.t().zero_()
    assert hits == [("fill", True), ("fill", True), ("zero", True)]
    hits.clear()
    y = llgrad.arange(10.0)
    w = y.as_strided((3, 4), (2, 1))            # elements sharing cells: PyTorch's loop
    w.fill_(2.0)
    w.add_(1.0)
    assert [d for _, d in hits] == [False, False]
    ty = torch.arange(10.0)
    tw = ty.as_strided((3, 4), (2, 1))
    tw.fill_(2.0)
    tw.add_(1.0)
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
    np.testing.assert_array_equal(w.numpy(), tw.numpy())
    hits.clear()
    z = llgrad.zeros(2, 3, requires_grad=True).clone()     # grad mode, history: recorded
    z[:, 1] = 1.0
    assert [d for _, d in hits] == [False]
    assert type(z.grad_fn).__name__ == "CopySlices"


def test_zero_d_index_tensors_read_as_ints_as_torch():
    a = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    for lib in (torch, llgrad):
        x = lib.tensor(a)
        i, j = lib.tensor(1), lib.tensor(-2, dtype=lib.int32)
        got = [x[i, :, j], x[:, j], x[i, None, 1:, j], x[0, i]]
        if lib is torch:
            want = [t.numpy() for t in got]
        else:
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g.numpy(), w)
            assert got[0]._base is x        # (a view, as torch's)
        with pytest.raises(IndexError):
            x[lib.tensor(5), :]
        b = lib.tensor(1, dtype=lib.uint8)  # (a 0-d uint8 tensor is a mask)
        with warnings.catch_warnings():     # (the uint8 deprecation; torch's warns once)
            warnings.simplefilter("ignore")
            shapes = [tuple(x[b, 0].shape), tuple(x[b, :, i].shape)]
        if lib is torch:
            want_shapes = shapes
        assert shapes == want_shapes == [(1, 3, 4), (1, 2, 4)]


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8"])
def test_integer_floor_division_and_remainder_as_torch(dtype):
    vals = np.array([-7, 0, 7, 13, -128, 127] if dtype != "uint8" else [0, 7, 13, 255])
    for b in (4, 1, 3, -3, -1):
        if dtype == "uint8" and b < 0:
            continue
        for v in vals:
            t = torch.tensor(int(v), dtype=getattr(torch, dtype))
            x = llgrad.tensor(int(v), dtype=getattr(llgrad, dtype))
            for f in (lambda k: k // b, lambda k: k % b, lambda k: k // llgrad_or_torch(k, b)):
                w, g = f(t), f(x)
                assert str(g.dtype)[7:] == str(w.dtype)[6:]
                assert g.item() == w.item()
    smallest = llgrad.tensor(-2 ** 63)
    assert (smallest // -1).item() == (torch.tensor(-2 ** 63) // -1).item()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        llgrad.tensor(3) // 0


def llgrad_or_torch(k, b):
    """b as a 0-d tensor of k's library and dtype (a tensor divisor)."""
    lib = torch if isinstance(k, torch.Tensor) else llgrad
    return lib.tensor(b, dtype=k.dtype)
