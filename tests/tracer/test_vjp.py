"""The VJP of a compiled function (its autograd.grad traced after the forward) and the
forward/backward partition, as llgrad.compile makes them (compile/entry.py)."""
import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F
from llgrad.compile.dump import saved_table_rows
from llgrad.ir import verify


def run_vjp(fn, arrays, diff):
    """The compiled entry of fn (interpreted) and the gradients its graphs give (the second
    call runs them; the first is the traced eager run)."""
    cf = llgrad.compile(fn, backend="interpret")
    for _ in range(2):
        ts = [llgrad.tensor(a, requires_grad=i in diff) for i, a in enumerate(arrays)]
        out = cf(*ts)
        outs = out if isinstance(out, tuple) else (out,)
        llgrad.autograd.backward([o for o in outs if o.requires_grad],
                                 [llgrad.ones_like(o) for o in outs if o.requires_grad])
    (entry,) = cf.entries
    verify(entry.forward)
    verify(entry.backward)
    return entry, outs, [ts[i].grad.numpy() for i in diff]


def eager_grads(fn, arrays, diff):
    ts = [llgrad.tensor(a, requires_grad=i in diff) for i, a in enumerate(arrays)]
    out = fn(*ts)
    outs = out if isinstance(out, tuple) else (out,)
    llgrad.autograd.backward([o for o in outs if o.requires_grad],
                             [llgrad.ones_like(o) for o in outs if o.requires_grad])
    return [ts[i].grad.numpy() for i in diff]


R = np.random.default_rng(1)


def rnd(*s):
    return R.standard_normal(s)


PROGRAMS = {
    "mlp": (lambda x, w, b, w2: ((x @ w + b).tanh() @ w2).log_softmax(1).sum(),
            [rnd(4, 3), rnd(3, 5), rnd(5), rnd(5, 2)], [1, 2, 3]),
    "fanout": (lambda x: (x * x).sum() + x.exp().mean() + x.sum(), [rnd(3, 2)], [0]),
    "broadcast": (lambda x, b: ((x + b) * b).sum(), [rnd(3, 4), rnd(4)], [0, 1]),
    "views": (lambda x: (x.t()[1:, ::2] * 3).sum() + x.diagonal().sum(), [rnd(4, 4)], [0]),
    "inplace_on_view": (lambda x: _inplace(x), [rnd(3, 4)], [0]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (4,), w, b).pow(2).sum(),
                   [rnd(2, 4), rnd(4), rnd(4)], [0, 1, 2]),
    "two_outputs": (lambda x: (x.sin(), (x * 2).sum()), [rnd(3)], [0]),
    "reductions": (lambda x: x.amax(1).sum() + x.var(0).sum() + x.logsumexp(1).sum(),
                   [rnd(3, 4)], [0]),
}


def _inplace(x):
    h = x * 1
    h[:, 1:] = h[:, 1:] * 2
    h.t()[0].mul_(3)
    return (h * h).sum()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_derived_gradients_equal_eager(name):
    fn, arrays, diff = PROGRAMS[name]
    v, outs, grads = run_vjp(fn, arrays, diff)
    for got, want in zip(grads, eager_grads(fn, arrays, diff)):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_matmul_outputs_are_saved_not_recomputed():
    fn, arrays, diff = PROGRAMS["mlp"]
    v, _, _ = run_vjp(fn, arrays, diff)
    assert not any(n.op == "mm" and [getattr(a, "name", None) for a in n.inputs] == ["x", "w"]
                   for n in v.backward.nodes)
    assert any(s.input_index is None for s in v.saved)


def test_a_cheap_chain_from_an_input_eager_saves_is_recomputed_not_saved():
    # sin saves its input: the backward reads x where it is (its version checked, as
    # eager's) and recomputes cos from it, saving no bytes
    x = rnd(100)
    v, _, grads = run_vjp(lambda x: x.sin().sum(), [x], [0])
    assert [s.input_index for s in v.saved] == [0]
    assert any(n.op == "cos" for n in v.backward.nodes)
    np.testing.assert_allclose(grads[0], np.cos(x))


def test_an_input_eager_did_not_save_is_not_read_by_the_backward():
    # exp saves its result, not x: a compiled backward reading x could see it written in
    # place after the call, where eager would give the right gradient without a word
    x = rnd(100)
    v, _, grads = run_vjp(lambda x: x.exp().sum(), [x], [0])
    assert [s.input_index for s in v.saved] == [None]
    np.testing.assert_allclose(grads[0], np.exp(x))


def test_views_of_saved_values_are_recomputed():
    v, _, _ = run_vjp(lambda x, w: (x @ w).t().tanh().sum(), [rnd(3, 4), rnd(4, 5)], [1])
    assert all(s.type.strides == tuple(sorted(s.type.strides, reverse=True)) or s.type.numel < 2
               for s in v.saved)        # nothing transposed is saved: the view is remade


def test_saved_table_lists_types_bytes_and_lines():
    fn, arrays, diff = PROGRAMS["mlp"]
    v, _, _ = run_vjp(fn, arrays, diff)
    text = saved_table_rows(v.saved)
    assert "bytes" in text and "test_vjp.py:" in text and "input" in text
    assert sum(s.nbytes for s in v.saved if s.input_index is None) > 0


def test_backward_nodes_carry_the_forward_line():
    fn, arrays, diff = PROGRAMS["layer_norm"]
    v, _, _ = run_vjp(fn, arrays, diff)
    assert {n.loc.split(":")[0] for n in v.backward.nodes} == {"test_vjp.py"}


def test_saved_inputs_follow_the_argument_order():
    # the backward's inputs (and so its disk-cache key) must not depend on where the
    # Values happen to live in memory: a set of inputs once ordered them by address
    n = 8
    arrays = [rnd(3) for _ in range(n)]

    def product(*xs):
        out = xs[0]
        for x in xs[1:]:
            out = out * x
        return out.sum()
    for _ in range(3):
        v, _, _ = run_vjp(product, arrays, list(range(n)))
        assert [s.input_index for s in v.saved] == list(range(n))
        assert [x.name for x in v.backward.inputs[:n]] == [f"xs_{i}" for i in range(n)]
