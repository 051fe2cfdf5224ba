"""Complex tensors attacked as an outside tester would: functions written as compositions
(log2, sinh, tan, vdot, sgn), pow's gradients, double backward through saved complex
results, tanh / sigmoid / prod / var / lerp / addcmul, casts to bool, gradcheck on complex
functions; against PyTorch and float64 finite differences on the real view."""
import warnings

import numpy as np
import pytest

import llgrad as L

torch = pytest.importorskip("torch")

Z = np.array([[1 + 2j, -0.5 + 0.3j, 2 - 1j], [0.7 - 1.1j, -1.5 - 0.2j, 0.4 + 0.9j]])
GO = np.array([[0.3 - 0.2j, 0.5 + 0.1j, -0.4 + 0.7j], [1.0 + 0.5j, -0.2j, 0.6]])


def _np(t):
    t = t.detach()
    return t.resolve_conj().numpy() if isinstance(t, torch.Tensor) else t.numpy()


def _values_and_grad(m, fn, z=Z):
    x = m.tensor(z, requires_grad=True)
    y = fn(m, x)
    w = GO.reshape(-1)[:y.numel()].reshape(tuple(y.shape))
    loss = (y.real * m.tensor(w.real) + y.imag * m.tensor(w.imag)).sum() \
        if y.dtype.is_complex else (y * m.tensor(w.real)).sum()
    g, = m.autograd.grad(loss, x)
    return _np(y), _np(g)


# (name, fn(module, complex128 x) -> tensor); the same code runs on torch and llgrad
CASES = [
    ("log2", lambda m, x: m.log2(x)),
    ("log10", lambda m, x: x.log10()),
    ("sinh", lambda m, x: x.sinh()),
    ("cosh", lambda m, x: m.cosh(x)),
    ("tan", lambda m, x: x.tan()),
    ("vdot", lambda m, x: m.vdot(x[0], x[1])),
    ("sgn", lambda m, x: x.sgn()),
    ("number_to_tensor_pow", lambda m, x: 2 ** x),
    ("complex_number_pow", lambda m, x: (1 + 1j) ** x),
    ("tensor_tensor_pow", lambda m, x: x[0] ** x[1]),
    ("tanh", lambda m, x: x.tanh()),
    ("sigmoid", lambda m, x: m.sigmoid(x)),
    ("prod", lambda m, x: x.prod(1)),
    ("prod_all", lambda m, x: x.prod()),
    ("var", lambda m, x: x.var(1)),
    ("std", lambda m, x: x.std()),
    ("lerp", lambda m, x: m.lerp(x[0], x[1], 0.3)),
    ("lerp_tensor_weight", lambda m, x: x[0].lerp(x[1], x[1] * 0.1)),
    ("addcmul", lambda m, x: m.addcmul(x[0], x[1], x[0].conj(), value=0.5)),
    ("addcdiv", lambda m, x: m.addcdiv(x[0], x[1], x[0] + 3, value=2)),
    ("rsqrt_log1p_expm1", lambda m, x: x.rsqrt() + x.log1p() * x.expm1()),
    ("masked_select", lambda m, x: x.masked_select(x.real > 0) * 1j),
    ("masked_scatter", lambda m, x: x[0].masked_scatter(x[1].real > 0, x[1].flip(0))),
]


