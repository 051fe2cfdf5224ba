"""Session 75 (d), vision functionals against torch, part 1: pools (max with dilation,
ceil_mode and indices into MaxUnpool, avg with count_include_pad/divisor_override, lp,
adaptive to sizes not dividing the input, fractional with fixed samples), fold/unfold,
pixel and channel shuffles, local_response_norm, normalize with p=1/inf/-inf, and the
GroupNorm/InstanceNorm/LayerNorm modules (affine, running stats, eval) on permuted,
step-sliced and float64 inputs: torch, llgrad eager and llgrad.compile
(adversarial_harness_s69_a10.check). Run by default: this session's regressions, NaN
and inf through adaptive average pooling (and interpolate's area mode) and antialiased
interpolate, each staying in its own windows. Parts 2 and 3: test_adversary_s75_d2.py
(interpolate, grid_sample, pads), test_adversary_s75_d3.py (convolutions)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.torch

from adversary_s75_d_common import (  # noqa: E402,F401 (the shared inputs)
    PERM, PERM64, STEP, V5, X, X64, X64P, XP, XS, _ids, perm, step)

R = np.random.default_rng(751)      # (this file's further inputs)

S = np.array([[[0.2, 0.8], [0.5, 0.05], [0.95, 0.4]], [[0.0, 0.3], [0.6, 0.6], [0.1, 0.99]]], np.float32)
U = R.standard_normal((2, 12, 6)).astype(np.float32)
XN = X.copy()
XN[0, 0, 1, 2], XN[1, 2, 4, 6], XN[0, 1, 0, 0] = np.nan, np.inf, -np.inf
XI = R.integers(-5, 9, (2, 3, 5, 7))
_MODS = {}


def adaptive_avg_nan_inf(torch, x):
    F = torch.nn.functional
    return (F.adaptive_avg_pool2d(x, 3), F.interpolate(x, size=(3, 4), mode="area"),
            F.adaptive_avg_pool1d(x.flatten(2), 6), F.adaptive_avg_pool3d(x.unsqueeze(1), (2, 2, 3)))


def antialias_inf(torch, x):
    F = torch.nn.functional
    return (F.interpolate(x, size=(2, 3), mode="bilinear", antialias=True),
            F.interpolate(x, size=(3, 2), mode="bicubic", antialias=True, align_corners=True))


@pytest.mark.parametrize("fn", [adaptive_avg_nan_inf, antialias_inf], ids=lambda f: f.__name__)
def test_nan_inf_stay_in_their_windows(fn):
    """adaptive_avg_pool1d/2d/3d to sizes not dividing the input multiplied by a matrix of
    window means, and antialiased interpolate added 0-weighted reads past each output's
    support: 0 * inf = NaN spread a NaN or inf to every output of the row."""
    check(fn, ("grad", XN), rtol=1e-4, atol=2e-5)


def int_unfold_raises(torch, x):
    return torch.nn.functional.unfold(x, 2)


def int_fold_raises(torch, x):
    return torch.nn.functional.fold(x.flatten(2)[:, :, :6].repeat(1, 4, 1), (3, 4), 2)


@pytest.mark.parametrize("fn", [int_unfold_raises, int_fold_raises], ids=lambda f: f.__name__)
def test_int_fold_unfold_raise(fn):
    check(fn, XI)


def _mods(lib, dtype, build):
    """build(lib) once per (library, dtype): the modules stay outside the compiled call."""
    key = (lib.__name__, str(dtype), build.__name__)
    if key not in _MODS:
        ms = build(lib)
        for m in ms:
            for k, p in enumerate(m.parameters()):
                p.data = (lib.arange(p.numel(), dtype=lib.float64).reshape(p.shape) / (p.numel() + 3)
                          - 0.4 + 0.1 * k).to(dtype)
        _MODS[key] = ms
    return _MODS[key]



def maxpool_nc(torch, x):
    F = torch.nn.functional
    y, i = F.max_pool2d(x, (2, 3), (1, 2), (1, 1), dilation=(2, 1), ceil_mode=True, return_indices=True)
    z, j = F.max_pool2d(x, 2, return_indices=True)
    return y, i, z, j, F.max_unpool2d(z, j, 2, output_size=(x.shape[2], x.shape[3]))

def unpool_modules(torch, x):
    nn = torch.nn
    p = nn.MaxPool2d(3, 2, 1, return_indices=True, ceil_mode=True)
    u = nn.MaxUnpool2d(3, 2, 1)
    y, i = p(x)
    p1 = nn.MaxPool1d(3, 2, return_indices=True)
    y1, i1 = p1(x.flatten(2))
    return y, i, u(y, i, output_size=x.shape), u(y, i), nn.MaxUnpool1d(3, 2)(y1, i1), y1, i1

def avgpool_options(torch, x):
    F = torch.nn.functional
    return (F.avg_pool2d(x, (3, 2), (2, 3), (1, 1), ceil_mode=True, count_include_pad=False, divisor_override=None),
            F.avg_pool2d(x, 3, 1, 1, count_include_pad=True, divisor_override=2),
            F.avg_pool2d(x, (2, 4), (3, 1), (1, 2), ceil_mode=True, divisor_override=7),
            F.avg_pool1d(x.flatten(2), 5, 4, 2, ceil_mode=True, count_include_pad=False),
            torch.nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False)(x))

def lp_pool_nc(torch, x):
    F = torch.nn.functional
    a = x * x + 0.2
    return (F.lp_pool2d(a, 2, (2, 3), stride=(2, 1)), F.lp_pool2d(a, 1.5, 3, ceil_mode=True),
            F.lp_pool1d(a.flatten(2), 3, 4, stride=3, ceil_mode=True), torch.nn.LPPool2d(4, (1, 2))(a),
            F.lp_pool2d(a, float(2), 2))

def adaptive_nc(torch, x):
    F = torch.nn.functional
    return (F.adaptive_avg_pool2d(x, (3, 4)), F.adaptive_max_pool2d(x, (2, 5), return_indices=True),
            F.adaptive_avg_pool2d(x, (7, 9)), F.adaptive_max_pool2d(x, (6, 1)),
            F.adaptive_avg_pool1d(x.flatten(2), 8), torch.nn.AdaptiveAvgPool2d((None, 2))(x),
            torch.nn.AdaptiveMaxPool2d(3)(x))

def fractional_nc(torch, x, s):
    F = torch.nn.functional
    return (F.fractional_max_pool2d(x, (2, 2), output_size=(4, 5), return_indices=True, _random_samples=s),
            F.fractional_max_pool2d(x, 3, output_ratio=(0.6, 0.6), _random_samples=s),
            F.fractional_max_pool2d(x, (1, 3), output_size=(5, 2), _random_samples=s))

def frac_module(torch, x, s):
    m = torch.nn.FractionalMaxPool2d(2, output_size=(3, 3), return_indices=True, _random_samples=s)
    return m(x)

def maxpool_raises_pad(torch, x):
    return torch.nn.functional.max_pool2d(x, 2, 2, padding=2)

def unpool_raises_size(torch, x):
    F = torch.nn.functional
    y, i = F.max_pool2d(x, 2, return_indices=True)
    return F.max_unpool2d(y, i, 2, output_size=(9, 9))

def fold_unfold_nc(torch, x):
    F = torch.nn.functional
    u = F.unfold(x, (3, 2), dilation=(2, 3), padding=(2, 1), stride=(1, 2))
    return (u, F.fold(u, x.shape[2:], (3, 2), dilation=(2, 3), padding=(2, 1), stride=(1, 2)),
            F.fold(F.unfold(x, 2, stride=2), (4, 6), 2, stride=2), torch.nn.Unfold(2, 2, 1, 3)(x),
            torch.nn.Fold((6, 8), (2, 3), dilation=1, padding=(0, 1), stride=(3, 2))(u[:, :, :8]))

def fold_3d_input(torch, u):
    F = torch.nn.functional
    return F.fold(u, (3, 4), 2), F.fold(u[0], (3, 4), 2), F.unfold(u.reshape(2, 6, 4, 3)[0], 2)

def fold_raises(torch, u):
    return torch.nn.functional.fold(u, (3, 5), 2)

def shuffles_nc(torch, x):
    F = torch.nn.functional
    y = x[:, :, :4, :6]
    y4 = x.repeat(1, 4, 1, 1)
    return (F.pixel_shuffle(y4, 2), F.pixel_unshuffle(y, (2)), torch.nn.PixelShuffle(2)(y4[:, :8]),
            F.channel_shuffle(x.repeat(1, 2, 1, 1), 3), torch.nn.ChannelShuffle(3)(x),
            F.pixel_unshuffle(x.unsqueeze(0)[..., :4, :6], 2), F.pixel_shuffle(y4.unsqueeze(0), 2))

def lrn_5d_expanded_raises(torch, x):      # (torch's own view() of the expanded input)
    return torch.nn.functional.local_response_norm(x.unsqueeze(2).expand(2, 3, 2, 5, 7), 2)

def shuffle_raises(torch, x):
    return torch.nn.functional.pixel_shuffle(x, 2)

def lrn_nc(torch, x):
    F = torch.nn.functional
    v = x.unsqueeze(2).expand(2, 3, 2, 5, 7).contiguous()
    return (F.local_response_norm(x, 4, alpha=0.3, beta=1.5, k=0.5), F.local_response_norm(v, 2, alpha=0.5),
            torch.nn.LocalResponseNorm(6, beta=0.25)(x), F.local_response_norm(x.flatten(2), 1))

def normalize_nc(torch, x):
    F = torch.nn.functional
    return (F.normalize(x, p=1, dim=(2)), F.normalize(x, p=float("inf"), dim=1),
            F.normalize(x, p=float("-inf"), dim=3), F.normalize(x, p=0.5, dim=-1, eps=1e-3),
            F.normalize(x[:, :1] * 0, p=float("inf"), dim=1), F.normalize(x, p=1, dim=(1, 2)))

def _norms(lib):
    nn = lib.nn
    return [nn.GroupNorm(3, 3), nn.GroupNorm(1, 3, affine=False, eps=1e-2),
            nn.InstanceNorm2d(3, affine=True, track_running_stats=True, momentum=0.3),
            nn.InstanceNorm2d(3, affine=False, track_running_stats=True),
            nn.InstanceNorm2d(3, affine=True), nn.LayerNorm((5, 7), elementwise_affine=False),
            nn.LayerNorm((5, 7), bias=False), nn.LayerNorm((3, 5, 7), eps=1e-2),
            nn.InstanceNorm1d(3, affine=True, track_running_stats=True)]

def norms_train(torch, x):
    m = _mods(torch, x.dtype, _norms)
    for k in (2, 3, 8):
        m[k].train()
    return [mi(x) for mi in m[:8]] + [m[8](x.flatten(2))]

def _norms_e(lib):
    return _norms(lib)

def norms_eval(torch, x):
    m = _mods(torch, x.dtype, _norms_e)
    for mi in m:
        mi.eval()
    out = [mi(x) for mi in m[:8]] + [m[8](x.flatten(2))]
    for mi in m:
        mi.train()
    return out

def norms_running_stats(torch, x):
    nn = torch.nn
    m = nn.InstanceNorm2d(3, affine=False, track_running_stats=True, momentum=None)
    y1 = m(x); y2 = m(x * 2)
    m.eval()
    return y1, y2, m(x), m.running_mean, m.running_var, m.num_batches_tracked

def groupnorm_raises(torch, x):
    return torch.nn.functional.group_norm(x, 2)

def instnorm_unbatched(torch, x):
    F = torch.nn.functional
    return F.instance_norm(x[0]), torch.nn.InstanceNorm2d(3)(x[0]), torch.nn.GroupNorm(3, 3, affine=False)(x[0:1])


RUNS = [("maxpool_nc", [PERM]), ("maxpool_nc", [STEP]), ("maxpool_nc", [("grad", X64)]),
        ("unpool_modules", [("grad", X)]), ("avgpool_options", [STEP]), ("avgpool_options", [("grad", X64)]),
        ("lp_pool_nc", [PERM]), ("lp_pool_nc", [("grad", X64)]), ("adaptive_nc", [STEP]),
        ("adaptive_nc", [("grad", X64)]), ("fractional_nc", [PERM, S]),
        ("fractional_nc", [("grad", X64), S.astype(np.float64)]), ("frac_module", [("grad", X), S]),
        ("maxpool_raises_pad", [X]), ("unpool_raises_size", [X]), ("fold_unfold_nc", [PERM]),
        ("fold_unfold_nc", [("grad", X64)]), ("fold_3d_input", [("grad", U)]), ("fold_raises", [U]),
        ("shuffles_nc", [PERM]), ("shuffle_raises", [X]), ("lrn_nc", [PERM]), ("lrn_nc", [("grad", X64)]),
        ("lrn_5d_expanded_raises", [PERM]), ("normalize_nc", [STEP]), ("normalize_nc", [("grad", X64)]),
        ("norms_train", [PERM]), ("norms_eval", [("grad", X)]), ("norms_eval", [PERM64]),
        ("norms_running_stats", [("grad", X)]), ("groupnorm_raises", [X]), ("instnorm_unbatched", [("grad", X)])]


@pytest.mark.slow       # (a compile a case)
@pytest.mark.parametrize("name,specs", RUNS, ids=_ids(RUNS))
def test_pools_folds_norms(name, specs):
    check(globals()[name], *specs, rtol=1e-4, atol=2e-5)
