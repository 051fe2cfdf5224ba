"""mul's and sub's NumPy VJPs (runtime/fast_vjp_arith.py) against the rules they stand for
(the same bits, the same layouts, the same errors and hook calls: the rule is run by taking
the VJPs out of node.fast_vjps) and against PyTorch's gradients."""
import numpy as np
import pytest

import llgrad
from llgrad.ir.optable import OPS
from llgrad.runtime import node as node_mod

torch = pytest.importorskip("torch")
_MUL, _SUB = OPS["mul"], OPS["sub"]


def _grads(lib, fn, arrays, grad_of):
    ts = [lib.tensor(a, requires_grad=k in grad_of) if isinstance(a, np.ndarray) else a
          for k, a in enumerate(arrays)]
    out = fn(*ts)
    out.backward(lib.tensor(np.linspace(-1.5, 2.0, out.numel()).reshape(tuple(out.shape))
                            .astype(arrays[0].dtype)))
    return [ts[k].grad for k in grad_of]


def _rule(monkeypatch, fn, arrays, grad_of):
    with monkeypatch.context() as m:
        m.delitem(node_mod.fast_vjps, _MUL)
        m.delitem(node_mod.fast_vjps, _SUB)
        return _grads(llgrad, fn, arrays, grad_of)


def _rng_arrays(dtype, *shapes):
    rng = np.random.default_rng(len(shapes))
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


