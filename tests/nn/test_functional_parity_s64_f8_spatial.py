"""torch.nn.functional parity, spatial ops with unusual but legal arguments (helper f8):
interpolate, grid_sample, affine_grid, pad, unfold/fold. Values and gradients in float32
and float64 against PyTorch, eager and compiled (compiled must equal eager)."""
import numpy as np
import pytest

from parity_harness_s64_f8 import check, compiled_params, rnd

torch = pytest.importorskip("torch")


def _interp(**kw):
    return lambda L, x: L.nn.functional.interpolate(x, **kw)


CASES = [
    ("nearest_1d_scale", _interp(scale_factor=1.7, mode="nearest"), [rnd(2, 3, 5)]),
    ("nearest_exact_2d_down", _interp(size=(3, 5), mode="nearest-exact"), [rnd(1, 2, 7, 4)]),
    ("nearest_3d_tuple", _interp(scale_factor=(0.6, 1.5, 2.0), mode="nearest"),
     [rnd(1, 1, 5, 3, 2)]),
    ("nearest_recompute", _interp(scale_factor=1.3, mode="nearest",
                                  recompute_scale_factor=True), [rnd(1, 2, 7)]),
    ("linear_ac", _interp(scale_factor=2.5, mode="linear", align_corners=True),
     [rnd(2, 2, 4)]),
    ("linear_down_noac", _interp(size=3, mode="linear"), [rnd(1, 2, 8)]),
    ("bilinear_tuple_scale", _interp(scale_factor=(1.5, 0.7), mode="bilinear"),
     [rnd(1, 2, 4, 6)]),
    ("bilinear_recompute", _interp(scale_factor=(1.3, 2.6), mode="bilinear",
                                   recompute_scale_factor=True), [rnd(1, 1, 5, 4)]),
    ("bilinear_ac_size1", _interp(size=(1, 5), mode="bilinear", align_corners=True),
     [rnd(1, 2, 4, 3)]),
    ("bilinear_aa_down", _interp(size=(3, 2), mode="bilinear", antialias=True),
     [rnd(1, 2, 9, 7)]),
    ("bilinear_aa_ac", _interp(scale_factor=0.4, mode="bilinear", antialias=True,
                               align_corners=True), [rnd(2, 1, 10, 8)]),
    ("bicubic", _interp(scale_factor=(1.6, 0.75), mode="bicubic"), [rnd(1, 2, 5, 8)]),
    ("bicubic_ac", _interp(size=(7, 3), mode="bicubic", align_corners=True),
     [rnd(1, 1, 4, 5)]),
    ("bicubic_aa_down", _interp(scale_factor=0.45, mode="bicubic", antialias=True),
     [rnd(1, 2, 11, 9)]),
    ("bicubic_aa_mixed", _interp(size=(4, 12), mode="bicubic", antialias=True),
     [rnd(1, 1, 9, 6)]),
    ("trilinear", _interp(scale_factor=(1.5, 0.5, 2.0), mode="trilinear"),
     [rnd(1, 2, 3, 6, 2)]),
    ("trilinear_ac", _interp(size=(2, 5, 3), mode="trilinear", align_corners=True),
     [rnd(1, 1, 4, 3, 4)]),
    ("area_2d", _interp(size=(3, 4), mode="area"), [rnd(1, 2, 7, 9)]),
    ("area_1d_up", _interp(scale_factor=2.5, mode="area"), [rnd(1, 2, 3)]),
    ("area_3d", _interp(size=(2, 3, 1), mode="area"), [rnd(1, 1, 5, 4, 3)]),
]

_gs = lambda **kw: (lambda L, x, g: L.nn.functional.grid_sample(x, g, **kw))  # noqa: E731
_GRID = rnd(2, 3, 4, 2, seed=3) * 0.8  # reaches past [-1, 1] for the padding modes
_GRID3 = rnd(1, 2, 3, 2, 3, seed=4) * 0.8
for mode in ("bilinear", "nearest", "bicubic"):
    for pad in ("zeros", "border", "reflection"):
        for ac in (False, True):
            CASES.append((f"grid_sample_{mode}_{pad}_{int(ac)}",
                          _gs(mode=mode, padding_mode=pad, align_corners=ac),
                          [rnd(2, 2, 5, 4, seed=2), _GRID]))
for mode in ("bilinear", "nearest"):
    for pad in ("zeros", "border", "reflection"):
        CASES.append((f"grid_sample_5d_{mode}_{pad}", _gs(mode=mode, padding_mode=pad,
                                                         align_corners=pad == "border"),
                      [rnd(1, 2, 3, 4, 5, seed=2), _GRID3]))
# far outside [-1, 1] (several reflections) and exactly on the corners and edges
_FAR = np.array([[[[-5.3, 0.2], [3.7, -2.9], [9.1, 1.0]], [[1.0, 1.0], [-1.0, -1.0],
                                                          [1.0, -0.5]]]])
_EDGE = np.array([[[[-1.0, 1.0], [1.0, 0.0], [-0.75, -1.0]], [[0.0, 0.0], [1.0, 1.0],
                                                             [-1.0, 0.25]]]])
