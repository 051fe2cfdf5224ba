"""Random streams against PyTorch (s75 k): a case `fn(lib, x)` draws from lib's generators
(the module is an argument, so one body serves torch, llgrad eager and llgrad.compile).
After lib.manual_seed(seed) the case is called three times with other x each time (so a
compiled call that baked the traced call's draws in shows); observed: every output's dtype,
shape and values, the exception type when torch raises, and after each call three float64
draws of the default generator (the stream's position: how many numbers the call drew).

A driver `drv(lib, comp)` (drivers()) runs its own calls, comp being the identity for torch
and llgrad eager and llgrad.compile for the compiled run; its outputs are compared the same
way (it ends with a draw of its own for the stream's position)."""
import warnings

import numpy as np

import llgrad

X = np.arange(1, 38, dtype=np.float32) / 40.0


def _seen(t):
    if not hasattr(t, "detach"):
        return ("py", t)
    t = t.detach()
    name = str(t.dtype).split(".")[-1]
    if name in ("float16", "bfloat16"):
        t = t.float()
    return (name, tuple(t.shape), np.array(t.numpy()))


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [y for x in out for y in _flat(x)]
    return [out]


def observe(lib, fn, compiled=False, seed=123, calls=3):
    lib.manual_seed(seed)
    g = llgrad.compile(fn) if compiled else fn
    seen = []
    for i in range(calls):
        x = lib.tensor(X * (i + 1))
        try:
            out = g(lib, x)
        except Exception as e:      # (the type is compared with torch's)
            return ("raises", type(e).__name__, str(e)[:200])
        seen += [_seen(o) for o in _flat(out)]
        seen.append(("after", np.array(lib.rand(3, dtype=lib.float64).numpy())))
    return seen


def same(want, got, what, rtol=1e-5, atol=1e-6):
    if want[0] == "raises":
        assert got[0] == "raises", f"{what}: torch raises {want[1]}: {want[2]}; got a result"
        assert got[1] == want[1], f"{what}: torch raises {want[1]}: {want[2]}; got {got[1:]}"
        return
    assert got[0] != "raises", f"{what}: torch gives a result, got {got[1]}: {got[2]}"
    assert len(want) == len(got), f"{what}: {len(want)} outputs, got {len(got)}"
    for k, (a, b) in enumerate(zip(want, got)):
        if a[0] == "after":
            np.testing.assert_array_equal(b[1], a[1], err_msg=f"{what}: stream after output {k}")
        elif a[0] == "py":
            assert a == b or np.isclose(a[1], b[1]), f"{what}: output {k}: {a} != {b}"
        else:
            assert a[:2] == b[:2], f"{what}: output {k}: {a[:2]} != {b[:2]}"
            np.testing.assert_allclose(b[2], a[2], rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=f"{what}: output {k}")


def check(fn, compiled=None):
    """torch == llgrad eager (and == llgrad.compile unless compiled is False)."""
    import torch
    want = observe(torch, fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # (a fallback to eager is warned)
        same(want, observe(llgrad, fn), f"eager {fn.__name__}")
        if compiled is not False:
            same(want, observe(llgrad, fn, True), f"compiled {fn.__name__}")


def check_driver(drv):
    import torch
    torch.manual_seed(0)
    want = [_seen(t) for t in _flat(drv(torch, lambda f: f))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for comp, what in ((lambda f: f, "eager"), (llgrad.compile, "compiled")):
            llgrad.manual_seed(0)
            got = [_seen(t) for t in _flat(drv(llgrad, comp))]
            same(want, got, f"{what} {drv.__name__}")
