"""The side-by-side check the sweep-15 (g) nn tests share: run one scenario, written once
against a library argument, with torch and with llgrad (both seeded with 0 first, so their
random numbers agree), and compare what it returns: tensors by dtype, shape,
requires_grad and values; containers element by element; strings with "torch" read as
"llgrad"; and an exception raised by the scenario by its type.

Tests import it after `torch = pytest.importorskip("torch")`."""
import warnings

import numpy as np
import torch

import llgrad


def _dtype_name(dt):
    return str(dt).split(".")[-1]


def _norm(x):
    if isinstance(x, (torch.Tensor, llgrad.Tensor)):
        a = x.detach()
        return ("tensor", _dtype_name(a.dtype), tuple(a.shape), bool(x.requires_grad),
                np.array(a.numpy(), copy=True))
    if isinstance(x, (torch.dtype, llgrad.dtype)):
        return ("dtype", _dtype_name(x))
    if isinstance(x, (torch.Size, llgrad.Size)):
        return ("size", tuple(x))
    if isinstance(x, dict):
        return ("dict", [(_norm(k), _norm(v)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__ if type(x) in (list, tuple) else "seq", [_norm(v) for v in x])
    if isinstance(x, str):
        return x.replace("torch", "llgrad")
    if isinstance(x, float):
        return ("float", x)
    return x


def observe(lib, scenario):
    """What `scenario(lib)` returns, normalised, or ("raised", type name)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib.manual_seed(0)
        try:
            return _norm(scenario(lib))
        except Exception as e:      # noqa: BLE001 (compared with the other library's)
            return ("raised", type(e).__name__)


def _same(a, b, rtol, atol, where):
    if isinstance(a, tuple) and a and a[0] == "tensor":
        assert isinstance(b, tuple) and b and b[0] == "tensor", (where, a, b)
        assert a[1:4] == b[1:4], (where, a[1:4], b[1:4])
        np.testing.assert_allclose(a[4], b[4], rtol=rtol, atol=atol, err_msg=str(where))
        return
    if isinstance(a, tuple) and a and a[0] == "float":
        assert isinstance(b, tuple) and b[0] == "float", (where, a, b)
        np.testing.assert_allclose(a[1], b[1], rtol=rtol, atol=atol, err_msg=str(where))
        return
    if isinstance(a, (tuple, list)) and not (a and a[0] == "raised"):
        assert isinstance(b, type(a)) and len(a) == len(b), (where, a, b)
        for i, (u, v) in enumerate(zip(a, b)):
            _same(u, v, rtol, atol, where + (i,))
        return
    assert a == b, (where, a, b)


def check(scenario, rtol=1e-5, atol=1e-6):
    """Assert that `scenario` observes the same with llgrad as with torch."""
    want = observe(torch, scenario)
    got = observe(llgrad, scenario)
    _same(got, want, rtol, atol, ())
    return want
