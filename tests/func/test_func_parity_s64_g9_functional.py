"""torch.autograd.functional parity (values, nesting, strict / create_graph errors) against
torch: jacobian / hessian / vjp / jvp / hvp / vhp as tutorials call them."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

X0 = np.random.RandomState(0).randn(4)
Y0 = np.random.RandomState(1).randn(4)


def _t(T, a):
    return T.tensor(a, dtype=T.float64)


def _flat(o):
    if isinstance(o, dict):
        return [x for k in sorted(o) for x in _flat(o[k])]
    if isinstance(o, (tuple, list)):
        return [x for v in o for x in _flat(v)]
    return [o]


def _nesting(o):
    if isinstance(o, dict):
        return "dict", sorted(o), [_nesting(o[k]) for k in sorted(o)]
    if isinstance(o, (tuple, list)):
        return type(o).__name__, [_nesting(v) for v in o]
    return "leaf"


def _run(T, case):
    try:
        return "ok", case(T)
    except Exception as e:      # (the error is the observable result compared)
        return "err", (type(e).__name__, str(e).replace("torch.", "llgrad.")[:90])


def same_as_torch(case):
    """case(llgrad) == case(torch): the same nesting and values, or the same error."""
    (gk, got), (wk, want) = _run(llgrad, case), _run(torch, case)
    assert gk == wk, (got, want)
    if gk == "err":
        assert got == want
        return
    assert _nesting(got) == _nesting(want)
    for g, w in zip(_flat(got), _flat(want)):
        if isinstance(w, bool):
            assert g == w
            continue
        assert tuple(g.shape) == tuple(w.shape)
        assert g.requires_grad == w.requires_grad
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        tol = 1e-10 if str(w.dtype) == "torch.float64" else 1e-5
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), atol=tol, rtol=tol)


def af(T):
    return T.autograd.functional


CONST = lambda T: (lambda x: T.ones(4, dtype=T.float64))         # noqa: E731


# output independent of the input, strict=False: zeros, as PyTorch (was a RuntimeError)
@pytest.mark.parametrize("fn", ["vjp", "jvp"])
def test_first_order_of_constant_output_is_zero(fn):
    same_as_torch(lambda T: getattr(af(T), fn)(CONST(T), _t(T, X0), _t(T, Y0)))


@pytest.mark.parametrize("fn", ["vjp", "jvp"])
def test_first_order_of_constant_output_strict_raises(fn):
    same_as_torch(lambda T: getattr(af(T), fn)(CONST(T), _t(T, X0), _t(T, Y0), strict=True))


# hvp / vhp strict=True of a function whose jacobian is independent of the input: PyTorch
# raises (llgrad returned zeros)
@pytest.mark.parametrize("fn", ["hvp", "vhp"])
@pytest.mark.parametrize("f", [lambda x: (x * 2).sum(), lambda x: (x * x).sum(),
                               lambda x: (x ** 3).sum()], ids=["linear", "quadratic", "cubic"])
@pytest.mark.parametrize("create_graph", [False, True])
def test_second_order_strict(fn, f, create_graph):
    same_as_torch(lambda T: getattr(af(T), fn)(f, _t(T, X0), _t(T, Y0), strict=True,
                                                create_graph=create_graph))


@pytest.mark.parametrize("fn", ["hvp", "vhp"])
@pytest.mark.parametrize("strict", [False, True])
def test_second_order_input_unused(fn, strict):
    same_as_torch(lambda T: getattr(af(T), fn)(
        lambda x, y: (x ** 3).sum(), (_t(T, X0), _t(T, Y0)), (_t(T, Y0), _t(T, X0)),
        strict=strict))


@pytest.mark.parametrize("case", [
    lambda T: af(T).jvp(lambda x: x * 2, _t(T, X0), _t(T, Y0), strict=True, create_graph=True),
    lambda T: af(T).jvp(lambda x, y: x * 2, (_t(T, X0), _t(T, Y0)), (_t(T, Y0), _t(T, X0)),
                        strict=True),
    lambda T: af(T).jvp(lambda x: x.sin(), _t(T, X0), _t(T, Y0), strict=True, create_graph=True),
    lambda T: af(T).vjp(lambda x: x * 2, _t(T, X0), _t(T, Y0), strict=True, create_graph=True),
    lambda T: af(T).vjp(lambda x: x * 2, _t(T, X0), _t(T, Y0), strict=True),
], ids=["jvp-linear-cg", "jvp-unused-input", "jvp-sin-cg", "vjp-linear-cg", "vjp-linear"])
def test_first_order_strict(case):
    same_as_torch(case)


def test_forward_mode_jacobian_create_graph_raises():
    same_as_torch(lambda T: af(T).jacobian(lambda x: x.sin() * x.sum(), _t(T, X0),
                                            create_graph=True, vectorize=True,
                                            strategy="forward-mode"))


def test_forward_mode_jacobian_nests_lists():
    f = lambda x, y: (x * y.cos(), (x * y).sum())       # noqa: E731
    same_as_torch(lambda T: af(T).jacobian(f, (_t(T, X0), _t(T, Y0)), vectorize=True,
                                            strategy="forward-mode"))
    same_as_torch(lambda T: af(T).jacobian(lambda x, y: x * y, (_t(T, X0), _t(T, Y0)),
                                            vectorize=True, strategy="forward-mode"))
    same_as_torch(lambda T: af(T).jacobian(lambda x: (x.sin(), x.sum()), _t(T, X0),
                                            vectorize=True, strategy="forward-mode"))
    same_as_torch(lambda T: af(T).jacobian(lambda x: x.sin(), (_t(T, X0),),
                                            vectorize=True, strategy="forward-mode"))


@pytest.mark.parametrize("single", [True, False])
def test_forward_mode_hessian_nests_lists(single):
    def case(T):
        x = _t(T, X0) if single else (_t(T, X0), _t(T, Y0))
        h = af(T).hessian(lambda *a: (a[0].sin() * a[-1]).sum(), x, vectorize=True,
                          outer_jacobian_strategy="forward-mode")
        # (torch's forward-mode hessian keeps a graph even without create_graph: detached)
        return h.detach() if single else \
            type(h)(type(row)(e.detach() for e in row) for row in h)
    same_as_torch(case)


def test_bad_strategy_is_assertion_error():
    same_as_torch(lambda T: af(T).jacobian(lambda x: x, _t(T, X0), strategy="sideways"))


F1 = lambda x: x.sin() * x.sum()                         # noqa: E731
FS = lambda x: (x.exp() * x).sum()                       # noqa: E731
F2 = lambda x, y: (x * y.cos(), (x * y).sum())           # noqa: E731


@pytest.mark.parametrize("kw", [{}, {"create_graph": True}, {"strict": True},
                                {"vectorize": True}], ids=str)
def test_jacobian_hessian_values(kw):
    same_as_torch(lambda T: af(T).jacobian(F1, _t(T, X0), **kw))
    same_as_torch(lambda T: af(T).jacobian(F2, (_t(T, X0), _t(T, Y0)), **kw))
    same_as_torch(lambda T: af(T).hessian(FS, _t(T, X0), **kw))
    same_as_torch(lambda T: af(T).hessian(lambda x, y: (x.sin() * y).sum(),
                                          (_t(T, X0), _t(T, Y0)), **kw))


@pytest.mark.parametrize("kw", [{}, {"create_graph": True}, {"strict": True}], ids=str)
def test_products_values(kw):
    same_as_torch(lambda T: af(T).vjp(F2, (_t(T, X0), _t(T, Y0)),
                                      (_t(T, Y0), _t(T, 1.0)), **kw))
    same_as_torch(lambda T: af(T).jvp(F2, (_t(T, X0), _t(T, Y0)), (_t(T, Y0), _t(T, X0)), **kw))
    same_as_torch(lambda T: af(T).hvp(FS, _t(T, X0), _t(T, Y0), **kw))
    same_as_torch(lambda T: af(T).vhp(lambda x, y: (x.sin() * y * x).sum(),
                                      (_t(T, X0), _t(T, Y0)), (_t(T, Y0), _t(T, X0)), **kw))


@pytest.mark.parametrize("fn", ["vjp", "jvp", "hvp", "jacobian"])
def test_create_graph_gradients_flow_to_inputs(fn):
    def case(T):
        x = _t(T, X0).requires_grad_()
        f = FS if fn == "hvp" else F1
        if fn == "jacobian":
            r = af(T).jacobian(f, x, create_graph=True)
        else:
            r = getattr(af(T), fn)(f, x, _t(T, Y0), create_graph=True)[1]
        r.sum().backward()
        return r, x.grad
    same_as_torch(case)
