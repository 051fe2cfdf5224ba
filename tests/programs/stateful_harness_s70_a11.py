"""Three-way comparison of stateful programs for the s70 a11 adversarial tests: torch,
llgrad eager and llgrad.compile run the same program, written once with the module as an
argument (`make(lib)`), over several calls whose inputs change.

make(lib) returns a dict:
  step(*args): one call (a forward, a backward, an optimiser step, whatever the case does);
    the function that is compiled;
  state(): what to observe after each call: tensors (a parameter, its .grad, a buffer, an
    optimiser's state), Python values, None; read by the harness, never compiled;
  between(i) (optional): what the program does between call i and call i+1 outside the
    step (changes an lr, a captured tensor, a module attribute, a requires_grad flag).
args(i) gives call i's arguments as NumPy arrays (made tensors of each library, without
grad) or Python values.

Observed after each call: the step's results (dtype, shape, values; Python values as
they are) or the exception's type, then state(). The compiled program must equal eager's
call by call, and eager torch's; warnings of the compiled calls (a fallback to eager names
its reason) must contain `compiled_warns` when given, and there must be none otherwise."""
import warnings

import numpy as np

import llgrad


def _is_tensor(v):
    return isinstance(v, llgrad.Tensor) or type(v).__name__ in ("Tensor", "Parameter")


def _seen(v):
    if _is_tensor(v):
        t = v.detach()
        if str(t.dtype).endswith("float16"):
            t = t.float()
        return (str(v.dtype).split(".")[-1], tuple(v.shape), np.array(t.numpy()))
    if isinstance(v, (tuple, list)):
        return [_seen(x) for x in v]
    if isinstance(v, dict):
        return {k: _seen(x) for k, x in v.items()}
    return ("py", type(v).__name__, v)


def _tensor_args(lib, args):
    return [lib.tensor(a.copy()) if isinstance(a, np.ndarray) else a for a in args]


def run(lib, make, args, calls, compiled=False):
    """The observations of `calls` calls of make(lib)'s step, compiled or not."""
    prog = make(lib)
    step = llgrad.compile(prog["step"]) if compiled else prog["step"]
    seen = []
    for i in range(calls):
        try:
            out = ("ok", _seen(step(*_tensor_args(lib, args(i)))))
        except Exception as e:      # (the type is compared with torch's)
            out = ("raises", type(e).__name__, str(e)[:200])
        seen.append((out, _seen(prog["state"]())))
        if "between" in prog and i + 1 < calls:
            prog["between"](i)
    return seen


def _close(w, g, rtol, atol, what):
    if isinstance(w, list):
        assert isinstance(g, list) and len(w) == len(g), f"{what}: {w} vs {g}"
        for k, (a, b) in enumerate(zip(w, g)):
            _close(a, b, rtol, atol, f"{what}[{k}]")
        return
    if isinstance(w, dict):
        assert isinstance(g, dict) and w.keys() == g.keys(), f"{what}: {w} vs {g}"
        for k in w:
            _close(w[k], g[k], rtol, atol, f"{what}[{k!r}]")
        return
    assert isinstance(g, tuple) and w[:2] == g[:2], f"{what}: {w[:2]} != {g[:2]}"
    a, b = w[2], g[2]
    if isinstance(a, np.ndarray):
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
        else:
            np.testing.assert_array_equal(b, a, err_msg=what)
    elif isinstance(a, float):
        assert isinstance(b, float) and (np.isnan(a) and np.isnan(b) or
                                         abs(a - b) <= atol + rtol * abs(a)), f"{what}: {a} != {b}"
    else:
        assert a == b, f"{what}: {a!r} != {b!r}"


def same(want, got, rtol, atol, what):
    assert len(want) == len(got), what
    for i, ((wo, ws), (go, gs)) in enumerate(zip(want, got)):
        where = f"{what}, call {i}"
        if wo[0] == "raises":
            assert go[0] == "raises", f"{where}: torch raises {wo[1]}: {wo[2]}; got a result"
            assert go[1] == wo[1], f"{where}: torch raises {wo[1]}: {wo[2]}; got {go[1]}: {go[2]}"
        else:
            assert go[0] == "ok", f"{where}: torch gives a result, got {go[1]}: {go[2]}"
            _close(wo[1], go[1], rtol, atol, f"{where}: result")
        _close(ws, gs, rtol, atol, f"{where}: state")


def check(make, args, calls=6, rtol=1e-5, atol=1e-6, compiled_warns=None):
    """torch == llgrad eager == llgrad compiled, call by call."""
    import torch
    want = run(torch, make, args, calls)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        eager = run(llgrad, make, args, calls)
    eager_msgs = {str(w.message) for w in caught}   # (eager's own, given again compiled)
    same(want, eager, rtol, atol, f"eager vs torch ({make.__name__})")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = run(llgrad, make, args, calls, compiled=True)
    msgs = [str(w.message) for w in caught
            if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning))
            and str(w.message) not in eager_msgs]
    if compiled_warns is None:
        assert not msgs, f"compiled {make.__name__} warned: {msgs}"
    else:
        assert all(compiled_warns in m for m in msgs), msgs
    same(eager, got, rtol, atol, f"compiled vs eager ({make.__name__})")


def randn(seed, *shape):
    """Fixed float32 values, the same for every library."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
