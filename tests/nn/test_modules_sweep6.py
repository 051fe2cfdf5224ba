"""Sweep 6: every torch.nn module class llgrad has, run against torch from a table of
constructor configurations (tests/nn/module_table_sweep6.py). torch's state_dict is copied
into llgrad's module; both run forward in train and eval mode on the same NumPy input, and
the test compares the outputs (values, dtypes, shapes, grad_fn names), the gradients of a
weighted sum w.r.t. the inputs and every parameter, the state_dict keys, the buffers after
forward, repr(module), and the result or error of inputs of a wrong shape."""
import warnings

import numpy as np
import pytest

import llgrad
from module_table_sweep6 import SKIPPED, TABLE, L

torch = pytest.importorskip("torch")

GRAD_KINDS = ("f", "d", "p", "ls")


def _np_inputs(specs, seed):
    rng = np.random.default_rng(seed)
    out = []
    for spec in specs:
        kind = spec[0]
        if kind in ("f", "x"):
            a = rng.standard_normal(spec[1]).astype(np.float32)
        elif kind == "d":
            a = rng.standard_normal(spec[1])
        elif kind in ("p", "q"):
            a = rng.uniform(0.05, 0.95, spec[1]).astype(np.float32)
        elif kind == "b":
            a = (rng.uniform(size=spec[1]) > 0.5).astype(np.float32)
        elif kind == "s":
            a = np.where(rng.uniform(size=spec[1]) > 0.5, 1.0, -1.0).astype(np.float32)
        elif kind == "i":
            a = rng.integers(0, spec[2], spec[1]).astype(np.int64)
        elif kind == "ls":
            z = rng.standard_normal(spec[1])
            d = min(spec[2], z.ndim - 1)
            z = z - (z.max(axis=d, keepdims=True) if z.size else 0)
            a = (z - np.log(np.exp(z).sum(axis=d, keepdims=True))).astype(np.float32)
        else:
            a = spec[1]
        out.append(a)
    return out


def _to_lib(lib, specs, arrays):
    out = []
    for spec, a in zip(specs, arrays):
        if isinstance(a, np.ndarray):
            t = lib.tensor(a)
            if spec[0] in GRAD_KINDS:
                t.requires_grad_()
            out.append(t)
        else:
            out.append(a)
    return out


def _resolve(lib, v):
    if isinstance(v, L):
        return v.fn(lib)
    if isinstance(v, list):
        return [_resolve(lib, x) for x in v]
    if isinstance(v, tuple):
        return tuple(_resolve(lib, x) for x in v)
    if isinstance(v, dict):
        return {k: _resolve(lib, x) for k, x in v.items()}
    return v


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [y for x in out for y in _flat(x)]
    return [out]


def _text(s):
    return str(s).replace("torch", "llgrad")


def _err(e):
    return (type(e).__name__, _text(str(e).split("\n")[0]))


def _warned(w):
    return [(x.category.__name__, _text(str(x.message).split(" (Triggered internally")[0]))
            for x in w if "oneDNN" not in str(x.message)]      # (a torch build's own)


def _always():
    """Every warning, but NumPy's RuntimeWarnings inside llgrad's ops, which llgrad silences
    (llgrad/runtime/dispatch.py) as PyTorch is silent."""
    warnings.simplefilter("always")
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"llgrad\.(ir|runtime)\.")


def _call(m, xs, clone, kw=None, seen=None):
    """m(*xs, **kw); the warnings it gives are appended to seen."""
    if clone:
        xs = [x * 1 if hasattr(x, "requires_grad") and x.requires_grad else x for x in xs]
    with warnings.catch_warnings(record=True) as w:
        _always()
        out = m(*xs, **(kw or {}))
    if seen is not None:
        seen += _warned(w)
    return out


def _forward_kwargs(lib, opts):
    fkw = opts.get("fkw", {})
    return dict(zip(fkw, _to_lib(lib, list(fkw.values()), _np_inputs(list(fkw.values()), 4))))


def _compare_values(a, b, what, tol):
    assert type(a).__name__.replace("torch", "llgrad") == type(b).__name__.replace(
        "torch", "llgrad") or not hasattr(b, "shape"), (what, type(a), type(b))
    if not hasattr(b, "shape"):
        assert a == b, what
        return
    assert tuple(a.shape) == tuple(b.shape), (what, tuple(a.shape), tuple(b.shape))
    assert _text(a.dtype) == _text(b.dtype), (what, a.dtype, b.dtype)
    np.testing.assert_allclose(a.detach().numpy().astype(np.float64),
                               b.detach().numpy().astype(np.float64),
                               rtol=tol, atol=tol, err_msg=what)


def _build(lib, name, args, kwargs, seen=None):
    with warnings.catch_warnings(record=True) as w:
        _always()
        m = getattr(lib.nn, name)(*_resolve(lib, args), **_resolve(lib, kwargs))
    if seen is not None:
        seen += _warned(w)
    return m


def _ids():
    seen = {}
    out = []
    for e in TABLE:
        k = seen.get(e[0], 0)
        seen[e[0]] = k + 1
        out.append(f"{e[0]}-{k}")
    return out


def test_every_torch_module_is_in_the_table():
    names = {n for n in dir(torch.nn) if isinstance(getattr(torch.nn, n), type)
             and issubclass(getattr(torch.nn, n), torch.nn.Module)}
    covered = {e[0] for e in TABLE}
    assert sorted(names - covered - set(SKIPPED)) == []
    assert sorted(n for n in covered if not hasattr(llgrad.nn, n)) == []


