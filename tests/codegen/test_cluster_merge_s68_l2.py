"""Open clusters joined by a group that reads both (codegen/schedule/cluster.py,
_join_read_clusters): an LSTM backward step's sigmoid(o) and tanh(c) start loops of their own,
the cell gradient reads both; joined, the step is one loop. Each kernel is checked against the
IR interpreter, and compiled LSTM / GRU steps against eager and torch."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen.lower import lower
from llgrad.ir import Builder, TensorType
from llgrad.ir.interpret import evaluate

torch = pytest.importorskip("torch")


def _ew(bld, op, *xs, **attrs):
    return bld.add(op, list(xs), attrs)


def _check(g, arrays, rtol=1e-6):
    k = lower(g)
    got = k(arrays)
    want, _ = evaluate(g, arrays)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol)
    return k


def _clusters(k):
    return [grp for grp in k.plan.groups if grp.loop == "cluster"]


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_a_group_reading_two_open_clusters_joins_them(dt):
    """a = sigmoid(x) (read twice: a cluster of its own), b = tanh(y) (shares nothing with
    a's: another), d = a * b + ... reads both: one loop, a and b never stored."""
    bld = Builder("two")
    x, y, z = (bld.input(TensorType(dt, (16, 24))) for _ in range(3))
    a = _ew(bld, "sigmoid", x)
    a2 = _ew(bld, "mul", a, a)
    b = _ew(bld, "tanh", y)
    b2 = _ew(bld, "mul", b, z)
    d = _ew(bld, "add", _ew(bld, "mul", a, b), _ew(bld, "mul", a2, b2), alpha=1)
    g = bld.ret(d, _ew(bld, "mul", d, a), _ew(bld, "mul", d, b))
    rng = np.random.default_rng(0)
    k = _check(g, [rng.standard_normal((16, 24)).astype(dt) for _ in range(3)],
               rtol=1e-6 if dt == "float32" else 1e-12)
    cl = _clusters(k)
    assert len(k.plan.groups) == 1 and len(cl) == 1
    stored = {v for grp in k.plan.groups for v in grp.results}
    assert a not in stored and b not in stored


def test_a_cluster_read_from_outside_is_not_joined():
    """A cluster that something outside read first is sealed: the later group reading it
    and another cluster does not pull it in (its values are stored for that reader)."""
    bld = Builder("sealed")
    x, y = (bld.input(TensorType("float32", (8, 32))) for _ in range(2))
    a = _ew(bld, "sigmoid", x)
    a2 = _ew(bld, "mul", a, a)
    s = _ew(bld, "sum", a2, dim=(1,), keepdim=True)      # a row sum reads a's cluster
    b = _ew(bld, "tanh", y)
    b2 = _ew(bld, "mul", b, b)
    d = _ew(bld, "add", _ew(bld, "mul", a, b), b2, alpha=1)
    g = bld.ret(d, s)
    rng = np.random.default_rng(1)
    _check(g, [rng.standard_normal((8, 32)).astype(np.float32) for _ in range(2)])


def _lstm_step_grads(lib, compiled, strided):
    rng = np.random.default_rng(2)
    B, I, H = 5, 7, 6
    x = rng.standard_normal((3, B, 2 * I) if strided else (3, B, I)).astype(np.float32)
    w_ih = rng.standard_normal((4 * H, I)).astype(np.float32) * 0.4
    w_hh = rng.standard_normal((4 * H, H)).astype(np.float32) * 0.4
    b = rng.standard_normal(4 * H).astype(np.float32) * 0.1
    t = [lib.tensor(a, requires_grad=True) for a in (x, w_ih, w_hh, b)]

    def loss(x, w_ih, w_hh, b):
        if strided:                     # every other feature: a strided input
            x = x[..., ::2]
        cell = lib.nn.functional
        h = c = lib.zeros(B, H)
        out = 0
        for s in range(x.shape[0]):
            gates = cell.linear(x[s], w_ih, b) + h @ w_hh.t()
            i, f, gg, o = gates.chunk(4, 1)
            c = f.sigmoid() * c + i.sigmoid() * gg.tanh()
            h = o.sigmoid() * c.tanh()
            out = out + (h * h).sum() + c.sum()
        return out
    fn = llgrad.compile(loss) if compiled else loss
    y = fn(*t)
    y.backward()
    return [float(y.item())] + [np.array(a.grad.numpy()) for a in t]


@pytest.mark.parametrize("strided", [False, True])
def test_lstm_steps_compiled_equal_eager_and_torch(strided):
    eager = _lstm_step_grads(llgrad, False, strided)
    comp = _lstm_step_grads(llgrad, True, strided)
    comp2 = _lstm_step_grads(llgrad, True, strided)       # (the compiled call)
    ref = _lstm_step_grads(torch, False, strided)
    for a, b, c, r in zip(eager, comp, comp2, ref):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(c, a, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_rnn_layer_backward_compiled_equals_eager_and_torch(mode):
    """nn.LSTM / nn.GRU (batch_first: a transposed input) under compile: the backward's
    per-step cell gradient is one loop now; loss and every gradient as eager and torch."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6, 5)).astype(np.float32)
    torch.manual_seed(0)
    tm = getattr(torch.nn, mode)(5, 8, batch_first=True)
    state = {k: v.detach().numpy().copy() for k, v in tm.state_dict().items()}

    def run(lib, compiled):
        m = getattr(lib.nn, mode)(5, 8, batch_first=True)
        m.load_state_dict({k: lib.tensor(v.copy()) for k, v in state.items()})

        def loss(m, x):
            y, _ = m(x)
            return (y * y).sum() + y.mean()
        fn = llgrad.compile(loss) if compiled else loss
        outs = []
        for _ in range(2):
            m.zero_grad()
            v = fn(m, lib.tensor(x))
            v.backward()
            outs.append([float(v.item())] + [np.array(p.grad.numpy()) for p in m.parameters()])
        return outs[-1]
    eager, comp, ref = run(llgrad, False), run(llgrad, True), run(torch, False)
    for a, b, r in zip(eager, comp, ref):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-5)
