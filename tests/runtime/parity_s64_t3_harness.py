"""The differential harness of sweep 64 (t3): one case is a function of the module `L` (torch
or llgrad) run on both; results are normalised to comparable records (dtype name, shape,
values; nested tuples; error type) and compared. `same_as_torch` compares eager runs,
`compiled_same` runs a function of tensors through torch, llgrad eager and llgrad.compile
(second call: the compiled graphs) and compares values, dtypes, shapes and gradients.
Imported by the test_parity_s64_t3_*.py files (torch is importorskip'ed there)."""
import math
import warnings

import numpy as np
import torch

import llgrad


def _dtype_name(d):
    return str(d).split(".")[-1]


def record(r):
    """A comparable record of a result: tensors as ("T", dtype, shape, values), nested
    sequences as tuples, grad_fn names without their namespace, other values as they are."""
    if isinstance(r, (torch.Tensor, llgrad.Tensor)):
        t = r.detach()
        if _dtype_name(t.dtype) == "bfloat16":
            t = t.float()
        return ("T", _dtype_name(r.dtype), tuple(r.shape), np.array(t.numpy(), copy=True))
    if isinstance(r, (list, tuple)):       # (named tuples, torch.Size, lists)
        return tuple(record(v) for v in r)
    if isinstance(r, (torch.dtype, llgrad.dtype)):
        return _dtype_name(r)
    if isinstance(r, str):
        return r.replace("torch::", "").replace("llgrad::", "")
    return r


def differ(a, b, tol):
    """None when records a and b agree (floats within tol, nan equal to nan), else why."""
    if isinstance(a, tuple) and a[:1] == ("T",):
        if not (isinstance(b, tuple) and b[:1] == ("T",)):
            return f"tensor vs {b!r}"
        if a[1:3] != b[1:3]:
            return f"dtype/shape {a[1:3]} vs {b[1:3]}"
        x, y = a[3], b[3]
        ok = np.allclose(x, y, rtol=tol, atol=tol, equal_nan=True) if x.dtype.kind in "fc" \
            else np.array_equal(x, y)
        return None if ok else f"values\n{x}\nvs\n{y}"
    if isinstance(a, tuple) and isinstance(b, tuple):
        if len(a) != len(b):
            return f"lengths {len(a)} vs {len(b)}"
        for u, v in zip(a, b):
            why = differ(u, v, tol)
            if why:
                return why
        return None
    if isinstance(a, float) and isinstance(b, float):
        return None if math.isclose(a, b, rel_tol=tol, abs_tol=tol) or a != a and b != b \
            else f"{a} vs {b}"
    return None if type(a) is type(b) and a == b else f"{a!r} vs {b!r}"


def outcome(fn, L):
    """("ok", record) or ("error", exception type name)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ("ok", record(fn(L)))
        except Exception as e:      # noqa: BLE001 -- the error type is what is compared
            return ("error", type(e).__name__)


def mismatch(fn, tol=1e-6):
    """None when fn(torch) and fn(llgrad) agree (or raise the same error type), else why."""
    want, got = outcome(fn, torch), outcome(fn, llgrad)
    if want[0] != got[0] or want[0] == "error":
        return None if want == got else f"torch {want[:2]} vs llgrad {got[:2]}"
    return differ(want[1], got[1], tol)


def check_table(cases, tol=1e-6):
    """Every (name, fn) of cases agrees; the failures listed together."""
    bad = [f"{name}: {why}" for name, fn in cases for why in [mismatch(fn, tol)] if why]
    assert not bad, "\n".join(bad[:20]) + f"\n({len(bad)} of {len(cases)} differ)"


def make_inputs(L, specs, grad):
    """Tensors of specs (arrays, or (array, dtype name)); floating ones require grad."""
    out = []
    for s in specs:
        a, dt = s if isinstance(s, tuple) else (s, None)
        t = L.tensor(np.asarray(a).tolist())
        if dt:
            t = t.to(getattr(L, dt))
        out.append(t.requires_grad_(grad and t.dtype.is_floating_point))
    return out


def _run(fn, specs, grad, how):
    L = torch if how == "torch" else llgrad
    if how == "compiled":
        cf = llgrad.compile(lambda *xs: fn(llgrad, *xs))
        cf(*make_inputs(L, specs, grad))        # (the trace; the next call runs native code)
        xs = make_inputs(L, specs, grad)
        outs = cf(*xs)
    else:
        xs = make_inputs(L, specs, grad)
        outs = fn(L, *xs)
    outs = tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
    loss = None
    for o in _tensors(outs):
        if o.requires_grad:
            w = L.arange(1., o.numel() + 1, dtype=L.float64).reshape(o.shape).sin()
            t = (o.double() * w).sum()
            loss = t if loss is None else loss + t
    if loss is not None:
        loss.backward()
    return record(outs), record(tuple(x.grad for x in xs))


def _tensors(o):
    if isinstance(o, (tuple, list)):
        return [t for e in o for t in _tensors(e)]
    return [o] if isinstance(o, (torch.Tensor, llgrad.Tensor)) else []


def compiled_same(fn, specs, grad=True, tol=1e-6, fallback_ok=False):
    """fn(L, *tensors) agrees between torch, llgrad eager and llgrad compiled (outputs and
    the inputs' gradients); the compiled call runs native code unless fallback_ok."""
    def attempt(how):
        try:
            return ("ok",) + _run(fn, specs, grad, how)
        except Exception as e:      # noqa: BLE001
            return ("error", type(e).__name__)
    want = attempt("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager = attempt("eager")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        comp = attempt("compiled")
    fell_back = [str(w.message) for w in caught if "running eagerly" in str(w.message)]
    assert fallback_ok or not fell_back, fell_back[0]
    for name, got in (("eager", eager), ("compiled", comp)):
        if want[0] != got[0] or want[0] == "error":
            assert want == got, f"{name}: torch {want} vs {got}"
        else:
            why = differ(want[1:], got[1:], tol)
            assert why is None, f"{name}: {why}"
