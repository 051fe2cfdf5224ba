"""The direct register-blocked kernels of convolutions with few input channels
(codegen/lowerings/ops_conv_direct.py: the forward and the weight gradient of a first layer)
against the NumPy implementations the IR interpreter runs (an independent reference: an
unfold and a product): strides, dilations, paddings wider than the kernel, non-square
kernels, output widths around the vector length (the masked row ends), output-channel
counts that leave a remainder block, both dtypes, the special values that reach the padding
and the masked lanes; inputs in other layouts (channels-last, strided views, a transposed
weight) through compiled calls against eager and torch; several threads; and the shapes
the kernels must leave to the other paths (groups, many channels)."""
import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F
from llgrad.codegen.lower import lower
from llgrad.codegen.lowerings import ops_conv_direct as direct
from llgrad.codegen.lowerings.conv_common import Geometry
from llgrad.ir import OPS, Builder, TensorType

# (N, C, (H, W), O, (KH, KW), stride, padding, dilation)
GEOMETRIES = [  # (output rows 16-40 wide: a vector and more on every target)
    (2, 3, (21, 41), 16, (7, 7), (2, 2), (3, 3), (1, 1)),     # the ResNet stem, small
    (3, 1, (14, 28), 6, (5, 5), (1, 1), (0, 0), (1, 1)),      # LeNet's first layer
    (2, 3, (9, 19), 5, (3, 3), (1, 1), (1, 1), (1, 1)),       # CIFAR's, odd sizes
    (2, 2, (10, 36), 7, (3, 3), (2, 2), (1, 1), (2, 2)),      # dilated, strided
    (3, 6, (11, 50), 33, (3, 3), (3, 3), (2, 2), (1, 1)),     # stride 3, a remainder block
    (1, 3, (5, 55), 9, (2, 5), (1, 3), (4, 0), (1, 1)),       # non-square, padding > kernel
    (2, 7, (6, 37), 40, (3, 1), (1, 1), (1, 0), (1, 1)),      # OW = 37: two vectors + 5
    (2, 1, (4, 17), 3, (1, 2), (2, 1), (0, 0), (1, 1)),       # OW = 16: one whole vector
    (2, 3, (12, 68), 64, (4, 4), (4, 4), (0, 0), (1, 1)),     # a ViT-style patch embedding
]


def _arrays(geo, dt, special=None):
    n, c, hw, o, k, s, p, d = geo
    rng = np.random.default_rng(11)
    x = rng.standard_normal((n, c) + hw).astype(dt)
    w = rng.standard_normal((o, c) + k).astype(dt)
    b = rng.standard_normal(o).astype(dt)
    if special == "inf_weight":
        w[1 % o, 0, 0, 0] = np.inf
    elif special == "nan_input":
        x[0, 0, 1, 2] = np.nan
    elif special == "inf_input":
        x[-1, -1, -1, -1] = -np.inf
    return x, w, b, dict(stride=s, padding=p, dilation=d, groups=1)


def _run(op, arrays, attrs, dt, expect_direct=True):
    bld = Builder("direct")
    ins = [bld.input(TensorType(dt, a.shape)) if a is not None else None for a in arrays]
    k = lower(bld.ret(bld.add(op, ins, dict(attrs))))
    assert bool(k.plan.groups[0].state.get("direct")) == expect_direct
    return k([a for a in arrays if a is not None])[0]


def _same(got, want, dt):
    assert got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isinf(got), np.isinf(want))
    f = np.isfinite(want)
    scale = np.abs(want[f]).max() if f.any() else 1.0
    tol = 2e-5 if dt == "float32" else 1e-12
    np.testing.assert_allclose(got[f], want[f], rtol=tol, atol=tol * scale)


# (float64 on the stem and the row tail in the default run; the other geometries are slow)
CASES = [pytest.param("float32", g, id=f"float32-{i}") for i, g in enumerate(GEOMETRIES)] + \
    [pytest.param("float64", g, id=f"float64-{i}",
                  marks=() if i in (0, 6) else pytest.mark.slow)
     for i, g in enumerate(GEOMETRIES)]


