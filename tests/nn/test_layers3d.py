"""The 3-D layers' functions: F.conv3d, F.conv_transpose3d, F.max_pool3d (+ with_indices),
F.avg_pool3d, F.adaptive_avg_pool3d, F.adaptive_max_pool3d (+ with_indices), F.lp_pool3d,
F.max_unpool3d and their torch.* names: values, indices, float64 gradients and backward
node names against torch over odd geometries (stride, padding, dilation, groups, ceil_mode,
count_include_pad, divisor_override, non-contiguous and unbatched inputs), gradcheck and
gradgradcheck, and compiled (native code) == eager."""
import math
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F

RNG = np.random.default_rng(31)


def _torch():
    return pytest.importorskip("torch")


def _both(fn, arrays, tol=1e-12, node=True):
    """fn(lib, *tensors) in llgrad and torch: outputs (a tensor or a tuple, the first one
    differentiated against a fixed cotangent), the float inputs' gradients and (node=True)
    the first output's grad_fn name."""
    torch = _torch()
    out = []
    for lib in (llgrad, torch):
        ts = [lib.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
        r = fn(lib, *ts)
        r = r if isinstance(r, tuple) else (r,)
        name = type(r[0].grad_fn).__name__
        cot = np.random.default_rng(1).standard_normal(tuple(r[0].shape))
        (r[0] * lib.tensor(cot)).sum().backward()
        out.append(([x.detach().numpy() for x in r],
                    [t.grad.numpy() for t in ts if t.requires_grad], name))
    (a, ga, na), (b, gb, nb) = out
    if node:
        assert na == nb
    for x, y in zip(a + ga, b + gb):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol)


def R(*shape):
    return RNG.standard_normal(shape)


CONV = [  # (input shape, weight shape, stride, padding, dilation, groups)
    ((2, 4, 5, 6, 7), (6, 2, 3, 2, 3), 1, 0, 1, 2),
    ((1, 3, 6, 5, 4), (4, 3, 2, 3, 2), (2, 1, 2), (1, 2, 0), (1, 1, 2), 1),
    ((2, 2, 7, 4, 5), (2, 1, 3, 1, 2), (1, 2, 1), 1, (2, 1, 1), 2),
    ((3, 5, 4, 6), (2, 3, 2, 2, 1), 1, (0, 1, 0), 1, 1),          # unbatched
]


@pytest.mark.parametrize("xs,ws,s,p,d,g", CONV)
def test_conv3d_matches_torch(xs, ws, s, p, d, g):
    bias = R(ws[0])
    _both(lambda L, x, w, b: L.nn.functional.conv3d(x, w, b, s, p, d, g), [R(*xs), R(*ws), bias])
    _both(lambda L, x, w: L.conv3d(x, w, None, s, p, d, g), [R(*xs), R(*ws)])


@pytest.mark.parametrize("padding,k", [("same", (3, 2, 3)), ("same", (2, 3, 1)),
                                       ("valid", (2, 2, 2))])
