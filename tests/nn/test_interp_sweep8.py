"""Sweep 8: F.interpolate over modes, align_corners, sizes and scale factors (up, down, to
one, recomputed), antialias=True (bilinear, bicubic, lanczos) and the errors of empty
outputs and of modes that take no antialias, against torch (tests/nn/oracle_sweep8.py)."""
import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from oracle_sweep8 import check, identity  # noqa: E402

MODES = {1: ("nearest", "nearest-exact", "linear", "area"),
         2: ("nearest", "nearest-exact", "bilinear", "bicubic", "area"),
         3: ("nearest", "nearest-exact", "trilinear", "area")}
SIZES = [dict(size=7), dict(size=2), dict(scale_factor=2), dict(scale_factor=0.5),
         dict(scale_factor=1.7), dict(scale_factor=1.7, recompute_scale_factor=True)]


def _x(*shape, dtype=np.float32):
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype)


def _interp(**kw):
    return lambda m, xs, lib: lib.nn.functional.interpolate(xs[0], **kw)


@pytest.mark.parametrize("dim,mode", [(d, m) for d in MODES for m in MODES[d]], ids=str)
def test_interpolate_modes(dim, mode):
    x = _x(2, 3, *(5, 4, 3)[:dim])
    corners = (None,) if mode in ("nearest", "nearest-exact", "area") else (None, False, True)
    for ac, sz in itertools.product(corners, SIZES + [dict(size=tuple([3, 8, 2][:dim]))]):
        check(identity, [x], _interp(mode=mode, align_corners=ac, **sz))


@pytest.mark.parametrize("mode", ("bilinear", "bicubic", "lanczos"))
@pytest.mark.parametrize("dtype", (np.float32, np.float64))
def test_interpolate_antialias(mode, dtype):
    """torchvision's Resize(antialias=True) path: PyTorch's separable filters (a triangle,
    Keys' cubic with a = -0.5, Lanczos-3) widened by the scale when downsampling."""
    x = _x(2, 3, 9, 13, dtype=dtype)
    corners = (None, False) if mode == "lanczos" else (None, False, True)
    sizes = [dict(size=(7, 3)), dict(size=2), dict(scale_factor=2), dict(scale_factor=0.5),
             dict(scale_factor=(0.3, 0.7)), dict(scale_factor=0.3, recompute_scale_factor=True),
             dict(size=(1, 1)), dict(size=(9, 4)), dict(size=(4, 13))]
    for ac, sz in itertools.product(corners, sizes):
        check(identity, [x], _interp(mode=mode, align_corners=ac, antialias=True, **sz), tol=1e-5)


def test_interpolate_antialias_large_downscale():
    x = _x(1, 3, 64, 50)
    for mode, size in itertools.product(("bilinear", "bicubic", "lanczos"), [(7, 11), (64, 17)]):
        a = torch.nn.functional.interpolate(torch.tensor(x), size=size, mode=mode,
                                            antialias=True)
        b = llgrad.nn.functional.interpolate(llgrad.tensor(x), size=size, mode=mode,
                                             antialias=True)
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=2e-6)


@pytest.mark.slow
def test_interpolate_antialias_compiled():
    x = _x(2, 3, 16, 12)

    def f(x):
        y = llgrad.nn.functional.interpolate(x, size=(5, 7), mode="bicubic", antialias=True)
        (y * y).sum().backward()
        return y

    compiled = llgrad.compile(f)
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.nn.functional.interpolate(xt, size=(5, 7), mode="bicubic", antialias=True)
    (yt * yt).sum().backward()
    for _ in range(2):
        xl = llgrad.tensor(x, requires_grad=True)
        y = compiled(xl)
        np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kw", [
    dict(mode="lanczos", size=3), dict(mode="lanczos", size=3, antialias=True, align_corners=True),
    dict(mode="nearest", size=3, antialias=True), dict(mode="area", size=3, antialias=True),
    dict(mode="bilinear", size=3, antialias=True, align_corners=True)], ids=str)
def test_interpolate_antialias_errors(kw):
    check(identity, [_x(1, 2, 5, 5)], _interp(**kw))
    check(identity, [_x(1, 2, 5)], _interp(**kw))


@pytest.mark.parametrize("dim", (1, 2, 3))
def test_interpolate_empty_output_raises(dim):
    """PyTorch: 'Input and output sizes should be greater than 0, ...' (area mode's forward
    gives the empty result)."""
    x = _x(1, 2, *(3,) * dim)
    for mode in MODES[dim] + ("bicubic", "trilinear"):
        if mode == "area":
            continue
        check(identity, [x], _interp(mode=mode, scale_factor=0.3))
        check(identity, [x], _interp(mode=mode, size=(0,) * dim))
    if dim == 2:
        check(identity, [x], _interp(mode="bilinear", size=(0, 2), antialias=True))
        check(identity, [_x(1, 2, 0, 3)], _interp(mode="nearest", size=(2, 2)))


@pytest.mark.parametrize("kw", [dict(scale_factor=2), dict(size=4),
                                dict(scale_factor=2.0, mode="bilinear"),
                                dict(scale_factor=(2, 3), mode="bilinear", align_corners=True),
                                dict(size=(3, 4), mode="nearest")], ids=str)
def test_upsample_module(kw):
    check(lambda lib: lib.nn.Upsample(**kw), [_x(1, 2, 3, 3)])
