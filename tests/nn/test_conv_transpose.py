"""conv_transpose2d (the convolution's input gradient, convolution_backward_input, or the
convolution of the spread-out input where output_padding reaches the stride) against
torch: values, grad_fn name, input/weight/bias gradients, eagerly and compiled, over
strides, paddings, output paddings, dilations and groups."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

CASES = [  # cin, cout, k, stride, padding, output_padding, dilation, groups, bias
    (4, 6, 3, 2, 1, 1, 1, 1, True),       # the decoder's usual upsampling layer
    (4, 6, 3, 1, 0, 0, 1, 2, False),
    (6, 4, 4, 2, 1, 0, 1, 2, True),
    (3, 5, 3, 3, 2, 2, 2, 1, True),
    (3, 5, 3, 1, 1, 1, 2, 1, True),       # output_padding >= stride (below the dilation)
    (2, 2, 5, 2, 3, 1, 1, 1, False),      # padding past the kernel's reach: cropped
    (3, 3, (2, 3), (2, 1), (0, 1), (1, 0), 1, 3, True),
]


def _run(lib, case, x, w, b, compiled=False):
    cin, cout, k, s, p, op, d, g, bias = case
    xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
    bt = lib.tensor(b, requires_grad=True) if bias else None

    def loss(xt, wt, bt):
        y = lib.nn.functional.conv_transpose2d(xt, wt, bt, s, p, op, g, d)
        return y, (y * y.detach().sin()).sum()
    fn = llgrad.compile(loss) if compiled else loss
    for _ in range(2 if compiled else 1):       # (compiled: the second call runs the kernels)
        for t in (xt, wt, bt):
            if t is not None:
                t.grad = None
        y, total = fn(xt, wt, bt)
        total.backward()
        if compiled:        # (LLGRAD_COMPILE=background: the second call once it is built)
            fn.wait()
    grads = [t.grad.numpy() for t in (xt, wt, bt) if t is not None]
    return y.detach().numpy(), grads, type(y.grad_fn).__name__


@pytest.mark.parametrize("case", CASES, ids=[str(c[:8]) for c in CASES])
def test_conv_transpose2d_matches_torch(case):
    cin, cout, k, s, p, op, d, g, bias = case
    rng = np.random.default_rng(0)
    kh, kw = (k, k) if isinstance(k, int) else k
    x = rng.standard_normal((2, cin, 5, 4)).astype(np.float32)
    w = rng.standard_normal((cin, cout // g, kh, kw)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    want = _run(torch, case, x, w, b)
    for compiled in (False, True):
        got = _run(llgrad, case, x, w, b, compiled)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)
        for a, e in zip(got[1], want[1], strict=True):
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-3)
        assert got[2] == ("CompiledFunctionBackward" if compiled else want[2])
    assert want[2] == "ConvolutionBackward0"
