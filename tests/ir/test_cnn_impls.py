"""The NumPy implementations behind eager CNNs (issue 20's cnn and cnn_bn workloads):
batch_norm's blocked forward against the whole-array formula (float32 to 1 ulp);
batch_norm_backward against PyTorch and against _norm_vjp's Tensor ops; the convolutions'
chunked products (chunks that do not divide the batch, strides, groups, dilation, a
non-finite weight) against a direct float64 reference and PyTorch; where / masked_fill
with a zero on one side (ReLU's backward) bit for bit against np.where; avg_pool2d's
backward over tiling windows bit for bit against adds into zeros."""
import numpy as np
import pytest

import llgrad
from llgrad.ir import bitselect, ops_conv, ops_nn_more, ops_select
from llgrad.ir.ops_batch_norm import _batch_norm, _batch_norm_backward, _reference
from llgrad.ir.ops_nn import _norm_vjp

# ---- batch_norm forward: the blocks are the whole-array formula (float32: to 1 ulp) --------

SHAPES = [(32, 16, 32, 32), (4, 3, 5), (2, 3), (9, 1), (5, 1, 4, 4), (1, 3, 7), (37, 6, 3),
          (7, 5, 3, 9), (3, 2, 100, 100), (2, 3, 3 * 8192 + 5), (300, 200), (2, 700, 1, 1)]


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_norm_forward_is_the_whole_array_formula(shape, dtype):
    rng = np.random.default_rng(len(shape) * 1000 + shape[-1])
    c = shape[1]
    x = (rng.standard_normal(shape) * 3 + 2).astype(dtype)
    w, b = rng.standard_normal(c).astype(dtype), rng.standard_normal(c).astype(dtype)
    mean, var = rng.standard_normal(c).astype(dtype), rng.uniform(0.5, 2, c).astype(dtype)
    for training in (True, False):
        for ww, bb in ((w, b), (w, None), (None, b), (None, None)):
            for eps in (1e-5, 0.3):
                want = _reference(x, ww, bb, mean, var, training, eps)
                got = _batch_norm(x, ww, bb, mean, var, training, eps)
                assert got.dtype == want.dtype and got.shape == want.shape
                # (the blocks sum in another order: float64's last bits; float32 is rounded
                # once from float64 values that differ by ~1e-16: at most a double rounding)
                if dtype == "float64":
                    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
                else:
                    np.testing.assert_array_max_ulp(got, want, maxulp=1)


def test_batch_norm_forward_other_layouts_and_operands():
    """Layouts and dtypes the blocks do not take (strided x, float64 x with float32
    statistics, float16) run the whole-array formula itself; special values agree too."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 4, 5)).astype(np.float32)
    s32 = rng.uniform(0.5, 2, 4).astype(np.float32)
    cases = [(x.transpose(2, 1, 0), None, None, True),
             (x.astype(np.float64), s32, s32, False),
             (x.astype(np.float16), None, None, True)]
    special = x.copy()
    special[0, 0, 0], special[1, 1, 1], special[2, 2, :] = np.nan, np.inf, 0.0
    special[:, 3] = -0.0
    cases.append((special, s32, -s32, True))
    for xx, m, v, training in cases:
        with np.errstate(all="ignore"):     # (inf - inf)
            want = _reference(xx, None, None, m, v, training, 1e-5)
            got = _batch_norm(xx, None, None, m, v, training, 1e-5)
        assert got.dtype == want.dtype and np.array_equal(_bits(got), _bits(want))


# ---- batch_norm_backward ----------------------------------------------------------------------

def _torch_grads(torch, x, w, g):
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w, requires_grad=True) if w is not None else None
    bt = torch.zeros(x.shape[1], dtype=xt.dtype, requires_grad=True)
    y = torch.nn.functional.batch_norm(xt, None, None, wt, bt, training=True)
    gs = torch.autograd.grad(y, [xt, bt] + ([wt] if w is not None else []), torch.tensor(g))
    return gs[0].numpy(), (gs[2].numpy() if w is not None else None), gs[1].numpy()


@pytest.mark.parametrize("shape", [(8, 4, 3, 3), (32, 16, 32, 32), (5, 3), (6, 70, 2)], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_backward_matches_torch_and_the_tensor_formula(shape, dtype, affine):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(shape[1])
    x = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(shape[1]).astype(dtype) if affine else None
    gx, gw, gb = _batch_norm_backward(g, x, w, 1e-5)
    assert (gx.dtype, gw.dtype, gb.dtype) == (np.dtype(dtype),) * 3
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    want = _torch_grads(torch, x, w, g)
    np.testing.assert_allclose(gx, want[0], **tol)
    np.testing.assert_allclose(gb, want[2], **tol)
    if affine:
        np.testing.assert_allclose(gw, want[1], **tol)
    dims = (0,) + tuple(range(2, len(shape)))
    wb = llgrad.tensor(w).reshape((1, -1) + (1,) * (len(shape) - 2)) if affine else None
    ops = _norm_vjp(llgrad.tensor(g), llgrad.tensor(x), wb, dims, 1e-5, dims)
    for got, t in zip((gx, gw, gb), ops):
        np.testing.assert_allclose(got, t.numpy(), **tol)


def test_batch_norm_backward_of_nothing_and_double_backward_node():
    gx, gw, gb = _batch_norm_backward(np.zeros((0, 3, 2)), np.zeros((0, 3, 2)), None, 1e-5)
    assert gx.shape == (0, 3, 2) and gw.tolist() == gb.tolist() == [0.0] * 3
    x = llgrad.randn(4, 3, 2, dtype=llgrad.float64, requires_grad=True)
    y = llgrad.nn.functional.batch_norm(x, None, None, training=True)
    (gx,) = llgrad.autograd.grad(y, x, llgrad.randn(4, 3, 2, dtype=llgrad.float64),
                                 create_graph=True)
    assert type(gx.grad_fn).__name__ == "NativeBatchNormBackwardBackward0"


# ---- convolutions ----------------------------------------------------------------------------

def _conv_ref(x, w, b, stride, padding, dilation, groups):
    """Direct float64 convolution: one einsum per group and kernel offset."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    oh, ow = ops_conv.out_size((h, wd), (kh, kw), stride, padding, dilation)
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for gi in range(groups):
        for a in range(kh):
            for bb in range(kw):
                win = xp[:, gi * cg:(gi + 1) * cg, a * dh:a * dh + sh * (oh - 1) + 1:sh,
                         bb * dw:bb * dw + sw * (ow - 1) + 1:sw]
                out[:, gi * og:(gi + 1) * og] += np.einsum("ncyx,oc->noyx", win,
                                                           w[gi * og:(gi + 1) * og, :, a, bb])
    return out + (b.reshape(1, -1, 1, 1) if b is not None else 0)


