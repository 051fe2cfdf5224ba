"""Convolutions with parameters of another dtype than the input: PyTorch's errors (the
bias checked first by the plain convolutions; a half input refused in oneDNN's words; the
transposed 1-d and 2-d ones adding a bias of another dtype in the input's dtype, the 3-d
one refusing it), against torch."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

_SHAPES = {"Conv1d": (1, 2, 6), "Conv2d": (1, 2, 5, 5), "Conv3d": (1, 2, 4, 4, 4),
           "ConvTranspose1d": (1, 2, 6), "ConvTranspose2d": (1, 2, 4, 4),
           "ConvTranspose3d": (1, 2, 3, 3, 3)}
_PAIRS = [("float16", "float32"), ("float32", "float16"), ("float64", "float16"),
          ("float16", "float64"), ("float32", "float64"), ("float64", "float32")]


def _module_error(lib, name, wdt, xdt, bias):
    m = getattr(lib.nn, name)(2, 3, 2, bias=bias).to(getattr(lib, wdt))
    try:
        m(lib.randn(*_SHAPES[name]).to(getattr(lib, xdt)))
    except RuntimeError as e:
        return str(e).replace("llgrad.", "torch.")
    return "ok"


@pytest.mark.parametrize("name", sorted(_SHAPES))
def test_weight_and_bias_dtype_errors(name):
    for wdt, xdt in _PAIRS:
        for bias in (True, False):
            want = _module_error(torch, name, wdt, xdt, bias)
            assert _module_error(llgrad, name, wdt, xdt, bias) == want, (wdt, xdt, bias)


def _transposed(lib, n, xdt, bdt):
    lib.manual_seed(0)
    x = lib.randn(*(1, 2) + (4,) * n).to(getattr(lib, xdt))
    w = lib.randn(*(2, 3) + (2,) * n).to(getattr(lib, xdt))
    b = lib.randn(3).to(getattr(lib, bdt))
    try:
        y = getattr(lib.nn.functional, f"conv_transpose{n}d")(x, w, b)
    except RuntimeError as e:
        return str(e).replace("llgrad.", "torch.")
    return str(y.dtype).split(".")[-1], y.float().numpy()


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("xdt,bdt", [("float32", "float64"), ("float64", "float32"),
                                     ("float16", "float32")])
def test_transposed_bias_of_another_dtype(n, xdt, bdt):
    want, got = _transposed(torch, n, xdt, bdt), _transposed(llgrad, n, xdt, bdt)
    if isinstance(want, str):
        assert got == want
    else:
        assert got[0] == want[0]
        # (where PyTorch runs float16 off oneDNN it gives a result: half's rounding)
        tol = dict(rtol=1e-2, atol=1e-3) if xdt == "float16" else dict(rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[1], want[1], **tol)
