"""Adaptive max pools over windows holding NaN, against torch: ATen's kernel scans a window
with (val > max || isnan(val)), so the index (and the gradient) is the window's LAST NaN; the
gather path llgrad takes where the windows are unequal took Tensor.max's first NaN (values
equal, indices and gradients not). Ties of ordinary values stay the first maximum."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

SHAPES = [((1, 1, 3, 3), (2, 2)), ((1, 2, 5, 7), (3, 4)), ((2, 1, 7, 5), (4, 2))]


def _data(shape, seed, nan=0.3, ties=False):
    rs = np.random.RandomState(seed)
    x = rs.randn(*shape).astype(np.float32)
    if ties:
        x = np.round(x)
    x[rs.rand(*shape) < nan] = np.nan
    return x


def _run(lib, fn, x):
    t = lib.tensor(x, requires_grad=True)
    values, idx = fn(lib.nn.functional, t)
    g = np.cos(np.arange(values.numel())).reshape(tuple(values.shape)).astype(np.float32)
    (values * lib.tensor(g)).sum().backward()
    return values.detach().numpy(), idx.numpy(), t.grad.numpy()


def _check(fn, x):
    ours, theirs = _run(llgrad, fn, x), _run(torch, fn, x)
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[1], theirs[1])
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("shape,out", SHAPES)
@pytest.mark.parametrize("ties", [False, True])
def test_adaptive_max_pool2d_nan_index_as_torch(shape, out, ties):
    _check(lambda F, t: F.adaptive_max_pool2d(t, out, return_indices=True),
           _data(shape, 0, ties=ties))


@pytest.mark.parametrize("shape,out", SHAPES)
def test_adaptive_max_pool1d_and_3d_nan_index_as_torch(shape, out):
    x = _data(shape, 1)
    _check(lambda F, t: F.adaptive_max_pool1d(t[0], out[1], return_indices=True), x)
    _check(lambda F, t: F.adaptive_max_pool3d(t, (1,) + out, return_indices=True), x)
    _check(lambda F, t: F.adaptive_max_pool3d(t.unsqueeze(0).transpose(1, 2).reshape(
        shape[0], shape[1], shape[2], -1, 1), (2, out[0], 1), return_indices=True), x)


def test_ties_without_nan_keep_the_first_maximum():
    x = np.zeros((1, 1, 5, 7), np.float32)
    x[0, 0, 1:3, 2:5] = 1.0
    _check(lambda F, t: F.adaptive_max_pool2d(t, (3, 4), return_indices=True), x)
    _check(lambda F, t: F.adaptive_max_pool3d(t.unsqueeze(2), (1, 3, 4), return_indices=True),
           x)


def test_compiled_nan_index_is_eagers():
    x = _data((2, 3, 5, 7), 2)
    F = llgrad.nn.functional

    def f(t):
        v, i = F.adaptive_max_pool2d(t, (3, 4), return_indices=True)
        return v * 2, i

    cf = llgrad.compile(f)
    for _ in range(2):
        tc = llgrad.tensor(x, requires_grad=True)
        vc, ic = cf(tc)
    vc.sum().backward()
    te = llgrad.tensor(x, requires_grad=True)
    ve, ie = f(te)
    ve.sum().backward()
    np.testing.assert_array_equal(ic.numpy(), ie.numpy())
    np.testing.assert_array_equal(tc.grad.numpy(), te.grad.numpy())
    tt = torch.tensor(x, requires_grad=True)
    vt, it = torch.nn.functional.adaptive_max_pool2d(tt, (3, 4), return_indices=True)
    (vt * 2).sum().backward()
    np.testing.assert_array_equal(ic.numpy(), it.numpy())
    np.testing.assert_array_equal(tc.grad.numpy(), tt.grad.numpy())


def test_meta_inputs_keep_their_device():
    # (adaptive_max_pool3d's index table was made on the CPU: a meta input with
    # return_indices=True raised a device mismatch)
    F = llgrad.nn.functional
    v, i = F.adaptive_max_pool3d(llgrad.empty(2, 3, 4, 5, 7, device="meta"), (2, 3, 4),
                                 return_indices=True)
    assert (v.device.type, i.device.type, tuple(i.shape)) == ("meta", "meta", (2, 3, 2, 3, 4))
    v, i = F.adaptive_max_pool2d(llgrad.empty(2, 3, 5, 7, device="meta"), (3, 4),
                                 return_indices=True)
    assert (v.device.type, i.device.type, tuple(i.shape)) == ("meta", "meta", (2, 3, 3, 4))
