"""nn.functional of issue 21 that is a composition of existing ops (no op-table entry of its
own: the ops are tests/runtime/samples_nn.py's): values and gradients against PyTorch,
gradcheck in float64, and PyTorch's errors for wrong shapes, dtypes and arguments."""
import warnings

import numpy as np
import pytest

import llgrad

_rng = np.random.default_rng(2126)


def R(*shape, lo=-1.5, hi=1.5):
    return np.asarray(_rng.uniform(lo, hi, shape))


def U(*shape):
    return R(*shape, lo=0.1, hi=0.9)


class K:
    """A constant input (no gradient), of its own dtype."""

    def __init__(self, arr):
        self.arr = np.asarray(arr)


def build(T, inputs):
    out = []
    for a in inputs:
        if isinstance(a, K):
            out.append(T.tensor(np.array(a.arr)))
        elif isinstance(a, np.ndarray) and a.dtype.kind == "f":
            out.append(T.tensor(np.array(a), dtype=T.float64, requires_grad=True))
        else:
            out.append(a)
    return out


def F(T):
    return T.nn.functional


X4 = R(2, 3, 5, 6)
CASES = {
    # activations PyTorch composes
    "softsign": (lambda T, x: F(T).softsign(x), R(3, 4)),
    "tanhshrink": (lambda T, x: F(T).tanhshrink(x), R(3, 4)),
    "softmin": (lambda T, x: F(T).softmin(x, 1), R(3, 4)),
    "hardshrink": (lambda T, x: F(T).hardshrink(x, 0.3), R(3, 4)),
    "softshrink": (lambda T, x: F(T).softshrink(x, 0.3), R(3, 4)),
    "prelu": (lambda T, x, w: F(T).prelu(x, w), R(2, 3, 4), R(3)),
    "prelu_shared": (lambda T, x, w: F(T).prelu(x, w), R(3, 4), R(1)),
    # losses
    "l1": (lambda T, x, y: F(T).l1_loss(x, y), R(3, 4), R(3, 4)),
    "l1_none": (lambda T, x, y: F(T).l1_loss(x, y, reduction="none"), R(3, 4), R(3, 4)),
    "l1_weight": (lambda T, x, y, w: F(T).l1_loss(x, y, weight=w), R(3, 4), R(3, 4), K(U(3, 4))),
    "huber_weight_sum": (lambda T, x, y, w: F(T).huber_loss(x, y, "sum", 0.5, w), R(3, 4),
                         R(3, 4), K(U(3, 4))),
    "smooth_l1_beta0": (lambda T, x, y: F(T).smooth_l1_loss(x, y, beta=0.0), R(3, 4), R(3, 4)),
    "kl_mean": (lambda T, x, y: F(T).kl_div(x, y), R(3, 4), U(3, 4)),
    "kl_batchmean": (lambda T, x, y: F(T).kl_div(x, y, reduction="batchmean"), R(3, 4), U(3, 4)),
    "kl_sum_log_target": (lambda T, x, y: F(T).kl_div(x, y, reduction="sum", log_target=True),
                          R(3, 4), R(3, 4)),
    "kl_none_zero_target": (lambda T, x, y: F(T).kl_div(x, y, reduction="none"), R(2, 3),
                            K([[0.0, 0.5, 0.5], [0.2, 0.0, 0.8]])),
    # vector norms
    "normalize": (lambda T, x: F(T).normalize(x), R(3, 4)),
    "normalize_p1_dim0": (lambda T, x: F(T).normalize(x, 1.0, 0), R(3, 4)),
    "normalize_zero_row": (lambda T, x, m: F(T).normalize(x * m, dim=-1), R(3, 4),
                           K([[0.0], [1.0], [1.0]])),
    "cosine": (lambda T, x, y: F(T).cosine_similarity(x, y), R(3, 4), R(3, 4)),
    "cosine_bcast": (lambda T, x, y: F(T).cosine_similarity(x, y, dim=-1, eps=1e-3), R(2, 3, 4),
                     R(4)),
    "pairwise": (lambda T, x, y: F(T).pairwise_distance(x, y), R(3, 4), R(3, 4)),
    "pairwise_p1_keepdim": (lambda T, x, y: F(T).pairwise_distance(x, y, 1.0, keepdim=True),
                            R(3, 4), R(4)),
    "pairwise_p3": (lambda T, x, y: F(T).pairwise_distance(x, y, 3.0), R(3, 4), R(3, 4)),
    # padding and pooling
    "pad_circular": (lambda T, x: F(T).pad(x, (1, 2, 2, 1), mode="circular"), X4),
    "pad_circular_1d_crop": (lambda T, x: F(T).pad(x, (-1, 2), mode="circular"), R(2, 3, 5)),
    "avg_pool1d": (lambda T, x: F(T).avg_pool1d(x, 3, 2, 1, ceil_mode=True), R(2, 3, 8)),
    "adaptive_avg_global": (lambda T, x: F(T).adaptive_avg_pool2d(x, 1), X4),
    "adaptive_avg_even": (lambda T, x: F(T).adaptive_avg_pool2d(x, (5, 3)), X4),
    "adaptive_avg_uneven": (lambda T, x: F(T).adaptive_avg_pool2d(x, (3, 4)), X4),
    "adaptive_avg_none": (lambda T, x: F(T).adaptive_avg_pool2d(x[0], (None, 4)), X4),
    "adaptive_avg_1d": (lambda T, x: F(T).adaptive_avg_pool1d(x, 3), R(2, 3, 7)),
    "adaptive_max": (lambda T, x: F(T).adaptive_max_pool2d(x, (3, 4)), X4),
    "adaptive_max_indices": (lambda T, x: F(T).adaptive_max_pool2d(x, (2, 4), True), X4),
    "adaptive_max_1d": (lambda T, x: F(T).adaptive_max_pool1d(x, 3, return_indices=True),
                        R(2, 3, 7)),
    # normalisation
    "instance_norm": (lambda T, x: F(T).instance_norm(x), R(2, 3, 5)),
    "instance_norm_affine": (lambda T, x, w, b: F(T).instance_norm(x, weight=w, bias=b, eps=1e-3),
                             R(2, 3, 2, 3), R(3), R(3)),
    "instance_norm_eval": (lambda T, x, m, v: F(T).instance_norm(x, m, v, use_input_stats=False),
                           R(2, 3, 4), K(R(3)), K(U(3))),
    "rms_norm": (lambda T, x, w: F(T).rms_norm(x, (4,), w), R(2, 3, 4), R(4)),
    "rms_norm_2d_eps": (lambda T, x: F(T).rms_norm(x, [3, 4], eps=1e-3), R(2, 3, 4)),
    # interpolation
    "nearest_x2": (lambda T, x: F(T).interpolate(x, scale_factor=2), X4),
    "nearest_size": (lambda T, x: F(T).interpolate(x, size=(7, 4)), X4),
    "nearest_scale_1_7": (lambda T, x: F(T).interpolate(x, scale_factor=1.7), X4),
    "nearest_exact": (lambda T, x: F(T).interpolate(x, size=(7, 4), mode="nearest-exact"), X4),
    "nearest_1d": (lambda T, x: F(T).interpolate(x, size=11), R(2, 3, 5)),
    "bilinear_x2": (lambda T, x: F(T).interpolate(x, scale_factor=2, mode="bilinear"), X4),
    "bilinear_align": (lambda T, x: F(T).interpolate(x, size=(7, 9), mode="bilinear",
                                                      align_corners=True), X4),
    "bilinear_down_scales": (lambda T, x: F(T).interpolate(x, scale_factor=(1.5, 0.7),
                                                            mode="bilinear"), X4),
    "bilinear_recompute": (lambda T, x: F(T).interpolate(x, scale_factor=1.3, mode="bilinear",
                                                          recompute_scale_factor=True), X4),
    "linear": (lambda T, x: F(T).interpolate(x, size=9, mode="linear"), R(2, 3, 5)),
    "trilinear": (lambda T, x: F(T).interpolate(x, size=(3, 4, 5), mode="trilinear"),
                  R(1, 2, 2, 3, 4)),
    "area": (lambda T, x: F(T).interpolate(x, size=(3, 4), mode="area"), X4),
    # convolutions
    "conv1d": (lambda T, x, w, b: F(T).conv1d(x, w, b, stride=2, padding=1), R(2, 4, 9),
               R(3, 4, 3), R(3)),
    "conv1d_groups_same": (lambda T, x, w: F(T).conv1d(x, w, groups=2, dilation=2, padding="same"),
                           R(2, 4, 9), R(4, 2, 3)),
    "conv1d_unbatched": (lambda T, x, w: F(T).conv1d(x, w), R(4, 6), R(2, 4, 2)),
    "conv_t2d": (lambda T, x, w: F(T).conv_transpose2d(x, w), X4, R(3, 4, 3, 3)),
    "conv_t2d_stride": (lambda T, x, w, b: F(T).conv_transpose2d(x, w, b, 2, 1, 1), X4,
                        R(3, 2, 3, 3), R(2)),
    "conv_t2d_groups_dilation": (lambda T, x, w: F(T).conv_transpose2d(
        x, w, stride=(2, 1), padding=(0, 2), groups=3, dilation=2), X4, R(3, 2, 3, 2)),
    "conv_t2d_big_padding": (lambda T, x, w: F(T).conv_transpose2d(x, w, stride=3, padding=3,
                                                                    output_padding=2),
                             X4, R(3, 2, 3, 3)),
    "conv_t1d": (lambda T, x, w: F(T).conv_transpose1d(x, w, stride=2, output_padding=1),
                 R(2, 3, 5), R(3, 2, 4)),
}
# compositions whose gradient is not the derivative by definition at the inputs drawn
NO_GRADCHECK = {"kl_none_zero_target": "a zero target's xlogy", "normalize_zero_row": "a zero "
                "norm: its subgradient"}


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name):
    torch = pytest.importorskip("torch")
    fn, *inputs = CASES[name]
    lx, tx = build(llgrad, inputs), build(torch, inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lo, to = _flat(fn(llgrad, *lx)), _flat(fn(torch, *tx))
    assert len(lo) == len(to)
    for a, b in zip(lo, to):
        assert tuple(a.shape) == tuple(b.shape) and str(a.dtype)[7:] == str(b.dtype)[6:]
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12,
                                   atol=1e-12)
    diff = [i for i, o in enumerate(to) if o.requires_grad]
    assert diff == [i for i, o in enumerate(lo) if o.requires_grad]
    if not diff:
        return
    seeds = [np.random.default_rng(0).standard_normal(tuple(to[i].shape)) for i in diff]
    li = [x for x in lx if isinstance(x, llgrad.Tensor) and x.requires_grad]
    ti = [x for x in tx if isinstance(x, torch.Tensor) and x.requires_grad]
    lg = llgrad.autograd.grad([lo[i] for i in diff], li, [llgrad.tensor(s) for s in seeds],
                              allow_unused=True)
    tg = torch.autograd.grad([to[i] for i in diff], ti, [torch.tensor(s) for s in seeds],
                             allow_unused=True)
    for x, a, b in zip(ti, lg, tg):
        a = np.zeros(tuple(x.shape)) if a is None else a.numpy()
        b = np.zeros(tuple(x.shape)) if b is None else b.numpy()
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", sorted(set(CASES) - set(NO_GRADCHECK)))
def test_gradcheck(name):
    fn, *inputs = CASES[name]
    xs = build(llgrad, inputs)
    if not any(isinstance(x, llgrad.Tensor) and x.requires_grad for x in xs):
        pytest.skip("no differentiable input")

    def f(*args):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = [o for o in _flat(fn(llgrad, *args)) if o.is_floating_point()]
        return tuple(outs) if len(outs) > 1 else outs[0]
    assert llgrad.autograd.gradcheck(f, xs, eps=1e-6, atol=1e-5, rtol=1e-3)


