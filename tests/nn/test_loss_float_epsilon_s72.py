"""ATen's EPSILON in binary_cross_entropy's backward and cosine_embedding_loss is a float:
1e-12 rounded to float32 (9.99999996e-13), in a float64 loss too. llgrad used the double
1e-12, so a float64 gradient where the clamp or the epsilon decides (a probability of 0 or
1, a zero embedding) was 4e-9 relative off torch's (batch 18, s72 u8)."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _losses(L, compiled=False):
    f64 = L.float64
    x = L.tensor([0., 1., 0.5, 1e-300], dtype=f64, requires_grad=True)
    a = L.tensor([[0., 0.], [0.3, 0.4]], dtype=f64, requires_grad=True)
    t = L.tensor([1., 0., 0.5, 1.], dtype=f64)
    b = L.tensor([[1.5, 2.], [0., 0.]], dtype=f64)
    F = L.nn.functional

    def step(x, a):
        loss = (F.binary_cross_entropy(x, t, weight=L.tensor([1., 2., 3., 4.], dtype=f64))
                + F.cosine_embedding_loss(a, b, L.tensor([1., -1.], dtype=f64), margin=-0.5))
        loss.backward()
        return loss.detach(), x.grad, a.grad
    if compiled:
        f = llgrad.compile(step)
        f(x, a)
        f.wait()
        x.grad = a.grad = None
        out = f(x, a)
        assert f.entries
    else:
        out = step(x, a)
    return [v.numpy() for v in out]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_float64_gradients_at_the_epsilon_equal_torchs_bits(compiled):
    want = _losses(torch)
    got = _losses(llgrad, compiled)
    for name, w, g in zip(["loss", "bce grad", "cosine embedding grad"], want, got):
        np.testing.assert_array_equal(g, w, err_msg=name)