@pytest.mark.parametrize("dt,geo", CASES)
def test_direct_kernels_match_numpy(dt, geo):
    x, w, b, attrs = _arrays(geo, dt)
    y = OPS["convolution"].impl(x, w, b, **attrs)
    _same(_run("convolution", [x, w, b], attrs, dt), y, dt)
    _same(_run("convolution", [x, w, None], attrs, dt),
          OPS["convolution"].impl(x, w, None, **attrs), dt)
    gy = np.random.default_rng(12).standard_normal(y.shape).astype(dt)
    at = dict(attrs, weight_size=w.shape)
    _same(_run("convolution_backward_weight", [gy, x], at, dt),
          OPS["convolution_backward_weight"].impl(gy, x, **at), dt)


@pytest.mark.parametrize("special", ["inf_weight", "nan_input", "inf_input", "inf_grad"])
@pytest.mark.parametrize("geo", [GEOMETRIES[0], GEOMETRIES[5], GEOMETRIES[6]],
                         ids=["stem", "pad", "tail"])
def test_special_values_reach_the_same_outputs(geo, special):
    """inf * the padding's zeros is NaN where the reference's product meets them too, and
    a value next to the masked lanes (or past a row's end) reaches no other output."""
    dt = "float32"
    x, w, b, attrs = _arrays(geo, dt, special)
    y = OPS["convolution"].impl(x, w, b, **attrs)
    _same(_run("convolution", [x, w, b], attrs, dt), y, dt)
    gy = np.random.default_rng(13).standard_normal(y.shape).astype(dt)
    if special == "inf_grad":
        gy[0, 0, 0, -1] = np.inf
    at = dict(attrs, weight_size=w.shape)
    _same(_run("convolution_backward_weight", [gy, x], at, dt),
          OPS["convolution_backward_weight"].impl(gy, x, **at), dt)


def test_other_shapes_keep_their_paths():
    """Groups, many input channels, narrow maps and the input gradient do not take the
    direct kernels."""
    dt = "float32"
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 30, 5)).astype(dt)
    w = rng.standard_normal((6, 3, 3, 3)).astype(dt)
    attrs = dict(stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1)   # (3 wide)
    _same(_run("convolution", [x, w, None], attrs, dt, expect_direct=False),
          OPS["convolution"].impl(x, w, None, **attrs), dt)
    x = rng.standard_normal((2, 4, 9, 9)).astype(dt)
    w = rng.standard_normal((6, 2, 3, 3)).astype(dt)
    attrs = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=2)
    _same(_run("convolution", [x, w, None], attrs, dt, expect_direct=False),
          OPS["convolution"].impl(x, w, None, **attrs), dt)
    x = rng.standard_normal((2, 8, 9, 40)).astype(dt)
    w = rng.standard_normal((6, 8, 3, 3)).astype(dt)
    attrs = dict(attrs, stride=(2, 2), groups=1)
    _same(_run("convolution", [x, w, None], attrs, dt, expect_direct=False),
          OPS["convolution"].impl(x, w, None, **attrs), dt)
    gy = rng.standard_normal((2, 6, 9, 9)).astype(dt)
    w = rng.standard_normal((6, 3, 3, 3)).astype(dt)
    at = dict(attrs, stride=(1, 1), input_size=(9, 9))
    _same(_run("convolution_backward_input", [gy, w], at, dt, expect_direct=False),
          OPS["convolution_backward_input"].impl(gy, w, **at), dt)


def test_tiles_fit_the_registers():
    """The tiles the cost model picks hold their sums, vectors and broadcasts in the
    target's registers (the bound the kernels were measured without spills at), and the
    forward's never has two vectors a step (which LLVM's scheduler spilled)."""
    for regs, vw in ((32, 16), (16, 8), (32, 8)):
        for (n, c, hw, o, k, s, p, d) in GEOMETRIES:
            geo = Geometry((n, c) + hw, (o, c) + k,
                           dict(stride=s, padding=p, dilation=d, groups=1))
            nv, no = direct.forward_tile(geo, vw, regs)
            assert nv != 2 and 1 <= no <= o
            assert (no + 3 if nv == 1 else no * nv + nv + no) <= regs
            no, jb = direct.weight_tile(geo, regs)
            assert no * jb + no + 2 <= regs and 1 <= jb <= geo.kw


