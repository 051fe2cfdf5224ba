"""Depthwise convolutions' direct loops (codegen/lowerings/ops_conv_depthwise.py) against the
NumPy implementations, their independent reference: strides, dilations, paddings wider than
the kernel, channel multipliers, both dtypes, and the special values that reach the padding
(an infinite weight: NaN where the reference multiplies the padding's zeros, and not where it
adds no such term); and a MobileNet block's compiled training step against eager and torch."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen import lower
from llgrad.ir import OPS
from llgrad.ir.builder import Builder
from llgrad.ir.graph import TensorType

GEOMETRIES = [  # (channels, multiplier, kernel, stride, padding, dilation, (H, W))
    (8, 1, 3, 1, 1, 1, (9, 10)), (6, 2, 3, 2, 1, 1, (11, 8)), (4, 1, 7, 1, 3, 1, (12, 12)),
    (5, 1, 3, 1, 0, 2, (10, 9)), (3, 3, 5, 2, 2, 1, (7, 13)), (4, 1, 3, 1, 4, 1, (5, 5))]


def _run(op, arrays, attrs, dt):
    b = Builder("dw")
    ins = [b.input(TensorType(dt, a.shape)) if a is not None else None for a in arrays]
    k = lower.lower(b.ret(b.add(op, ins, dict(attrs))))
    assert k.plan.describe().startswith(f"group 0: [{op}]")
    direct = op == "convolution_backward_input" or attrs["stride"] == (1, 1)
    assert bool(k.plan.groups[0].state.get("depthwise")) == direct     # (the direct loops)
    return k([a for a in arrays if a is not None])[0]


def _same(got, want, dt):
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isinf(got), np.isinf(want))
    f = np.isfinite(want)
    scale = np.abs(want[f]).max() if f.any() else 1.0
    tol = 1e-5 if dt == "float32" else 1e-12
    np.testing.assert_allclose(got[f], want[f], rtol=tol, atol=tol * scale)


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("geo", GEOMETRIES)
@pytest.mark.parametrize("special", [None, "inf_weight", "nan_input", "inf_grad"])
def test_direct_loops_match_numpy(dt, geo, special):
    c, mult, k, s, p, d, hw = geo
    rng = np.random.default_rng(7)
    o, n = c * mult, 3
    x = rng.standard_normal((n, c) + hw).astype(dt)
    w = rng.standard_normal((o, 1, k, k)).astype(dt)
    bias = rng.standard_normal(o).astype(dt)
    if special == "inf_weight":
        w[1, 0, 0, 0] = np.inf
    elif special == "nan_input":
        x[0, 1, 2, 3] = np.nan
    attrs = dict(stride=(s, s), padding=(p, p), dilation=(d, d), groups=c)
    y = OPS["convolution"].impl(x, w, bias, **attrs)
    _same(_run("convolution", [x, w, bias], attrs, dt), y, dt)
    gy = rng.standard_normal(y.shape).astype(dt)
    if special == "inf_grad":
        gy[1, 0, 0, 1] = np.inf
    at = dict(attrs, input_size=hw)
    _same(_run("convolution_backward_input", [gy, w], at, dt),
          OPS["convolution_backward_input"].impl(gy, w, **at), dt)
    at = dict(attrs, weight_size=w.shape)
    _same(_run("convolution_backward_weight", [gy, x], at, dt),
          OPS["convolution_backward_weight"].impl(gy, x, **at), dt)


def test_mobilenet_block_compiled_matches_eager_and_torch():
    torch = pytest.importorskip("torch")
    outs = {}
    for name, lib, wrap in (("torch", torch, None), ("eager", llgrad, None),
                            ("compiled", llgrad, llgrad.compile)):
        lib.manual_seed(0)
        nn = lib.nn
        m = nn.Sequential(nn.Conv2d(8, 8, 3, 1, 1, groups=8), nn.ReLU6(),
                          nn.Conv2d(8, 16, 3, 2, 1, groups=8, bias=False), nn.ReLU(),
                          nn.Conv2d(16, 16, 7, 1, 3, groups=16))
        x = lib.randn(4, 8, 14, 14, requires_grad=True)

        def step(x):
            m.zero_grad()
            y = m(x)
            (y * y).sum().backward()
            return y.detach()
        step = wrap(step) if wrap else step
        for _ in range(2):
            x.grad = None
            y = step(x)
        outs[name] = [y.numpy(), x.grad.numpy()] + [p.grad.numpy() for p in m.parameters()]
    for name in ("eager", "compiled"):
        for a, b in zip(outs[name], outs["torch"]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [2, 3])
def test_threads_give_the_one_thread_bits(threads):
    """Planes (channels, for the weight gradient) are split among the threads, each chunk
    with scratch of its own: the results are the one-thread run's, bit for bit."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((16, 32, 16, 16)).astype(np.float32)
    w = rng.standard_normal((32, 1, 3, 3)).astype(np.float32)
    gy = rng.standard_normal((16, 32, 16, 16)).astype(np.float32)
    attrs = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=32)
    cases = [("convolution", [x, w, None], attrs),
             ("convolution_backward_input", [gy, w], dict(attrs, input_size=(16, 16))),
             ("convolution_backward_weight", [gy, x], dict(attrs, weight_size=w.shape))]
    old = llgrad.get_num_threads()
    try:
        results = []
        for t in (1, threads):
            llgrad.set_num_threads(t)
            results.append([_run(op, arrays, at, "float32") for op, arrays, at in cases])
    finally:
        llgrad.set_num_threads(old)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
