"""The differential harness of the _sweep5 API tests: run one program in torch and in llgrad
on the same NumPy inputs and compare results (values, dtypes, shapes, grad_fn names),
gradients, or the exception's type and first line."""
import warnings

import numpy as np


def _flat(v):
    if isinstance(v, (tuple, list)):
        return [x for e in v for x in _flat(e)]
    return [v]


def _run(lib, fn, arrays, grad):
    xs = []
    for a in arrays:
        t = lib.tensor(a)
        if grad and t.dtype.is_floating_point:
            t.requires_grad_(True)
        xs.append(t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = fn(lib, *xs)
        except Exception as e:   # noqa: BLE001 (compared with torch's)
            return ("raise", type(e).__name__, (str(e).splitlines() or [""])[0]), None
    outs = _flat(out)
    seen = [(tuple(o.shape), str(o.dtype).split(".")[-1], o.detach().numpy().copy(),
             type(o.grad_fn).__name__ if o.grad_fn is not None else None)
            if hasattr(o, "detach") else o for o in outs]
    grads = None
    if grad:
        diff = [o for o in outs if hasattr(o, "grad_fn") and o.requires_grad]
        if diff:
            total = sum((o * lib.tensor(np.linspace(0.5, 2.0, o.numel()).reshape(
                tuple(o.shape)), dtype=o.dtype)).sum() for o in diff)
            ins = [x for x in xs if x.requires_grad]
            gs = lib.autograd.grad(total, ins, allow_unused=True)
            grads = [None if g is None else g.numpy() for g in gs]
    return seen, grads


def same(fn, *arrays, grad=True, rtol=1e-6, atol=1e-6, names=True):
    """fn(lib, *tensors) gives the same in torch and llgrad; returns llgrad's results."""
    import torch
    import llgrad
    want, wgrads = _run(torch, fn, arrays, grad)
    got, ggrads = _run(llgrad, fn, arrays, grad)
    if want[0] == "raise" or got[0] == "raise":
        assert got == want
        return got
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want):
        if isinstance(w, tuple):
            assert g[:2] == w[:2], (g[:2], w[:2])
            np.testing.assert_allclose(g[2], w[2], rtol=rtol, atol=atol, equal_nan=True)
            if names:
                assert g[3] == w[3], (g[3], w[3])
        else:
            assert g == w
    if wgrads is not None:
        assert ggrads is not None
        for g, w in zip(ggrads, wgrads):
            assert (g is None) == (w is None)
            if w is not None:
                np.testing.assert_allclose(g, w, rtol=rtol * 10, atol=atol * 10)
    return got
