"""torch.slogdet in a compiled step (Glow's invertible 1x1 convolution) runs as native code:
linalg_slogdet has a lowering and its backward is a solve (as PyTorch's), so neither graph
falls back to the interpreter. Values and gradients as torch's, singular matrices included
(sign 0, -inf, PyTorch's inf/nan gradient)."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _matrices(dt):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 4, 4)).astype(dt)
    a[1] = a[1][[1, 0, 2, 3]]           # (an odd permutation: a negative sign)
    a[2] = -np.abs(a[2]) - 4 * np.eye(4, dtype=dt)
    a[3, :, 0] = 0                      # (singular)
    return a


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_slogdet_and_its_gradient_compile_to_native_code(dt):
    A = _matrices(dt)
    res = []
    for lib in (torch, llgrad):
        def fn(a):
            sign, logabsdet = lib.slogdet(a)
            (logabsdet[:3] * lib.arange(1.0, 4.0, dtype=a.dtype)).sum().backward()
            return sign.detach(), logabsdet.detach()

        cf = llgrad.compile(fn) if lib is llgrad else fn
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for _ in range(2):          # (the second call runs the compiled code)
                a = lib.tensor(A, requires_grad=True)
                sign, logabsdet = cf(a)
                if lib is llgrad:       # (LLGRAD_COMPILE=background: once it is built)
                    cf.wait()
        res.append((sign.numpy(), logabsdet.numpy(), a.grad.numpy()[:3]))
    rtol = 1e-5 if dt == np.float32 else 1e-12
    for want, got in zip(*res):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    kernels = [k for e in cf.entries for k in e.kernels.values()]
    assert kernels and not [k for k in kernels if isinstance(k, str)]
