"""PyTorch's grad_fn names (and the values and gradients with them) for ops llgrad computes
as compositions of its op table's ops: before, the result's node was named after the
composition's last op (WhereBackward0 for median, ToCopyBackward0 for tan, SubBackward0 for
x % 2, IndexSelectBackward0 for interpolate, ...). Also clamp's gradient where the bound
wins (PyTorch selects: 0, not inf * 0 = nan), torch.pow with a number base, mvlgamma,
adaptive_avg_pool2d to the input's own size (a new tensor, not the input), fill_/lerp
argument checks, atanh/acosh gradients at their poles (inf, not nan), multi_margin_loss's
at a margin of exactly 0. Compiled, the same programs give eager's (and PyTorch's) names."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

_X = np.array([[0.5, -1.0, 2.0], [0.2, 0.3, -0.4]])


def _run(lib, fn, x=_X):
    a = lib.tensor(x, dtype=lib.float32).requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = fn(lib, a)
    if isinstance(y, tuple):
        y = y[0]
    w = lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)), dtype=y.dtype)
    (y * w).sum().backward()
    g = a.grad.numpy(force=True) if lib is torch else a.grad.numpy()   # (sgn: a ZeroTensor)
    return type(y.grad_fn).__name__, y.detach().numpy(), g


def same_node(fn, x=_X, rtol=1e-5, compiled=False):
    tn, tv, tg = _run(torch, fn, x)
    for wrap in (lambda f: f,) + ((llgrad.compile,) if compiled else ()):
        ln, lv, lg = _run(llgrad, lambda L, a: wrap(lambda t: fn(L, t))(a), x)
        assert ln == tn, (ln, tn)
        np.testing.assert_allclose(lv, tv, rtol=rtol, atol=1e-6, equal_nan=True)
        np.testing.assert_allclose(lg, tg, rtol=max(rtol, 1e-4), atol=1e-5, equal_nan=True)


CASES = [
    lambda L, x: x.median(),
    lambda L, x: x.median(1),
    lambda L, x: x.nanmedian(),
    lambda L, x: x.nanmedian(0),
    lambda L, x: x.nansum(),
    lambda L, x: L.nansum(x, 1),
    lambda L, x: x.aminmax()[1],
    lambda L, x: L.aminmax(x, dim=0)[0],
    lambda L, x: L.take(x, L.tensor([0, 4])),
    lambda L, x: x.put(L.tensor([0]), L.tensor([1.0])),
    lambda L, x: x.index_fill(1, L.tensor([0]), 1.0),
    lambda L, x: x.index_fill(1, L.tensor([0]), L.tensor(1.0)),
    lambda L, x: x.index_copy(1, L.tensor([0]), L.ones(2, 1)),
    lambda L, x: x % 0.7,
    lambda L, x: x % (x + 2),
    lambda L, x: x.remainder(0.7),
    lambda L, x: L.remainder(x, x + 2),
    lambda L, x: x.fmod(0.3),
    lambda L, x: L.fmod(x, x + 2),
    lambda L, x: x.sgn(),
    lambda L, x: x.tan(),
    lambda L, x: x.sinh(),
    lambda L, x: x.cosh(),
    lambda L, x: x.asinh(),
    lambda L, x: (x + 3).acosh(),
    lambda L, x: (x / 3).atanh(),
    lambda L, x: x.abs().log2(),
    lambda L, x: x.abs().log10(),
    lambda L, x: x.exp2(),
    lambda L, x: x.sigmoid().logit(),
    lambda L, x: x.sigmoid().logit(0.1),
    lambda L, x: x.sinc(),
    lambda L, x: x.logaddexp(x * 2),
    lambda L, x: x.logaddexp2(x * 2),
    lambda L, x: x.hypot(x * 2),
    lambda L, x: x.abs().xlogy(x.abs() + 1),
    lambda L, x: x.xlogy(2),
    lambda L, x: x.copysign(-x),
    lambda L, x: x.copysign(-1),
    lambda L, x: x.deg2rad(),
    lambda L, x: x.rad2deg(),
    lambda L, x: x.nan_to_num(),
    lambda L, x: x.ldexp(L.tensor([1])),
    lambda L, x: x.fmax(x.flip(0)),
    lambda L, x: x.fmin(x.flip(0)),
    lambda L, x: x.cummax(1),
    lambda L, x: x.cummin(0),
    lambda L, x: x.logcumsumexp(1),
    lambda L, x: x.kthvalue(2, 1),
    lambda L, x: x.mode(1),
    lambda L, x: x.trace(),
    lambda L, x: L.cdist(x, x * 2),
    lambda L, x: L.dist(x, x * 2, p=3),
    lambda L, x: L.std_mean(x, 1),
    lambda L, x: L.var_mean(x)[1],
    lambda L, x: x.renorm(2, 0, 1),
    lambda L, x: L.cross(x.repeat(1, 1), x.flip(1), dim=1),
    lambda L, x: x.rot90(),
    lambda L, x: (x + 3).mvlgamma(2),
    lambda L, x: L.nn.functional.softshrink(x, 0.5),
    lambda L, x: L.nn.functional.hardshrink(x, 0.3),
    lambda L, x: L.nn.functional.prelu(x, L.tensor([0.2])),
    lambda L, x: L.nn.functional.pdist(x),
    lambda L, x: L.nn.functional.pairwise_distance(x, x.flip(0)),
    lambda L, x: L.nn.functional.soft_margin_loss(x, L.ones(2, 3)),
    lambda L, x: L.nn.functional.soft_margin_loss(x, L.ones(2, 3), reduction="none"),
    lambda L, x: L.nn.functional.multi_margin_loss(x, L.tensor([0, 1])),
    lambda L, x: L.nn.functional.multilabel_margin_loss(x, L.tensor([[0, -1, 0], [1, 2, -1]])),
    lambda L, x: L.nn.functional.interpolate(x[None], size=5),
    lambda L, x: L.nn.functional.interpolate(x[None], size=5, mode="nearest-exact"),
    lambda L, x: L.nn.functional.interpolate(x[None], size=5, mode="linear"),
    lambda L, x: L.nn.functional.interpolate(x[None, None], size=(3, 4)),
    lambda L, x: L.nn.functional.interpolate(x[None, None], size=(3, 4), mode="bilinear",
                                             align_corners=True),
    lambda L, x: L.nn.functional.interpolate(x[None, None], size=(3, 4), mode="bicubic"),
    lambda L, x: L.nn.functional.interpolate(x[None, None], size=(3, 4), mode="area"),
    lambda L, x: L.nn.functional.interpolate(x[None, None, None], size=(1, 3, 4),
                                             mode="trilinear"),
    lambda L, x: L.nn.functional.interpolate(x[None, None, None], size=(2, 3, 4)),
    lambda L, x: L.nn.functional.adaptive_avg_pool2d(x[None], 2),
    lambda L, x: L.nn.functional.adaptive_avg_pool2d(x[None], (2, 3)),
    lambda L, x: L.nn.functional.adaptive_max_pool2d(x[None], (1, 3)),
    lambda L, x: L.nn.functional.adaptive_max_pool2d(x[None], 2),
    lambda L, x: L.nn.functional.adaptive_avg_pool3d(x[None, None], (1, 2, 2)),
    lambda L, x: L.nn.functional.adaptive_avg_pool3d(x[None, None], (1, 2, 3)),
    lambda L, x: L.nn.functional.adaptive_max_pool3d(x[None, None], (1, 1, 3)),
    lambda L, x: L.nn.functional.adaptive_max_pool3d(x[None, None], (1, 2, 2)),
    lambda L, x: L.nn.functional.conv1d(x[None], x[:, :, None].repeat(1, 1, 2)[:, :2]),
    lambda L, x: L.nn.functional.conv_transpose1d(x[None, :, :2], x[:, None, :2].repeat(1, 2, 1)),
    lambda L, x: L.nn.functional.unfold(x[None, None], 2),
    lambda L, x: L.nn.functional.unfold(x[None], (1, 2)),
    lambda L, x: L.nn.functional.fold(x.reshape(1, 1, 6)[:, :, :4], (2, 2), (1, 1)),
    lambda L, x: L.nn.functional.pixel_shuffle(x.reshape(6, 1, 1)[:4], 2),
    lambda L, x: L.nn.functional.pixel_unshuffle(x[None, :, :2], 2),
    lambda L, x: (x * 1).clamp_(min=0).sqrt_(),
    lambda L, x: L.clamp(x, 0, 1) * L.tensor([1.0, float("inf"), 2.0]),
    lambda L, x: L.clamp(x, min=x.flip(1)).rsqrt(),
    lambda L, x: x.clamp_max(0.0).neg().sqrt(),
    lambda L, x: x.clamp_min(L.tensor(0.25)).sqrt() ** -1,
    lambda L, x: L.pow(2, x),
    lambda L, x: L.pow(0.5, x * 2),
    lambda L, x: L.special.entr(x.abs()),
    lambda L, x: L.special.xlog1py(x.abs(), x.abs() * 2),
    lambda L, x: L.special.xlog1py(x, 2.0),
    lambda L, x: L.special.xlog1py(2.0, x.abs()),
    lambda L, x: L.special.erfcx(x),
    lambda L, x: L.special.ndtr(x),
    lambda L, x: L.special.ndtri(x.sigmoid()),
    lambda L, x: L.special.log_ndtr(x),
    lambda L, x: L.block_diag(x, x[:1]),
    lambda L, x: L.linalg.cross(x, x.flip(1)),
]


@pytest.mark.parametrize("fn", CASES)
def test_grad_fn_name_value_and_gradient(fn):
    same_node(fn)


@pytest.mark.parametrize("fn,x", [
    (lambda L, x: x.atanh(), [[-1.0, -0.5, 0.0], [0.25, 1.0, 1e-7]]),     # (inf at +-1)
    (lambda L, x: x.acosh(), [[1.0, 1.5, 2.0], [1e10, 1.0 + 1e-6, 3.0]]),    # (inf at 1)
    (lambda L, x: L.nn.functional.multi_margin_loss(x, L.tensor([0, 2])),      # (a tie at 0)
     [[-1.0, -0.5, 0.0], [0.5, 1.0, 1.5]]),
    (lambda L, x: L.nn.functional.multi_margin_loss(x, L.tensor([0, 2]), p=2,
                                                    weight=L.tensor([1.0, 2.0, 3.0])),
     [[-1.0, -0.5, 0.0], [0.5, 1.0, 1.5]]),
])
def test_gradients_at_the_edges(fn, x):
    same_node(fn, np.array(x), rtol=2e-5)


@pytest.mark.parametrize("fn", [CASES[0], CASES[13], CASES[20], CASES[70], CASES[93]])
def test_compiled_keeps_the_names(fn):
    same_node(fn, compiled=True)


@pytest.mark.parametrize("fn", [
    lambda L: L.pow(2, 3),
    lambda L: L.tensor([1.0, 2]).fill_(L.tensor([2.7])),
    lambda L: L.tensor([1, 2]).lerp_(L.tensor([3, 4]), 0.5),
    lambda L: L.tensor([1, 2]).lerp(L.tensor([3, 4]), L.tensor([1, 2])),
    lambda L: L.tensor([1.0, 2]).lerp(L.tensor([3, 4]), 0.5),
    lambda L: L.tensor([1.0, 2]).lerp(L.tensor([3.0, 4], dtype=L.float64), 0.5),
    lambda L: L.tensor([1.0, 2]).lerp(L.tensor([3.0, 4]), L.tensor([1, 2])),
    lambda L: L.tensor([True]).lerp(L.tensor([True]), 0.5),
    lambda L: L.mvlgamma(L.tensor([1.0]), 0),
])
def test_errors(fn):
    def observe(lib):
        with pytest.raises(Exception) as e:
            fn(lib)
        return type(e.value).__name__, str(e.value).splitlines()[0]
    assert observe(llgrad) == observe(torch)


def test_values_without_errors():
    for lib in (torch, llgrad):
        x = lib.arange(16.0).reshape(1, 1, 4, 4).requires_grad_()
        y = lib.nn.functional.adaptive_avg_pool2d(x, 4)
        assert y is not x and type(y.grad_fn).__name__ == "AdaptiveAvgPool2DBackward0"
        y = lib.nn.functional.adaptive_avg_pool3d(x, (1, 4, 4))
        assert y is not x and type(y.grad_fn).__name__ == "AdaptiveAvgPool3DBackward0"
    for x in ([-1.0, 0.5, 2.0], [1, 2]):
        t = torch.mvlgamma(torch.tensor(x), 2)
        v = llgrad.mvlgamma(llgrad.tensor(x), 2)
        assert str(v.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        np.testing.assert_allclose(v.numpy(), t.numpy(), rtol=1e-6)
        np.testing.assert_allclose(llgrad.special.multigammaln(llgrad.tensor(x), 2).numpy(),
                                   t.numpy(), rtol=1e-6)
