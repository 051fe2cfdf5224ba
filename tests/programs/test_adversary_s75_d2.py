"""Session 75 (d), vision functionals against torch, part 2: interpolate (antialias mixing
up- and down-sampling, scale_factor with and without recompute, size-1 inputs and outputs,
1-D/3-D modes, nn.Upsample*), grid_sample with the grid's and affine_grid's theta's
gradients (2-D, 3-D), reflect/replicate/circular pads with negative pads and the pad
modules, on permuted, step-sliced and float64 inputs, and the errors torch raises: torch,
llgrad eager and llgrad.compile (adversarial_harness_s69_a10.check). Part 1 (pools, fold,
shuffles, norms and the regressions of this session's fixes): test_adversary_s75_d.py;
convolutions: test_adversary_s75_d3.py."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.torch

from adversary_s75_d_common import (  # noqa: E402,F401 (the shared inputs)
    PERM, PERM64, STEP, V5, X, X64, X64P, XP, XS, _ids, perm, step)

R = np.random.default_rng(752)      # (this file's further inputs)

G = R.uniform(-1.4, 1.4, (2, 4, 3, 2)).astype(np.float32)
TH = np.array([[[0.9, -0.3, 0.2], [0.4, 1.2, -0.1]], [[-1.1, 0.2, 0.5], [0.1, 0.8, 0.3]]], np.float32)
TH3 = np.array([[[0.9, -0.3, 0.2, 0.1], [0.4, 1.2, -0.1, 0.0], [0.0, 0.3, 0.7, -0.4]]], np.float32)


def interp_nc(torch, x):
    F = torch.nn.functional
    return (F.interpolate(x, size=(4, 9), mode="bilinear", align_corners=True),
            F.interpolate(x, scale_factor=(0.5, 1.5), mode="nearest-exact"),
            F.interpolate(x, scale_factor=1.25, mode="bicubic", align_corners=False),
            F.interpolate(x, size=(2, 3), mode="area"),
            F.interpolate(x, size=(3, 9), mode="bilinear", antialias=True))

def interp_aa_mixed(torch, x):
    F = torch.nn.functional
    return (F.interpolate(x, size=(2, 11), mode="bilinear", antialias=True, align_corners=True),
            F.interpolate(x, size=(3, 2), mode="bicubic", antialias=True),
            F.interpolate(x, scale_factor=0.4, mode="bilinear", antialias=True, recompute_scale_factor=True))

def interp_scale_nonrecompute(torch, x):
    F = torch.nn.functional
    return (F.interpolate(x, scale_factor=(0.7, 1.3), mode="bilinear", align_corners=False),
            F.interpolate(x, scale_factor=(0.7, 1.3), mode="bilinear", recompute_scale_factor=True),
            F.interpolate(x, scale_factor=2.9, mode="nearest"),
            F.interpolate(x, scale_factor=0.34, mode="area"),
            F.interpolate(x, scale_factor=0.34, mode="bicubic", align_corners=True))

def interp_1d_3d(torch, x):
    F = torch.nn.functional
    s = x.reshape(2, 3, 35)
    v = x.reshape(2, 3, 5, 7, 1)
    return (F.interpolate(s, scale_factor=0.3, mode="linear"), F.interpolate(s, size=11, mode="nearest-exact"),
            F.interpolate(s, size=4, mode="area"), F.interpolate(v, size=(3, 4, 2), mode="trilinear"),
            F.interpolate(v, scale_factor=(0.5, 1.5, 3.0), mode="trilinear", align_corners=True),
            F.interpolate(v, size=(2, 3, 3), mode="area"), F.interpolate(v, scale_factor=1.6, mode="nearest-exact"))

def interp_size1(torch, x):
    F = torch.nn.functional
    return (F.interpolate(x[:, :, :1, :1], size=(3, 4), mode="bilinear", align_corners=True),
            F.interpolate(x[:, :, :1], size=(4, 2), mode="bicubic", align_corners=True),
            F.interpolate(x, size=(1, 5), mode="bilinear", align_corners=False),
            F.interpolate(x, size=(1, 1), mode="bicubic", antialias=True))

def upsample_modules(torch, x):
    nn = torch.nn
    return (nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)(x),
            nn.Upsample(size=(3, 8), mode="nearest")(x),
            nn.Upsample(scale_factor=(1.5, 0.5), mode="bicubic")(x),
            nn.UpsamplingNearest2d(scale_factor=2)(x), nn.UpsamplingBilinear2d(size=(4, 4))(x))

def interp_raises_both(torch, x):
    return torch.nn.functional.interpolate(x, size=(3, 3), scale_factor=2.0)

def interp_raises_aa_nearest(torch, x):
    return torch.nn.functional.interpolate(x, size=(3, 3), mode="nearest", antialias=True)

def interp_raises_align_nearest(torch, x):
    return torch.nn.functional.interpolate(x, size=(3, 3), mode="nearest", align_corners=True)

def interp_raises_bilinear_3d(torch, x):
    return torch.nn.functional.interpolate(x[0], size=3, mode="bilinear")

def grid_grad(torch, x, g):
    F = torch.nn.functional
    return (F.grid_sample(x, g, mode="bilinear", padding_mode="zeros", align_corners=False),
            F.grid_sample(x, g, mode="bilinear", padding_mode="border", align_corners=True),
            F.grid_sample(x, g, mode="bilinear", padding_mode="reflection", align_corners=False),
            F.grid_sample(x, g, mode="bicubic", padding_mode="zeros", align_corners=True))

def affine_theta_grad(torch, x, th):
    F = torch.nn.functional
    g = F.affine_grid(th, [2, 3, 4, 6], align_corners=False)
    g2 = F.affine_grid(th, [2, 3, 3, 5], align_corners=True)
    return (g, F.grid_sample(x, g, align_corners=False, padding_mode="reflection"),
            F.grid_sample(x, g2, mode="nearest", align_corners=True))

def affine_3d_theta_grad(torch, v, th):
    F = torch.nn.functional
    g = F.affine_grid(th, [1, 2, 2, 3, 4], align_corners=True)
    return g, F.grid_sample(v, g, align_corners=True, padding_mode="border")

def grid_raises_bicubic_5d(torch, v):
    F = torch.nn.functional
    g = torch.zeros(1, 2, 2, 2, 3)
    return F.grid_sample(v, g, mode="bicubic", align_corners=False)


def pads_nc(torch, x):
    F = torch.nn.functional
    return (F.pad(x, (2, 1, 4, 0), mode="reflect"), F.pad(x, (-1, 3, 2, -2), mode="circular"),
            F.pad(x, (0, 3, 1, 1), mode="replicate"), F.pad(x, (-2, 1, 3, -1), mode="replicate"),
            F.pad(x, (1, -3, 0, 2), mode="reflect"))

def pads_1d_neg(torch, x):
    F = torch.nn.functional
    s = x.reshape(2, 3, 35)
    return (F.pad(s, (-3, 2), mode="reflect"), F.pad(s, (4, -5), mode="replicate"),
            F.pad(s, (-2, -2), mode="circular"), F.pad(x[0, 0], (2, 1), mode="reflect"),
            F.pad(x[0], (1, 2, 1, 0), mode="circular"))

def pads_3d_neg(torch, v):
    F = torch.nn.functional
    return (F.pad(v, (-1, 2, 1, -1, 2, 0), mode="reflect"), F.pad(v, (1, -2, 0, 1, -1, 2), mode="replicate"),
            F.pad(v, (-1, -1, 2, 3, 1, -1), mode="circular"), F.pad(v[0], (1, 1, 2, 0, 0, 1), mode="reflect"))

def pad_modules(torch, x):
    nn = torch.nn
    return (nn.ReflectionPad2d((1, 3, 2, 0))(x), nn.ReflectionPad2d(2)(x), nn.ReplicationPad2d((0, 2, -1, 3))(x),
            nn.CircularPad2d((2, -1, 1, 1))(x), nn.ZeroPad2d((1, -1, 2, 0))(x), nn.ConstantPad2d(1, -0.5)(x),
            nn.ReflectionPad1d((3, 1))(x[0]), nn.ReplicationPad3d(1)(x.unsqueeze(2)))

def pad_circular_too_wide_raises(torch, x):
    return torch.nn.functional.pad(x, (8, 0, 0, 0), mode="circular")

def pad_replicate_wrong_len_raises(torch, x):
    return torch.nn.functional.pad(x, (1, 1, 1, 1, 1, 1, 1, 1), mode="replicate")


RUNS = [("interp_nc", [PERM]), ("interp_nc", [STEP]), ("interp_nc", [PERM64]),
        ("interp_aa_mixed", [("grad", X)]), ("interp_aa_mixed", [("grad", X64)]),
        ("interp_scale_nonrecompute", [("grad", X)]), ("interp_1d_3d", [("grad", X)]),
        ("interp_size1", [("grad", X)]), ("upsample_modules", [("grad", X)]),
        ("interp_raises_both", [X]), ("interp_raises_aa_nearest", [X]), ("interp_raises_align_nearest", [X]),
        ("interp_raises_bilinear_3d", [X]), ("grid_grad", [("grad", X), ("grad", G)]),
        ("grid_grad", [PERM, ("grad", G)]), ("affine_theta_grad", [("grad", X), ("grad", TH)]),
        ("affine_3d_theta_grad", [("grad", V5), ("grad", TH3)]), ("grid_raises_bicubic_5d", [V5]),
        ("pads_nc", [PERM]), ("pads_nc", [STEP]), ("pads_nc", [("grad", X64)]),
        ("pads_1d_neg", [("grad", X)]), ("pads_3d_neg", [("grad", V5)]), ("pad_modules", [("grad", X)]),
        ("pad_circular_too_wide_raises", [X]), ("pad_replicate_wrong_len_raises", [X])]


@pytest.mark.slow       # (a compile a case)
@pytest.mark.parametrize("name,specs", RUNS, ids=_ids(RUNS))
def test_interp_grid_pad(name, specs):
    check(globals()[name], *specs, rtol=1e-4, atol=2e-5)
