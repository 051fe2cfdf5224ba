"""An op is declared once: a new elementwise op in a scratch OpDef (softsign, with a VJP
rule and a decomposition into existing ops, no lowering of its own) works as a Tensor
method, an llgrad.* function, eagerly, in gradients, and under every backend, with no other
registration anywhere."""
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.ir import OPS
from llgrad.ir.optable import defop


def _softsign_primitives(node, emit):
    x = node.inputs[0]
    return emit("div", [x, emit("add", [emit("abs", [x]), 1], alpha=1)])


@pytest.fixture
def softsign():
    name = "softsign_scratch"
    op = defop(name, lambda x: x / (1 + np.abs(x)),
               vjp=lambda c, g: (g / (1 + c.self.abs()) ** 2,), grad_fn="SoftsignBackward0",
               save=("self",), kind="elementwise", promote=(0,), float_out=True,
               methods=(name,), functions=(name,), decompose=_softsign_primitives)
    yield name
    del OPS[name]                               # (the op table is the process's)
    delattr(llgrad.Tensor, name)
    functions = __import__("llgrad.runtime.functions", fromlist=["x"])
    del functions.__dict__[name]
    functions.__all__.remove(name)
    assert op.name == name


def _want(a):
    return a / (1 + np.abs(a)), 1 / (1 + np.abs(a)) ** 2


def test_the_op_is_a_method_a_function_and_differentiable(softsign):
    a = np.linspace(-3, 3, 7)
    x = llgrad.tensor(a, requires_grad=True)
    y = getattr(x, softsign)()
    assert type(y.grad_fn).__name__ == "SoftsignBackward0"
    np.testing.assert_allclose(getattr(llgrad, softsign)(x).detach().numpy(), _want(a)[0])
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), _want(a)[1])
    assert llgrad.autograd.gradcheck(lambda t: getattr(t, softsign)(), (x,))


@pytest.mark.parametrize("backend", ["interpret", "python", "llvm"])
def test_the_op_compiles_on_every_backend(softsign, backend):
    def f(x):
        return getattr(llgrad, softsign)(x * 2).sum()

    cf = llgrad.compile(f, backend=backend)
    a = np.linspace(-2, 3.5, 9).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # native code: not interpreted, no warning
        for _ in range(3):
            x = llgrad.tensor(a, requires_grad=True)
            out = cf(x)
            out.backward()
            np.testing.assert_allclose(out.item(), _want(2 * a)[0].sum(), rtol=1e-6)
            np.testing.assert_allclose(x.grad.numpy(), 2 * _want(2 * a)[1], rtol=1e-6)
    assert cf.n_traces == 1
    if backend == "llvm":
        assert all(not isinstance(k, str) for k in cf.entries[0].kernels.values())
