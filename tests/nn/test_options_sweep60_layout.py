"""The memory format of the upsample, adaptive pool, max_pool3d and 3-d convolution results
against torch: ATen allocates them channels_last (channels_last_3d) where the input (or the
convolution's weight) suggests that format; llgrad returned them row-major (values equal,
strides not, so x.view(...) worked where torch's raises, and the layout of every op after
them differed). Eager and compiled."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

X4 = np.random.RandomState(0).randn(2, 4, 6, 7).astype(np.float32)
X5 = np.random.RandomState(1).randn(2, 4, 3, 4, 5).astype(np.float32)

CASES_4D = {
    "nearest": lambda F, t: F.interpolate(t, scale_factor=2),
    "nearest_exact": lambda F, t: F.interpolate(t, scale_factor=2, mode="nearest-exact"),
    "bilinear": lambda F, t: F.interpolate(t, size=(5, 9), mode="bilinear"),
    "bilinear_same_size": lambda F, t: F.interpolate(t, size=(6, 7), mode="bilinear"),
    "bilinear_ac": lambda F, t: F.interpolate(t, size=(5, 9), mode="bilinear",
                                              align_corners=True),
    "bicubic": lambda F, t: F.interpolate(t, size=(5, 9), mode="bicubic"),
    "bilinear_aa": lambda F, t: F.interpolate(t, size=(3, 3), mode="bilinear", antialias=True),
    "bicubic_aa": lambda F, t: F.interpolate(t, size=(3, 9), mode="bicubic", antialias=True),
    "area": lambda F, t: F.interpolate(t, size=(3, 3), mode="area"),
    "adaptive_avg": lambda F, t: F.adaptive_avg_pool2d(t, (3, 2)),
    "adaptive_avg_even": lambda F, t: F.adaptive_avg_pool2d(t[..., :6], (3, 3)),
    "adaptive_max": lambda F, t: F.adaptive_max_pool2d(t, (3, 2), return_indices=True),
    "adaptive_max_even": lambda F, t: F.adaptive_max_pool2d(t[..., :6], (3, 3),
                                                            return_indices=True),
    "uint8_bilinear": lambda F, t: F.interpolate((t.detach() * 20).abs().byte(), size=(4, 9),
                                                 mode="bilinear"),
}

CASES_5D = {
    "trilinear": lambda F, t: F.interpolate(t, scale_factor=2, mode="trilinear"),
    "nearest3d": lambda F, t: F.interpolate(t, scale_factor=(2, 1, 1.5)),
    "max_pool3d": lambda F, t: F.max_pool3d(t, 2, return_indices=True),
    "conv3d": lambda F, t: F.conv3d(t, t.new_ones((3, 4, 2, 1, 2))),
    "conv_transpose3d": lambda F, t: F.conv_transpose3d(t, t.new_ones((4, 2, 2, 2, 2)), stride=2,
                                                        groups=2),
}


def _run(lib, f, x, fmt):
    t = lib.tensor(x).contiguous(memory_format=getattr(lib, fmt)).requires_grad_(True)
    out = f(lib.nn.functional, t)
    outs = out if isinstance(out, tuple) else (out,)
    if outs[0].dtype.is_floating_point:
        (outs[0] * lib.arange(outs[0].numel()).reshape(outs[0].shape).to(outs[0].dtype)
         ).sum().backward()
    grad = None if t.grad is None else (t.grad.numpy().copy(), tuple(t.grad.stride()))
    return [(o.detach().numpy().copy(), tuple(o.stride())) for o in outs], grad


def _check(f, x, fmt):
    ours, ograd = _run(llgrad, f, x, fmt)
    theirs, tgrad = _run(torch, f, x, fmt)
    for (a, sa), (b, sb) in zip(ours, theirs):
        assert sa == sb
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    if tgrad is not None:
        assert ograd[1] == tgrad[1]
        np.testing.assert_allclose(ograd[0], tgrad[0], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("name", sorted(CASES_4D))
def test_channels_last_result_as_torch(name):
    _check(CASES_4D[name], X4, "channels_last")


@pytest.mark.parametrize("name", sorted(CASES_5D))
def test_channels_last_3d_result_as_torch(name):
    _check(CASES_5D[name], X5, "channels_last_3d")


def test_conv3d_channels_last_weight_as_torch():
    out = []
    for lib in (llgrad, torch):
        w = lib.ones(4, 4, 1, 2, 1).contiguous(memory_format=lib.channels_last_3d)
        out.append(lib.nn.functional.conv3d(lib.tensor(X5), w))
    assert out[0].stride() == out[1].stride()
    np.testing.assert_allclose(out[0].numpy(), out[1].numpy(), rtol=1e-5, atol=1e-5)


def test_row_major_input_stays_row_major():
    for f in list(CASES_4D.values())[:6]:
        ours, _ = _run(llgrad, f, X4, "contiguous_format")
        theirs, _ = _run(torch, f, X4, "contiguous_format")
        assert [s for _, s in ours] == [s for _, s in theirs]


@pytest.mark.parametrize("name", ["bilinear", "adaptive_max", "nearest"])
def test_compiled_layout_is_eagers(name):
    f = CASES_4D[name]
    F = llgrad.nn.functional

    def g(t):
        return f(F, t)

    cg = llgrad.compile(g)
    for _ in range(2):
        t = llgrad.tensor(X4).contiguous(memory_format=llgrad.channels_last)
        c = cg(t)
    e = g(llgrad.tensor(X4).contiguous(memory_format=llgrad.channels_last))
    for a, b in zip(c if isinstance(c, tuple) else (c,), e if isinstance(e, tuple) else (e,)):
        assert a.stride() == b.stride()
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("shape,out", [((1, 2, 5, 6, 6), (2, 4, 6)), ((1, 2, 1, 2, 4), (2, 5, 10)),
                                       ((2, 3, 4, 5, 6), (2, 2, 7))])
@pytest.mark.parametrize("fmt", ["contiguous_format", "channels_last_3d"])
def test_adaptive_avg_pool3d_result_row_major_as_torch(shape, out, fmt):
    # (the window-mean matmuls of unequal windows left a dim they skipped permuted; ATen's
    # result is row-major, channels_last_3d input or not)
    x = np.random.RandomState(2).randn(*shape).astype(np.float32)
    _check(lambda F, t: F.adaptive_avg_pool3d(t, out), x, fmt)
