"""torch.autograd's namespace as PyTorch programs import it: the submodules by their dotted
names, the deprecated Variable, and torch.autograd.functional's vjp / jvp / vhp / hvp,
against PyTorch."""
import numpy as np
import pytest

import llgrad
import llgrad.autograd.functional as AF
from llgrad.autograd import Variable
from llgrad.autograd.function import Function, once_differentiable  # noqa: F401
from llgrad.autograd.graph import saved_tensors_hooks  # noqa: F401

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def test_variable_as_torch():
    for lib in (torch, llgrad):
        x = lib.ones(2)
        v = lib.autograd.Variable(x, requires_grad=True)
        assert v is not x and v.requires_grad and v.is_leaf
        y = lib.ones(2, requires_grad=True) * 2
        v2 = lib.autograd.Variable(y)
        assert v2.grad_fn is None and not v2.requires_grad
        v2[0] = 5.0                 # (a new leaf over the same data)
        assert y[0].item() == 5.0
        assert isinstance(x, lib.autograd.Variable)
        with pytest.raises(TypeError, match="Variable data has to be a tensor"):
            lib.autograd.Variable([1, 2])
    assert isinstance(llgrad.ones(1), Variable)


def _f(a, b):
    return (a.sin() * b).exp(), a * b.sum()


def _scalar(a, b):
    return (a.sin() * b * b).sum()


def _inputs(lib):
    a = lib.tensor([0.3, -0.8, 1.2], dtype=lib.float64)
    b = lib.tensor([1.5, -0.4, 0.7], dtype=lib.float64)
    return a, b


def _np(r):
    if isinstance(r, tuple):
        return [_np(x) for x in r]
    return r.detach().numpy()


@pytest.mark.parametrize("which", ["vjp", "jvp", "vhp", "hvp"])
def test_functional_products_as_torch(which):
    out = []
    for lib in (torch, llgrad):
        fn = getattr(lib.autograd.functional, which)
        a, b = _inputs(lib)
        if which == "vjp":
            v = (lib.ones(3, dtype=lib.float64), lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64))
            r = fn(_f, (a, b), v)
        elif which == "jvp":
            r = fn(_f, (a, b), (lib.ones(3, dtype=lib.float64), b))
        else:
            r = fn(_scalar, (a, b), (b, a))
        out.append(_np(r))
    for x, y in zip(np.concatenate([np.ravel(t) for t in _flat(out[1])]),
                    np.concatenate([np.ravel(t) for t in _flat(out[0])])):
        np.testing.assert_allclose(x, y, rtol=1e-10)


def _flat(r):
    return [t for x in r for t in (_flat(x) if isinstance(x, list) else [x])]


def test_functional_single_tensor_and_errors():
    for lib in (torch, llgrad):
        x = lib.tensor([2.0], requires_grad=True)
        out, g = lib.autograd.functional.vjp(lambda t: t ** 3, x)   # v None: one element
        assert not out.requires_grad and g.tolist() == [12.0]
        out, jv = lib.autograd.functional.jvp(lambda t: t ** 3, x)
        assert jv.tolist() == [12.0]
        with pytest.raises(RuntimeError, match="v can only be None"):
            lib.autograd.functional.vjp(lambda t: t * 2, lib.ones(2))
        with pytest.raises(RuntimeError, match="invalid size"):
            lib.autograd.functional.vjp(lambda t: t * 2, lib.ones(2), lib.ones(3))
        with pytest.raises(RuntimeError, match="single element"):
            lib.autograd.functional.hvp(lambda t: t * 2, lib.ones(2), lib.ones(2))
        # create_graph keeps the result differentiable
        x = lib.tensor([2.0], requires_grad=True)
        _, g = lib.autograd.functional.vjp(lambda t: t ** 3, x, create_graph=True)
        (gg,) = lib.autograd.grad(g.sum(), x)
        assert gg.tolist() == [12.0]


def test_functional_is_the_module_attribute():
    assert AF is llgrad.autograd.functional
    assert llgrad.autograd.function.Function is llgrad.autograd.Function
