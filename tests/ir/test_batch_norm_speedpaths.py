"""batch_norm's blocked NumPy paths (llgrad/ir/ops_batch_norm.py) and F.batch_norm's eager
update of the running statistics from the forward's own (llgrad/nn/functional_batch_norm.py):
against PyTorch (forward in training and evaluation, running statistics with a momentum and
with momentum=None's cumulative average, gradients), float32 and float64, odd shapes (N=1,
C=1, 2-D and 3-D inputs, channels shorter and longer than a BLAS row), non-contiguous inputs
(channels-last, sliced); gradcheck and gradgradcheck in float64; the backward's fast formula
against the exact one (_norm_vjp's operations) where the data is finite, and the exact one
taking over block by block where it is not; accuracy with a large mean (float64 statistics)."""
import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F
from llgrad.ir import ops_batch_norm
from llgrad.ir.ops_batch_norm import _batch_norm, _batch_norm_backward, _exact_block, _sums

SHAPES = [(8, 4, 5, 5), (1, 3, 5, 7), (6, 1, 4, 4), (7, 5), (4, 3, 10), (2, 3, 200),
          (3, 2, 9, 9), (16, 3, 1, 1)]
TOL = {"float32": dict(rtol=2e-5, atol=2e-5), "float64": dict(rtol=1e-11, atol=1e-11)}


def _layouts(a):
    """a itself, as a channels-last permutation, and as a slice of a bigger array."""
    yield "contiguous", a
    if a.ndim == 4:
        yield "channels-last", np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    big[..., ::2] = a
    yield "sliced", big[..., ::2]


def _data(shape, dtype, seed, loc=1.0, scale=2.0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale + loc).astype(dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_forward_and_gradients_match_torch(shape, dtype):
    torch = pytest.importorskip("torch")
    c = shape[1]
    x0, g = _data(shape, dtype, 1), _data(shape, dtype, 2, 0.0, 1.0)
    w, b = _data((c,), dtype, 3), _data((c,), dtype, 4)
    for name, x in _layouts(x0):
        for affine in (True, False):
            xl = llgrad.tensor(x, requires_grad=True)
            wl = llgrad.tensor(w, requires_grad=True) if affine else None
            bl = llgrad.tensor(b, requires_grad=True) if affine else None
            y = F.batch_norm(xl, None, None, wl, bl, training=True)
            y.backward(llgrad.tensor(g))
            xt = torch.tensor(x0, requires_grad=True)
            wt = torch.tensor(w, requires_grad=True) if affine else None
            bt = torch.tensor(b, requires_grad=True) if affine else None
            yt = torch.nn.functional.batch_norm(xt, None, None, wt, bt, training=True)
            yt.backward(torch.tensor(g))
            what = f"{name}, affine={affine}"
            np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), **TOL[dtype],
                                       err_msg=what)
            np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), **TOL[dtype],
                                       err_msg=what)
            if affine:
                np.testing.assert_allclose(wl.grad.numpy(), wt.grad.numpy(), **TOL[dtype],
                                           err_msg=what)
                np.testing.assert_allclose(bl.grad.numpy(), bt.grad.numpy(), **TOL[dtype],
                                           err_msg=what)


@pytest.mark.parametrize("shape", [(8, 4, 5, 5), (1, 3, 5, 7), (6, 1, 4, 4), (7, 5)], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_module_running_statistics_and_evaluation_match_torch(shape, dtype, momentum):
    torch = pytest.importorskip("torch")
    c = shape[1]
    cls = "BatchNorm2d" if len(shape) == 4 else "BatchNorm1d"
    ml = getattr(llgrad.nn, cls)(c, momentum=momentum).to(getattr(llgrad, dtype))
    mt = getattr(torch.nn, cls)(c, momentum=momentum).to(getattr(torch, dtype))
    with torch.no_grad():
        mt.weight.copy_(torch.tensor(_data((c,), dtype, 5)))
        mt.bias.copy_(torch.tensor(_data((c,), dtype, 6)))
    ml.load_state_dict({k: llgrad.tensor(v.detach().numpy().copy())
                        for k, v in mt.state_dict().items()})
    for step in range(4):
        x0 = _data(shape, dtype, 10 + step, loc=step - 1.0, scale=1.0 + step)
        x = dict(_layouts(x0))["sliced" if step % 2 else "contiguous"]
        y, yt = ml(llgrad.tensor(x)), mt(torch.tensor(x0))
        np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), **TOL[dtype])
    assert int(ml.num_batches_tracked.item()) == int(mt.num_batches_tracked.item()) == 4
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(getattr(ml, name).numpy(),
                                   getattr(mt, name).detach().numpy(), **TOL[dtype],
                                   err_msg=name)
    ml.eval(), mt.eval()
    x0 = _data(shape, dtype, 20)
    for _, x in _layouts(x0):
        np.testing.assert_allclose(ml(llgrad.tensor(x)).detach().numpy(),
                                   mt(torch.tensor(x0)).detach().numpy(), **TOL[dtype])