def test_conv3d_string_padding_matches_torch(padding, k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (even kernels: torch's and llgrad's warning)
        _both(lambda L, x, w: L.nn.functional.conv3d(x, w, None, 1, padding, (1, 2, 1)),
              [R(1, 2, 5, 6, 5), R(3, 2, *k)])


def test_conv3d_non_contiguous_input_and_weight():
    _both(lambda L, x, w: L.nn.functional.conv3d(x.transpose(2, 4), w.permute(1, 0, 2, 3, 4),
                                                 None, 1, 1),
          [R(2, 3, 5, 4, 6), R(3, 3, 2, 2, 2)])


@pytest.mark.parametrize("xs,ws,s,p,op,g,d", [
    ((2, 4, 3, 4, 3), (4, 3, 2, 3, 2), (2, 1, 2), (1, 0, 1), (1, 0, 0), 2, (1, 2, 1)),
    ((1, 2, 2, 3, 2), (2, 3, 3, 2, 2), 2, 1, 1, 1, 1),
    ((4, 3, 4, 3), (4, 3, 2, 3, 2), 2, 0, 0, 1, 1),                 # unbatched
])
def test_conv_transpose3d_matches_torch(xs, ws, s, p, op, g, d):
    _both(lambda L, x, w, b: L.nn.functional.conv_transpose3d(x, w, b, s, p, op, g, d),
          [R(*xs), R(*ws), R(ws[1] * g)])
    _both(lambda L, x, w: L.conv_transpose3d(x, w, None, s, p, op, g, d), [R(*xs), R(*ws)])


MAXPOOL = [  # (kernel, stride, padding, dilation, ceil_mode)
    (2, None, 0, 1, False), ((3, 2, 3), (1, 2, 2), 1, 1, True),
    ((3, 3, 2), (2, 1, 2), (1, 0, 1), (2, 1, 2), True), ((2, 3, 3), 2, 1, (2, 2, 1), False),
    (3, 1, 1, 1, False),
]


@pytest.mark.parametrize("k,s,p,d,ceil", MAXPOOL)
def test_max_pool3d_matches_torch(k, s, p, d, ceil):
    _both(lambda L, x: L.nn.functional.max_pool3d(x, k, s, p, d, ceil, True), [R(2, 3, 5, 6, 7)])
    _both(lambda L, x: L.nn.functional.max_pool3d_with_indices(x.permute(0, 1, 4, 3, 2), k, s,
                                                                p, d, ceil),
          [R(2, 3, 7, 6, 5)])
    _both(lambda L, x: L.max_pool3d(x, k, s or (), p, d, ceil), [R(3, 5, 6, 7)])


def test_max_pool3d_ties_nan_and_integers_match_torch():
    torch = _torch()
    x = np.round(RNG.standard_normal((2, 2, 5, 5, 4)))          # many ties: the first max
    x[0, 0, 1, 1, 1] = x[1, 1, 3, 2, 0] = x[1, 1, 3, 3, 1] = np.nan
    x[0, 1] = -np.inf
    for arr in (x, np.nan_to_num(x, nan=2.0, neginf=-3).astype(np.int64)):
        for args in ((2, 1, 1), ((3, 2, 2), (1, 2, 1), (1, 1, 0), (2, 1, 1), True)):
            a = F.max_pool3d(llgrad.tensor(arr), *args, return_indices=True)
            b = torch.nn.functional.max_pool3d(torch.tensor(arr), *args, return_indices=True)
            np.testing.assert_array_equal(a[0].numpy(), b[0].numpy())
            np.testing.assert_array_equal(a[1].numpy(), b[1].numpy())


AVGPOOL = [  # (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    (2, None, 0, False, True, None), ((3, 2, 3), (1, 2, 2), 1, True, False, None),
    (3, 2, (1, 0, 1), True, True, None), ((2, 3, 2), 1, (1, 1, 0), False, False, 5),
    (3, (2, 1, 3), 1, True, True, 2),
]


@pytest.mark.parametrize("k,s,p,ceil,cip,div", AVGPOOL)
def test_avg_pool3d_matches_torch(k, s, p, ceil, cip, div):
    _both(lambda L, x: L.nn.functional.avg_pool3d(x, k, s, p, ceil, cip, div), [R(2, 3, 5, 6, 7)])
    _both(lambda L, x: L.nn.functional.avg_pool3d(x.transpose(1, 3), k, s, p, ceil, cip, div),
          [R(3, 6, 5, 7)])


def test_avg_pool3d_integers_match_torch():
    torch = _torch()
    x = RNG.integers(-50, 50, (2, 2, 5, 4, 6))
    for args in ((2,), (3, 2, 1, True, False), ((2, 3, 2), 1, (1, 1, 0), False, True, 3)):
        a = F.avg_pool3d(llgrad.tensor(x), *args)
        b = torch.nn.functional.avg_pool3d(torch.tensor(x), *args)
        assert a.dtype == llgrad.int64
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("out", [1, 2, (3, 2, 4), (5, 3, 7), (None, 4, 1), (4, 5, 6)])
def test_adaptive_pools3d_match_torch(out):
    x = R(2, 3, 5, 6, 7)
    # (PyTorch's nodes are AdaptiveAvgPool3DBackward0 / AdaptiveMaxPool3DBackward0: here
    # compositions of means, products and max_pool3d, as the 2-D ones)
    _both(lambda L, t: L.nn.functional.adaptive_avg_pool3d(t, out), [x], node=False)
    _both(lambda L, t: L.nn.functional.adaptive_max_pool3d(t, out, True), [x], node=False)
    _both(lambda L, t: L.nn.functional.adaptive_max_pool3d_with_indices(t[0], out), [x],
          node=False)


@pytest.mark.parametrize("p,args", [(2, (2,)), (1.5, ((2, 3, 2), (1, 2, 1))),
                                    (3, (2, 1, True)), (math.inf, (2,)), (-math.inf, (3, 2))])
def test_lp_pool3d_matches_torch(p, args):
    x = np.abs(R(2, 3, 5, 6, 5)) + 0.1
    _both(lambda L, t: L.nn.functional.lp_pool3d(t, p, *args), [x])
    _both(lambda L, t: L.nn.LPPool3d(p, *args)(t), [x[0]])


@pytest.mark.parametrize("args,shape", [((2,), (2, 3, 6, 6, 8)), ((3, 2, 1), (2, 2, 7, 5, 7)),
                                        (((2, 3, 2), (2, 2, 1)), (1, 2, 6, 9, 4)),
                                        ((2,), (3, 4, 6, 6))])
def test_max_unpool3d_matches_torch(args, shape):
    def fn(L, t):
        y, i = L.nn.functional.max_pool3d(t, *args, return_indices=True)
        return L.nn.functional.max_unpool3d(y * 2, i, *args,
                                            output_size=tuple(t.shape[-3:])), i
    _both(fn, [R(*shape)], node=False)     # (PyTorch's node: MaxUnpool3DBackward0)

    def module(L, t):
        y, i = L.nn.MaxPool3d(*args, return_indices=True)(t)
        return L.nn.MaxUnpool3d(*args)(y, i, output_size=t.shape[-3:]), i
    _both(module, [R(*shape)], node=False)


def test_torch_max_pool1d_names_match_torch():
    _both(lambda L, x: L.max_pool1d(x, 3, 2, 1, 1, True), [R(2, 3, 9)])
    _both(lambda L, x: L.max_pool1d_with_indices(x, 2), [R(3, 8)])
    _both(lambda L, x: L.max_pool1d(x, (3,), (), 1, 2), [R(2, 3, 9)])


def test_torch_convolution_dispatches_by_rank():
    _both(lambda L, x, w: L.convolution(x, w, None, [2, 1, 1], [1, 0, 1], [1, 1, 1], False,
                                        [0, 0, 0], 1), [R(1, 2, 5, 4, 5), R(3, 2, 2, 2, 2)])
    _both(lambda L, x, w: L.convolution(x, w, None, [2, 2], [0, 0], [1, 1], True, [1, 1], 1),
          [R(1, 2, 4, 4), R(2, 3, 2, 2)])
    # (llgrad's conv1d is conv2d over a unit height: its node is SqueezeBackward1)
    _both(lambda L, x, w: L.convolution(x, w, None, [1], [1], [2], False, [0], 1),
          [R(1, 2, 7), R(3, 2, 2)], node=False)


@pytest.mark.slow
def test_gradcheck_and_gradgradcheck():
    def leaf(*shape):
        return llgrad.tensor(R(*shape), requires_grad=True)
    x, w, b = leaf(1, 2, 3, 3, 4), leaf(2, 1, 2, 2, 2), leaf(2)
    gc, ggc = llgrad.autograd.gradcheck, llgrad.autograd.gradgradcheck
    conv = (lambda x, w, b: F.conv3d(x, w, b, (2, 1, 1), 1, (1, 1, 2), 2))
    assert gc(conv, (x, w, b)) and ggc(conv, (x, w, b))
    convt = (lambda x, w, b: F.conv_transpose3d(x, w, b, 2, 1, 1, 2))
    assert gc(convt, (x, w, b)) and ggc(convt, (x, w, b))
    y = llgrad.tensor(RNG.permutation(60).reshape(1, 1, 4, 3, 5) / 9.0, requires_grad=True)
    for f in (lambda t: F.max_pool3d(t, 2, 1, 1, ceil_mode=True),
              lambda t: F.avg_pool3d(t, 3, 2, 1, True, False),
              lambda t: F.avg_pool3d(t, (2, 3, 2), 1, divisor_override=4),
              lambda t: F.adaptive_avg_pool3d(t, (3, 2, 4)),
              lambda t: F.adaptive_max_pool3d(t, (3, 2, 2)),
              lambda t: F.lp_pool3d(t + 0.5, 1.5, 2, 1)):
        assert gc(f, (y,)) and ggc(f, (y,))


def test_compiled_equals_eager():
    """A small video/volume model (conv, pools, norms, transposed conv, unpooling) compiled
    runs as native code and gives eager's values and gradients, with no graph break."""
    llgrad.manual_seed(0)
    net = nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.BatchNorm3d(4), nn.ReLU(),
                        nn.Conv3d(4, 4, (2, 3, 3), stride=(1, 2, 1), groups=2, bias=False),
                        nn.InstanceNorm3d(4, affine=True))
    up = nn.ConvTranspose3d(4, 2, 2, stride=2)
    pool, unpool = nn.MaxPool3d(2, return_indices=True), nn.MaxUnpool3d(2)
    x = llgrad.tensor(RNG.standard_normal((2, 2, 6, 8, 6)).astype(np.float32),
                      requires_grad=True)

    def loss(x):
        h = net(x)
        p, i = pool(h)
        back = unpool(p, i, output_size=h.shape)
        a = F.avg_pool3d(h, (2, 1, 2), 1, (1, 0, 1), True, False) + 0
        return (back.pow(2).mean() + a.mean() + F.adaptive_avg_pool3d(h, (2, 3, 1)).sum()
                + F.adaptive_max_pool3d(h, 2).sum() + F.lp_pool3d(h.abs() + 1, 2, 2).mean()
                + up(p).sum() + F.max_pool3d(h, 3, 1, 1).mean())

    results = []
    cf = llgrad.compile(loss)
    for fn in (loss, cf):
        for _ in range(2):
            x.grad = None
            for prm in net.parameters():
                prm.grad = None
            with warnings.catch_warnings():
                warnings.simplefilter("error")      # no graph break
                value = fn(x)
            value.backward()
        results.append((value.item(), x.grad.numpy().copy(),
                        [prm.grad.numpy().copy() for prm in net.parameters()]))
    cf.wait()
    assert all(not isinstance(k, str) for k in cf.entries[0].kernels.values())
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-5)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-4, atol=1e-5)
    for a, b in zip(results[0][2], results[1][2]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_compiled_equals_eager_float64_exact_ops():
    """Each new op alone, float64, compiled against eager: values, indices and gradients."""
    ops = [lambda x, w: F.conv3d(x, w, None, (2, 1, 1), (1, 0, 1), (1, 2, 1), 2),
           lambda x, w: F.max_pool3d(x, (2, 3, 2), (1, 2, 1), (1, 1, 0), (2, 1, 1), True, True),
           lambda x, w: F.avg_pool3d(x, (3, 2, 2), (2, 1, 2), (1, 1, 0), True, False)]
    for op in ops:
        runs = []
        for fn in (op, llgrad.compile(op)):
            for _ in range(2):
                x = llgrad.tensor(np.linspace(-2, 3, 2 * 4 * 5 * 6 * 4).reshape(2, 4, 5, 6, 4)
                                  .transpose(0, 1, 2, 4, 3).copy(), requires_grad=True)
                w = llgrad.tensor(np.cos(np.arange(96.0)).reshape(4, 2, 3, 2, 2),
                                  requires_grad=True)
                out = fn(x, w)
            outs = out if isinstance(out, tuple) else (out,)
            (outs[0] * outs[0]).sum().backward()
            runs.append([o.detach().numpy() for o in outs] + [x.grad.numpy()]
                        + ([w.grad.numpy()] if w.grad is not None else []))
        for a, b in zip(*runs):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