CONV = [  # x shape, w shape, stride, padding, dilation, groups
    ((32, 16, 32, 32), (32, 16, 3, 3), (1, 1), (1, 1), (1, 1), 1),     # cnn_bn's second
    ((7, 3, 6, 5), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1),           # chunks of 7 images
    ((5, 4, 7, 6), (6, 2, 3, 2), (2, 1), (1, 2), (1, 2), 2),
    ((3, 2, 9, 8), (3, 2, 2, 3), (1, 1), (0, 2), (2, 1), 1),
    ((2, 3, 5, 5), (2, 3, 1, 1), (1, 1), (0, 0), (1, 1), 1),
]


@pytest.mark.parametrize("case", CONV, ids=lambda c: f"{c[0]}x{c[1]}s{c[2]}p{c[3]}d{c[4]}g{c[5]}")
def test_convolutions_match_a_direct_reference_and_torch(case):
    xs, ws, stride, padding, dilation, groups = case
    rng = np.random.default_rng(sum(xs))
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    p = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    y = ops_conv._convolution(x, w, b, **p)
    ref = _conv_ref(x, w, b, **p)
    assert y.dtype == np.float32 and y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    g = rng.standard_normal(y.shape).astype(np.float32)
    gx = ops_conv._backward_input(g, w, xs[2:], **p)
    gw = ops_conv._backward_weight(g, x, ws, **p)
    # adjoints of the forward: <g, conv(u, w)> = <bi(g, w), u>, <g, conv(x, v)> = <bw(g, x), v>
    u, v = rng.standard_normal(xs), rng.standard_normal(ws)
    g64 = g.astype(np.float64)
    assert np.isclose(np.vdot(gx, u), np.vdot(g64, _conv_ref(u, w, None, **p)), rtol=1e-4)
    assert np.isclose(np.vdot(gw, v), np.vdot(g64, _conv_ref(x, v, None, **p)), rtol=1e-4)
    torch = pytest.importorskip("torch")
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    yt = torch.nn.functional.conv2d(xt, wt, torch.tensor(b), stride, padding, dilation, groups)
    tgx, tgw = torch.autograd.grad(yt, (xt, wt), torch.tensor(g))
    for got, want in ((y, yt.detach()), (gx, tgx), (gw, tgw)):
        want = want.numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5 * np.abs(want).max())


def test_input_gradient_with_a_non_finite_weight_folds_directly():
    """The padded-grid fold multiplies every weight by the grid's zeros: with an inf or NaN
    weight it would put NaN where the direct fold puts none, so such weights take it."""
    rng = np.random.default_rng(5)
    g = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    w[1, 0, 0, 0], w[2, 1, 2, 1] = np.inf, np.nan
    p = dict(stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1)
    got = ops_conv._backward_input(g, w, (6, 6), **p)
    want = ops_conv._backward_input_strided(g, w, (6, 6), **p)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and not np.isnan(got).all()
    np.testing.assert_array_equal(got, want)


