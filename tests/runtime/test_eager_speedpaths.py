"""The eager backward's speed paths: the matrix products' NumPy VJPs (runtime/fast_vjp.py,
node.fast_vjps) and the engine's NumPy sums of a slot's gradients (in place into a sum the
engine made). Each scenario runs with the paths on and off and must give the same values
(bitwise), errors, hook calls and .grad identity; the recurrent layers' time-major
projection keeps PyTorch's values and output grad_fn names."""
import numpy as np
import pytest
import torch

import llgrad
from llgrad.runtime import engine, node


def rnd(seed, *shape, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.fixture
def paths_off(monkeypatch):
    """Switch both paths off: the matrix products run their rules, slots sum with `+`."""
    def off():
        monkeypatch.setattr(node, "fast_vjps", {})
        monkeypatch.setattr(engine, "_SUMMED", ())
    return off


def _both(fn, paths_off):
    on = fn()
    paths_off()
    off = fn()
    return on, off


def _grads(*ts):
    return [None if t.grad is None else t.grad.numpy().copy() for t in ts]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("which", ["all", "mat1", "mat2", "bias"])
def test_addmm_mm_values_match_rules(paths_off, dtype, which):
    def run():
        b = llgrad.tensor(rnd(0, 5, dtype=dtype), requires_grad=which in ("all", "bias"))
        a = llgrad.tensor(rnd(1, 4, 3, dtype=dtype), requires_grad=which in ("all", "mat1"))
        w = llgrad.tensor(rnd(2, 3, 5, dtype=dtype), requires_grad=which in ("all", "mat2"))
        v = llgrad.tensor(rnd(3, 5, 2, dtype=dtype), requires_grad=True)
        y = b.addmm(a, w).tanh().mm(v)
        (y * y).sum().backward()
        return _grads(a, w, b, v)
    on, off = _both(run, paths_off)
    for x, y in zip(on, off):
        assert (x is None) == (y is None)
        if x is not None:
            assert x.dtype == y.dtype and np.array_equal(x, y)


def test_addmm_alpha_beta(paths_off):
    def run():
        b = llgrad.tensor(rnd(0, 4, 5), requires_grad=True)
        a = llgrad.tensor(rnd(1, 4, 3), requires_grad=True)
        w = llgrad.tensor(rnd(2, 3, 5), requires_grad=True)
        y = llgrad.addmm(b, a, w, beta=0.5, alpha=2.0)
        z = a.mm(w)
        (y.sum() + z.sum()).backward()
        return _grads(a, w, b)
    on, off = _both(run, paths_off)
    for x, y in zip(on, off):
        assert x.dtype == y.dtype and np.array_equal(x, y)


def test_matrix_products_create_graph_matches_torch():
    a0, w0 = rnd(1, 4, 3), rnd(2, 3, 5)
    res = []
    for lib in (llgrad, torch):
        a = lib.tensor(a0, requires_grad=True)
        w = lib.tensor(w0, requires_grad=True)
        y = (a.mm(w).tanh() ** 2).sum()
        ga, = lib.autograd.grad(y, a, create_graph=True)
        (ga * ga).sum().backward()
        res.append([a.grad.detach().numpy(), w.grad.detach().numpy()])
    for x, y in zip(*res):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def test_matrix_product_version_error_still_raised():
    a = llgrad.tensor(rnd(1, 4, 3), requires_grad=True)
    w = llgrad.tensor(rnd(2, 3, 5))
    x = a * 1.0
    y = x.mm(w)
    w.add_(1.0)             # a saved operand modified in place: the backward refuses
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    b = llgrad.tensor(rnd(0, 5), requires_grad=True)
    x = a * 1.0
    y = b.addmm(x, w.requires_grad_())     # (mat1 is saved for mat2's gradient only)
    x.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_summed_slots_values_hooks_retain_grad(paths_off):
    """A tensor used four times: its slot sums four gradients (the 3rd and 4th in place);
    the gradients each use produced are left as they were (a node hook sees them), the
    tensor's hook and retain_grad see the sum, once."""
    def run():
        x = llgrad.tensor(rnd(0, 3, 4), requires_grad=True)
        y = x * 2.0
        y.retain_grad()
        seen, outs = [], []
        y.register_hook(lambda g: seen.append(g.numpy().copy()))
        uses = [y * 3.0, y.sin(), y * y, y.exp()]
        for u in uses:
            u.grad_fn.register_hook(lambda gi, go: outs.append([g for g in gi]))
        sum(u.sum() for u in uses).backward()
        kept = [[g.numpy().copy() for g in gi if g is not None] for gi in outs]
        return (x.grad.numpy().copy(), y.grad.numpy().copy(), seen, kept, outs)
    on, off = _both(run, paths_off)
    assert np.array_equal(on[0], off[0]) and np.array_equal(on[1], off[1])
    assert len(on[2]) == 1 and np.array_equal(on[2][0], off[2][0])
    assert np.array_equal(on[1], on[2][0])
    # what each use's node gave is what it gives after the whole backward: not summed into
    for gi_now, gi_then in zip(on[4], on[3]):
        for g, then in zip([g for g in gi_now if g is not None], gi_then):
            assert np.array_equal(g.numpy(), then)
    y_value = rnd(0, 3, 4) * 2.0
    expect = 3.0 + np.cos(y_value) + 2 * y_value + np.exp(y_value)
    np.testing.assert_allclose(on[1], expect, rtol=1e-5)


def test_summed_slot_into_leaf_grad_identity(paths_off):
    """A leaf used three times: .grad is a fresh tensor (no use's gradient, no input of the
    user's), and accumulates into an existing .grad as before."""
    def run():
        x = llgrad.tensor(rnd(0, 5), requires_grad=True)
        g_out = llgrad.tensor(rnd(1, 5))
        (x * 1.0 + x * 2.0 + x * 3.0).backward(g_out)
        first = x.grad
        assert first is not g_out
        snapshot = first.numpy().copy()
        (x * 1.0 + x * 1.0 + x).backward(g_out)
        assert np.array_equal(g_out.numpy(), rnd(1, 5))
        return snapshot, x.grad.numpy().copy()
    on, off = _both(run, paths_off)
    for x, y in zip(on, off):
        assert np.array_equal(x, y)


def test_summed_slots_with_create_graph(paths_off):
    def run():
        x = llgrad.tensor(rnd(0, 4), requires_grad=True)
        y = x * x
        z = (y * 2.0 + y * 3.0 + y.sin()).sum()
        gx, = llgrad.autograd.grad(z, x, create_graph=True)
        assert gx.requires_grad
        gx.sum().backward()
        return x.grad.numpy().copy()
    on, off = _both(run, paths_off)
    assert np.array_equal(on, off)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("batch_first", [True, False])
def test_rnn_time_major_projection_matches_torch(kind, batch_first):
    torch.manual_seed(0)
    tm = getattr(torch.nn, kind)(6, 5, num_layers=2, batch_first=batch_first,
                                 bidirectional=True)
    lm = getattr(llgrad.nn, kind)(6, 5, num_layers=2, batch_first=batch_first,
                                  bidirectional=True)
    lm.load_state_dict({k: llgrad.tensor(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})
    x0 = rnd(4, 3, 7, 6)
    outs = []
    for lib, m in ((torch, tm), (llgrad, lm)):
        x = lib.tensor(x0, requires_grad=True)
        out, hidden = m(x)
        h = hidden[0] if kind == "LSTM" else hidden
        outs.append((type(out.grad_fn).__name__, type(h.grad_fn).__name__))
        (out.sin().sum() + h.sum()).backward()
        outs.append([out.detach().numpy(), x.grad.numpy()] +
                    [p.grad.numpy() for p in m.parameters()])
    if kind == "LSTM":      # (torch's batch-first GRU ends in transpose_: TransposeBackward1)
        assert outs[0] == outs[2]
    for a, b in zip(outs[1], outs[3]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_fast_vjps_are_taken(monkeypatch):
    calls = []
    wrapped = {op: (lambda f: lambda n, g: calls.append(n.name()) or f(n, g))(f)
               for op, f in node.fast_vjps.items()}
    monkeypatch.setattr(node, "fast_vjps", wrapped)
    b = llgrad.tensor(rnd(0, 5), requires_grad=True)
    a = llgrad.tensor(rnd(1, 4, 3), requires_grad=True)
    w = llgrad.tensor(rnd(2, 3, 5), requires_grad=True)
    (b.addmm(a, w).mm(w.t())).sum().backward()
    assert sorted(calls) == ["AddmmBackward0", "MmBackward0", "TBackward0"]
