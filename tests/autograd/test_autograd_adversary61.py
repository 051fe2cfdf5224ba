"""H6 (session 61): torch.autograd.functional.jacobian / hessian as PyTorch computes them,
by the engine on func's outputs (not by func transforms): a Function without setup_context,
autograd.grad or .item() inside func, func called once, PyTorch's strict-mode errors."""
import importlib

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

_R = np.random.RandomState(61)
_V = _R.randn(4)
_M = _R.randn(3, 4)


def _t(lib, a, rg=False):
    return lib.tensor(a, dtype=lib.float64, requires_grad=rg)


def _af(lib):
    return importlib.import_module(lib.__name__ + ".autograd.functional")


def _round_ste(lib):
    """An old-style Function (forward(ctx, ...), no setup_context) whose backward is not
    the derivative of its forward (a straight-through estimator)."""
    class RoundSTE(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.round()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * (x.abs() < 1).to(g.dtype)
    return RoundSTE


def _np(r):
    if isinstance(r, tuple):
        return tuple(_np(x) for x in r)
    return r.detach().numpy()


def _same(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
        return
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def _both(fn):
    return _np(fn(llgrad)), _np(fn(torch))


@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian_of_an_old_style_function(vectorize):
    # was: "In order to use an autograd.Function with functorch transforms ... must override
    # the setup_context staticmethod" (jacobian ran through jacrev); PyTorch differentiates
    # with the engine and uses the Function's own backward
    def run(lib):
        ste = _round_ste(lib)
        return _af(lib).jacobian(lambda x: ste.apply(x * 2) * x, _t(lib, _V), vectorize=vectorize)
    _same(*_both(run))


@pytest.mark.parametrize("vectorize", [False, True])
def test_hessian_of_an_old_style_function(vectorize):
    def run(lib):
        class Cube(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * 3 * x ** 2
        return _af(lib).hessian(lambda x: Cube.apply(x).sum() * x.sum(), _t(lib, _V),
                                vectorize=vectorize)
    _same(*_both(run))


def test_jacobian_of_a_function_calling_item_and_autograd_grad():
    def run(lib):
        af = _af(lib)
        a = af.jacobian(lambda x: x * x.sum().item(), _t(lib, _V))
        b = af.jacobian(lambda x: lib.autograd.grad((x ** 3).sum(), x, create_graph=True)[0],
                        _t(lib, _V))
        c = af.hessian(lambda x: (x ** 2).sum() * x.sum().item(), _t(lib, _V))
        return a, b, c
    _same(*_both(run))


@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian_and_hessian_tuples_and_create_graph(vectorize):
    def run(lib):
        af = _af(lib)
        x, w = _t(lib, _M), _t(lib, _V)
        j = af.jacobian(lambda a, b: ((a @ b).exp(), (a * b).sum()), (x, w), vectorize=vectorize)
        h = af.hessian(lambda a, b: ((a @ b).tanh() ** 2).sum(), (x, w), vectorize=vectorize)
        xg = _t(lib, _V, True)
        jc = af.jacobian(lambda a: a ** 3, xg, create_graph=True, vectorize=vectorize)
        return j, h, jc, lib.autograd.grad(jc.sum(), xg)
    _same(*_both(run))


def test_jacobian_calls_func_once():
    # (strict mode used to call func a second time for its checks)
    def run(lib):
        calls = []

        def f(x):
            calls.append(1)
            return x * 2
        af = _af(lib)
        af.jacobian(f, _t(lib, _V), strict=True)
        af.jacobian(f, _t(lib, _V), vectorize=True)
        return len(calls)
    assert run(llgrad) == run(torch) == 2


@pytest.mark.parametrize("case", ["strict_vectorize_const", "hessian_linear",
                                  "hessian_indep", "jacobian_indep"])
def test_strict_mode_errors_as_pytorch(case):
    def run(lib):
        af = _af(lib)
        x, y = _t(lib, _V), _t(lib, _V)
        try:
            if case == "strict_vectorize_const":    # (the outputs' check comes first)
                af.jacobian(lambda a: lib.ones(2, dtype=lib.float64), x, strict=True,
                            vectorize=True)
            elif case == "hessian_linear":
                af.hessian(lambda a: (a * 2).sum(), x, strict=True)
            elif case == "hessian_indep":
                af.hessian(lambda a, b: (a ** 2).sum(), (x, y), strict=True)
            else:
                af.jacobian(lambda a, b: a ** 2, (x, y), strict=True)
        except RuntimeError as e:
            return str(e).replace("torch.", "").replace("llgrad.", "")
        return None
    got, want = run(llgrad), run(torch)
    assert want is not None and got == want