for mode in ("bilinear", "nearest", "bicubic"):
    for pad in ("zeros", "border", "reflection"):
        for gname, grid in (("far", _FAR), ("edge", _EDGE)):
            for ac in (False, True):
                CASES.append((f"grid_sample_{gname}_{mode}_{pad}_{int(ac)}",
                              _gs(mode=mode, padding_mode=pad, align_corners=ac),
                              [rnd(1, 2, 3, 4, seed=2), grid]))
for ac in (False, True):
    CASES.append((f"affine_grid_2d_{int(ac)}", lambda L, t, ac=ac:
                  L.nn.functional.affine_grid(t, [2, 1, 3, 5], align_corners=ac),
                  [rnd(2, 2, 3, seed=5)]))
    CASES.append((f"affine_grid_3d_{int(ac)}", lambda L, t, ac=ac:
                  L.nn.functional.affine_grid(t, [1, 1, 2, 3, 4], align_corners=ac),
                  [rnd(1, 3, 4, seed=5)]))
    CASES.append((f"affine_then_sample_{int(ac)}", lambda L, x, t, ac=ac:
                  L.nn.functional.grid_sample(x, L.nn.functional.affine_grid(
                      t, [2, 2, 4, 3], align_corners=ac), align_corners=ac,
                      padding_mode="reflection"), [rnd(2, 2, 5, 5), rnd(2, 2, 3, seed=5)]))

_pad = lambda p, m: (lambda L, x: L.nn.functional.pad(x, p, mode=m))  # noqa: E731
CASES += [
    ("pad_reflect_1d_neg", _pad((-1, 2), "reflect"), [rnd(2, 3, 6)]),
    ("pad_reflect_2d_mixed", _pad((2, -1, -2, 3), "reflect"), [rnd(1, 2, 5, 6)]),
    ("pad_reflect_3d", _pad((1, 0, -1, 2, 2, 1), "reflect"), [rnd(1, 1, 4, 4, 3)]),
    ("pad_replicate_neg", _pad((-2, 3, 1, -1), "replicate"), [rnd(1, 2, 4, 5)]),
    ("pad_replicate_1d_unbatched", _pad((3, -1), "replicate"), [rnd(2, 4)]),
    ("pad_circular_neg", _pad((-1, 2, 1, -2), "circular"), [rnd(1, 2, 4, 5)]),
    ("pad_circular_3d", _pad((1, 2, -1, 1, 2, 0), "circular"), [rnd(1, 1, 3, 4, 3)]),
    ("pad_constant_neg", lambda L, x: L.nn.functional.pad(x, (-1, 2, 0, -3), value=2.5),
     [rnd(2, 5, 6)]),
    ("unfold_dil_pad_stride", lambda L, x: L.nn.functional.unfold(
        x, (2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 3)), [rnd(2, 3, 7, 8)]),
    ("fold_overlap", lambda L, x: L.nn.functional.fold(
        x, (5, 6), (2, 3), dilation=(1, 2), padding=1, stride=(1, 2)), [rnd(2, 12, 12)]),
    ("fold_unbatched", lambda L, x: L.nn.functional.fold(x, (4, 4), 2, stride=2),
     [rnd(8, 4)]),
    ("unfold_fold_roundtrip", lambda L, x: L.nn.functional.fold(L.nn.functional.unfold(
        x, 3, padding=1), (5, 4), 3, padding=1), [rnd(1, 2, 5, 4)]),
]


# strided inputs (transposed / channels-last views) and the largest legal pads
_T = lambda f: (lambda L, x, *r: f(L, x.transpose(-1, -2), *r))  # noqa: E731
_CL = lambda f: (lambda L, x, *r: f(L, x.permute(0, 3, 1, 2), *r))  # noqa: E731
CASES += [
    ("T_bilinear_aa", _T(_interp(size=(2, 3), mode="bilinear", antialias=True)),
     [rnd(1, 2, 7, 5)]),
    ("CL_bicubic", _CL(_interp(scale_factor=(1.5, 0.6), mode="bicubic", align_corners=True)),
     [rnd(1, 5, 6, 3)]),
    ("CL_nearest_exact", _CL(_interp(scale_factor=0.7, mode="nearest-exact")),
     [rnd(2, 7, 5, 2)]),
    ("CL_area", _CL(_interp(size=(3, 2), mode="area")), [rnd(1, 7, 5, 3)]),
    ("T_linear_scale_round", _T(_interp(scale_factor=0.3, mode="linear")), [rnd(1, 10, 2)]),
    ("T_trilinear", _T(_interp(scale_factor=1.5, mode="trilinear")), [rnd(1, 2, 2, 3, 4)]),
    ("T_grid_sample", _T(_gs(mode="bicubic", padding_mode="reflection")),
     [rnd(1, 2, 5, 4), _GRID[:1]]),
    ("CL_grid_sample", _CL(_gs(mode="bilinear", padding_mode="border")),
     [rnd(2, 5, 4, 2), _GRID]),
    ("T_pad_reflect_max", _T(_pad((4, 4, 3, -2), "reflect")), [rnd(1, 2, 5, 4)]),
    ("pad_circular_full", _pad((5, 5, 4, 0), "circular"), [rnd(1, 2, 4, 5)]),
    ("pad_replicate_3d_neg", _pad((-1, 0, 2, -2, 1, 1), "replicate"), [rnd(2, 3, 4, 3)]),
    ("CL_unfold", _CL(lambda L, x: L.nn.functional.unfold(x, (2, 2), stride=(1, 2))),
     [rnd(1, 5, 4, 3)]),
    ("bilinear_aa_up_ac", _interp(scale_factor=(2.5, 1.5), mode="bilinear", antialias=True,
                                  align_corners=True), [rnd(1, 2, 3, 4)]),
    ("bicubic_aa_tuple", _interp(scale_factor=(0.35, 0.8), mode="bicubic", antialias=True,
                                 recompute_scale_factor=True), [rnd(1, 1, 12, 7)]),
    ("area_mixed", _interp(size=(9, 2), mode="area"), [rnd(1, 2, 4, 7)]),
]