def test_statistics_with_a_large_mean_are_float64_accurate():
    """float32 data far from zero: the statistics are float64 (as PyTorch's): the running
    mean and variance and the output agree with a float64 computation; the gradient has the
    error of any float32 one (x - mean with the mean rounded to float32, as PyTorch and
    native code), no more than PyTorch's."""
    torch = pytest.importorskip("torch")
    x = _data((16, 3, 12, 12), "float32", 7, loc=3000.0, scale=0.5)
    g = _data(x.shape, "float32", 8, loc=0.0, scale=1.0)
    rm, rv = llgrad.zeros(3), llgrad.ones(3)
    xl = llgrad.tensor(x, requires_grad=True)
    y = F.batch_norm(xl, rm, rv, training=True, momentum=1.0)
    y.backward(llgrad.tensor(g))
    x64 = x.astype(np.float64)
    mean, var = x64.mean((0, 2, 3)), x64.var((0, 2, 3))
    np.testing.assert_allclose(rm.numpy(), mean, rtol=1e-7)
    np.testing.assert_allclose(rv.numpy(), x64.var((0, 2, 3), ddof=1), rtol=1e-6)
    want = (x64 - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5)
    assert np.abs(y.detach().numpy() - want).max() < 1e-6      # rounded once (<= 1 ulp)
    grads = []
    for dt in (torch.float64, torch.float32):
        xt = torch.tensor(x, dtype=dt, requires_grad=True)
        torch.nn.functional.batch_norm(xt, None, None, training=True).backward(
            torch.tensor(g, dtype=dt))
        grads.append(xt.grad.double().numpy())
    err, err_torch = (np.abs(a - grads[0]).max() for a in (xl.grad.numpy(), grads[1]))
    assert err < max(2 * err_torch, 1e-6), (err, err_torch)


@pytest.mark.parametrize("shape", [(3, 2, 4), (2, 3, 2, 2), (4, 2)], ids=str)
def test_gradcheck_and_gradgradcheck_in_float64(shape):
    rng = np.random.default_rng(11)
    c = shape[1]
    x = llgrad.tensor(rng.standard_normal(shape), requires_grad=True)
    w = llgrad.tensor(rng.standard_normal(c), requires_grad=True)
    b = llgrad.tensor(rng.standard_normal(c), requires_grad=True)

    def fn(x, w, b):
        return F.batch_norm(x, None, None, w, b, training=True)
    assert llgrad.autograd.gradcheck(fn, (x, w, b))
    assert llgrad.autograd.gradgradcheck(fn, (x, w, b))


