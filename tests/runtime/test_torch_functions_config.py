"""PyTorch's constants and settings in the llgrad namespace (pi, e, inf, nan, newaxis, short;
set_printoptions and the repr it changes; get/set_default_device; is_inference; the
anomaly-mode flags) and Tensor.new / resize_ / resize_as_, against PyTorch."""
import math

import numpy as np
import pytest

from torch_compare import compare, compare_error

torch = pytest.importorskip("torch")
import llgrad  # noqa: E402


def test_constants():
    for name in ("pi", "e", "inf", "nan", "newaxis"):
        a, b = getattr(llgrad, name), getattr(torch, name)
        assert a == b or (a != a and b != b) or (a is None and b is None), name
    assert llgrad.short is llgrad.int16 and str(llgrad.short) == "llgrad.int16"
    x = llgrad.arange(6).reshape(2, 3)
    assert tuple(x[llgrad.newaxis].shape) == (1, 2, 3)
    assert math.isinf(llgrad.inf) and math.isnan(llgrad.nan)


@pytest.fixture
def printoptions():
    yield
    llgrad.set_printoptions(profile="default")
    torch.set_printoptions(profile="default")


DATA = [[1.23456, 2.5], [1.0, 2.0, 3.0], [1e-8, 1e10], list(range(20)),
        [[0.001, 123.5], [7.25, -1.5]], [0.0, math.nan], [[1.5] * 30] * 30, list(range(1500)),
        [], [7]]


@pytest.mark.parametrize("opts", [dict(precision=2), dict(sci_mode=True), dict(sci_mode=False),
                                  dict(profile="short"), dict(threshold=5, edgeitems=1),
                                  dict(linewidth=30), dict(profile="full"),
                                  dict(precision=6, sci_mode=True), dict(profile="bogus")])
def test_set_printoptions_repr(opts, printoptions):
    llgrad.set_printoptions(**opts)
    torch.set_printoptions(**opts)
    for data in DATA:
        for dt in ("float32", "float64", "int64"):
            if dt == "int64" and any(v != v for v in np.ravel(data)):
                continue                            # (nan: no int64 tensor)
            want = repr(torch.tensor(data, dtype=getattr(torch, dt)))
            got = repr(llgrad.tensor(data, dtype=getattr(llgrad, dt)))
            assert got.replace("llgrad.", "torch.") == want, (opts, data, dt)


def test_set_printoptions_resets_sci_mode(printoptions):
    llgrad.set_printoptions(sci_mode=True)
    llgrad.set_printoptions(precision=3)         # (sci_mode back to None, as in PyTorch)
    assert repr(llgrad.tensor([1.5, 2.25])) == "tensor([1.500, 2.250])"


def test_default_device():
    assert llgrad.get_default_device() == llgrad.device("cpu")
    assert str(llgrad.get_default_device()) == str(torch.get_default_device())
    llgrad.set_default_device("cpu")
    llgrad.set_default_device(None)
    llgrad.set_default_device(llgrad.device("cpu"))
    with pytest.raises(RuntimeError, match="CPU only"):
        llgrad.set_default_device("cuda")
    llgrad.set_default_device(llgrad.device("meta"))    # (the meta device: shape-only tensors)
    try:
        assert llgrad.get_default_device() == llgrad.device("meta")
    finally:
        llgrad.set_default_device(None)
    assert llgrad.get_default_device() == llgrad.device("cpu")


def test_is_inference():
    assert llgrad.is_inference(llgrad.zeros(1)) is False
    with llgrad.inference_mode():
        t = llgrad.zeros(1)
    assert llgrad.is_inference(t) is True
    compare_error(lambda lib: lib.is_inference(3))


def test_anomaly_flags():
    assert llgrad.is_anomaly_enabled() is torch.is_anomaly_enabled() is False
    assert llgrad.is_anomaly_check_nan_enabled() is True
    llgrad.set_anomaly_enabled(True)
    try:
        assert llgrad.is_anomaly_enabled() is True
        llgrad.set_anomaly_enabled(True, check_nan=False)
        assert llgrad.is_anomaly_check_nan_enabled() is False
    finally:
        llgrad.set_anomaly_enabled(False)
    assert llgrad.is_anomaly_enabled() is False and llgrad.is_anomaly_check_nan_enabled()


# ---- Tensor.new, resize_, resize_as_ --------------------------------------------------------

X, INT = np.zeros(2), np.array([1, 2])


@pytest.mark.parametrize("fn", [lambda lib, x: x.new(), lambda lib, x: x.new(2, 3) * 0,
                                lambda lib, x: x.new([1, 2]), lambda lib, x: x.new((1, 2)),
                                lambda lib, x: x.new(lib.Size([2, 2])) * 0,
                                lambda lib, x: x.new([1.5]), lambda lib, x: x.new(x),
                                lambda lib, x: x.new([1, 2], device="cpu")])
def test_new(fn):
    compare(fn, X, grad=False)
    compare(fn, INT, grad=False)


def test_new_details():
    compare(lambda lib, x: x.new([1.7, -1.7]), INT, grad=False)     # (truncated, as PyTorch)
    x = llgrad.zeros(2, dtype=llgrad.float64, requires_grad=True)
    y = x.new(x)
    assert y.data_ptr() == x.data_ptr() and not y.requires_grad
    assert not x.new([1.0]).requires_grad
    for bad in (lambda lib: lib.zeros(2, dtype=lib.float64).new(lib.tensor([1, 2])),
                lambda lib: lib.zeros(2).new(2, 3.0), lambda lib: lib.zeros(2).new(3.5),
                lambda lib: lib.zeros(2).new([1, 2], dtype=lib.int32),
                lambda lib: lib.zeros(2).new("a"),
                lambda lib: lib.zeros(2).new(3, requires_grad=True)):
        compare_error(bad)


@pytest.mark.parametrize("fn", [
    lambda lib: lib.arange(6.).resize_(2, 3), lambda lib: lib.arange(6.).resize_(2, 2),
    lambda lib: lib.arange(6.).resize_((2, 3)), lambda lib: lib.arange(6.)[1:].resize_(2, 2),
    lambda lib: lib.arange(6.).view(2, 3).t().resize_(2, 3),
    lambda lib: lib.arange(6.).resize_as_(lib.zeros(3, 2)),
    lambda lib: lib.arange(6.).resize_(4, 2)[:3], lambda lib: lib.arange(6).resize_(5)])
def test_resize(fn):
    compare(fn, grad=False)


def test_resize_views_and_errors():
    a = llgrad.arange(6.)
    v = a[:4]
    assert a.resize_(2, 2) is a and a._version == 1
    assert a.tolist() == [[0.0, 1.0], [2.0, 3.0]] and v.tolist() == [0.0, 1.0, 2.0, 3.0]
    a[0, 0] = 9.0
    assert v[0].item() == 9.0                       # (still the same memory)
    b = llgrad.arange(3.)
    b.resize_(5)
    assert b.tolist() == [0.0, 1.0, 2.0, 0.0, 0.0]  # (grown: new elements are zeros here)
    assert llgrad.empty(0).resize_(2, 3).shape == (2, 3)
    c = llgrad.arange(3.)
    w = c[1:]
    with pytest.raises(RuntimeError, match="clone"):
        c.resize_(10)                               # (shared with w: cannot grow under it)
    assert w.tolist() == [1.0, 2.0]
    for bad in (lambda lib: lib.zeros(2, requires_grad=True).resize_(3),
                lambda lib: (lib.zeros(2, requires_grad=True) * 1).resize_(3),
                lambda lib: lib.arange(6.).resize_(-1)):
        compare_error(bad)