def _step(lib, x, w, b, attrs):
    y = lib.nn.functional.conv2d(x, w, b, **attrs)
    loss = (y * y.detach().cos()).sum()
    loss.backward()
    return loss


LAYOUTS = ["contiguous", "channels_last", "strided_input", "transposed_weight"]


def _inputs(lib, layout, x, w, b):
    xt = lib.tensor(x)
    if layout == "channels_last":
        xt = xt.contiguous(memory_format=lib.channels_last)
    elif layout == "strided_input":         # every other row and column of a larger array
        big = np.zeros(x.shape[:2] + (2 * x.shape[2], 2 * x.shape[3]), x.dtype)
        big[:, :, ::2, ::2] = x
        xt = lib.tensor(big)[:, :, ::2, ::2]
    wt = lib.tensor(np.ascontiguousarray(w.transpose(0, 1, 3, 2))).transpose(2, 3) \
        if layout == "transposed_weight" else lib.tensor(w)
    wt.requires_grad_(True)
    bt = lib.tensor(b, requires_grad=True)
    return xt, wt, bt


@pytest.mark.parametrize("layout", [pytest.param(k, marks=pytest.mark.slow)
                                    if k == "strided_input" else k for k in LAYOUTS])
def test_compiled_step_matches_eager_and_torch(layout):
    torch = pytest.importorskip("torch")
    geo = (3, 3, (20, 40), 10, (7, 7), (2, 2), (3, 3), (1, 1))     # (OW 20: direct)
    x, w, b, attrs = _arrays(geo, "float32")
    attrs = {k: v for k, v in attrs.items() if k != "groups"}
    got = {}
    for name, lib in (("torch", torch), ("eager", llgrad), ("compiled", llgrad)):
        fn = llgrad.compile(_step) if name == "compiled" else _step
        xt, wt, bt = _inputs(lib, layout, x, w, b)
        for _ in range(2 if name == "compiled" else 1):      # (trace, then the kernel)
            wt.grad = bt.grad = None
            loss = fn(lib, xt, wt, bt, attrs)
        assert not xt.requires_grad and xt.grad is None
        got[name] = [float(loss.detach()), wt.grad.numpy().copy(), bt.grad.numpy().copy()]
    for name in ("eager", "compiled"):
        for g, t in zip(got[name], got["torch"]):
            np.testing.assert_allclose(g, t, rtol=2e-5, atol=2e-5 * np.abs(t).max())
    for g, e in zip(got["compiled"], got["eager"]):
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=2e-5 * np.abs(e).max())


def test_threads_agree_and_repeat():
    """17 images on 1, 2 and 3 threads (uneven chunks, each with phase planes and partial
    sums of its own): the weight gradient as eager's, and the same bits on a repeat."""
    x, w, b, attrs = _arrays((17, 3, (15, 36), 12, (5, 5), (2, 2), (2, 2), (1, 1)), "float32")
    attrs = {k: v for k, v in attrs.items() if k != "groups"}

    def grads(fn):
        xt, wt, bt = _inputs(llgrad, "contiguous", x, w, b)
        fn(llgrad, xt, wt, bt, attrs)
        return wt.grad.numpy().copy(), bt.grad.numpy().copy()

    want = grads(_step)
    old = llgrad.get_num_threads()
    try:
        for threads in (1, 2, 3):
            llgrad.set_num_threads(threads)
            fn = llgrad.compile(_step)
            grads(fn)                                   # (the tracing call)
            first = grads(fn)
            again = grads(fn)
            for g, e, a in zip(first, want, again):
                np.testing.assert_allclose(g, e, rtol=2e-5, atol=2e-5 * np.abs(e).max())
                assert np.array_equal(g, a)
    finally:
        llgrad.set_num_threads(old)
