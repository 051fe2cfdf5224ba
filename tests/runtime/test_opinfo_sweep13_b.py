"""Sweep 13 (helper B): differences found by running PyTorch's OpInfo samples (op_db, names
m-z outside nn.functional / linalg / fft / special) through llgrad, each written here as a
small standalone comparison with torch (the OpInfo databases are not imported)."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _same(t, l, exact=True):
    assert str(l.dtype).split(".")[1] == str(t.dtype).split(".")[1]
    assert tuple(l.shape) == tuple(t.shape)
    u, v = t.detach().numpy(), l.detach().numpy()
    if exact:
        np.testing.assert_array_equal(v, u)
        assert (np.signbit(v) == np.signbit(u))[~np.isnan(u)].all()
    else:
        np.testing.assert_allclose(v, u, rtol=1e-7, atol=1e-12)


# ---- fmod / remainder: C's fmod, exact (x - trunc(x / y) * y rounded the quotient) ------------

_A = [-0.25, 0.25, 1.0, -1e20, 5.5, -3.0, 3.0, 12936.7, -4988429.2, -0.0, 7.0, float("inf")]
_B = [-0.001, 0.001, 0.1, 3.0, 1e-30, 3.0, -3.0, -1001.2, 1001.2, 2.0, float("inf"), 2.0]


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("fn", ["remainder", "fmod"])
def test_fmod_remainder_values_and_grads(fn, dt):
    # -0.25 % -0.001 is -0.001 (was -0), -1e20 % 3 is 2 (was -0), 5.5 % 1e-30 is 1.2e-31
    ta = torch.tensor(_A, dtype=getattr(torch, dt), requires_grad=True)
    tb = torch.tensor(_B, dtype=getattr(torch, dt), requires_grad=True)
    la = llgrad.tensor(_A, dtype=getattr(llgrad, dt), requires_grad=True)
    lb = llgrad.tensor(_B, dtype=getattr(llgrad, dt), requires_grad=True)
    tr, lr = getattr(torch, fn)(ta, tb), getattr(llgrad, fn)(la, lb)
    _same(tr, lr)
    assert lr.grad_fn.name() == tr.grad_fn.name()
    g = np.linspace(-1, 1, len(_A))
    tg = torch.autograd.grad(tr, (ta, tb), torch.tensor(g, dtype=ta.dtype))
    lg = llgrad.autograd.grad(lr, (la, lb), llgrad.tensor(g, dtype=la.dtype))
    for u, v in zip(tg, lg):
        np.testing.assert_allclose(v.numpy(), u.numpy(), rtol=1e-6)


def test_remainder_grad_of_infinite_input_is_grad():
    # PyTorch's derivative for self is grad itself (the composition gave nan through trunc)
    x = [float("inf"), -float("inf"), float("nan"), 2.5]
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    l = llgrad.tensor(x, dtype=llgrad.float64, requires_grad=True)
    torch.remainder(t, torch.tensor([2.0, 3.0, 1.0, 1.0], dtype=torch.float64)).sum().backward()
    llgrad.remainder(l, llgrad.tensor([2.0, 3.0, 1.0, 1.0], dtype=llgrad.float64)).sum().backward()
    np.testing.assert_array_equal(l.grad.numpy(), t.grad.numpy())


def test_python_mod_operator_and_inplace():
    x = [1.0, -0.25, 0.7, 12.3]
    t, l = torch.tensor(x), llgrad.tensor(x)
    _same(t % 0.1, l % 0.1)
    _same(t.remainder(-0.001), l.remainder(-0.001))
    t %= 0.1
    l %= 0.1
    _same(t, l)
    _same(t.fmod_(0.03), l.fmod_(0.03))


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_fmod_remainder_compiled(dt):
    f = llgrad.compile(lambda x, y: (x % y * 1.0, x.fmod(y) + 0.0, x % 0.1), fullgraph=True)
    tx, ty = torch.tensor(_A, dtype=getattr(torch, dt)), torch.tensor(_B, dtype=getattr(torch, dt))
    r = f(llgrad.tensor(_A, dtype=getattr(llgrad, dt)), llgrad.tensor(_B, dtype=getattr(llgrad, dt)))
    for u, v in zip((tx % ty * 1.0, tx.fmod(ty) + 0.0, tx % 0.1), r):
        _same(u, v)


# ---- empty operands ---------------------------------------------------------------------------

@pytest.mark.parametrize("sa,sb", [((5, 5, 0), (0, 5)), ((0, 0), (5, 0, 0)), ((2, 0, 3), (3, 4))])
def test_matmul_backward_of_empty_stack(sa, sb):
    # the stack-times-matrix gradient reshaped with -1: ambiguous for 0 elements (raised)
    ta = torch.randn(*sa, dtype=torch.float64, requires_grad=True)
    tb = torch.randn(*sb, dtype=torch.float64, requires_grad=True)
    la = llgrad.tensor(ta.detach().numpy(), requires_grad=True)
    lb = llgrad.tensor(tb.detach().numpy(), requires_grad=True)
    torch.matmul(ta, tb).sum().backward()
    llgrad.matmul(la, lb).sum().backward()
    _same(ta.grad, la.grad)
    _same(tb.grad, lb.grad)


def test_native_group_norm_empty_batch():
    w, b = torch.randn(2), torch.randn(2)
    t = torch.native_group_norm(torch.randn(0, 2), w, b, 0, 2, 1, 1, 1e-5)
    l = llgrad.native_group_norm(llgrad.randn(0, 2), llgrad.tensor(w.numpy()),
                                 llgrad.tensor(b.numpy()), 0, 2, 1, 1, 1e-5)
    for u, v in zip(t, l):
        _same(u, v)


# ---- argument forms ---------------------------------------------------------------------------

@pytest.mark.parametrize("args", [("cpu", "float64", True, True), ("cpu", "float32", False, True),
                                  ("cpu", "float32", True, False), ("float32", False, True),
                                  ("float32", True), ("other", False, True), ("other", True)])
def test_to_positional_non_blocking_and_copy(args):
    # Tensor.to(device, dtype, non_blocking, copy): the bools were taken for devices (raised)
    t, l = torch.ones(3), llgrad.ones(3)

    def conv(lib, x, a):
        if a == "other":
            return x
        return getattr(lib, a) if a in ("float32", "float64") else a
    tr = t.to(*[conv(torch, t, a) for a in args])
    lr = l.to(*[conv(llgrad, l, a) for a in args])
    assert (lr is l) == (tr is t)
    _same(tr, lr)


def test_special_methods_take_keywords():
    # x.polygamma(n=1), x.polygamma_(n=1), x.atan2(other=y): the wrappers dropped keywords
    x = [0.5, 1.5, 3.0]
    t, l = torch.tensor(x), llgrad.tensor(x)
    _same(t.polygamma(n=1), l.polygamma(n=1), exact=False)
    _same(t.atan2(other=t * 2), l.atan2(other=l * 2), exact=False)
    _same(t.arctan2(other=t), l.arctan2(other=l), exact=False)
    _same(t.clone().polygamma_(n=2), l.clone().polygamma_(n=2), exact=False)


# ---- not fixed --------------------------------------------------------------------------------

def test_nextafter_grad_at_infinity():
    x = [float("inf"), float("nan"), 1.0]
    y = [-float("inf"), 1.0, 2.0]
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    l = llgrad.tensor(x, dtype=llgrad.float64, requires_grad=True)
    torch.nextafter(t, torch.tensor(y, dtype=torch.float64)).sum().backward()
    llgrad.nextafter(l, llgrad.tensor(y, dtype=llgrad.float64)).sum().backward()
    np.testing.assert_array_equal(l.grad.numpy(), t.grad.numpy())
