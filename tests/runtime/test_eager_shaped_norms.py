"""Eager batch norm (training and eval, with and without affine), its backward, group norm,
layer norm, index_add and index_put on kernels built for their shapes
(compile/eager_shaped.py): the shaped kernels run, and give the NumPy implementations'
values and gradients within rounding, and torch's; an index out of range raises eager's own
error."""
import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_builds, eager_shaped
from llgrad.runtime import dispatch

F = llgrad.nn.functional


def _with(native, fn):
    prev = dispatch.set_native_eager(dispatch.native_eager if native else None)
    try:
        return fn()
    finally:
        dispatch.set_native_eager(prev)


def _native(fn):
    """fn() on the shaped kernels, and how many of them ran: built first, by a call of its
    own (LLGRAD_COMPILE=background: that call queues the builds and runs NumPy's)."""
    _with(True, fn)
    eager_builds.wait()
    before = eager_shaped.stats["calls"]
    out = _with(True, fn)
    return out, eager_shaped.stats["calls"] - before


def _batch_norm(training, affine, dtype=np.float32, shape=(16, 32, 12, 12)):
    rng = np.random.default_rng(0)
    x = llgrad.tensor(rng.standard_normal(shape).astype(dtype) * 3 + 1, requires_grad=True)
    c = shape[1]
    w = llgrad.tensor(rng.standard_normal(c).astype(dtype), requires_grad=True) if affine \
        else None
    b = llgrad.tensor(rng.standard_normal(c).astype(dtype), requires_grad=True) if affine \
        else None
    rm = llgrad.tensor(rng.standard_normal(c).astype(dtype))
    rv = llgrad.tensor(rng.random(c).astype(dtype) + 0.5)
    g = llgrad.tensor(rng.standard_normal(shape).astype(dtype))
    y = F.batch_norm(x, rm, rv, w, b, training=training, momentum=0.1, eps=1e-5)
    y.backward(g)
    outs = [y.detach().numpy(), x.grad.numpy(), rm.numpy(), rv.numpy()]
    return outs + ([w.grad.numpy(), b.grad.numpy()] if affine else [])


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_matches_numpy(training, affine):
    got, ran = _native(lambda: _batch_norm(training, affine))
    assert ran, "the shaped kernels did not run"
    want = _with(False, lambda: _batch_norm(training, affine))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(b).max()))


def test_batch_norm_float64_against_torch():
    torch = pytest.importorskip("torch")
    got, _ = _native(lambda: _batch_norm(True, True, np.float64))
    rng = np.random.default_rng(0)
    shape = (16, 32, 12, 12)
    x = torch.tensor(rng.standard_normal(shape) * 3 + 1, requires_grad=True)
    w = torch.tensor(rng.standard_normal(32), requires_grad=True)
    b = torch.tensor(rng.standard_normal(32), requires_grad=True)
    rm, rv = torch.tensor(rng.standard_normal(32)), torch.tensor(rng.random(32) + 0.5)
    g = torch.tensor(rng.standard_normal(shape))
    y = torch.nn.functional.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5)
    y.backward(g)
    want = [y.detach(), x.grad, rm, rv, w.grad, b.grad]
    for a, b_ in zip(got, want):
        np.testing.assert_allclose(a, b_.numpy(), rtol=1e-9, atol=1e-9)


def _group_norm(dtype=np.float32):
    rng = np.random.default_rng(1)
    x = llgrad.tensor(rng.standard_normal((8, 32, 16, 16)).astype(dtype), requires_grad=True)
    w = llgrad.tensor(rng.standard_normal(32).astype(dtype), requires_grad=True)
    b = llgrad.tensor(rng.standard_normal(32).astype(dtype), requires_grad=True)
    y = F.group_norm(x, 4, w, b, 1e-5)
    y.backward(llgrad.tensor(rng.standard_normal((8, 32, 16, 16)).astype(dtype)))
    return [y.detach().numpy(), x.grad.numpy(), w.grad.numpy(), b.grad.numpy()]


def test_group_norm_matches_numpy_and_torch():
    got, ran = _native(_group_norm)
    assert ran, "the shaped kernel did not run"
    want = _with(False, _group_norm)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(b).max())
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = torch.tensor(rng.standard_normal((8, 32, 16, 16)).astype(np.float32), requires_grad=True)
    w = torch.tensor(rng.standard_normal(32).astype(np.float32), requires_grad=True)
    b = torch.tensor(rng.standard_normal(32).astype(np.float32), requires_grad=True)
    y = torch.nn.functional.group_norm(x, 4, w, b, 1e-5)
    y.backward(torch.tensor(rng.standard_normal((8, 32, 16, 16)).astype(np.float32)))
    for a, b_ in zip(got, (y.detach(), x.grad, w.grad, b.grad)):
        np.testing.assert_allclose(a, b_.numpy(), rtol=1e-4, atol=1e-4 * np.abs(a).max())


