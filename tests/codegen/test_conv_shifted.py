"""Convolutions as shifted products (codegen/lowerings/ops_conv_shifted.py): each of the
three ops against the NumPy implementation, with and without a BLAS, float32 and float64,
over strides (the phases), paddings, dilations, kernel shapes, groups, bias, strided
operands, uneven chunks of images on threads; infinities and NaNs in the input or the weights (where the
products run row by row) exactly where NumPy puts them; and whole layers against torch."""
import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F
from llgrad.codegen.lower import lower
from llgrad.codegen.lowerings import ops_conv_shifted
from llgrad.codegen.lowerings.conv_common import Geometry
from llgrad.ir import OPS, Builder, TensorType

# x shape, w shape, padding, dilation, groups, stride
CASES = [
    ((3, 8, 9, 7), (5, 8, 3, 3), (1, 1), (1, 1), 1, (1, 1)),
    ((2, 16, 8, 11), (6, 8, 3, 2), (0, 2), (2, 1), 2, (1, 1)),
    ((4, 9, 6, 6), (4, 9, 5, 3), (2, 1), (1, 1), 1, (1, 1)),
    ((1, 12, 5, 5), (12, 12, 3, 3), (3, 3), (2, 2), 1, (1, 1)),
    ((3, 8, 9, 10), (5, 8, 3, 3), (1, 1), (1, 1), 1, (2, 2)),
    ((2, 16, 11, 8), (6, 8, 4, 3), (0, 2), (1, 2), 2, (3, 2)),
    ((2, 10, 12, 12), (4, 10, 4, 4), (1, 1), (1, 1), 1, (2, 2)),
    ((1, 8, 7, 9), (3, 8, 3, 5), (2, 0), (2, 1), 1, (2, 1)),
]


@pytest.fixture(autouse=True)
def _small_maps_too(monkeypatch):
    """The cases' maps are small (fast tests): shifted products from any width here, and
    however much of their wide grid is padding; on any host (AVX2 ones unfold instead)."""
    monkeypatch.setattr(ops_conv_shifted, "_thin_products_pay", lambda: True)
    monkeypatch.setattr(ops_conv_shifted, "MIN_COLUMNS", 0)
    monkeypatch.setattr(ops_conv_shifted, "MAX_WIDE", float("inf"))


def _attrs(case):
    xs, ws, p, d, g, s = case
    return {"stride": s, "padding": p, "dilation": d, "groups": g}


def _arrays(op, case, dt, rng):
    xs, ws = case[:2]
    attrs = _attrs(case)
    geo = Geometry(xs, ws, attrs)
    gs = (xs[0], ws[0], geo.oh, geo.ow)
    if op == "convolution":
        return [rng.standard_normal(s).astype(dt) for s in (xs, ws, (ws[0],))], attrs
    if op == "convolution_backward_input":
        return [rng.standard_normal(s).astype(dt) for s in (gs, ws)], \
            dict(attrs, input_size=xs[2:])
    return [rng.standard_normal(s).astype(dt) for s in (gs, xs)], dict(attrs, weight_size=ws)


def _lowered(op, arrays, attrs, blas=True):
    bld = Builder("conv")
    ins = [bld.input(TensorType(a.dtype.name, a.shape)) for a in arrays]
    return lower(bld.ret(bld.add(op, ins, attrs)), blas=blas)


def test_the_cases_take_the_shifted_path():
    for case in CASES:
        assert ops_conv_shifted.applies(Geometry(case[0], case[1], _attrs(case)))
    arrays, attrs = _arrays("convolution", CASES[0], "float32", np.random.default_rng(0))
    ir_text = _lowered("convolution", arrays, attrs).ir_before
    assert "wp0.head" in ir_text and "ow.head" not in ir_text   # (packed, no unfold)


@pytest.mark.parametrize("blas", [True, False])
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("op", ["convolution", "convolution_backward_input",
                                "convolution_backward_weight"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_matches_numpy(case, op, dt, blas):
    rng = np.random.default_rng(case)
    arrays, attrs = _arrays(op, CASES[case], dt, rng)
    (got,) = _lowered(op, arrays, attrs, blas)(arrays)
    want = OPS[op].impl(*arrays, **attrs)
    tol = 1e-4 if dt == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("op,which", [("convolution_backward_weight", 1),
                                      ("convolution_backward_input", 1),
                                      ("convolution", 0), ("convolution", 1)])
@pytest.mark.parametrize("special", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("case", [0, 4])
def test_non_finite_values_land_where_numpy_puts_them(case, op, which, special):
    """An infinity next to the right edge of a row (read by the wide grid's extra columns
    as the start of the next row) or in a weight: NaN and inf exactly where NumPy has them."""
    rng = np.random.default_rng(7)
    arrays, attrs = _arrays(op, CASES[case], "float64", rng)
    a = arrays[which]
    for n in range(a.shape[0]):
        a[n, 1, 2, -1] = special
        a[n, 3, 0, 0] = special
    (got,) = _lowered(op, arrays, attrs)(arrays)
    with np.errstate(all="ignore"):
        want = OPS[op].impl(*arrays, **attrs)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-12, atol=1e-12)


def test_strided_operands_and_threads_agree_with_eager():
    """A permuted (channels-last) input and 13 images on 1, 2 and 3 threads: loss and
    gradients as eager's."""
    rng = np.random.default_rng(3)
    x = np.ascontiguousarray(rng.standard_normal((13, 10, 12, 16)).astype(np.float32)
                             .transpose(0, 3, 1, 2))
    w = rng.standard_normal((12, 8, 3, 3)).astype(np.float32)
    b = rng.standard_normal(12).astype(np.float32)

    def f(x, w, b):
        y = F.conv2d(x.permute(0, 2, 3, 1).permute(0, 3, 1, 2), w, b, 1, 1, 1, 2)
        return (y * y.detach().sin()).sum()

    def grads(fn):
        ts = [llgrad.tensor(a, requires_grad=True) for a in (x, w, b)]
        fn(*ts).backward()
        return [t.grad.numpy() for t in ts]

    want = grads(f)
    old = llgrad.get_num_threads()
    try:
        for threads in (1, 2, 3):
            llgrad.set_num_threads(threads)
            fn = llgrad.compile(f)
            grads(fn)
            for g, e in zip(grads(fn), want):
                np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4 * np.abs(e).max())
    finally:
        llgrad.set_num_threads(old)


def test_layers_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 16, 14, 14))
    w1, b1 = rng.standard_normal((24, 16, 3, 3)) * 0.1, rng.standard_normal(24)
    w2 = rng.standard_normal((8, 12, 5, 5)) * 0.1

    def f(T, x, w1, b1, w2):
        y = T.nn.functional.conv2d(x, w1, b1, padding=1).relu()
        y = T.nn.functional.conv2d(y, w2, None, padding=2, dilation=1, groups=2)
        return (y * y).mean()

    ts = [torch.tensor(a, requires_grad=True) for a in (x, w1, b1, w2)]
    f(torch, *ts).backward()
    ls = [llgrad.tensor(a, requires_grad=True) for a in (x, w1, b1, w2)]
    step = llgrad.compile(lambda *a: f(llgrad, *a))
    step(*[llgrad.tensor(a, requires_grad=True) for a in (x, w1, b1, w2)])
    loss = step(*ls)
    loss.backward()
    np.testing.assert_allclose(loss.item(), f(torch, *ts).item(), rtol=1e-10)
    for a, b in zip(ls, ts):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-11)
