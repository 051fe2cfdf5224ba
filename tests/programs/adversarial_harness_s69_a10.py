"""Three-way comparison for the s69 a10 adversarial tests: torch, llgrad eager and
llgrad.compile run the same case function `fn(torch, *inputs)` (the module is an argument,
so one function body serves all three). Observed: every output's dtype, shape and values
(NaN where NaN), the inputs' values after the call, the .grad of every leaf (None kept
apart from zeros) after a backward of a fixed weighting of the floating outputs, and the
exception type when torch raises.
The compiled function is called several times with fresh leaves: the first call traces,
the later ones run the compiled graphs; each must equal eager."""
import warnings

import numpy as np

import llgrad


def _lib_tensor(lib, spec, leaves=None):
    """spec: a NumPy array (no grad), ("grad", array) for a leaf requiring grad,
    ("view", array, grad, fn) for fn(leaf) (a non-contiguous input: the leaf's .grad is
    observed), or a Python value passed through."""
    if isinstance(spec, tuple) and len(spec) == 2 and spec[0] == "grad":
        return lib.tensor(spec[1].copy(), requires_grad=True)
    if isinstance(spec, tuple) and len(spec) == 4 and spec[0] == "view":
        leaf = lib.tensor(spec[1].copy(), requires_grad=spec[2])
        if leaves is not None:
            leaves.append(leaf)
        return spec[3](leaf)
    if isinstance(spec, np.ndarray):
        return lib.tensor(spec.copy())
    return spec


def _as_np(t):
    t = t.detach()
    if str(t.dtype).endswith("bfloat16") or str(t.dtype).endswith("float16"):
        t = t.float()
    return np.array(t.numpy())


def _flatten(out):
    if isinstance(out, (tuple, list)):
        return [y for x in out for y in _flatten(x)]
    return [out]


def observe(lib, fn, specs, backward=True):
    """What one run of fn shows: ("raises", type name) or (outputs, grads)."""
    view_leaves = []
    args = [_lib_tensor(lib, s, view_leaves) for s in specs]
    try:
        out = _flatten(fn(lib, *args))
    except Exception as e:      # (the type is compared with torch's)
        return ("raises", type(e).__name__, str(e)[:200])
    seen = []
    loss = None
    for k, o in enumerate(out):
        if isinstance(o, (llgrad.Tensor,)) or type(o).__name__ == "Tensor":
            seen.append((str(o.dtype).split(".")[-1], tuple(o.shape), _as_np(o)))
            if backward and o.requires_grad and o.dtype.is_floating_point:
                w = (lib.arange(o.numel(), dtype=o.dtype).reshape(o.shape) % 3 + 1 + k)
                term = (o * w).sum()
                loss = term if loss is None else loss + term
        else:
            seen.append(("py", type(o).__name__, o))
    for a in args:          # (the inputs after the call: writes to them are observed)
        if type(a).__name__ == "Tensor" or isinstance(a, llgrad.Tensor):
            seen.append((str(a.dtype).split(".")[-1], tuple(a.shape), _as_np(a)))
    grads = []
    if loss is not None:
        try:
            loss.backward()
        except Exception as e:      # (torch's derivative-not-implemented errors)
            return ("raises", type(e).__name__, "backward: " + str(e)[:200])
        given = [a for a in args if getattr(a, "is_leaf", False)
                 and not any(a is v for v in view_leaves)]
        for a in given + view_leaves:
            if a.requires_grad:
                grads.append(None if a.grad is None else _as_np(a.grad))
    return (seen, grads)


def _close(w, g, rtol, atol, what):
    if isinstance(w, np.ndarray):
        assert isinstance(g, np.ndarray), what
        assert w.shape == g.shape, what
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
        else:
            np.testing.assert_array_equal(g, w, err_msg=what)
    elif isinstance(w, float) and np.isnan(w):
        assert isinstance(g, float) and np.isnan(g), what
    else:
        assert w == g, what


def same(want, got, rtol=1e-6, atol=1e-7, what=""):
    if want[0] == "raises":
        assert got[0] == "raises", f"{what}: torch raises {want[1]}: {want[2]}; got {got}"
        assert got[1] == want[1], f"{what}: torch raises {want[1]}: {want[2]}; got {got[1]}: {got[2]}"
        return
    assert got[0] != "raises", f"{what}: torch gives a result, got {got[1]}: {got[2]}"
    (wo, wg), (go, gg) = want, got
    assert len(wo) == len(go), what
    for k, (a, b) in enumerate(zip(wo, go)):
        assert a[0] == b[0] and a[1] == b[1], f"{what}: output {k}: {a[:2]} != {b[:2]}"
        _close(a[2], b[2], rtol, atol, f"{what}: output {k}")
    assert len(wg) == len(gg), what
    for k, (a, b) in enumerate(zip(wg, gg)):
        assert (a is None) == (b is None), f"{what}: grad {k}: {a} vs {b}"
        if a is not None:
            _close(a, b, rtol, atol, f"{what}: grad {k}")


def _perturbed(spec):
    """Other values of the same shape and dtype (so a compiled call that kept the traced
    call's values as constants shows)."""
    grad = isinstance(spec, tuple) and len(spec) == 2 and spec[0] == "grad"
    view = isinstance(spec, tuple) and len(spec) == 4 and spec[0] == "view"
    a = spec[1] if grad or view else spec
    if not isinstance(a, np.ndarray):
        return spec
    if a.dtype == np.bool_:
        b = ~a
    elif a.dtype.kind in "iu":
        b = (a + 1).astype(a.dtype)
    else:
        b = (a * 1.5 + 0.25).astype(a.dtype)
    if view:
        return ("view", b, spec[2], spec[3])
    return ("grad", b) if grad else b


def check(fn, *specs, rtol=1e-6, atol=1e-7, backward=True, compiled_warns=None):
    """torch == llgrad eager == llgrad compiled, the compiled function called with other
    values first (the call that traces), then with these, twice. compiled_warns: None means
    the compiled calls must not warn; a string, the warnings (if any) must contain it (a
    fallback to eager is warned once per line, so a later case may see none)."""
    import torch
    want = observe(torch, fn, specs, backward)
    other = [_perturbed(s) for s in specs]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        eager = observe(llgrad, fn, specs, backward)
        eager_other = observe(llgrad, fn, other, backward)
    eager_msgs = {str(w.message) for w in caught}      # (torch's own, as "var(): degrees of freedom")
    same(want, eager, rtol, atol, f"eager vs torch ({fn.__name__})")
    cf = llgrad.compile(fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = [(eager_other, observe(llgrad, cf, other, backward))]
        runs += [(eager, observe(llgrad, cf, specs, backward)) for _ in range(2)]
        runs += [(eager_other, observe(llgrad, cf, other, backward))]
    msgs = [str(w.message) for w in caught
            if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning))
            and str(w.message) not in eager_msgs]
    if compiled_warns is None:
        assert not msgs, f"compiled {fn.__name__} warned: {msgs}"
    else:
        assert all(compiled_warns in m for m in msgs), msgs
    for i, (w, got) in enumerate(runs):
        same(w, got, rtol, atol, f"compiled call {i} vs eager ({fn.__name__})")
    return cf
