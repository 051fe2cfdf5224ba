"""The weight gradient of an unfolded convolution with K = C/G*KH*KW >= 4 * O/G rows of cols
is computed transposed (codegen/lowerings/ops_conv.py: dW^T = cols @ grad^T, a K x O/G
product per image and group, transposed when the chunks are summed; one K x O product and a
transpose for small maps): against the NumPy implementation, with groups, strides and
padding, per-image and batched, float32 and float64, and a compiled training step against
eager on 1 and 2 threads (one and two chunks of images)."""
import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F
from llgrad.codegen.lower import lower
from llgrad.codegen.lowerings import ops_conv_shifted as shifted
from llgrad.codegen.lowerings.conv_common import Geometry
from llgrad.ir import OPS, Builder, TensorType

# (x shape, weight shape, stride, padding, dilation, groups): K >= 4 * O/G, none shifted
GEOMETRIES = [((3, 4, 12, 12), (6, 4, 3, 3), (2, 2), (1, 1), (1, 1), 1),     # per image
              ((2, 6, 10, 10), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1), 2),     # groups
              ((5, 3, 18, 18), (4, 3, 5, 5), (1, 1), (2, 2), (1, 1), 1),     # large map
              ((4, 5, 6, 6), (16, 5, 4, 4), (2, 2), (1, 1), (1, 1), 1),      # batched
              ((2, 1, 16, 16), (2, 1, 3, 3), (1, 1), (0, 0), (2, 2), 1)]     # dilated


def _out_hw(x, w, s, p, d):
    return tuple((x[2 + i] + 2 * p[i] - d[i] * (w[2 + i] - 1) - 1) // s[i] + 1
                 for i in range(2))


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("geo", range(len(GEOMETRIES)))
def test_transposed_weight_gradient_matches_numpy(geo, dt):
    xs, ws, s, p, d, g = GEOMETRIES[geo]
    attrs = {"stride": s, "padding": p, "dilation": d, "groups": g, "weight_size": ws}
    info = Geometry(xs, ws, attrs)
    assert info.k >= 4 * info.og and not shifted.applies(info)
    gs = (xs[0], ws[0]) + _out_hw(xs, ws, s, p, d)
    rng = np.random.default_rng(geo)
    gy, x = (rng.standard_normal(sh).astype(dt) for sh in (gs, xs))
    bld = Builder("conv")
    ins = [bld.input(TensorType(dt, a.shape)) for a in (gy, x)]
    k = lower(bld.ret(bld.add("convolution_backward_weight", ins, attrs)))
    (got,) = k([gy, x])
    want = OPS["convolution_backward_weight"].impl(gy, x, **attrs)
    tol = 1e-4 if dt == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("threads", [1, 2])
def test_training_step_as_eager(threads):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 6, 14, 14)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)    # (groups 2: K 27, O/G 2)

    def f(x, w):
        y = F.conv2d(x, w, None, 1, 1, 1, 2)
        return (y * y.detach().sin()).sum()

    def grads(fn):
        ts = [llgrad.tensor(a, requires_grad=True) for a in (x, w)]
        loss = fn(*ts)
        loss.backward()
        return [loss.detach().numpy()] + [t.grad.numpy() for t in ts]
    old = llgrad.get_num_threads()
    try:
        llgrad.set_num_threads(threads)
        got, want = grads(llgrad.compile(f)), grads(f)
    finally:
        llgrad.set_num_threads(old)
    for a, e in zip(got, want):
        np.testing.assert_allclose(a, e, rtol=2e-4, atol=2e-4 * np.abs(e).max())
