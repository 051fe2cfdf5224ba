"""layer_norm's NumPy VJP below its shaped kernel's sizes (runtime/fast_vjp_norm.py) against
its rule bit for bit (the same backward with the fast VJP taken out) and against torch:
float32/float64, one or two normalised dims, with and without weight and bias, a
non-contiguous input (the rule), a gradient with NaN / infinities, inputs wanting or not wanting their
gradients, and a create_graph backward (the rule then, differentiable again)."""
import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_shaped_vjp
from llgrad.ir.optable import OPS
from llgrad.runtime import fast_vjp_norm

torch = pytest.importorskip("torch")

_LN = OPS["layer_norm"]

CASES = [  # (shape, normalized_shape, affine, dtype, transposed, wants)
    ((5, 3, 8), (8,), True, np.float32, False, "xwb"),
    ((5, 3, 8), (3, 8), True, np.float64, False, "xwb"),
    ((4, 6), (6,), False, np.float32, False, "x"),
    ((6, 4), (4,), True, np.float32, True, "xwb"),
    ((8,), (8,), True, np.float64, False, "xwb"),
    ((3, 7), (7,), True, np.float32, False, "wb"),
    ((3, 7), (7,), True, np.float32, False, "x"),
]


def _run(L, case, seed, special=False):
    shape, norm, affine, dtype, transposed, wants = case
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape[::-1] if transposed else shape) * 3 + 1).astype(dtype)
    gs = rng.standard_normal(shape).astype(dtype)
    if special:
        gs.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    x = L.tensor(a, requires_grad="x" in wants)
    xin = x.t() if transposed else x
    w = b = None
    if affine:
        w = L.tensor(rng.standard_normal(norm).astype(dtype), requires_grad="w" in wants)
        b = L.tensor(rng.standard_normal(norm).astype(dtype), requires_grad="b" in wants)
    y = L.nn.functional.layer_norm(xin, norm, w, b, 1e-5)
    y.backward(L.tensor(gs))
    return [t.grad.detach().numpy().copy() for t in (x, w, b)
            if t is not None and t.grad is not None]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[3].__name__}-"
                                             f"{'T' if c[4] else 'C'}-{c[5]}" for c in CASES])
@pytest.mark.parametrize("special", [False, True])
def test_layer_norm_fast_vjp_is_the_rule_and_torch(case, special, monkeypatch):
    calls = []
    fast = eager_shaped_vjp._below[_LN]
    assert fast is fast_vjp_norm.layer_norm_vjp

    def counted(node, g):
        res = fast(node, g)
        calls.append(res is not None)
        return res
    monkeypatch.setitem(eager_shaped_vjp._below, _LN, counted)
    got = _run(llgrad, case, 0, special)
    assert calls == [not case[4]]      # (a non-contiguous input: the rule)
    monkeypatch.setitem(eager_shaped_vjp._below, _LN, lambda node, g: None)
    rule = _run(llgrad, case, 0, special)
    for a, b in zip(got, rule):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))
    ref = _run(torch, case, 0, special)
    assert len(ref) == len(got)
    rtol = 1e-4 if case[3] is np.float32 else 1e-10
    for a, r in zip(got, ref):
        np.testing.assert_allclose(a, r, rtol=rtol, atol=rtol)


def test_layer_norm_double_backward_takes_the_rule():
    """create_graph: the gradient is differentiable (the rule's ops, recorded), as torch's."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 5))
    outs = []
    for L in (llgrad, torch):
        x = L.tensor(a, requires_grad=True)
        w = L.tensor(np.linspace(0.5, 1.5, 5), requires_grad=True)
        y = L.nn.functional.layer_norm(x, (5,), w, None, 1e-5)
        gx, = L.autograd.grad((y * y.detach().sin()).sum(), x, create_graph=True)
        assert gx.requires_grad
        (gx.pow(2).sum()).backward()
        outs.append([gx.detach().numpy(), x.grad.numpy(), w.grad.numpy()])
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
