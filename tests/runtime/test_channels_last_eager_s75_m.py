"""Eager convolutions and batch norm of channels_last activations (a permuted NHWC input)
without the NCHW round trip (compile/eager_channels_last.py): values, gradients and every
result's strides as torch's and as the NCHW path's (the same ops with the channels_last
forms turned off)."""
import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_channels_last as ecl
from llgrad.compile import eager_builds

torch = pytest.importorskip("torch")

FAST = ecl.OPS


@pytest.fixture(autouse=True)
def _on():
    ecl.OPS = FAST
    yield
    ecl.OPS = FAST


def _rand(*shape, seed=0, scale=1.0):
    return (np.random.RandomState(seed).randn(*shape) * scale).astype(np.float32)


def _run(lib, fn, arrays):
    """(outputs, grads of the leaves, the permuted inputs' strides) of fn on lib's leaves
    made of arrays (NHWC ones: ndim 4, permuted to NCHW by fn's caller)."""
    leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
    outs = fn(lib, *leaves)
    outs = outs if isinstance(outs, tuple) else (outs,)
    loss = sum((o * lib.tensor(_rand(*o.shape, seed=7))).sum() for o in outs)
    loss.backward()
    return ([(o.detach().numpy().copy(), tuple(o.stride()),
              o.is_contiguous(memory_format=lib.channels_last) if o.dim() == 4 else None)
             for o in outs],
            [(leaf.grad.numpy().copy(), tuple(leaf.grad.stride())) for leaf in leaves])


def _compare(fn, arrays, fires=True, rtol=1e-4):
    """fn's results on llgrad (the channels_last forms, then the NCHW path) as torch's;
    fires: whether the channels_last forms run (None: either)."""
    _run(llgrad, fn, arrays)    # (background builds: the kernels there before the count)
    eager_builds.wait()
    before = ecl.stats["calls"]
    got = _run(llgrad, fn, arrays)
    fired = ecl.stats["calls"] - before
    assert fires is None or (fired > 0) == fires, fired
    ecl.OPS = frozenset()
    nchw = _run(llgrad, fn, arrays)
    ecl.OPS = FAST
    want = _run(torch, fn, arrays)
    for ref in (want, nchw):
        for (g, gs, gcl), (w, ws, wcl) in zip(got[0], ref[0]):
            assert _strides(g, gs, ref is want) == _strides(w, ws, ref is want) and gcl == wcl
            scale = max(1.0, float(np.abs(w).max()))
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale)
        for (g, gs), (w, ws) in zip(got[1], ref[1]):
            assert _strides(g, gs, ref is want) == _strides(w, ws, ref is want)
            scale = max(1.0, float(np.abs(w).max()))
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale)


def _strides(a, strides, loose):
    """strides; loose (against torch's): but those of size-1 dims, which torch sets its way
    (a 1x1 weight's gradient: (32, 1, 32, 32) in torch, (32, 1, 1, 1) in llgrad, before
    and after)."""
    return tuple(s for n, s in zip(a.shape, strides) if n != 1 or not loose)


def _cl(t):
    return t.permute(0, 3, 1, 2)


# (N, H, W, Cin), Cout, kernel, stride, padding, groups, bias, fast (the 1x1 product)
CONVS = [((4, 16, 16, 32), 48, 1, 1, 0, 1, True, True),
         ((4, 16, 16, 32), 16, 1, 1, 0, 1, False, True),
         ((2, 8, 32, 64), 64, 1, 1, 0, 1, True, True),
         ((4, 16, 16, 32), 32, 3, 1, 1, 1, True, False),
         ((4, 16, 16, 32), 32, 1, 1, 0, 4, True, False)] + [
    pytest.param(*c, marks=pytest.mark.slow) for c in (
        ((4, 16, 16, 32), 32, 3, 2, 1, 1, False, False),
        ((4, 16, 16, 32), 32, 1, 2, 0, 1, True, False),
        ((4, 16, 16, 32), 32, 1, 1, 1, 1, True, False),
        ((4, 16, 16, 32), 32, 3, 1, 1, 32, True, False))]


