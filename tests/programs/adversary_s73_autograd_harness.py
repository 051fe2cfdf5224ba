"""Three-way runner for the s73 autograd tests: a case is fwd(lib, *tensors) (the part
llgrad.compile traces) and drive(lib, f, s) (builds leaves scaled by s, calls f = fwd or its
compiled version, runs backward / hooks / autograd.grad eagerly, and returns a list of
observations: tensors, grads, grad_fn names, exception types and message words). torch ==
llgrad eager (s=1), and the compiled fwd called with s=1.5 (traces) then s=1 twice then
s=1.5 == llgrad eager at the same s."""
import functools
import warnings

import numpy as np
import pytest

import llgrad


def obs(v):
    """A comparable form of one observed value."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return round(v, 5)
    if isinstance(v, (tuple, list)):
        return [obs(x) for x in v]
    if type(v).__name__ == "Tensor" or isinstance(v, llgrad.Tensor):
        t = v.detach()
        if t.dtype.is_floating_point:
            t = t.double()
        return ("T", tuple(t.shape), np.array(t.numpy()))
    return repr(v)


def raises(f, *words):
    """("raises", type name, which words the message contains) or ("ok", f's result)."""
    try:
        r = f()
    except Exception as e:      # (compared with torch's)
        m = str(e).lower()
        return ("raises", type(e).__name__, [w for w in words if w.lower() in m])
    return ("ok", r)


def gname(t):
    return None if t.grad_fn is None else type(t.grad_fn).__name__


def _same(a, b, what):
    if isinstance(a, tuple) and a and a[0] == "T":
        assert isinstance(b, tuple) and b and b[0] == "T", f"{what}: {a} vs {b}"
        assert a[1] == b[1], f"{what}: shape {a[1]} vs {b[1]}"
        np.testing.assert_allclose(b[2], a[2], rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=what)
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), f"{what}: {a} vs {b}"
        for k, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{what}[{k}]")
    else:
        assert a == b, f"{what}: {a!r} vs {b!r}"


def check3(fwd, drive, compiled=True, not_compiled=()):
    """not_compiled: the indices of observations the compiled calls are not compared on
    (the grad_fn names of its outputs: CompiledFunctionBackward, as torch.compile's)."""
    import torch
    want = obs(drive(torch, functools.partial(fwd, torch), 1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager = obs(drive(llgrad, functools.partial(fwd, llgrad), 1.0))
        eager_other = obs(drive(llgrad, functools.partial(fwd, llgrad), 1.5))
    _same(want, eager, f"eager vs torch ({drive.__name__})")
    if not compiled:
        return
    cf = llgrad.compile(fwd)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = [(eager_other, obs(drive(llgrad, functools.partial(cf, llgrad), 1.5)))]
        runs += [(eager, obs(drive(llgrad, functools.partial(cf, llgrad), 1.0))) for _ in range(2)]
        runs += [(eager_other, obs(drive(llgrad, functools.partial(cf, llgrad), 1.5)))]
    for i, (w, g) in enumerate(runs):
        w, g = ([v for k, v in enumerate(x) if k not in not_compiled] for x in (w, g))
        _same(w, g, f"compiled call {i} vs eager ({drive.__name__})")


def params(cases, xfail):
    """pytest params of (fwd, drive) cases, named by drive; those xfail names (a reason
    each) are strict xfails."""
    return [pytest.param(f, d, id=d.__name__, marks=[pytest.mark.xfail(
        strict=True, reason=xfail[d.__name__])] if d.__name__ in xfail else [])
        for f, d in cases]
