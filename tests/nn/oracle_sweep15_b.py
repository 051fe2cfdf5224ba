"""The side-by-side check of the sweep-15 (b) tests: one scenario, written once against a
library argument, runs with torch and with llgrad (NumPy's global generator seeded with 0
before each run, so both draw the same inputs; the libraries' own generators seeded with 0
too), and what it returns must agree: tensors by dtype, shape and values (within tol);
containers element by element; strings with "torch" read as "llgrad"; an exception raised by
the scenario by its type.

Tests import it after `torch = pytest.importorskip("torch")`."""
import warnings

import numpy as np
import torch

import llgrad


def _norm(x):
    if isinstance(x, (torch.Tensor, llgrad.Tensor)):
        a = x.detach()
        return ("tensor", str(a.dtype).split(".")[-1], tuple(a.shape),
                np.array(a.numpy(), copy=True))
    if isinstance(x, (torch.Size, llgrad.Size)):
        return ("size", tuple(x))
    if isinstance(x, dict):
        return ("dict", [(k, _norm(v)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return ("seq", [_norm(v) for v in x])
    if isinstance(x, str):
        return x.replace("torch", "llgrad")
    return x


def _same(a, b, tol, path="result"):
    if isinstance(a, tuple) and a[:1] == ("tensor",):
        assert isinstance(b, tuple) and b[:1] == ("tensor",), f"{path}: {a} vs {b}"
        assert a[1:3] == b[1:3], f"{path}: dtype/shape {a[1:3]} vs {b[1:3]}"
        if a[3].dtype.kind in "biu":
            np.testing.assert_array_equal(b[3], a[3], err_msg=path)
        else:
            np.testing.assert_allclose(b[3], a[3], rtol=tol, atol=tol, err_msg=path)
        return
    if isinstance(a, tuple) and a[:1] in (("seq",), ("dict",)):
        assert isinstance(b, tuple) and b[0] == a[0] and len(b[1]) == len(a[1]), \
            f"{path}: {a} vs {b}"
        for i, (x, y) in enumerate(zip(a[1], b[1])):
            _same(x, y, tol, f"{path}[{i}]")
        return
    if isinstance(a, float) and isinstance(b, float):
        assert np.isclose(a, b, rtol=tol, atol=tol, equal_nan=True), f"{path}: {a} vs {b}"
        return
    assert a == b, f"{path}: torch {a!r} vs llgrad {b!r}"


def run(lib, scenario):
    """scenario(lib)'s normalised result, or ("raised", exception type name)."""
    np.random.seed(0)
    lib.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return _norm(scenario(lib))
        except Exception as e:      # (compared by type with torch's)
            return ("raised", type(e).__name__)


def check(scenario, tol=1e-5):
    """scenario run with torch and with llgrad gives the same result."""
    _same(run(torch, scenario), run(llgrad, scenario), tol)


def raised(fn):
    """The name of the exception type fn() raises, or "returned"."""
    try:
        fn()
    except Exception as e:
        return type(e).__name__
    return "returned"


def randn(lib, *shape, dtype=np.float32, requires_grad=False):
    """A tensor of lib from NumPy's global generator (the same numbers for both libraries)."""
    return lib.tensor(np.random.randn(*shape).astype(dtype), requires_grad=requires_grad)


def compiled_like_eager(fn, *arrays, tol=1e-6):
    """fn(*llgrad tensors) -> a tensor: llgrad.compile(fn)'s value and input gradients (of
    the sum) equal eager's, on the tracing call and on a cache hit."""
    def value_and_grads(f):
        xs = [llgrad.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
        out = f(*xs)
        out.sum().backward()
        return [out] + [x.grad for x in xs if x.requires_grad]
    want = value_and_grads(fn)
    compiled = llgrad.compile(fn)
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")      # (an eager fallback warns: not compiled)
            got = value_and_grads(compiled)
        _same(_norm(want), _norm(got), tol)
