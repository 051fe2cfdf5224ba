"""Sweep 20 (C), part 13: `p.data = y` inside a compiled step (the sparse autoencoder's
decoder renormalisation, WGAN's `p.data = p.data.clamp(-c, c)`): compiled calls give p the
new value in memory of its own, with eager's values, version and a buffer other than the
one it had, as eager's run does; where other tensors share y's memory, or the call's
results require grad, the call runs eagerly with a warning."""
import warnings

import numpy as np
import pytest

import llgrad

nn, F = llgrad.nn, llgrad.nn.functional


def _run(step, make, n=3, backend="llvm"):
    """make() -> state; step(state) run eagerly and compiled -> (eager, compiled) records."""
    out = []
    for compiled in (False, True):
        st = make()
        fn = llgrad.compile(step, backend=backend) if compiled else step
        rec = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(n):
                p = st["p"]
                old_ptr, old = p.data_ptr(), p.data
                before = old.clone()
                r = fn(st)
                rec.append((np.array(p.detach().numpy()), p._version, p.data_ptr() != old_ptr,
                            bool(llgrad.equal(old, before)), p.is_contiguous(), p.stride(),
                            None if r is None else np.array(r.detach().numpy())))
        out.append((rec, [str(w.message) for w in caught], fn))
    return out


def _same(eager, compiled):
    for a, b in zip(eager, compiled):
        np.testing.assert_allclose(b[0], a[0], rtol=1e-6, atol=1e-7)
        assert b[1:6] == a[1:6]
        if a[6] is not None:
            np.testing.assert_allclose(b[6], a[6], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("backend", ["llvm", "interpret"])
def test_renormalised_after_backward(backend):
    def make():
        llgrad.manual_seed(0)
        lin = nn.Linear(4, 3)
        return {"p": lin.weight, "lin": lin, "opt": llgrad.optim.SGD(lin.parameters(), lr=0.1),
                "x": llgrad.randn(5, 4)}

    def step(st):
        lin, p = st["lin"], st["p"]
        loss = lin(st["x"]).pow(2).mean()
        loss.backward()
        with llgrad.no_grad():
            normed = p / p.norm(dim=-1, keepdim=True)
            p.grad -= (p.grad * normed).sum(-1, keepdim=True) * normed
            p.data = normed
        st["opt"].step()
        st["opt"].zero_grad()
        return loss.detach()
    (e, ew, _), (c, cw, cf) = _run(step, make, backend=backend)
    assert not ew and not cw, cw
    _same(e, c)
    assert cf.entries


def test_clamped_before_forward():
    def make():
        llgrad.manual_seed(1)
        lin = nn.Linear(3, 1)
        return {"p": lin.weight, "lin": lin, "opt": llgrad.optim.RMSprop(lin.parameters(), lr=0.05),
                "x": llgrad.randn(6, 3)}

    def step(st):
        for q in st["lin"].parameters():
            q.data = q.data.clamp(-0.3, 0.3)
        loss = -st["lin"](st["x"]).mean()
        st["opt"].zero_grad()
        loss.backward()
        st["opt"].step()
        return loss.detach()
    (e, ew, _), (c, cw, cf) = _run(step, make, n=4)
    assert not ew and not cw, cw
    _same(e, c)
    assert cf.entries


@pytest.mark.parametrize("case", ["returned", "input", "twice", "view", "grad"])
def test_shared_memory_runs_eagerly(case):
    def make():
        p = llgrad.ones(2, 3)
        if case == "grad":
            p.requires_grad_()
        return {"p": p, "q": llgrad.full((2, 3), 2.0), "r": llgrad.zeros(2, 3)}

    def step(st):
        p = st["p"]
        if case == "grad":
            p.data = p.data * 2
            return p * 3        # (requires grad: its backward would differentiate the new p)
        with llgrad.no_grad():
            y = p * 2 if case != "view" else (llgrad.ones(4, 3) * 5)[1:3]
            if case == "input":
                p.data = st["q"]
                return None
            p.data = y
            if case == "twice":
                st["r"].data = y
            return y if case == "returned" else None
    (e, ew, _), (c, cw, _) = _run(step, make)
    assert not ew
    if case == "returned":  # (y only p's memory and the result: replayed, moved_data.py)
        assert not cw, cw
    else:
        assert any("other memory" in w for w in cw), cw
    _same(e, c)


def test_sparse_autoencoder_state():
    """The version and identity of the new memory, and the optimizer state keyed by p."""
    def make():
        llgrad.manual_seed(2)
        w = nn.Parameter(llgrad.randn(3, 4))
        return {"p": w, "opt": llgrad.optim.Adam([w], lr=0.01), "x": llgrad.randn(5, 4)}

    def step(st):
        w = st["p"]
        loss = (st["x"] @ w.t()).relu().sum()
        loss.backward()
        w.data = w.data / w.data.norm(dim=-1, keepdim=True)
        st["opt"].step()
        st["opt"].zero_grad(set_to_none=True)
        return loss.detach()
    (e, ew, _), (c, cw, cf) = _run(step, make, n=4)
    assert not ew and not cw, cw
    _same(e, c)


def test_written_then_moved():
    """p written in place (its old memory, which an alias sees) and then given other memory,
    and returned: the old buffer gets eager's write, p its new value."""
    def make():
        return {"p": llgrad.arange(6.0).reshape(2, 3)}

    def step(st):
        p = st["p"]
        p.mul_(2)
        p.data = p.data + 1
        p.add_(1)
        return p
    (e, ew, _), (c, cw, cf) = _run(step, make)
    assert not ew and not cw, cw
    _same(e, c)
    assert [r[3] for r in e] == [False] * 3


def test_moved_and_view_returned():
    def make():
        return {"p": llgrad.arange(6.0).reshape(2, 3)}

    def step(st):
        p = st["p"]
        p.data = p.data * 3
        return p[1]         # (a view of p's new memory: eager's result aliases p)
    (e, ew, _), (c, cw, _) = _run(step, make)
    assert any("other memory" in w for w in cw), cw
    _same(e, c)