CASES = [
    ("same shape", lambda a, b: a * b, ((4, 5), (4, 5)), (0, 1)),
    ("broadcast row", lambda a, b: a * b, ((6, 5), (5,)), (0, 1)),
    ("broadcast column", lambda a, b: b * a, ((6, 5), (6, 1)), (0, 1)),
    ("0-d other", lambda a, b: a * b, ((3, 4), ()), (0, 1)),
    ("transposed", lambda a, b: a.t() * b, ((5, 4), (4, 5)), (0, 1)),
    ("float number", lambda a: (a * 1.01) * 0.3, ((7, 3),), (0,)),
    ("int number", lambda a: 3 * a * -2, ((7, 3),), (0,)),
    ("only other needs", lambda a, b: a * b, ((4, 5), (4, 5)), (1,)),
    ("square", lambda a: a * a, ((4, 5),), (0,)),
    ("expanded grad", lambda a, b: (a * b).sum(0), ((3, 4), (3, 4)), (0, 1)),
    ("chain", lambda a, b: ((a * b) * a).exp() * b, ((2, 3, 4), (3, 4)), (0, 1)),
    ("large", lambda a, b: a * b, ((70, 70), (70, 70)), (0, 1)),
    # (a permuted gradient times a row-major operand: NumPy's own result order is not the
    # one the dispatcher lays the product out in, iterator_layout's)
    ("permuted grad", lambda a, b: (a * b).permute(1, 2, 0), ((4, 2, 3), (4, 2, 3)), (0, 1)),
    ("sub", lambda a, b: (a - b) * (b - a.exp()), ((3, 4), (3, 4)), (0, 1)),
    ("sub broadcast and number", lambda a, b: (a - b - 2.5) * (1 - a), ((5, 4), (4,)), (0, 1)),
    ("sub alpha", lambda a, b: a.sub(b, alpha=0.5) * a.sub(b, alpha=2), ((3, 4), (3, 4)),
     (0, 1)),
    ("sub of permuted grad", lambda a, b: (a - b).permute(1, 2, 0), ((4, 2, 3), (4, 2, 3)),
     (0, 1)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,fn,shapes,grad_of", CASES, ids=[c[0] for c in CASES])
def test_as_rule_and_torch(monkeypatch, dtype, name, fn, shapes, grad_of):
    arrays = _rng_arrays(dtype, *shapes)
    fast = _grads(llgrad, fn, arrays, grad_of)
    rule = _rule(monkeypatch, fn, arrays, grad_of)
    ref = _grads(torch, fn, arrays, grad_of)
    for f, r, t in zip(fast, rule, ref):
        assert f._data.dtype == r._data.dtype and f._data.strides == r._data.strides
        np.testing.assert_array_equal(np.ascontiguousarray(f._data).reshape(-1).view(np.uint8),
                                      np.ascontiguousarray(r._data).reshape(-1).view(np.uint8))
        np.testing.assert_allclose(f.numpy(), t.numpy(), rtol=1e-5 if dtype == np.float32
                                   else 1e-12, atol=1e-6)


def test_parameter_operand_and_huge_int(monkeypatch):
    """A Parameter operand (served), a Python int past 2**53 (the rule's)."""
    w = llgrad.nn.Parameter(llgrad.tensor(np.linspace(-1, 1, 6).reshape(2, 3)))
    x = llgrad.tensor(np.linspace(0, 2, 6).reshape(2, 3), requires_grad=True)
    ((x * w) * (1 << 60)).sum().backward()
    tw = torch.nn.Parameter(torch.tensor(np.linspace(-1, 1, 6).reshape(2, 3)))
    tx = torch.tensor(np.linspace(0, 2, 6).reshape(2, 3), requires_grad=True)
    ((tx * tw) * (1 << 60)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12)


def test_version_error_as_torch():
    """An operand changed in place after mul saved it: the rule's error (PyTorch's words)."""
    def run(lib):
        a = lib.tensor(np.ones(3), requires_grad=True)
        b = lib.tensor(np.full(3, 2.0), requires_grad=True)
        c = b * 1.0
        out = a * c
        with lib.no_grad():
            c.add_(1)
        with pytest.raises(RuntimeError) as e:
            out.sum().backward()
        return str(e.value)
    msg, tmsg = run(llgrad), run(torch)
    head = "one of the variables needed for gradient computation has been modified by an " \
           "inplace operation"
    assert msg.startswith(head) and tmsg.startswith(head)
    assert "is at version 1; expected version 0 instead" in msg
    assert "is at version 1; expected version 0 instead" in tmsg


def test_saved_tensor_hooks_unpack_once_each():
    """Under saved_tensors_hooks each saved operand is unpacked once per backward (the rule's
    reads), as PyTorch's."""
    def run(lib):
        calls = []

        def pack(t):
            calls.append("pack")
            return t

        def unpack(t):
            calls.append("unpack")
            return t
        a = lib.tensor(np.arange(1.0, 4.0), requires_grad=True)
        b = lib.tensor(np.arange(4.0, 7.0), requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
            out = (a * b).sum()
        out.backward()
        return calls, a.grad.numpy(), b.grad.numpy()
    calls, ga, gb = run(llgrad)
    tcalls, tga, tgb = run(torch)
    assert calls == tcalls
    np.testing.assert_array_equal(ga, tga)
    np.testing.assert_array_equal(gb, tgb)


def test_create_graph_takes_the_rule():
    """create_graph: the products are graph ops (a second derivative), as PyTorch's."""
    def run(lib):
        a = lib.tensor(np.linspace(0.5, 1.5, 4), requires_grad=True)
        b = lib.tensor(np.linspace(-1.0, 1.0, 4), requires_grad=True)
        (ga,) = lib.autograd.grad((a * b * a).sum(), [a], create_graph=True)
        (gb,) = lib.autograd.grad(ga.sum(), [b])
        return ga.detach().numpy(), gb.numpy()
    for x, y in zip(run(llgrad), run(torch)):
        np.testing.assert_allclose(x, y, rtol=1e-12)


def test_retained_grad_layout_as_rule_and_torch(monkeypatch):
    """A permuted gradient times a row-major operand is laid out as the dispatcher lays it
    (a tensor hook sees PyTorch's strides), not as NumPy's; the retained .grad is a row-major
    copy of it, as PyTorch's retain_grad hook makes (it was a copy in the gradient's layout)."""
    def run(lib):
        rng = np.random.default_rng(0)
        a = lib.tensor(rng.standard_normal((4, 2, 3)), requires_grad=True)
        b = lib.tensor(rng.standard_normal((4, 2, 3)), requires_grad=True)
        h = a * 1.0
        h.retain_grad()
        seen = []
        h.register_hook(lambda g: seen.append(tuple(g.stride())))
        (h * b).permute(1, 2, 0).backward(lib.tensor(rng.standard_normal((2, 3, 4))))
        return (seen, tuple(h.grad.stride())), h.grad.detach().numpy()
    fast = run(llgrad)
    with monkeypatch.context() as m:
        m.delitem(node_mod.fast_vjps, _MUL)
        rule = run(llgrad)
    ref = run(torch)
    assert fast[0] == rule[0] == ref[0]
    np.testing.assert_array_equal(fast[1], rule[1])
    np.testing.assert_allclose(fast[1], ref[1], rtol=1e-12)
