"""The mm / addmm backward gives an operand that was column-major at the forward (strides
(1, rows): a Linear's W.t()) a column-major gradient, as PyTorch's mm_mat1_backward /
mm_mat2_backward do, so W's gradient is row-major (autograd.grad's strides are torch's)
and .grad takes it without a transposing copy. The fast eager VJP and the op table's rule
(create_graph) agree bitwise; reading the layout checks no version (W changed in place
after the forward while x wants no gradient is no error, as in PyTorch)."""
import numpy as np
import pytest

import llgrad


def _both():
    torch = pytest.importorskip("torch")
    return llgrad, torch


def test_linear_weight_grad_strides_match_torch():
    for L in _both():
        L.manual_seed(0)
        lin = L.nn.Linear(20, 7)
        x = L.randn(5, 20, requires_grad=True)
        gw, gx = L.autograd.grad(lin(x).pow(2).sum(), (lin.weight, x))
        assert gw.stride() == (20, 1) and gx.stride() == (20, 1), L.__name__


@pytest.mark.parametrize("op", ["mm", "addmm"])
def test_column_major_operands_get_column_major_grads_like_torch(op):
    rng = np.random.default_rng(0)
    a0, b0 = rng.standard_normal((6, 4)), rng.standard_normal((5, 6))
    got = {}
    for L in _both():
        a = L.tensor(a0, requires_grad=True)          # a.t(): (4, 6), strides (1, 4)
        b = L.tensor(b0, requires_grad=True)          # b.t(): (6, 5), strides (1, 6)
        y = L.mm(a.t(), b.t()) if op == "mm" else \
            L.addmm(L.ones(4, 5, dtype=L.float64), a.t(), b.t())
        g = L.tensor(rng.standard_normal((4, 5)) if L is llgrad else got["g"])
        got.setdefault("g", g.numpy())
        ga, gb = L.autograd.grad(y, (a, b), g)
        got[L.__name__] = (ga.stride(), gb.stride(), ga.numpy(), gb.numpy())
    lg, tc = got["llgrad"], got["torch"]
    assert lg[:2] == tc[:2] == ((4, 1), (6, 1))
    np.testing.assert_allclose(lg[2], tc[2], rtol=1e-12)
    np.testing.assert_allclose(lg[3], tc[3], rtol=1e-12)


def test_fast_vjp_equals_the_rule_bitwise():
    llgrad.manual_seed(0)
    lin = llgrad.nn.Linear(33, 17)
    x = llgrad.randn(9, 33, requires_grad=True)
    fast = llgrad.autograd.grad(lin(x).sum(), (lin.weight, x))
    rule = llgrad.autograd.grad(lin(x).sum(), (lin.weight, x), create_graph=True)
    for f, r in zip(fast, rule):
        assert f.stride() == r.stride()
        np.testing.assert_array_equal(f.detach().numpy(), r.detach().numpy())


def test_weight_changed_after_forward_needs_no_version_check():
    for L in _both():
        w = L.randn(3, 4, requires_grad=True)
        x = L.randn(2, 4)                       # no gradient wanted: w is not saved
        y = x @ w.t()
        with L.no_grad():
            w.mul_(2)
        y.sum().backward()                      # (torch: no error either)
        assert w.grad.shape == (3, 4)
