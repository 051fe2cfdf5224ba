"""Spatial ops at their edges against torch: interpolate with fractional scales (nearest,
nearest-exact, bilinear with and without align_corners, bicubic), negative and circular
padding, pooling with ceil_mode whose last window starts in the padding (and
count_include_pad=False, divisor_override, dilation), convolutions with padding="same"
and even kernels, fold/unfold with dilation, pixel (un)shuffle and grid_sample outside
[-1, 1]: torch, llgrad eager and llgrad.compile (adversarial_harness_s69_a10.check)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case; the fast regressions are in
# test_adversarial_regressions_s69_a10.py)

X = np.random.default_rng(3).standard_normal((1, 2, 5, 7)).astype(np.float32)


def interp_nearest(torch, x):
    F = torch.nn.functional
    return (F.interpolate(x, scale_factor=1.5), F.interpolate(x, scale_factor=0.7),
            F.interpolate(x, size=(3, 11)), F.interpolate(x, scale_factor=(2.3, 0.45), mode="nearest-exact"),
            F.interpolate(x, scale_factor=1.7, recompute_scale_factor=True))


def interp_linear(torch, x):
    F = torch.nn.functional
    return (F.interpolate(x, scale_factor=1.5, mode="bilinear"),
            F.interpolate(x, size=(3, 11), mode="bilinear", align_corners=True),
            F.interpolate(x, scale_factor=0.6, mode="bilinear"),
            F.interpolate(x, size=(1, 1), mode="bilinear", align_corners=True),
            F.interpolate(x, scale_factor=2.5, mode="bicubic"), F.interpolate(x[0], scale_factor=1.3, mode="linear"))


def pads(torch, x):
    F = torch.nn.functional
    return (F.pad(x, (1, -2, -1, 2)), F.pad(x, (2, 3, 1, 4), mode="reflect"),
            F.pad(x, (3, 1, 2, 0), mode="replicate"), F.pad(x, (6, 7, 4, 5), mode="circular"),
            F.pad(x, (1, 1), value=float("nan")))


def pools_ceil(torch, x):
    F = torch.nn.functional
    return (F.max_pool2d(x, 3, 2, 1, ceil_mode=True), F.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
            F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
            F.avg_pool2d(x, 2, 3, 1, ceil_mode=True, divisor_override=3),
            F.max_pool2d(x, 2, 3, 1, dilation=2, ceil_mode=True), F.lp_pool2d(x.abs(), 2, 3, 2, ceil_mode=True),
            F.adaptive_avg_pool2d(x, (3, 4)), F.adaptive_max_pool2d(x, (4, 3)),
            F.avg_pool1d(x[0], 4, 3, 2, ceil_mode=True, count_include_pad=False))


def convs(torch, x):
    F = torch.nn.functional
    w = torch.arange(2 * 2 * 2 * 4, dtype=torch.float32).reshape(2, 2, 2, 4) / 50 - 0.3
    return (F.conv2d(x, w, padding="same"), F.conv2d(x, w, padding="same", dilation=(2, 1)),
            F.conv2d(x, w, stride=(2, 3), padding=(1, 2)),
            F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1), F.conv2d(x, w[:, :1], groups=2),
            F.conv2d(F.pad(x, (3, 3, 0, 0), mode="circular"), w))


def fold_unfold(torch, x):
    F = torch.nn.functional
    u = F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    return u, F.fold(u, (5, 7), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), x.unfold(3, 3, 2)


def shuffles_and_grid(torch, x):
    F = torch.nn.functional
    y = x[:, :, :4, :6]
    grid = torch.tensor([[[[-1.2, 0.3], [0.5, 1.1]], [[0.0, 0.0], [1.0, -1.0]]]])
    return (F.pixel_unshuffle(y, 2), F.pixel_shuffle(F.pixel_unshuffle(y, 2), 2),
            F.channel_shuffle(x.repeat(1, 2, 1, 1), 2), F.grid_sample(x, grid, align_corners=False),
            F.grid_sample(x, grid, mode="nearest", padding_mode="reflection", align_corners=True))


CASES = [interp_nearest, interp_linear, pads, pools_ceil, convs, fold_unfold, shuffles_and_grid]


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("grad", [False, True])
def test_spatial_edges(fn, grad):
    check(fn, ("grad", X) if grad else X, atol=1e-5, rtol=1e-5)