def _index_add(index):
    rng = np.random.default_rng(2)
    x = llgrad.tensor(rng.standard_normal((64, 48, 16)).astype(np.float32))
    src = llgrad.tensor(rng.standard_normal((len(index), 48, 16)).astype(np.float32))
    return x.index_add(0, llgrad.tensor(np.array(index, np.int64)), src, alpha=0.5).numpy()


def test_index_add_with_repeats_matches_numpy_and_torch():
    index = [3, 0, 3, 63, 7, 7, 7, 12] * 8
    got, ran = _native(lambda: _index_add(index))
    assert ran, "the shaped kernel did not run"
    np.testing.assert_allclose(got, _with(False, lambda: _index_add(index)), rtol=1e-6,
                               atol=1e-6)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x = torch.tensor(rng.standard_normal((64, 48, 16)).astype(np.float32))
    src = torch.tensor(rng.standard_normal((len(index), 48, 16)).astype(np.float32))
    want = x.index_add(0, torch.tensor(index), src, alpha=0.5)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_index_add_out_of_range_raises_eagers_error():
    index = [3, 0, 64] * 8
    with pytest.raises(Exception):     # (its kernel's build: LLGRAD_COMPILE=background)
        _with(True, lambda: _index_add(index))
    eager_builds.wait()
    with pytest.raises(Exception) as native:
        _with(True, lambda: _index_add(index))
    with pytest.raises(Exception) as plain:
        _with(False, lambda: _index_add(index))
    assert type(native.value) is type(plain.value)
    assert str(native.value) == str(plain.value)


def _layer_norm(affine, dtype=np.float32):
    rng = np.random.default_rng(3)
    x = llgrad.tensor(rng.standard_normal((16, 65, 64)).astype(dtype) * 2 + 1,
                      requires_grad=True)
    w = llgrad.tensor(rng.standard_normal(64).astype(dtype), requires_grad=True) \
        if affine else None
    b = llgrad.tensor(rng.standard_normal(64).astype(dtype), requires_grad=True) \
        if affine else None
    y = F.layer_norm(x, (64,), w, b, 1e-5)
    y.backward(llgrad.tensor(rng.standard_normal((16, 65, 64)).astype(dtype)))
    return [y.detach().numpy(), x.grad.numpy()] + \
        ([w.grad.numpy(), b.grad.numpy()] if affine else [])


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_matches_numpy(affine):
    got, ran = _native(lambda: _layer_norm(affine))
    assert ran, "the shaped kernel did not run"
    want = _with(False, lambda: _layer_norm(affine))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(b).max())


def _index_put(index, accumulate):
    rng = np.random.default_rng(4)
    x = llgrad.tensor(rng.standard_normal((1000, 64)).astype(np.float32))
    v = llgrad.tensor(rng.standard_normal((len(index), 64)).astype(np.float32))
    return x.index_put((llgrad.tensor(np.array(index, np.int64)),), v,
                       accumulate=accumulate).numpy()


@pytest.mark.parametrize("accumulate", [True, False])
def test_index_put_matches_numpy_and_torch(accumulate):
    index = list(range(-500, 500, 4)) if not accumulate else [5, -1, 5, 999, 0, 5] * 40
    got, ran = _native(lambda: _index_put(index, accumulate))
    assert ran, "the shaped kernel did not run"
    np.testing.assert_allclose(got, _with(False, lambda: _index_put(index, accumulate)),
                               rtol=1e-5, atol=1e-5)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x = torch.tensor(rng.standard_normal((1000, 64)).astype(np.float32))
    v = torch.tensor(rng.standard_normal((len(index), 64)).astype(np.float32))
    want = x.index_put((torch.tensor(index),), v, accumulate=accumulate)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_index_put_out_of_range_raises_eagers_error():
    index = [3, 0, 1000] * 100
    with pytest.raises(Exception):     # (its kernel's build: LLGRAD_COMPILE=background)
        _with(True, lambda: _index_put(index, True))
    eager_builds.wait()
    with pytest.raises(Exception) as native:
        _with(True, lambda: _index_put(index, True))
    with pytest.raises(Exception) as plain:
        _with(False, lambda: _index_put(index, True))
    assert type(native.value) is type(plain.value)
    assert str(native.value) == str(plain.value)


def test_small_batch_norm_1d_runs_its_kernel_from_the_tables_size():
    """BatchNorm1d's (64, 256) (16k elements, under the convolutions' 32k) runs the shaped
    kernels: the op's eager_min_elements."""
    got, ran = _native(lambda: _batch_norm(True, True, shape=(64, 256)))
    assert ran == 2, "the shaped kernels did not run"
    want = _with(False, lambda: _batch_norm(True, True, shape=(64, 256)))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(b).max()))