def test_one_hot():
    t = llgrad.tensor([[1, 0], [3, 3]])
    out = llgrad.nn.functional.one_hot(t)
    assert out.dtype == llgrad.int64 and tuple(out.shape) == (2, 2, 4)
    np.testing.assert_array_equal(out.numpy(), np.eye(4, dtype=np.int64)[t.numpy()])
    assert tuple(llgrad.nn.functional.one_hot(llgrad.zeros(0, dtype=llgrad.int64), 3).shape) \
        == (0, 3)


# ---- PyTorch's errors ------------------------------------------------------------------------

def _x(T, *shape):
    return T.zeros(*shape) + 0.5


ERRORS = {
    "bce_range": lambda T: F(T).binary_cross_entropy(_x(T, 3) * 3, _x(T, 3)),
    "bce_target_range": lambda T: F(T).binary_cross_entropy(_x(T, 3), _x(T, 3) - 1),
    "bce_size": lambda T: F(T).binary_cross_entropy(_x(T, 3, 2), _x(T, 2)),
    "bce_dtype": lambda T: F(T).binary_cross_entropy(_x(T, 3).double(), _x(T, 3)),
    "reduction": lambda T: F(T).l1_loss(_x(T, 3), _x(T, 3), reduction="foo"),
    "kl_reduction": lambda T: F(T).kl_div(_x(T, 3), _x(T, 3), reduction="foo"),
    "smooth_l1_beta": lambda T: F(T).smooth_l1_loss(_x(T, 3), _x(T, 3), beta=-1.0),
    "huber_delta": lambda T: F(T).huber_loss(_x(T, 3), _x(T, 3), delta=0.0),
    "l1_weight_size": lambda T: F(T).l1_loss(_x(T, 3), _x(T, 3), weight=_x(T, 2)),
    "one_hot_dtype": lambda T: F(T).one_hot(T.tensor([1.0])),
    "one_hot_negative": lambda T: F(T).one_hot(T.tensor([-1])),
    "one_hot_big": lambda T: F(T).one_hot(T.tensor([3]), 3),
    "one_hot_empty": lambda T: F(T).one_hot(T.zeros(0, dtype=T.int64)),
    "cosine_shapes": lambda T: F(T).cosine_similarity(_x(T, 3, 4), _x(T, 3, 3)),
    "cosine_dim": lambda T: F(T).cosine_similarity(_x(T, 3, 4), _x(T, 3, 4), dim=2),
    "cosine_ints": lambda T: F(T).cosine_similarity(T.tensor([1, 2]), T.tensor([1, 2]), 0),
    "normalize_dim": lambda T: F(T).normalize(_x(T, 3, 4), dim=3),
    "glu_odd": lambda T: F(T).glu(_x(T, 3, 5)),
    "glu_scalar": lambda T: F(T).glu(T.tensor(0.5)),
    "hardtanh_bounds": lambda T: F(T).hardtanh(_x(T, 3), 1.0, -1.0),
    "pad_odd": lambda T: F(T).pad(_x(T, 2, 3), (1,)),
    "pad_long": lambda T: F(T).pad(_x(T, 2, 3), (1,) * 6),
    "pad_mode": lambda T: F(T).pad(_x(T, 2, 3), (1, 1), mode="foo"),
    "pad_reflect_big": lambda T: F(T).pad(_x(T, 2, 3, 4), (4, 1), mode="reflect"),
    "pad_reflect_value": lambda T: F(T).pad(_x(T, 2, 3, 4), (1, 1), mode="reflect", value=1.0),
    "pad_reflect_dims": lambda T: F(T).pad(_x(T, 2, 3, 4), (1,) * 6, mode="reflect"),
    "pad_replicate_small": lambda T: F(T).pad(_x(T, 2, 3, 4), (-3, -2), mode="replicate"),
    "pad_reflect_empty": lambda T: F(T).pad(_x(T, 2, 0, 4), (1, 1), mode="reflect"),
    "pad_circular_wrap": lambda T: F(T).pad(_x(T, 2, 3, 4), (5, 1), mode="circular"),
    "avg_pool_stride": lambda T: F(T).avg_pool2d(_x(T, 1, 2, 4, 4), 2, 0),
    "avg_pool_pad": lambda T: F(T).avg_pool2d(_x(T, 1, 2, 4, 4), 2, padding=2),
    "avg_pool_small": lambda T: F(T).avg_pool2d(_x(T, 1, 2, 4, 4), 7),
    "avg_pool_divisor": lambda T: F(T).avg_pool2d(_x(T, 1, 2, 4, 4), 2, divisor_override=0),
    "avg_pool_kernel": lambda T: F(T).avg_pool2d(_x(T, 1, 2, 4, 4), (2, 2, 2)),
    "avg_pool1d_dims": lambda T: F(T).avg_pool1d(_x(T, 1, 2, 4, 4), 2),
    "adaptive_avg_dims": lambda T: F(T).adaptive_avg_pool2d(_x(T, 4, 4), 2),
    "adaptive_avg_size": lambda T: F(T).adaptive_avg_pool2d(_x(T, 1, 4, 4), (1, 2, 3)),
    "adaptive_max_dims": lambda T: F(T).adaptive_max_pool2d(_x(T, 4, 4), 2),
    "adaptive_1d_dims": lambda T: F(T).adaptive_avg_pool1d(_x(T, 1, 2, 4, 4), 2),
    "group_norm_groups": lambda T: F(T).group_norm(_x(T, 2, 6, 4), 4),
    "group_norm_weight": lambda T: F(T).group_norm(_x(T, 2, 6, 4), 3, _x(T, 5)),
    "group_norm_one": lambda T: F(T).group_norm(_x(T, 1, 3, 1), 3),
    "group_norm_dims": lambda T: F(T).group_norm(_x(T, 3), 3),
    "instance_norm_spatial": lambda T: F(T).instance_norm(_x(T, 2, 3, 1)),
    "instance_norm_stats": lambda T: F(T).instance_norm(_x(T, 2, 3, 4), use_input_stats=False),
    "rms_norm_shape": lambda T: F(T).rms_norm(_x(T, 2, 3), (4,)),
    "rms_norm_weight": lambda T: F(T).rms_norm(_x(T, 2, 4), (4,), _x(T, 3)),
    "interp_both": lambda T: F(T).interpolate(_x(T, 1, 2, 4), size=3, scale_factor=2.0),
    "interp_none": lambda T: F(T).interpolate(_x(T, 1, 2, 4)),
    "interp_align": lambda T: F(T).interpolate(_x(T, 1, 2, 4), size=3, align_corners=True),
    "interp_size_len": lambda T: F(T).interpolate(_x(T, 1, 2, 4), size=(3, 3)),
    "interp_recompute": lambda T: F(T).interpolate(_x(T, 1, 2, 4), size=3,
                                                   recompute_scale_factor=True),
    "conv1d_dims": lambda T: F(T).conv1d(_x(T, 4), _x(T, 2, 4, 3)),
    "conv1d_channels": lambda T: F(T).conv1d(_x(T, 2, 4, 9), _x(T, 3, 5, 3)),
    "conv1d_groups": lambda T: F(T).conv1d(_x(T, 2, 4, 9), _x(T, 3, 2, 3), groups=2),
    "conv1d_kernel": lambda T: F(T).conv1d(_x(T, 2, 4, 9), _x(T, 3, 4, 30)),
    "conv_t2d_dims": lambda T: F(T).conv_transpose2d(_x(T, 5, 6), _x(T, 4, 3, 3, 3)),
    "conv_t2d_channels": lambda T: F(T).conv_transpose2d(_x(T, 2, 5, 5, 6), _x(T, 4, 3, 3, 3)),
    "conv_t2d_output_padding": lambda T: F(T).conv_transpose2d(
        _x(T, 2, 4, 5, 6), _x(T, 4, 3, 3, 3), output_padding=1),
    "conv_t2d_bias": lambda T: F(T).conv_transpose2d(_x(T, 2, 4, 5, 6), _x(T, 4, 3, 3, 3),
                                                     _x(T, 4)),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_match_torch(name):
    torch = pytest.importorskip("torch")
    raised = []
    for T in (torch, llgrad):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(Exception) as info:
                ERRORS[name](T)
        raised.append(info.value)
    want, got = raised
    assert type(got) is type(want), (got, want)
    assert str(got) == str(want).replace("torch.Size", "llgrad.Size")