def _exact(g, x, w, eps=1e-5):
    """_norm_vjp's operations on the whole array (as one block), the mean as the op sums it."""
    n, c = x.shape[:2]
    dt = np.result_type(g, x)
    x3, g3 = x.reshape(n, c, -1), g.reshape(n, c, -1)
    xt, gt = x3.transpose(1, 0, 2), g3.transpose(1, 0, 2)
    mean = (_sums(np.ascontiguousarray(xt, dt)) / (x.size // c)).astype(dt).reshape(-1, 1, 1)
    gx = np.empty(xt.shape, dt)
    wk = None if w is None else w.astype(dt).reshape(-1, 1, 1)
    with np.errstate(all="ignore"):
        gw, gb = _exact_block(gt, xt, wk, mean, eps, dt, gx)
    return gx.transpose(1, 0, 2).reshape(x.shape), gw.astype(dt), gb.astype(dt)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_backward_fast_formula_is_the_exact_one_and_special_values_take_the_exact_path(dtype):
    x, g = _data((6, 5, 7, 7), dtype, 12), _data((6, 5, 7, 7), dtype, 13)
    w = _data((5,), dtype, 14)
    tol = TOL[dtype]
    for got, want in zip(_batch_norm_backward(g, x, w, 1e-5), _exact(g, x, w)):
        np.testing.assert_allclose(got, want, **tol)
    # one channel with a NaN, one with an inf in g, one overflowing float32's squares: the
    # others as before, those channels as the exact operations give them (NaN for NaN...)
    x2, g2 = x.copy(), g.copy()
    x2[0, 1, 0, 0], g2[2, 3, 1, 1] = np.nan, np.inf
    if dtype == "float32":
        x2[:, 4] *= np.float32(1e19)
    old = ops_batch_norm.BLOCK
    try:
        for block in (old, 49 * 6):             # blocks of all channels, or of one
            ops_batch_norm.BLOCK = block
            got = _batch_norm_backward(g2, x2, w, 1e-5)
            want = _exact(g2, x2, w)
            for a, e in zip(got, want):
                assert np.array_equal(np.isnan(a), np.isnan(e))
                assert np.array_equal(np.isinf(a), np.isinf(e))
                ok = np.isfinite(e)
                np.testing.assert_allclose(a[ok], e[ok], **tol)
            if block < old:     # (one channel a block: channel 0 as without the specials)
                for a, e in zip(got, _batch_norm_backward(g, x, w, 1e-5)):
                    np.testing.assert_array_equal(a[..., 0] if a.ndim == 1 else a[:, 0],
                                                  e[..., 0] if e.ndim == 1 else e[:, 0])
    finally:
        ops_batch_norm.BLOCK = old
    # a non-finite weight: the exact operations throughout
    w2 = w.copy()
    w2[1] = np.inf
    for a, e in zip(_batch_norm_backward(g, x, w2, 1e-5), _exact(g, x, w2)):
        np.testing.assert_array_equal(a, e)


def test_forward_blocks_leave_their_statistics_once():
    """take_stats gives the forward's statistics for that very array, once; anything else
    is computed (the same values: NumPy's here, not the native loop's own order of sums)."""
    prev = ops_batch_norm.set_native_stats(None)
    try:
        _stats_once()
    finally:
        ops_batch_norm.set_native_stats(prev)


def _stats_once():
    x = _data((4, 3, 5, 5), "float32", 15)
    _batch_norm(x, None, None, None, None, True, 1e-5)
    fresh = ops_batch_norm.batch_stats(x)
    stash = ops_batch_norm.take_stats(x)
    for a, e in zip(stash, fresh):
        np.testing.assert_array_equal(a, e)
    assert getattr(ops_batch_norm._stash, "entry", None) is None
    other = x.copy()
    _batch_norm(x, None, None, None, None, True, 1e-5)
    for a, e in zip(ops_batch_norm.take_stats(other), fresh):
        np.testing.assert_array_equal(a, e)
    assert ops_batch_norm.batch_stats(x.astype(np.float16)) is None


def test_eager_running_statistics_agree_with_the_traced_update():
    """Eager (the forward's statistics) and compiled / interpreted (tensor ops recorded in
    the graph) update the buffers alike."""
    def step(x, rm, rv, w, b):
        return F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.3)
    x = _data((8, 4, 6, 6), "float32", 16)
    w, b = _data((4,), "float32", 17), _data((4,), "float32", 18)
    results = []
    for fn in (step, llgrad.compile(step, backend="interpret")):
        rm, rv = llgrad.zeros(4), llgrad.ones(4)
        for _ in range(3):
            y = fn(llgrad.tensor(x), rm, rv, llgrad.tensor(w), llgrad.tensor(b))
        results.append((y.numpy(), rm.numpy(), rv.numpy()))
    for a, e in zip(*results):
        np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-6)
