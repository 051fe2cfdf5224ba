"""The differential check the sweep-8 nn tests share: build a module in torch and in
llgrad with the generators seeded alike (so the parameters come from each library's own
initialisation), run forward on the same NumPy inputs with the generators seeded again
(dropout masks), backward of a fixed weighted sum of the outputs, and compare outputs
(values, dtypes, shapes, grad_fn names), gradients of the inputs and of every parameter,
state_dict keys and values, repr, the generator's next number, or the errors raised.

Tests import it after `torch = pytest.importorskip("torch")`."""
import warnings

import numpy as np
import torch

import llgrad


def flat(out):
    if isinstance(out, (tuple, list)):
        return [y for x in out for y in flat(x)]
    return [out]


def _text(s):
    return str(s).replace("torch", "llgrad")


def first_line(e):
    """An error's type and first line; llgrad's own note of the user's line (" (at f.py:3)",
    which PyTorch's message has not) left out."""
    line = _text(str(e).split("\n")[0])
    if " (at " in line and line.endswith(")"):
        line = line[:line.rindex(" (at ")]
    return type(e).__name__, line


def _lib_value(lib, v):
    if isinstance(v, np.ndarray):
        return lib.tensor(v, requires_grad=v.dtype.kind == "f")
    return v


def run(lib, build, inputs, fwd=None, seed=0, grad=True):
    """The observations of one library (a dict), or ("error", type, line) / ("backward
    error", ...) when forward / backward raises."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib.manual_seed(seed)
        try:
            m = build(lib)
        except Exception as e:      # noqa: BLE001 (compared with the other library's)
            return ("constructor error",) + first_line(e)
        xs = [_lib_value(lib, a) if grad else (lib.tensor(a) if isinstance(a, np.ndarray) else a)
              for a in inputs]
        lib.manual_seed(seed + 1)
        try:
            out = fwd(m, xs, lib) if fwd else m(*xs)
        except Exception as e:      # noqa: BLE001 (compared with the other library's)
            return ("error",) + first_line(e)
        outs = flat(out)
        loss = 0
        rng = np.random.default_rng(5)
        for o in outs:
            if isinstance(o, lib.Tensor) and o.requires_grad:
                w = rng.standard_normal(tuple(o.shape))
                loss = loss + (o * lib.tensor(w).to(o.dtype)).sum()
        if not isinstance(loss, int):
            try:
                loss.backward()
            except Exception as e:      # noqa: BLE001
                return ("backward error",) + first_line(e)
    res = {"out": [(o.detach().numpy().copy(), _text(o.dtype),
                    type(o.grad_fn).__name__ if o.grad_fn is not None else None)
                   if isinstance(o, lib.Tensor) else ("py", o) for o in outs]}
    res["input grads"] = [x.grad.numpy().copy() if isinstance(x, lib.Tensor) and x.grad is not None
                          else None for x in xs]
    if isinstance(m, lib.nn.Module):
        res["param grads"] = [(k, None if p.grad is None else p.grad.numpy().copy())
                              for k, p in m.named_parameters()]
        res["state"] = [(k, v.detach().numpy().copy()) for k, v in m.state_dict().items()]
        res["repr"] = _text(repr(m))
    res["next random"] = lib.rand(1).item()
    return res


def _close(a, b, tol):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.allclose(a.astype(np.float64), b.astype(np.float64),
                                              rtol=tol, atol=tol, equal_nan=True)


def differences(a, b, tol=1e-4):
    """The differences of two run() results (torch's first), as a list of tuples."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return [] if a == b else [("raised", a if isinstance(a, tuple) else "nothing",
                                   b if isinstance(b, tuple) else "nothing")]
    out = []
    if len(a["out"]) != len(b["out"]):
        return [("number of outputs", len(a["out"]), len(b["out"]))]
    for i, (x, y) in enumerate(zip(a["out"], b["out"])):
        if isinstance(x[0], str) or isinstance(y[0], str):
            if _text(x) != _text(y):
                out.append(("output", i, x, y))
            continue
        if x[0].shape != y[0].shape:
            out.append(("shape", i, x[0].shape, y[0].shape))
            continue
        if x[1:] != y[1:]:
            out.append(("dtype, grad_fn", i, x[1:], y[1:]))
        if not _close(x[0], y[0], tol):
            out.append(("value", i))
    for i, (x, y) in enumerate(zip(a["input grads"], b["input grads"])):
        if (x is None) != (y is None) or (x is not None and not _close(x, y, tol)):
            out.append(("input grad", i))
    for key in ("param grads", "state"):
        if key not in a:
            continue
        if [k for k, _ in a[key]] != [k for k, _ in b[key]]:
            out.append((key, "names", [k for k, _ in a[key]], [k for k, _ in b[key]]))
            continue
        for (k, x), (_, y) in zip(a[key], b[key]):
            if (x is None) != (y is None) or (x is not None and not _close(x, y, tol)):
                out.append((key, k))
    if a.get("repr") != b.get("repr"):
        out.append(("repr", a.get("repr"), b.get("repr")))
    if abs(a["next random"] - b["next random"]) > 1e-7:
        out.append(("generator", a["next random"], b["next random"]))
    return out


def check(build, inputs, fwd=None, tol=1e-4, seed=0, grad=True):
    """Assert that torch and llgrad agree (see the module's doc)."""
    a = run(torch, build, inputs, fwd, seed, grad)
    b = run(llgrad, build, inputs, fwd, seed, grad)
    d = differences(a, b, tol)
    assert not d, d[:4]


def identity(lib):
    return lib.nn.Identity()
