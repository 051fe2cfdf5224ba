"""nn.functional with the options tutorials pass, against torch: interpolate (bicubic with
align_corners, antialias, area, trilinear, recompute_scale_factor), affine_grid/grid_sample
(every padding_mode, align_corners, bicubic, 3-D), reflect/replicate/circular pads in 1-D
and 3-D, fold/unfold with stride > kernel, grouped/dilated conv1d/3d and conv_transpose
with output_padding, max_pool return_indices + max_unpool, avg_pool3d options, adaptive
pools to sizes not dividing the input, lp_pool, fractional_max_pool with fixed samples,
batch/instance/group/layer/local_response norms, normalize (embedding, embedding_bag,
attention and more: test_adversary_s73_c4.py): torch, llgrad eager and llgrad.compile
(adversarial_harness_s69_a10.check)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case)

R = np.random.default_rng(73)
X = R.standard_normal((2, 4, 5, 7)).astype(np.float32)
X64 = R.standard_normal((2, 4, 5, 7))


def interp_bicubic_align(torch, x):
    F = torch.nn.functional
    return (F.interpolate(x, size=(7, 4), mode="bicubic", align_corners=True),
            F.interpolate(x, scale_factor=0.6, mode="bicubic", align_corners=False),
            F.interpolate(x, scale_factor=(1.7, 0.8), mode="bilinear", recompute_scale_factor=True))


def interp_antialias(torch, x):
    F = torch.nn.functional
    return (F.interpolate(x, size=(3, 4), mode="bilinear", antialias=True),
            F.interpolate(x, scale_factor=0.45, mode="bicubic", antialias=True, align_corners=True),
            F.interpolate(x, size=(8, 3), mode="bilinear", antialias=True))


def interp_area_3d(torch, x):
    F = torch.nn.functional
    v = x.reshape(1, 2, 4, 5, 7)
    return (F.interpolate(x, size=(3, 4), mode="area"), F.adaptive_avg_pool2d(x, (4, 3)),
            F.interpolate(v, size=(3, 7, 5), mode="trilinear", align_corners=True),
            F.interpolate(v, scale_factor=(1.5, 0.5, 1.2), mode="nearest"),
            F.interpolate(v, scale_factor=0.7, mode="nearest-exact"),
            F.interpolate(x[0], size=9, mode="linear", align_corners=True))


def grid_sample_modes(torch, x):
    F = torch.nn.functional
    th = torch.tensor([[[0.9, -0.3, 0.2], [0.4, 1.2, -0.1]], [[-1.1, 0.2, 0.5], [0.1, 0.8, 0.3]]])
    outs = []
    for ac in (False, True):
        g = F.affine_grid(th, [2, 4, 3, 6], align_corners=ac)
        outs.append(g)
        for pm in ("zeros", "border", "reflection"):
            outs.append(F.grid_sample(x, g, mode="bilinear", padding_mode=pm, align_corners=ac))
        outs.append(F.grid_sample(x, g, mode="nearest", padding_mode="border", align_corners=ac))
    return outs


def grid_sample_bicubic(torch, x):
    F = torch.nn.functional
    th = torch.tensor([[[0.9, -0.3, 0.2], [0.4, 1.2, -0.1]], [[-1.1, 0.2, 0.5], [0.1, 0.8, 0.3]]])
    g = F.affine_grid(th, [2, 4, 3, 6], align_corners=False)
    return (F.grid_sample(x, g, mode="bicubic", padding_mode="zeros", align_corners=False),
            F.grid_sample(x, g, mode="bicubic", padding_mode="border", align_corners=True),
            F.grid_sample(x, g, mode="bicubic", padding_mode="reflection", align_corners=False))


def grid_sample_3d(torch, x):
    F = torch.nn.functional
    v = x.reshape(2, 2, 2, 5, 7)
    th = torch.tensor([[[0.9, -0.3, 0.2, 0.1], [0.4, 1.2, -0.1, 0.0], [0.0, 0.3, 0.7, -0.4]]] * 2)
    g = F.affine_grid(th, [2, 2, 3, 2, 4], align_corners=False)
    return (F.grid_sample(v, g, align_corners=False, padding_mode="border"),
            F.grid_sample(v, g, mode="nearest", align_corners=True, padding_mode="reflection"))


def pads_1d_3d(torch, x):
    F = torch.nn.functional
    v = x.reshape(1, 2, 4, 5, 7)
    return (F.pad(x[0], (3, 2), mode="reflect"), F.pad(x[0], (-1, 4), mode="circular"),
            F.pad(v, (1, 2, 2, 1, 3, 0), mode="replicate"), F.pad(v, (2, 1, 0, 2, 1, 1), mode="reflect"),
            F.pad(v, (1, 1, 3, 0, 2, 2), mode="circular"), F.pad(x, (0, 0, -2, -1), mode="constant", value=2.5))


def pad_reflect_too_wide_raises(torch, x):
    return torch.nn.functional.pad(x[0], (7, 0), mode="reflect")


def fold_stride_gt_kernel(torch, x):
    F = torch.nn.functional
    u = F.unfold(x, 2, stride=3)
    return u, F.fold(u, (5, 7), 2, stride=3), F.fold(F.unfold(x, (3, 2), padding=(1, 0), stride=(1, 2)), (5, 7), (3, 2), padding=(1, 0), stride=(1, 2))


def conv1d_3d_groups(torch, x):
    F = torch.nn.functional
    w1 = torch.arange(4 * 2 * 3, dtype=torch.float32).reshape(4, 2, 3) / 30 - 0.4
    w3 = torch.arange(4 * 1 * 2 * 2 * 3, dtype=torch.float32).reshape(4, 1, 2, 2, 3) / 40 - 0.3
    s = x.reshape(2, 4, 35)
    v = x.reshape(1, 4, 2, 5, 7)
    return (F.conv1d(s, w1, torch.tensor([0.1, -0.2, 0.3, 0.0]), stride=3, dilation=4, groups=2),
            F.conv1d(s, w1[:, :, :2], padding="same", dilation=3, groups=2),
            F.conv3d(v, w3, groups=4, padding=(1, 0, 2), stride=(1, 2, 2)),
            F.conv3d(v, w3[:, :, :, :1], stride=3, groups=4))


def conv_weight_grads(torch, x, w):
    F = torch.nn.functional
    return (F.conv2d(x, w, stride=(3, 4)), F.conv2d(x, w, padding="same", dilation=2),
            F.conv2d(x, w[:1].reshape(4, 1, 2, 2), groups=4, bias=None, padding=1))


def conv_transpose_groups(torch, x, w):
    F = torch.nn.functional
    b = torch.tensor([0.5, -0.5, 0.25, 0.0])
    s = x.reshape(2, 4, 35)
    wt = w[:2].reshape(4, 2, 2, 2)
    return (F.conv_transpose2d(x, wt, b, stride=(3, 2), padding=1, output_padding=(2, 1), groups=2, dilation=(1, 2)),
            F.conv_transpose1d(s, wt.reshape(4, 2, 4)[:, :, :3], stride=2, output_padding=1, groups=2),
            F.conv_transpose3d(x.reshape(1, 4, 2, 5, 7), wt.reshape(4, 1, 2, 2, 2), stride=2, padding=(0, 1, 1), output_padding=(1, 0, 1), groups=4))


def max_pool_unpool(torch, x):
    F = torch.nn.functional
    y, i = F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True)
    y1, i1 = F.max_pool1d(x[0], 2, 2, dilation=2, ceil_mode=True, return_indices=True)
    y3, i3 = F.max_pool3d(x.reshape(1, 2, 4, 5, 7), 2, 2, ceil_mode=True, return_indices=True)
    z, iz = F.max_pool2d(x, 2, 2, return_indices=True)
    return (y, i, F.max_unpool2d(z, iz, 2, 2, output_size=(5, 7)), y1, i1,
            F.max_unpool1d(y1, i1, 2, 2, output_size=[7]), y3, i3)


def avg_pool_3d_options(torch, x):
    F = torch.nn.functional
    v = x.reshape(1, 2, 4, 5, 7)
    return (F.avg_pool3d(v, 3, 2, 1, ceil_mode=True, count_include_pad=False),
            F.avg_pool3d(v, (2, 3, 2), (1, 2, 3), (1, 1, 0), divisor_override=5),
            F.avg_pool1d(x[0], 3, 2, 1, count_include_pad=False))


def adaptive_nondividing(torch, x):
    F = torch.nn.functional
    v = x.reshape(1, 2, 4, 5, 7)
    return (F.adaptive_avg_pool1d(x[0], 3), F.adaptive_max_pool1d(x[0], 4, return_indices=True),
            F.adaptive_avg_pool3d(v, (3, 2, 4)), F.adaptive_max_pool3d(v, (3, 4, 5)),
            F.adaptive_max_pool2d(x, (3, 5), return_indices=True), F.adaptive_avg_pool2d(x, (None, 3)))


def lp_pools(torch, x):
    F = torch.nn.functional
    a = x.abs() + 0.1
    return F.lp_pool2d(a, 1, 2), F.lp_pool2d(a, 3, (2, 3), stride=(1, 2)), F.lp_pool1d(a[0], 2.5, 3, 2)


def fractional_max_pool(torch, x):
    F = torch.nn.functional
    s = torch.tensor([[[0.3, 0.7], [0.1, 0.9], [0.5, 0.5], [0.0, 0.99]]] * 2)
    s3 = torch.tensor([[[0.3, 0.7, 0.2], [0.1, 0.9, 0.6]]])
    return (F.fractional_max_pool2d(x, 2, output_size=(3, 4), _random_samples=s),
            F.fractional_max_pool2d(x, (2, 3), output_ratio=(0.5, 0.5), return_indices=True, _random_samples=s),
            F.fractional_max_pool3d(x.reshape(1, 2, 4, 5, 7), 2, output_size=(2, 3, 4), _random_samples=s3))


def batch_norm_eval_affine(torch, x):
    F = torch.nn.functional
    rm, rv = torch.tensor([0.1, -0.2, 0.3, 0.0]), torch.tensor([1.5, 0.5, 2.0, 1.0])
    w, b = torch.tensor([1.0, 2.0, -1.0, 0.5]), torch.tensor([0.0, 0.1, 0.2, 0.3])
    y0 = F.batch_norm(x, rm * 1, rv * 1, w, b, training=False, eps=1e-3)   # (copies: torch's
    y1 = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.3)  # stat update bumps no version)
    y2 = F.batch_norm(x, None, None, w, None, training=True)
    return y0, y1, y2, rm, rv


def instance_norm_running(torch, x):
    F = torch.nn.functional
    rm, rv = torch.zeros(4), torch.ones(4)
    w, b = torch.tensor([1.0, 2.0, -1.0, 0.5]), torch.tensor([0.0, 0.1, 0.2, 0.3])
    y = F.instance_norm(x, rm, rv, w, b, use_input_stats=True, momentum=0.2)
    e = F.instance_norm(x, rm, rv, w, b, use_input_stats=False)
    return y, e, rm, rv, F.instance_norm(x[:, :, 0])


def group_layer_norms(torch, x):
    F = torch.nn.functional
    w, b = torch.tensor([1.0, 2.0, -1.0, 0.5]), torch.tensor([0.0, 0.1, 0.2, 0.3])
    return (F.group_norm(x, 4, w, b, eps=1e-3), F.group_norm(x, 1), F.layer_norm(x, (5, 7)),
            F.layer_norm(x, (7,), torch.arange(7.0) / 7, None),
            F.local_response_norm(x, 3), F.local_response_norm(x, 2, alpha=0.1, beta=0.5, k=2.0),
            F.local_response_norm(x.reshape(2, 4, 35), 5))


def normalize_p1(torch, x):
    F = torch.nn.functional
    return (F.normalize(x, p=1, dim=1), F.normalize(x, p=1.0, dim=-1, eps=2.0),
            F.normalize(x, p=float("inf"), dim=2), F.normalize(x * 0, p=3, dim=0))


CASES = [interp_bicubic_align, interp_antialias, interp_area_3d, grid_sample_modes,
         grid_sample_bicubic, grid_sample_3d, pads_1d_3d, pad_reflect_too_wide_raises,
         fold_stride_gt_kernel, conv1d_3d_groups, max_pool_unpool, avg_pool_3d_options,
         adaptive_nondividing, lp_pools, fractional_max_pool, batch_norm_eval_affine,
         instance_norm_running, group_layer_norms, normalize_p1]
XFAIL = {}


def _param(fn):
    return pytest.param(fn, id=fn.__name__, marks=[pytest.mark.xfail(strict=True, reason=XFAIL[fn.__name__])]
                        if fn.__name__ in XFAIL else [])


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("fn", [_param(f) for f in CASES])
@pytest.mark.parametrize("grad", [False, True])
def test_functional_options(fn, grad):
    check(fn, ("grad", X) if grad else X, atol=2e-5, rtol=1e-4)


W = R.standard_normal((4, 4, 2, 2)).astype(np.float32)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("fn", [_param(f) for f in [conv_weight_grads, conv_transpose_groups]])
def test_conv_weight_grads(fn):
    check(fn, ("grad", X), ("grad", W), atol=2e-5, rtol=1e-4)
