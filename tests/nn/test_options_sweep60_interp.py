"""F.interpolate's linear modes with a scale_factor that leaves a size as it is
(floor(8 * 1.1) = 8): ATen's kernels copy such a dim, llgrad resampled it with the scale
(1 / 1.1), a silent difference in values and gradients. Against torch, eager and compiled,
plus a sweep of 1-d sizes and scales for the nearest and linear modes."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

X = np.arange(40, dtype=np.float32).reshape(1, 1, 5, 8) * 0.37 - 3.0

CASES = [
    ("linear", (1, 1, 8), (1.1,)),
    ("linear", (2, 3, 10), (1.05,)),
    ("bilinear", (1, 1, 5, 8), (1.1, 1.1)),
    ("bilinear", (1, 1, 5, 8), (1.1, 2.0)),
    ("bilinear", (1, 1, 5, 8), (2.0, 1.1)),
    ("bilinear", (1, 1, 5, 8), (1.1, 0.5)),
    ("trilinear", (1, 1, 3, 5, 8), (1.1, 2.0, 1.1)),
    ("trilinear", (1, 1, 3, 5, 8), (1.2, 1.1, 0.7)),
]


def _run(lib, mode, shape, sf, dtype="float32"):
    x = lib.tensor(np.resize(X.ravel(), int(np.prod(shape))).reshape(shape)).to(
        getattr(lib, dtype)).requires_grad_(True)
    y = lib.nn.functional.interpolate(x, scale_factor=sf, mode=mode)
    g = lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape))).to(y.dtype)
    (y * g).sum().backward()
    return y.detach().double().numpy(), x.grad.double().numpy()


@pytest.mark.parametrize("mode,shape,sf", CASES)
def test_same_size_dim_is_copied_as_torch(mode, shape, sf):
    ours, theirs = _run(llgrad, mode, shape, sf), _run(torch, mode, shape, sf)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_same_size_dim_other_dtypes(dtype):
    ours = _run(llgrad, "bilinear", (1, 2, 5, 8), (1.1, 2.0), dtype)
    theirs = _run(torch, "bilinear", (1, 2, 5, 8), (1.1, 2.0), dtype)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-3 if dtype == "float16" else 1e-12,
                                   atol=1e-2 if dtype == "float16" else 1e-12)


def test_compiled_same_size_dim_is_eagers():
    F = llgrad.nn.functional

    def f(x):
        return F.interpolate(x, scale_factor=(1.1, 2.0), mode="bilinear") * 3

    cf = llgrad.compile(f)
    for _ in range(2):
        xc = llgrad.tensor(X, requires_grad=True)
        yc = cf(xc)
    yc.sum().backward()
    xt = torch.tensor(X, requires_grad=True)
    yt = torch.nn.functional.interpolate(xt, scale_factor=(1.1, 2.0), mode="bilinear") * 3
    yt.sum().backward()
    np.testing.assert_allclose(yc.detach().numpy(), yt.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(xc.grad.numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_sizes_and_scales_sweep_1d():
    rs = np.random.RandomState(0)
    scales = [1 / 3, 2 / 3, 0.1, 0.7, 1.1, 1.3, 3.3, 7 / 3, 0.35, 0.99, 1.01, 2.5, 0.123456]
    for _ in range(60):
        n = int(rs.randint(1, 200))
        x = np.arange(n, dtype=np.float32).reshape(1, 1, n)
        kw = {"size": int(rs.randint(1, 300))} if rs.rand() < 0.4 else \
            {"scale_factor": float(rs.choice(scales))}
        for mode, extra in [("nearest", {}), ("nearest-exact", {}), ("linear", {}),
                            ("linear", {"align_corners": True})]:
            a, b = (lib.nn.functional.interpolate(lib.tensor(x), mode=mode, **kw, **extra)
                    .numpy() for lib in (llgrad, torch))
            assert a.shape == b.shape, (n, kw, mode)
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4, err_msg=f"{n} {kw} {mode}")
