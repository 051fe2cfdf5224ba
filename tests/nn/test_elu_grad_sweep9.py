"""elu / selu / celu gradients as PyTorch's: CELU's backward takes input_scale = 1 / float32(alpha)
(derivatives.yaml's 1.0 / alpha.toFloat()), and the double backward masks x < 0 (0 at
x == 0, where the first derivative is the negative branch's)."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

_X = np.concatenate([[-0.0, 0.0, -1.0, -0.5, 1e-300, 2.0, -30.0], np.linspace(-3, 3, 37)])

_ACTS = {
    "elu": lambda lib, t: lib.nn.functional.elu(t, 0.7),
    "elu_": lambda lib, t: lib.nn.functional.elu_(t, 1.3),
    "selu": lambda lib, t: lib.nn.functional.selu(t),
    "selu_": lambda lib, t: lib.nn.functional.selu(t, inplace=True),
    "celu": lambda lib, t: lib.nn.functional.celu(t, 0.7),
    "celu_": lambda lib, t: lib.nn.functional.celu_(t, 0.3),
    "CELU": lambda lib, t: lib.nn.CELU(1.1, inplace=True)(t),
}


def _grads(lib, act, x, compiled=False):
    def f(X):
        y = act(lib, X * 1.0)
        g, = lib.autograd.grad((y * y.detach().cos()).sum(), X, create_graph=True)
        return g, (g * g.detach().sin()).sum()
    X = lib.tensor(x, requires_grad=True)
    g, z = (llgrad.compile(f) if compiled else f)(X)
    z.backward()
    return g.detach().numpy(), X.grad.numpy()


@pytest.mark.parametrize("name", sorted(_ACTS))
@pytest.mark.parametrize("compiled", [False, True])
def test_elu_family_grads_float64(name, compiled):
    want = _grads(torch, _ACTS[name], _X)
    got = _grads(llgrad, _ACTS[name], _X, compiled)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("name", ["celu", "celu_"])
def test_celu_grad_large_eager(name):
    """the eager native backward kernel (arrays of many elements) as torch's too"""
    x = np.linspace(-4, 4, 40001)
    got, want = [], []
    for lib, out in ((llgrad, got), (torch, want)):
        X = lib.tensor(x, requires_grad=True)
        _ACTS[name](lib, X * 1.0).sum().backward()
        out.append(X.grad.numpy())
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
