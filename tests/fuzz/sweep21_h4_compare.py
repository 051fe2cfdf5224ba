"""The comparison behind test_adversarial_sweep21_h4*.py: one case run on torch and on
llgrad (eager, and compiled twice where it is a pure function of tensors), reduced to
comparable values: a tensor's dtype, shape, strides, contiguity and values; an exception's
type and first line (torch's "torch." read as "llgrad."); the warnings raised."""
import math
import warnings

import numpy as np

import llgrad


def _norm(r):
    if isinstance(r, llgrad.Tensor) or type(r).__module__.startswith("torch") and \
            hasattr(r, "stride") and hasattr(r, "detach"):
        return ("T", str(r.dtype).split(".")[-1], tuple(r.shape), tuple(r.stride()),
                r.is_contiguous(), r.detach().numpy())
    if isinstance(r, (tuple, list)):
        return ("seq", [_norm(x) for x in r])
    if "dtype" in type(r).__name__:
        return ("dtype", str(r).split(".")[-1])
    if type(r).__name__ == "Size":
        return ("size", tuple(r))
    if isinstance(r, str):
        return ("v", r.replace("torch", "llgrad"))
    return ("v", r)


def run(fn, T, args):
    """fn(T, *tensors of args) reduced by _norm, and its warnings (NumPy's RuntimeWarnings,
    which llgrad's dispatcher silences by a module filter that a recording context drops,
    left out)."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            out = _norm(fn(T, *[T.tensor(a) if isinstance(a, np.ndarray) else a
                                for a in args]))
        except Exception as e:   # noqa: BLE001 (the exception is the value compared)
            msg = str(e).split("\n")[0].split(" Hint:")[0]    # (llgrad's hints name lines)
            out = ("E", type(e).__name__, msg.replace("torch", "llgrad"))
    msgs = sorted({f"{type(x.message).__name__}: {x.message}".split(" (Triggered")[0]
                   .replace("torch", "llgrad") for x in w if "encountered in" not in
                   str(x.message) and not str(x.message).startswith(_ONCE_PER_PROCESS)})
    return out, msgs


# (given once per process by both, TORCH_WARN_ONCE: whether either gives it here depends on
# the tests its worker ran before)
_ONCE_PER_PROCESS = "Converting a tensor with requires_grad=True to a scalar"


def same(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple) and a and a[0] == "T":
        if a[1:3] != b[1:3] or a[4] != b[4]:
            return False
        if a[3] != b[3] and all(n > 1 for n in a[2]):   # (size-1 dims' strides: see tests)
            return False
        x, y = a[5], b[5]
        if x.dtype.kind in "fc" and x.size:
            ok = np.isnan(x) == np.isnan(y)
            return bool(ok.all() and np.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True)
                        and (np.signbit(x.real) == np.signbit(y.real))[~np.isnan(x)].all())
        return np.array_equal(x, y)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isnan(a) and math.isnan(b)
    return a == b


def check(torch, fn, args=(), compiled=True):
    """Assert that llgrad's fn(llgrad, *args) equals torch's (values, exception, warnings)
    and, compiled, equals eager twice over (an exception of the same type)."""
    want, want_w = run(fn, torch, args)
    got, got_w = run(fn, llgrad, args)
    assert same(want, got), f"torch {want!r}\nllgrad {got!r}"
    assert want_w == got_w, (want_w, got_w)
    if compiled:
        cf = llgrad.compile(lambda *a: fn(llgrad, *a))
        for _ in range(2):
            c, _w = run(lambda T, *a: cf(*a), llgrad, args)
            if got[0] == "E":
                assert c[:2] == got[:2], (got, c)
            else:
                assert same(got, c), f"eager {got!r}\ncompiled {c!r}"
