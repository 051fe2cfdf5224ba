"""Sweep 8: state_dict / load_state_dict (strict=False and its return value, errors, assign,
prefix, keep_vars), torch.save / torch.load round trips (nested containers, shared views,
whole modules, weights_only, an optimizer's state), clip_grad_norm_ / clip_grad_value_ and
checkpoint with dropout, against torch: the same script run with each library."""
import io
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _text(x):
    return str(x).replace("torch", "llgrad")


def _state_dicts(lib):
    out = []
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.BatchNorm1d(3), lib.nn.Linear(3, 1))
    sd = m.state_dict()
    out += [list(sd), type(sd).__name__, getattr(sd, "_metadata", None)]
    sd2 = dict(sd)
    sd2.pop("0.bias")
    sd2["extra"] = lib.zeros(1)
    r = m.load_state_dict(sd2, strict=False)
    out.append((type(r).__name__, r.missing_keys, r.unexpected_keys, repr(r), str(r)))
    for bad, strict in ((sd2, True), (dict(sd, **{"0.weight": lib.zeros(4, 2)}), False)):
        try:
            m.load_state_dict(bad, strict=strict)
        except Exception as e:      # noqa: BLE001 (compared with torch's)
            out.append((type(e).__name__, str(e)))
    r = m.load_state_dict(sd)
    out += [repr(r), r == ([], []), repr(m[0].load_state_dict({"weight": lib.ones(3, 2)},
                                                              strict=False))]
    m2 = lib.nn.Linear(2, 3)
    w = lib.ones(3, 2)
    m2.load_state_dict({"weight": w, "bias": lib.zeros(3)}, assign=True)
    out.append((m2.weight is w, type(m2.weight).__name__, m2.weight.requires_grad))
    out.append(list(m.state_dict(prefix="pre.")))
    out.append([type(v).__name__ for v in m.state_dict(keep_vars=True).values()])
    out.append([v.requires_grad for v in m.state_dict().values()])
    return out


def test_state_dict_and_load_state_dict():
    assert _text(_state_dicts(llgrad)) == _text(_state_dicts(torch))


def _save_load(lib):
    out = []
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.BatchNorm1d(3), lib.nn.Linear(3, 1))
    buf = io.BytesIO()
    lib.save({"model": m.state_dict(), "epoch": 3, "list": [lib.tensor([1, 2]), 1.5]}, buf)
    buf.seek(0)
    ck = lib.load(buf)
    out.append((sorted(ck), ck["epoch"], [type(x).__name__ for x in ck["list"]],
                repr(ck["list"][0].dtype), list(ck["model"])))
    buf = io.BytesIO()
    base = lib.arange(6.)
    lib.save([base, base[2:4]], buf)
    buf.seek(0)
    a, b = lib.load(buf)
    b[0] = 100
    out.append(a.tolist())
    buf = io.BytesIO()
    lib.save(m, buf)
    buf.seek(0)
    out.append(repr(lib.load(buf, weights_only=False)))
    buf.seek(0)
    try:
        lib.load(buf)
    except Exception as e:      # noqa: BLE001 (compared with torch's)
        out.append((type(e).__name__, str(e).split("\n")[0][:60]))
    o = lib.optim.Adam(m.parameters(), lr=0.1)
    m(lib.ones(4, 2)).sum().backward()
    o.step()
    buf = io.BytesIO()
    lib.save(o.state_dict(), buf)
    buf.seek(0)
    o2 = lib.optim.Adam(m.parameters(), lr=0.5)
    o2.load_state_dict(lib.load(buf))
    out.append((o2.param_groups[0]["lr"], sorted(o2.state[m[0].weight]),
                repr(o2.state[m[0].weight]["step"].dtype)))
    return out


def test_save_load_round_trips():
    assert _text(_save_load(llgrad)) == _text(_save_load(torch))


def _clip_and_checkpoint(lib):
    out = []
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Dropout(0.5), lib.nn.Linear(4, 2))
    x = lib.randn(5, 3, requires_grad=True)
    for reentrant in (False, True):
        lib.manual_seed(3)
        y = lib.utils.checkpoint.checkpoint(m, x, use_reentrant=reentrant)
        y.sum().backward()
        out.append((type(y.grad_fn).__name__, y.detach().numpy(), x.grad.numpy().copy(),
                    m[0].weight.grad.numpy().copy()))
        x.grad = None
        m.zero_grad()
    for norm_type in (2.0, 1.0, float("inf"), 3.0):
        for foreach in (None, False, True):
            m.zero_grad()
            m(x).pow(2).sum().backward()
            n = lib.nn.utils.clip_grad_norm_(m.parameters(), 0.5, norm_type=norm_type,
                                             foreach=foreach)
            out.append((n.item(), m[0].weight.grad.numpy().copy()))
    m.zero_grad()
    m(x).pow(2).sum().backward()
    lib.nn.utils.clip_grad_value_(m.parameters(), 0.1)
    out.append(m[0].weight.grad.numpy().copy())
    m[0].weight.grad[0, 0] = float("nan")
    try:
        lib.nn.utils.clip_grad_norm_(m.parameters(), 1.0, error_if_nonfinite=True)
    except RuntimeError as e:
        out.append(str(e))
    out.append(str(lib.nn.utils.clip_grad_norm_(m.parameters(), 1.0).item()))
    out.append(repr(lib.nn.utils.clip_grad_norm_([], 1.0)))
    return out


def test_clip_grad_and_checkpoint_with_dropout():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want, got = _clip_and_checkpoint(torch), _clip_and_checkpoint(llgrad)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        if isinstance(b, str):
            assert _text(a) == _text(b)
            continue
        for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
            if isinstance(y, str):
                assert x == y
            else:
                np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-7)
