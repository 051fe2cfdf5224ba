"""The differential harness of tests/compile/*_sweep7.py: one scenario run with torch (the
oracle), with llgrad eagerly and with llgrad.compile, after manual_seed(0) each; every
observation of every run must equal the first run's."""
import warnings

import numpy as np

import llgrad


def seen(v, torch):
    """An observation that later writes cannot change (torch's tensors too)."""
    if isinstance(v, (llgrad.Tensor, torch.Tensor)):
        return ("tensor", v.detach().numpy().copy(), str(v.dtype).split(".")[-1],
                v.requires_grad, tuple(v.shape))
    if isinstance(v, (llgrad.dtype, torch.dtype)):
        return ("dtype", str(v).split(".")[-1])
    if isinstance(v, BaseException):
        return ("raised", type(v).__name__, str(v).splitlines()[0] if str(v) else "")
    if isinstance(v, (list, tuple)):
        return [seen(x, torch) for x in v]
    if isinstance(v, dict):
        return {k: seen(x, torch) for k, x in v.items()}
    return v


def same(a, b, where):
    if isinstance(a, tuple) and a and a[0] == "tensor":
        assert isinstance(b, tuple) and b[0] == "tensor", f"{where}: {a!r} vs {b!r}"
        assert a[4] == b[4], f"{where}: shape {a[4]} vs {b[4]}"
        np.testing.assert_allclose(b[1], a[1], rtol=1e-5, atol=1e-5, err_msg=where)
        assert a[2:4] == b[2:4], f"{where}: dtype/requires_grad {a[2:4]} vs {b[2:4]}"
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: {a!r} vs {b!r}"
        for k, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{k}]")
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: {a!r} vs {b!r}"
        for k in a:
            same(a[k], b[k], f"{where}[{k}]")
    else:
        assert a == b, f"{where}: first {a!r}, other {b!r}"


def runs(scenario, torch, with_torch=True, **compile_kw):
    """scenario(lib, wrap, see) run with torch, llgrad eagerly and llgrad compiled; returns
    the compiled run's own warnings (those starting llgrad.compile(...))."""
    compile_kw.setdefault("backend", "interpret")
    todo = [("llgrad eager", llgrad, lambda f: f),
            ("llgrad compiled", llgrad, lambda f: llgrad.compile(f, **compile_kw))]
    if with_torch:
        todo.insert(0, ("torch", torch, lambda f: f))
    logs, own = [], []
    for _, lib, wrap in todo:
        lib.manual_seed(0)
        log = []
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            scenario(lib, wrap, lambda *vs: log.extend(seen(v, torch) for v in vs))
        own = [str(x.message) for x in w if str(x.message).startswith("llgrad.compile(")]
        logs.append(log)
    for (name, _, _), log in zip(todo[1:], logs[1:]):
        assert len(log) == len(logs[0]), name
        for k, (a, b) in enumerate(zip(logs[0], log)):
            same(a, b, f"{name} vs {todo[0][0]}: observation {k}")
    return own