@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_match_torch(name, fn):
    ty, tg = _values_and_grad(torch, fn)
    ly, lg = _values_and_grad(L, fn)
    assert ly.dtype == ty.dtype
    np.testing.assert_allclose(ly, ty, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(lg, tg, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name,fn", CASES[:12], ids=[c[0] for c in CASES[:12]])
def test_gradients_against_finite_differences(name, fn):
    x = L.tensor(Z, requires_grad=True)
    assert L.autograd.gradcheck(lambda t: fn(L, t), (x,))


def test_sgn_gradient_at_zero_is_zero():
    for m in (torch, L):
        x = m.tensor([0j, 3 + 4j], requires_grad=True)
        x.sgn().real.sum().backward()
        if m is torch:
            want = _np(x.grad)
    np.testing.assert_allclose(_np(x.grad), want)
    assert _np(x.grad)[0] == 0


@pytest.mark.parametrize("expr", ["t.exp()", "t.sqrt()", "t.reciprocal()", "t.tanh()",
                                  "t.sigmoid()", "t.sin() * t", "t.log() / (t + 3)"])
def test_double_backward_through_saved_complex_results(expr):
    """A VJP that reads the op's complex result (exp, sqrt, reciprocal) must keep it in the
    graph for a second derivative, as a float result is."""
    res = []
    for m in (torch, L):
        t = m.tensor(Z, requires_grad=True)
        go = m.tensor(GO, requires_grad=True)
        g, = m.autograd.grad(eval(expr), t, go, create_graph=True)
        loss = (g * m.tensor(GO.conj())).real.sum() + g.imag.sum() * 0.7
        res.append([_np(a) for a in m.autograd.grad(loss, (t, go))])
    for a, b in zip(*res):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12)


def test_gradgradcheck_on_complex_functions():
    x = L.tensor(Z[0], requires_grad=True)
    assert L.autograd.gradgradcheck(lambda t: t * t + t.exp(), (x,))
    assert L.autograd.gradgradcheck(lambda t: (t.conj() * t.sin()).abs(), (x,))


def test_gradcheck_checks_complex_outputs_and_inputs():
    """gradcheck perturbs real and imaginary parts and compares both parts of a complex
    output: a VJP that forgets the conjugate must fail (it used to pass unchecked)."""
    class MissingConj(L.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return t * t

        @staticmethod
        def backward(ctx, g):
            t, = ctx.saved_tensors
            return g * 2 * t        # (should be g * conj(2 t))

    x = L.tensor(Z[0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (complex128 inputs: no precision warning)
        assert L.autograd.gradcheck(lambda t: t * t, (x,))
    assert not L.autograd.gradcheck(MissingConj.apply, (x,), raise_exception=False)
    # a complex output of real inputs, and mixed inputs
    y = L.tensor([0.5, 1.5], dtype=L.float64, requires_grad=True)
    assert L.autograd.gradcheck(lambda r: L.polar(r, r * 2), (y,))
    assert L.autograd.gradcheck(lambda a, b: a[:2] * b, (x, y))


def test_casts_of_complex_to_bool_test_both_parts():
    for m in (torch, L):
        z = m.tensor([0j, 1j, 2, 0.5 - 0.5j])
        got = [_np(z.bool()), _np(z.to(m.bool)), _np(z.any()), _np(z.all()),
               _np(m.logical_not(z))]
        if m is torch:
            want = got
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)


def test_sign_of_complex_raises_as_torch():
    with pytest.raises(NotImplementedError):
        torch.ones(2, dtype=torch.cfloat).sign()
    with pytest.raises(NotImplementedError, match="sign"):
        L.ones(2, dtype=L.cfloat).sign()


ALPHA_CASES = [
    ("add", lambda m, x, y: m.add(x, y, alpha=2 - 1j)),
    ("sub", lambda m, x, y: m.sub(x, y, alpha=1j)),
    ("rsub", lambda m, x, y: m.rsub(x, y, alpha=1 + 1j)),
    ("add_", lambda m, x, y: (x * 1).add_(y, alpha=1j)),
    ("sub_", lambda m, x, y: (x * 1).sub_(y, alpha=2j)),
    ("add_real_other", lambda m, x, y: m.add(x, y.real, alpha=1j)),
    ("addmm", lambda m, x, y: m.addmm(x[:1, None] * 1, x[None, :], y[:, None], beta=1j,
                                      alpha=2 - 1j)),
]


@pytest.mark.parametrize("name,fn", ALPHA_CASES, ids=[c[0] for c in ALPHA_CASES])
def test_complex_alpha_and_beta_are_conjugated_in_gradients(name, fn):
    """(PyTorch's rules multiply by alpha.conj(): the gradients were silently wrong)"""
    res = []
    for m in (torch, L):
        x = m.tensor(Z[0], requires_grad=True)
        y = m.tensor(Z[1], requires_grad=True)
        r = fn(m, x, y)
        loss = (r * m.tensor(GO[0][:r.shape[-1]])).real.sum()
        res.append([_np(r)] + [_np(g) for g in m.autograd.grad(loss, (x, y))])
    for a, b in zip(*res):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


def test_index_add_with_a_complex_alpha_against_finite_differences():
    """(it raised in int(alpha); PyTorch's own rule for source forgets the conjugate: its
    gradcheck fails there, so this one is checked against finite differences)"""
    x = L.tensor(Z[0], requires_grad=True)
    y = L.tensor(Z[1], requires_grad=True)
    idx = L.tensor([2, 0, 1])
    assert L.autograd.gradcheck(lambda a, b: a.index_add(0, idx, b, alpha=1j), (x, y))
    assert L.autograd.gradcheck(lambda a, b: (a * 1).index_add_(0, idx, b, alpha=2 + 1j), (x, y))