@pytest.mark.parametrize("shape,cout,k,stride,padding,groups,bias,fast", CONVS)
def test_conv2d_channels_last(shape, cout, k, stride, padding, groups, bias, fast):
    arrays = [_rand(*shape), _rand(cout, shape[3] // groups, k, k, seed=1, scale=0.1)]
    if bias:
        arrays.append(_rand(cout, seed=2))

    def fn(lib, x, w, b=None):
        return lib.nn.functional.conv2d(_cl(x), w, b, stride=stride, padding=padding,
                                        groups=groups)
    # (a 1x1 convolution's weight gradient runs the product whatever the forward took)
    _compare(fn, arrays, fires=fast or (k == 1 and stride == 1 and padding == 0
                                        and groups == 1))


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", [(4, 16, 16, 32),
                                   pytest.param((8, 4, 4, 64), marks=pytest.mark.slow)])
def test_batch_norm_channels_last(training, affine, shape):
    c = shape[3]
    arrays = [_rand(*shape, scale=2.0) + 1.0]
    if affine:
        arrays += [_rand(c, seed=3) + 1.0, _rand(c, seed=4)]

    def fn(lib, x, w=None, b=None):
        rm, rv = lib.tensor(_rand(c, seed=5)), lib.tensor(np.abs(_rand(c, seed=6)) + 0.5)
        y = lib.nn.functional.batch_norm(_cl(x), rm, rv, w, b, training=training,
                                         momentum=0.3)
        return y, rm.unsqueeze(0) * 1.0, rv.unsqueeze(0) * 1.0    # (the running stats)
    _compare(fn, arrays)


def test_batch_norm_no_running_stats_and_module():
    x = _rand(4, 16, 16, 32)
    _compare(lambda lib, t: lib.nn.functional.batch_norm(_cl(t), None, None, training=True),
             [x])

    def fn(lib, t):
        lib.manual_seed(0)
        bn = lib.nn.BatchNorm2d(32)
        y = bn(_cl(t))
        return y, bn.running_mean.unsqueeze(0) * 1.0, bn.running_var.unsqueeze(0) * 1.0
    _compare(fn, [x])


def test_conv1d_of_transposed_input_keeps_its_layout():
    """conv1d of a transposed (N, L, C) input, which it unsqueezes to a channels_last-looking
    4-D view, keeps the NCHW path's (torch's) layout: only F.conv2d and the batch norms lay
    their results out channels_last."""
    x = _rand(4, 512, 32)
    w = _rand(48, 32, 1, seed=1, scale=0.1)
    _compare(lambda lib, t, v: lib.nn.functional.conv1d(t.transpose(1, 2), v), [x, w],
             fires=None)


def test_torch_batch_norm_channels_last():
    """torch.batch_norm and torch.native_batch_norm of a channels_last input: channels_last
    results as torch's (llgrad gave NCHW ones before s75)."""
    y = _rand(4, 16, 16, 32)
    _compare(lambda lib, t: lib.batch_norm(_cl(t), None, None, None, None, True, 0.1, 1e-5,
                                           False), [y])
    w, b = _rand(32, seed=1) + 1.0, _rand(32, seed=2)
    _compare(lambda lib, t, v, c: lib.native_batch_norm(_cl(t), v, c, None, None, True, 0.1,
                                                        1e-5)[0], [y, w, b])


def _net(lib):
    lib.manual_seed(0)
    nn = lib.nn
    # (no bias before a batch norm: its gradient would be rounding noise, ~0)
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32),
                         nn.ReLU(), nn.Conv2d(32, 32, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(32, 16, 1))


def _net_step(lib, compiled=False):
    m = _net(lib)
    params = dict(m.named_parameters())
    with (torch.no_grad() if lib is torch else llgrad.no_grad()):
        for i, p in enumerate(params.values()):     # (the same weights in both)
            p.copy_(lib.tensor(_rand(*p.shape, seed=10 + i, scale=0.2)))
    f = llgrad.compile(m) if compiled else m
    imgs = lib.tensor(_rand(4, 32, 32, 3), requires_grad=True)
    out = f(imgs.permute(0, 3, 1, 2))
    (out * out).sum().backward()
    return ([out.detach().numpy(), imgs.grad.numpy(), m[1].running_mean.numpy(),
             m[4].running_var.numpy()] + [p.grad.numpy() for p in params.values()],
            tuple(out.stride()), tuple(imgs.grad.stride()))


@pytest.mark.parametrize("compiled", [False, True])
def test_conv_bn_relu_pool_net(compiled):
    got, want = _net_step(llgrad, compiled), _net_step(torch)
    ecl.OPS = frozenset()
    nchw = _net_step(llgrad, compiled)
    for ref in (want, nchw):
        assert got[1:] == ref[1:]
        for g, w in zip(got[0], ref[0]):
            np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4 * max(1.0, np.abs(w).max()))