# ---- where with a zero on one side (ReLU's backward: masked_fill(result <= 0, 0)) ------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int16", "uint8"])
def test_where_with_a_zero_side_is_np_where_bit_for_bit(dtype):
    rng = np.random.default_rng(7)
    shapes = [((64, 128), (), (64, 128)), ((64, 128), (64, 128), ()), ((1, 128), (), (64, 128)),
              ((64, 128), (128,), ()), ((64, 128), (), (64, 1)), ((64, 128), (), ())]
    for shape_c, shape_a, shape_b in shapes:
        for zero in (0.0, -0.0, 3.0):       # (-0.0 and 3 take the and/or path)
            cond = rng.standard_normal(shape_c) < 0
            a = np.asarray(zero, dtype) if shape_a == () else \
                (rng.standard_normal(shape_a) * 5).astype(dtype)
            b = np.asarray(0, dtype) if shape_b == () else \
                (rng.standard_normal(shape_b) * 5).astype(dtype)
            if b.ndim and b.dtype.kind == "f":
                b.flat[::7], b.flat[1::11] = np.nan, -0.0
            got, want = bitselect.where(cond, a, b), np.where(cond, a, b)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.array_equal(np.ascontiguousarray(got).view(np.uint8),
                                  np.ascontiguousarray(want).view(np.uint8))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "uint8"])
def test_where_with_a_mask_that_broadcasts_is_np_where_bit_for_bit(dtype):
    """A mask smaller than the result (attention's causal (T, T) mask over (B, H, T, T)):
    its words are made at its own size, the passes broadcast them."""
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((4, 3, 32, 32)) * 5).astype(dtype)
    if x.dtype.kind == "f":
        x.flat[::13], x.flat[1::17] = np.nan, -0.0
    fill = np.asarray(-np.inf if x.dtype.kind == "f" else 7, dtype)
    for cond in (np.triu(np.ones((32, 32), bool), 1), rng.random((3, 1, 32)) < 0.5,
                 rng.random((4, 1, 1, 32)) < 0.5):
        for a, b in ((fill, x), (x, fill), (x, x[::-1, :, :, ::-1]), (x[:, :, ::-1], x[0])):
            got, want = bitselect.where(cond, a, b), np.where(cond, a, b)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.array_equal(np.ascontiguousarray(got).view(np.uint8),
                                  np.ascontiguousarray(want).view(np.uint8))


# ---- lerp with a number weight (an optimiser's exp_avg.lerp_(grad, 1 - beta1)) ---------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lerp_with_a_number_weight_is_the_where_of_both_formulas(dtype):
    """Only the formula the weight picks is computed: the values a tensor weight's np.where
    of both gives."""
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((6, 7)) * 3).astype(dtype)
    b = (rng.standard_normal(7) * 3).astype(dtype)
    a.flat[::5], b[2] = np.nan, np.inf
    for w in (0.1, 0.4999, 0.5, 0.9, 1, 0, -2, 3.5, float("nan"), float("inf")):
        for x, y in ((a, b), (b, a), (a[:, ::2], b[::2]), (np.asarray(a[0, 1]), b)):
            want = ops_select._lerp(x, y, np.full(np.broadcast(x, y).shape, w,
                                                  np.result_type(x, y)))
            got = ops_select._lerp(x, y, w)
            assert type(got) is np.ndarray and got.dtype == want.dtype
            if w != w:      # (a NaN weight: NaN throughout, its sign bit NumPy's choice)
                np.testing.assert_array_equal(got, want)
                continue
            assert got.shape == want.shape and got.tobytes() == want.tobytes()


# ---- avg_pool2d's backward where the windows tile the plane ----------------------------------

@pytest.mark.parametrize("shape", [(32, 32, 32, 32), (2, 3, 7, 9), (3, 6, 6)], ids=str)
@pytest.mark.parametrize("kernel", [(2, 2), (3, 2), (1, 1)], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_avg_pool2d_backward_of_tiling_windows_is_the_adds_into_zeros(shape, kernel, dtype):
    rng = np.random.default_rng(11)
    for ceil_mode, count_include_pad, divisor in ((False, True, None), (True, False, 3)):
        attrs = dict(kernel_size=kernel, stride=kernel, padding=(0, 0), ceil_mode=ceil_mode,
                     count_include_pad=count_include_pad, divisor_override=divisor)
        oh, ow, div = ops_nn_more.avg_geometry(*shape[-2:], kernel, kernel, (0, 0), ceil_mode,
                                               count_include_pad, divisor)
        g = (rng.standard_normal(shape[:-2] + (oh, ow)) * 5).astype(dtype)
        if g.dtype.kind == "f":
            g.flat[::5], g.flat[1::7] = -0.0, np.nan
        share = ops_nn_more._divided(g, div).astype(g.dtype, copy=False)
        want = np.zeros(shape, share.dtype)
        (kh, kw), (h, w) = kernel, shape[-2:]
        for a in range(kh):             # each window's share, added into zeros
            for b in range(kw):
                rows, cols = min(oh, (h - a + kh - 1) // kh), min(ow, (w - b + kw - 1) // kw)
                want[..., a:a + kh * rows:kh, b:b + kw * cols:kw] += share[..., :rows, :cols]
        got = ops_nn_more._avg_pool2d_backward(g, np.zeros(shape, dtype), **attrs)
        assert got.dtype == want.dtype and np.array_equal(got.view(np.uint8), want.view(np.uint8))