# a few cases compiled in the default run, one per family; all of them under -m slow
COMPILED_FAST = [
    'bicubic_aa_down', 'grid_sample_bicubic_reflection_1', 'affine_then_sample_0',
    'pad_circular_neg', 'CL_bicubic',
]


def _eager_params():
    """Every case in float64; float32 too, but the 72 boundary-grid ones under -m slow."""
    out = []
    for c in CASES:
        out.append(pytest.param(*c, np.float64, id=f"{c[0]}-f64"))
        slow = c[0].startswith(("grid_sample_far", "grid_sample_edge"))
        out.append(pytest.param(*c, np.float32, id=f"{c[0]}-f32",
                                marks=pytest.mark.slow if slow else ()))
    return out


@pytest.mark.parametrize("name,fn,specs,dtype", _eager_params())
def test_eager_matches_torch(name, fn, specs, dtype):
    check(fn, specs, dtype, compiled=False)


@pytest.mark.parametrize("name,fn,specs", compiled_params(CASES, COMPILED_FAST))
def test_compiled_matches_eager(name, fn, specs):
    check(fn, specs, np.float32, torch_oracle=False)


# A given scale_factor whose output size equals the input size along a dim: the forward maps
# with 1 / scale_factor (PyTorch's forward too), but ATen's backward kernels copy the gradient
# straight through when the sizes agree (nearest, antialiased bilinear / bicubic), so
# PyTorch's own gradcheck fails there. llgrad keeps the gradient of the forward it computes:
# the forward is compared with PyTorch, the gradient by float64 gradcheck.
SAME_SIZE = [
    ("nearest_9x1.1", lambda L, x: L.nn.functional.interpolate(x, scale_factor=1.1), (1, 1, 9)),
    ("nearest_3x7/3", lambda L, x: L.nn.functional.interpolate(x, scale_factor=1 / 3 * 7),
     (1, 1, 3)),
    ("bilinear_aa_9", lambda L, x: L.nn.functional.interpolate(
        x, scale_factor=(1.1, 1 / 1.1), mode="bilinear", antialias=True), (1, 1, 9, 9)),
    ("bicubic_aa_9", lambda L, x: L.nn.functional.interpolate(
        x, scale_factor=(1 / 1.1, 1.1), mode="bicubic", antialias=True), (1, 2, 9, 9)),
]


@pytest.mark.parametrize("name,fn,shape", SAME_SIZE, ids=[c[0] for c in SAME_SIZE])
def test_same_size_scale_factor_gradient_is_the_forwards(name, fn, shape):
    import llgrad
    x0 = rnd(*shape)
    np.testing.assert_allclose(fn(llgrad, llgrad.tensor(x0)).numpy(),
                               fn(torch, torch.tensor(x0)).numpy(), rtol=1e-12, atol=1e-12)
    x = llgrad.tensor(x0, requires_grad=True)
    assert llgrad.autograd.gradcheck(lambda t: fn(llgrad, t), (x,))
    check(fn, [x0], np.float64, torch_oracle=False)



@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_antialias_to_width_one_matches_torch_on_the_transposed_image(mode):
    """PyTorch 2.13's antialiased resize to an output width of 1 returns every output row
    equal (even for a pure upsampling of a column), while the transposed resize to height 1
    interpolates. llgrad interpolates both ways: its (H, 1) result is PyTorch's (1, H) result
    on the transposed image."""
    import llgrad
    x0 = rnd(1, 2, 3, 4)
    got = llgrad.nn.functional.interpolate(llgrad.tensor(x0), size=(6, 1), mode=mode,
                                           antialias=True).numpy()
    want = torch.nn.functional.interpolate(torch.tensor(x0).transpose(2, 3).contiguous(),
                                           size=(1, 6), mode=mode, antialias=True)
    np.testing.assert_allclose(got, want.transpose(2, 3).numpy(), rtol=1e-12, atol=1e-12)
