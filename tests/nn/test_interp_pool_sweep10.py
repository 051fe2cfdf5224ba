"""F.interpolate on integer inputs (uint8 bilinear/bicubic/lanczos in PIL-style fixed point, the
other dtypes and modes refused with PyTorch's errors) and max_unpool's invalid-index
error, against torch."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _run(lib, x, **kw):
    try:
        return lib.nn.functional.interpolate(lib.tensor(x), **kw).numpy()
    except Exception as e:      # noqa: BLE001 (the error is compared)
        return f"{type(e).__name__}: {e}"


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("channels", [3, 5])
def test_uint8_bilinear_bicubic_bitexact(mode, antialias, align_corners, channels):
    x = np.random.RandomState(channels).randint(0, 256, (2, channels, 7, 9)).astype(np.uint8)
    for kw in (dict(size=(14, 12)), dict(size=(3, 3)), dict(scale_factor=(1.7, 0.45)),
               dict(size=(7, 27))):
        kw.update(mode=mode, antialias=antialias, align_corners=align_corners)
        want, got = _run(torch, x, **kw), _run(llgrad, x, **kw)
        assert got.dtype == np.uint8 and got.shape == want.shape, kw
        np.testing.assert_array_equal(got, want, err_msg=str(kw))


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "int64", "bool"])
def test_integer_interpolate_errors(dtype):
    cases = [(3, "nearest"), (3, "nearest-exact"), (3, "linear"), (3, "area"),
             (4, "nearest"), (4, "bilinear"), (4, "bicubic"), (4, "area"),
             (5, "nearest"), (5, "trilinear")]
    for nd, mode in cases:
        for kw in (dict(scale_factor=1.5), dict(size=(70,) * (nd - 2))):
            x = (np.arange(2 * 4 ** (nd - 2)) * 7 % 23).reshape((1, 2) + (4,) * (nd - 2))
            x = x.astype(dtype)
            want, got = _run(torch, x, mode=mode, **kw), _run(llgrad, x, mode=mode, **kw)
            if isinstance(want, str):
                assert got == want, (nd, mode, kw)
            else:
                np.testing.assert_array_equal(got, want)
    x = np.zeros((1, 2, 8, 8), dtype)
    for mode in ("bilinear", "bicubic"):
        want = _run(torch, x, mode=mode, scale_factor=0.5, antialias=True)
        got = _run(llgrad, x, mode=mode, scale_factor=0.5, antialias=True)
        assert str(got) == str(want)


@pytest.mark.parametrize("dim,k,s,p", [(2, 3, 2, 1), (3, 2, 2, 0), (3, 3, 2, 1)])
def test_max_unpool_reports_last_invalid_index(dim, k, s, p):
    x = np.random.RandomState(0).randn(*((1, 2, 5, 6, 7) if dim == 3 else (2, 3, 7, 8)))
    msgs = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)        # (PyTorch's threads race to report theirs)
    try:
        for lib in (torch, llgrad):
            t = lib.tensor(x.astype(np.float32))
            y, i = getattr(lib.nn, f"MaxPool{dim}d")(k, s, p, return_indices=True)(t)
            with pytest.raises(RuntimeError) as e:
                getattr(lib.nn, f"MaxUnpool{dim}d")(k, s, p)(y, i)
            msgs.append(str(e.value))
    finally:
        torch.set_num_threads(threads)
    assert msgs[1] == msgs[0]


@pytest.mark.parametrize("channels", [3, 5])
def test_uint8_lanczos_bitexact(channels):
    x = np.random.RandomState(channels).randint(0, 256, (2, channels, 9, 13)).astype(np.uint8)
    for kw in (dict(size=(4, 5)), dict(size=(18, 7)), dict(scale_factor=(1.6, 0.7))):
        kw.update(mode="lanczos", antialias=True)
        np.testing.assert_array_equal(_run(llgrad, x, **kw), _run(torch, x, **kw), str(kw))


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "lanczos"])
def test_half_antialias_refused(mode):
    x = np.ones((1, 1, 4, 4), np.float16)
    kw = dict(mode=mode, scale_factor=0.5, antialias=True)
    assert _run(llgrad, x, **kw) == _run(torch, x, **kw)


@pytest.mark.parametrize("mode,size", [("linear", 13), ("linear", 40), ("trilinear", (6, 2, 9)),
                                       ("bilinear", (70, 80)), ("bicubic", (70, 80))])
@pytest.mark.parametrize("align_corners", [False, True])
def test_half_resampled_in_single_precision(mode, size, align_corners):
    dim = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}[mode]
    x = (np.random.RandomState(0).randn(*((2, 3) + (4,) * dim)) * 10).astype(np.float16)
    kw = dict(size=size, mode=mode, align_corners=align_corners)
    want, got = _run(torch, x, **kw), _run(llgrad, x, **kw)
    assert got.dtype == np.float16
    # (one rounding, as PyTorch's; its compiled kernels' fused multiply-adds tip a rare tie)
    assert (got != want).mean() < (0.01 if dim == 2 else 1e-9)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3,
                               atol=1e-3)
