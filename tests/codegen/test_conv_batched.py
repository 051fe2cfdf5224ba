"""Convolutions with small output maps run as one product over all the images
(codegen/lowerings/ops_conv.py, BATCH_BELOW): forward (with bias), input gradient and weight
gradient against the NumPy implementations, with padding, stride, dilation, a 1x1 output
(the first layer of a DCGAN generator) and a weight that is not contiguous; and against
eager on 1 and 2 threads. Fewer than 16 output channels stay one product per image."""
import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F
from llgrad.codegen.lower import lower
from llgrad.ir.ops_conv import BATCH_BELOW, batches
from llgrad.ir import OPS, Builder, TensorType

# (x shape, weight shape, stride, padding, dilation): each output map smaller than BATCH_BELOW
GEOMETRIES = [((6, 5, 8, 8), (17, 5, 4, 4), (2, 2), (1, 1), (1, 1)),
              ((4, 3, 4, 4), (16, 3, 4, 4), (1, 1), (0, 0), (1, 1)),
              ((5, 4, 9, 7), (20, 4, 3, 2), (2, 3), (1, 0), (2, 1)),
              ((3, 2, 3, 3), (16, 2, 1, 1), (1, 1), (0, 0), (1, 1))]


def _out_hw(x, w, s, p, d):
    return tuple((x[2 + i] + 2 * p[i] - d[i] * (w[2 + i] - 1) - 1) // s[i] + 1
                 for i in range(2))


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("geo", range(len(GEOMETRIES)))
@pytest.mark.parametrize("name", ["convolution", "convolution_backward_input",
                                  "convolution_backward_weight"])
def test_batched_products_match_numpy(name, geo, dt):
    xs, ws, s, p, d = GEOMETRIES[geo]
    oh, ow = _out_hw(xs, ws, s, p, d)
    assert oh * ow < BATCH_BELOW
    attrs = {"stride": s, "padding": p, "dilation": d, "groups": 1}
    gs = (xs[0], ws[0], oh, ow)
    if name == "convolution":
        shapes = [xs, ws, (ws[0],)]
    elif name == "convolution_backward_input":
        shapes, attrs["input_size"] = [gs, ws], xs[2:]
    else:
        shapes, attrs["weight_size"] = [gs, xs], ws
    rng = np.random.default_rng(geo)
    arrays = [rng.standard_normal(sh).astype(dt) for sh in shapes]
    if name != "convolution_backward_weight":       # (a weight that is not contiguous)
        arrays[1] = np.ascontiguousarray(arrays[1].transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)
    bld = Builder("conv")
    ins = [bld.input(TensorType(dt, a.shape, tuple(st // a.itemsize for st in a.strides)))
           for a in arrays]
    k = lower(bld.ret(bld.add(name, ins, attrs)))
    assert f"i64 {xs[0] * oh * ow}" in k.ir_before       # (one product over the images)
    (got,) = k(arrays)
    want = OPS[name].impl(*arrays, **attrs)
    tol = 1e-4 if dt == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("threads", [1, 2])
def test_batched_training_step_as_eager(threads):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((9, 16, 8, 8)).astype(np.float32)
    w = rng.standard_normal((24, 16, 4, 4)).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)

    def f(x, w, b):
        y = F.conv2d(x, w, b, 2, 1)
        return (y * y.detach().cos()).sum()

    def grads(fn):
        ts = [llgrad.tensor(a, requires_grad=True) for a in (x, w, b)]
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


def test_few_output_channels_keep_a_product_per_image():
    assert batches(1, 16, BATCH_BELOW - 1) and not batches(1, 15, 1)
    assert not batches(2, 64, 4) and not batches(1, 64, BATCH_BELOW)