@pytest.mark.parametrize("entry", TABLE, ids=_ids())
def test_module_against_torch(entry):
    name, args, kwargs, specs, opts = entry
    tol = opts.get("tol", 2e-4)
    torch.manual_seed(0)
    tw, lw = [], []
    try:
        tm = _build(torch, name, args, kwargs, tw)
    except Exception as e:      # noqa: BLE001 (the same error from llgrad's constructor)
        with pytest.raises(Exception) as info:
            _build(llgrad, name, args, kwargs)
        assert _err(info.value) == _err(e)
        return
    lm = _build(llgrad, name, args, kwargs, lw)
    assert lw == tw
    assert list(lm.state_dict()) == list(tm.state_dict())
    if opts.get("lazy"):        # both lazy modules take the state of an initialised one
        warm = _build(torch, name, args, kwargs)
        with torch.no_grad():
            _call(warm, _to_lib(torch, specs, _np_inputs(specs, 1)), False)
        tm.load_state_dict(warm.state_dict())
    sd = {k: llgrad.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()}
    lm.load_state_dict(sd)
    assert _text(repr(lm)) == _text(repr(tm))
    assert list(lm.state_dict()) == list(tm.state_dict())
    for what in ("named_modules", "named_children", "named_buffers", "named_parameters"):
        assert [(k, type(v).__name__) for k, v in getattr(lm, what)()] == \
            [(k, type(v).__name__) for k, v in getattr(tm, what)()], what
    if opts.get("noforward"):
        return
    for mode in opts.get("modes", ("train", "eval")):
        tm.train(mode == "train")
        lm.train(mode == "train")
        arrays = _np_inputs(specs, 2)
        txs, lxs = _to_lib(torch, specs, arrays), _to_lib(llgrad, specs, arrays)
        tkw, lkw = _forward_kwargs(torch, opts), _forward_kwargs(llgrad, opts)
        tw, lw = [], []
        try:
            tout = _call(tm, txs, opts.get("clone"), tkw, tw)
        except Exception as e:      # noqa: BLE001 (compared with llgrad's)
            with pytest.raises(Exception) as info:
                _call(lm, lxs, opts.get("clone"), lkw)
            assert _err(info.value) == _err(e)
            continue
        lout = _call(lm, lxs, opts.get("clone"), lkw, lw)
        assert lw == tw, mode
        tflat, lflat = _flat(tout), _flat(lout)
        assert len(lflat) == len(tflat), mode
        rng = np.random.default_rng(3)
        tloss, lloss = 0, 0
        for i, (a, b) in enumerate(zip(lflat, tflat)):
            _compare_values(a, b, f"{mode} output {i}", tol)
            if hasattr(b, "grad_fn"):
                assert type(a.grad_fn).__name__ == type(b.grad_fn).__name__ or \
                    opts.get("grad_fn", True) is False, (mode, i)
                if b.requires_grad:
                    w = rng.standard_normal(tuple(b.shape)).astype(np.float32)
                    tloss = tloss + (b * torch.tensor(w)).sum()
                    lloss = lloss + (a * llgrad.tensor(w)).sum()
        if not isinstance(tloss, int):
            tloss.backward()
            lloss.backward()
        for i, (a, b) in enumerate(zip(lxs, txs)):
            if hasattr(b, "grad") and b.requires_grad:
                assert (a.grad is None) == (b.grad is None), (mode, "input", i)
                if b.grad is not None:
                    _compare_values(a.grad, b.grad, f"{mode} grad of input {i}", tol)
        lparams = dict(lm.named_parameters())
        assert list(lparams) == [k for k, _ in tm.named_parameters()]
        for k, p in tm.named_parameters():
            assert (lparams[k].grad is None) == (p.grad is None), (mode, k)
            if p.grad is not None:
                _compare_values(lparams[k].grad, p.grad, f"{mode} grad of {k}", tol)
        tsd, lsd = tm.state_dict(), lm.state_dict()
        assert list(lsd) == list(tsd)
        for k in tsd:
            _compare_values(lsd[k], tsd[k], f"{mode} state {k}", tol)
        tm.zero_grad()
        lm.zero_grad()


def _bad_variants(specs):
    first = next((i for i, s in enumerate(specs) if s[0] != "c"), None)
    if first is None:
        return []
    out = []
    s = specs[first]
    shape = tuple(s[1])
    for new in [(2,) + shape, shape[:-1] + (shape[-1] + 1,) if shape else (2,), shape[1:]]:
        v = list(specs)
        v[first] = (s[0], new) + tuple(s[2:])
        out.append(v)
    return out


def _wrong_shape_runs(e):
    return not (e[4].get("noforward") or e[4].get("lazy") or e[4].get("wrong_shape") is False
                or e[4].get("ctor_error"))


@pytest.mark.parametrize("entry", [e for e in TABLE if _wrong_shape_runs(e)],
                         ids=[i for e, i in zip(TABLE, _ids()) if _wrong_shape_runs(e)])
def test_module_wrong_shape_against_torch(entry):
    name, args, kwargs, specs, opts = entry
    torch.manual_seed(0)
    tm = _build(torch, name, args, kwargs)
    lm = _build(llgrad, name, args, kwargs)
    lm.load_state_dict({k: llgrad.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    tm.eval()
    lm.eval()
    for bad in _bad_variants(specs):
        arrays = _np_inputs(bad, 2)
        for lib, m in ((torch, tm), (llgrad, lm)):
            xs = _to_lib(lib, bad, arrays)
            try:
                with lib.no_grad():
                    r = [tuple(o.shape) if hasattr(o, "shape") else o
                         for o in _flat(_call(m, xs, False, _forward_kwargs(lib, opts)))]
            except Exception as e:      # noqa: BLE001 (compared with torch's)
                r = _err(e)
            if lib is torch:
                want = r
            else:
                assert r == want, ([s[1] for s in bad], r, want)
