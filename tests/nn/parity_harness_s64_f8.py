"""Table-driven parity harness (helper f8): a case is fn(L, *inputs) run with L = torch and
L = llgrad, eagerly and under llgrad.compile; forward values and the gradients of every
floating input are compared (PyTorch is the oracle, compiled must equal eager)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

TOL = {np.float32: dict(rtol=2e-4, atol=2e-5), np.float64: dict(rtol=1e-9, atol=1e-11)}


def rnd(*shape, seed=0, lo=None):
    a = np.asarray(np.random.RandomState(seed).randn(*shape))
    return np.abs(a) + lo if lo is not None else a


def ints(a):
    return ("int", np.asarray(a, dtype=np.int64))


def boolean(a):
    return ("bool", np.asarray(a, dtype=bool))


def _make(L, spec, dtype):
    if isinstance(spec, tuple) and len(spec) == 2 and spec[0] in ("int", "bool", "const"):
        kind, a = spec
        if kind == "const":
            return L.tensor(a.astype(dtype))
        return L.tensor(a)
    return L.tensor(np.asarray(spec).astype(dtype), requires_grad=True)


def _outs(o):
    return list(o) if isinstance(o, (tuple, list)) else [o]


def _run(L, fn, specs, dtype, compiled=False, seed=None):
    xs = [_make(L, s, dtype) for s in specs]
    f = (lambda *a: fn(L, *a))
    if compiled:
        f = llgrad.compile(f)
    res = None
    for _ in range(2 if compiled else 1):  # compiled: 1st call traces, 2nd runs native code
        for x in xs:
            if x.requires_grad:
                x.grad = None
        if seed is not None:
            L.manual_seed(seed)
        outs = [o for o in _outs(f(*xs)) if o is not None]
        loss = 0
        for k, o in enumerate(outs):
            if o.requires_grad:
                w = L.tensor(rnd(*o.shape, seed=100 + k).astype(dtype))
                loss = loss + (o * w).sum()
        if not isinstance(loss, int):
            loss.backward()
        res = ([o.detach().numpy().copy() for o in outs],
               [None if not x.requires_grad or x.grad is None else x.grad.numpy().copy()
                for x in xs])
    return res


def _close(got, want, tol, what):
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        if w is None or g is None:  # .grad None (no path) is observable: must match too
            assert g is None and w is None, (what, "one .grad is None, the other is not")
            continue
        assert g.shape == w.shape, (what, g.shape, w.shape)
        np.testing.assert_allclose(g, w, err_msg=what, **tol)


def check(fn, specs, dtype=np.float64, compiled=True, seed=None, torch_oracle=True,
          tol=None):
    """fn(L, *inputs): eager llgrad vs torch, compiled llgrad vs eager llgrad."""
    tol = tol or TOL[dtype]
    eager = _run(llgrad, fn, specs, dtype, seed=seed)
    if torch_oracle:
        want = _run(torch, fn, specs, dtype, seed=seed)
        _close(eager[0], want[0], tol, "forward vs torch")
        _close(eager[1], want[1], tol, "grad vs torch")
    if compiled:
        comp = _run(llgrad, fn, specs, dtype, compiled=True, seed=seed)
        _close(comp[0], eager[0], TOL[dtype], "compiled forward vs eager")
        _close(comp[1], eager[1], TOL[dtype], "compiled grad vs eager")


def compiled_params(cases, fast):
    """The table's cases for the compiled run: those named in fast run by default, the rest
    (a native build each) under the slow mark."""
    unknown = set(fast) - {c[0] for c in cases}
    assert not unknown, unknown
    return [pytest.param(*c, id=c[0], marks=() if c[0] in fast else pytest.mark.slow)
            for c in cases]
