"""Output memory layout parity with PyTorch (s66 s1): the strides and contiguity of op
results on transposed / stepped / expanded / channels_last inputs, which a program sees
through .stride(), .is_contiguous() and .view() (which raises on a layout it cannot view:
a program that works with torch must not raise with llgrad). Eager against torch; the
compiled results' strides against eager's."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as LF

torch = pytest.importorskip("torch")
TF = torch.nn.functional

_RNG = np.random.default_rng(0)
_X = _RNG.standard_normal((2, 4, 4, 6))
_P = _RNG.uniform(0.1, 0.9, (2, 4, 4, 6))


def laid(L, a, kind):
    """a as a tensor of library L in the layout kind, values unchanged (expand: the first
    slice broadcast)."""
    t = L.tensor(a.copy())
    if kind == "T":
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if kind == "step":
        buf = L.zeros(a.shape[:-1] + (2 * a.shape[-1],), dtype=t.dtype)
        buf[..., ::2] = t
        return buf[..., ::2]
    if kind == "expand":
        return t[:1].expand(t.shape)
    if kind == "CL":
        return t.contiguous(memory_format=L.channels_last)
    return t


def F(L):
    return TF if L is torch else LF


# name -> fn(L, x, p): x standard normal, p in (0, 1), both (2, 4, 4, 6) in one layout
CASES = {
    # fixed here: llgrad's result was less contiguous than torch's (a .view raised)
    "adaptive_avg_pool2d_same": lambda L, x, p: F(L).adaptive_avg_pool2d(x, (4, 6)),
    "adaptive_avg_pool3d_same": lambda L, x, p: F(L).adaptive_avg_pool3d(x, (4, 4, 6)),
    "matrix_power_0": lambda L, x, p: L.linalg.matrix_power(x[..., :4], 0),
    "matrix_power_1": lambda L, x, p: L.linalg.matrix_power(x[..., :4], 1),
    "rms_norm": lambda L, x, p: F(L).rms_norm(x, (6,)),
    # fixed here: llgrad's result was contiguous where torch's keeps the input's layout
    "hardshrink": lambda L, x, p: F(L).hardshrink(x),
    "softshrink": lambda L, x, p: F(L).softshrink(x),
    "mse_loss_none": lambda L, x, p: F(L).mse_loss(x, p, reduction="none"),
    "huber_loss_none": lambda L, x, p: F(L).huber_loss(x, p, reduction="none"),
    "smooth_l1_loss_none": lambda L, x, p: F(L).smooth_l1_loss(x, p, reduction="none"),
    "bce_none": lambda L, x, p: F(L).binary_cross_entropy(p, p, reduction="none"),
    "bce_logits_none": lambda L, x, p: F(L).binary_cross_entropy_with_logits(
        x, p, reduction="none"),
    # already as torch's: guards
    "mul": lambda L, x, p: x * p,
    "gelu": lambda L, x, p: F(L).gelu(x),
    "where": lambda L, x, p: L.where(x > 0, x, 0.0),
    "masked_fill": lambda L, x, p: x.masked_fill(x > 0, 1.0),
    "softmax": lambda L, x, p: x.softmax(-1),
    "layer_norm": lambda L, x, p: F(L).layer_norm(x, (6,)),
    "sum_keepdim": lambda L, x, p: x.sum(1, keepdim=True),
    "clone": lambda L, x, p: x.clone(),
    "mse_loss_mean": lambda L, x, p: F(L).mse_loss(x, p).reshape(1),
    "adaptive_avg_pool2d_22": lambda L, x, p: F(L).adaptive_avg_pool2d(x, (2, 2)),
    "max_pool2d": lambda L, x, p: F(L).max_pool2d(x, 2),
    "rrelu_eval": lambda L, x, p: F(L).rrelu(x),
    "local_response_norm": lambda L, x, p: F(L).local_response_norm(x, 2),
    "conv2d": lambda L, x, p: F(L).conv2d(x, L.ones(3, 4, 3, 3, dtype=x.dtype)),
}
KINDS = ("T", "step", "expand", "CL")


def _layout(r):
    return tuple(r.shape), r.stride(), r.is_contiguous()


def _run(L, name, kind):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CASES[name](L, laid(L, _X, kind), laid(L, _P, kind))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_result_layout_as_torch(name, kind):
    want, got = _run(torch, name, kind), _run(llgrad, name, kind)
    assert _layout(got) == _layout(want)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12,
                               atol=1e-12)
    if want.is_contiguous():        # (a .view that works in torch works in llgrad)
        assert got.view(-1).shape == (want.numel(),)


def test_hardshrink_keeps_nan_and_gradient():
    x = [[float("nan"), 0.3, -2.0], [0.7, -0.4, 1.5]]
    got, want = (L.tensor(x, dtype=L.float64, requires_grad=True) for L in (llgrad, torch))
    for t, f in ((got, LF), (want, TF)):
        (f.hardshrink(t.t(), 0.5) * 2 + f.softshrink(t.t(), 0.5)).sum().backward()
    np.testing.assert_array_equal(LF.hardshrink(got, 0.5).detach().numpy(),
                                  TF.hardshrink(want, 0.5).detach().numpy())
    np.testing.assert_array_equal(got.grad.numpy(), want.grad.numpy())
    assert type(LF.hardshrink(got.t()).grad_fn).__name__ == "HardshrinkBackward0"


def test_unreduced_loss_gradient_as_torch():
    got, want = [], []
    for L, out in ((llgrad, got), (torch, want)):
        x = laid(L, _X[0, 0], "T").requires_grad_()
        p = laid(L, _P[0, 0], "T")
        loss = F(L).huber_loss(x, p, reduction="none", delta=0.5)
        (loss * L.arange(24.).reshape(4, 6).double()).sum().backward()
        out += [type(loss.grad_fn).__name__, x.grad.numpy()]
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)


_A3 = _RNG.standard_normal((2, 8, 4))


@pytest.mark.parametrize("weight_t", [False, True])
@pytest.mark.parametrize("grad", [False, True])
def test_one_d_pooling_and_transposed_conv_layout_as_torch(grad, weight_t):
    # max_pool1d: row-major without a gradient wanted (ATen's max_pool1d_impl), else the
    # 2-d pool's layout; conv_transpose1d: channels_last-like only from the weight
    got = []
    for L in (torch, llgrad):
        x = L.tensor(_A3).transpose(1, 2).requires_grad_(grad)     # (2, 4, 8), transposed
        w = L.ones(4, 3, 3, dtype=x.dtype)
        if weight_t:
            w = w.transpose(1, 2).contiguous().transpose(1, 2)
        got.append([_layout(r) for r in (F(L).max_pool1d(x, 2),
                                          F(L).max_pool1d(x, 2, return_indices=True)[0],
                                          F(L).conv_transpose1d(x, w))])
    assert got[1] == got[0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_conv3d_channels_last_3d_layout_as_torch(dtype):
    # ATen's CPU conv3d allocates channels_last_3d from its mkldnn kernel only (float32,
    # bfloat16); float64's slow_conv3d writes row-major
    got = []
    for L in (torch, llgrad):
        dt = getattr(L, dtype)
        x = L.tensor(_X[:, :, :3]).to(dt).unsqueeze(2).contiguous(
            memory_format=L.channels_last_3d)       # (2, 4, 1, 3, 6)
        w = L.ones(3, 4, 1, 2, 2, dtype=dt)
        wc = w.contiguous(memory_format=L.channels_last_3d)
        got.append([_layout(r) for r in (F(L).conv3d(x, w), F(L).conv3d(x.contiguous(), wc),
                                          F(L).conv_transpose3d(x, w.transpose(0, 1)))])
    assert got[1] == got[0]


COMPILED = ("adaptive_avg_pool2d_same", "hardshrink", "mse_loss_none", "rms_norm",
            "matrix_power_0", "mul")


@pytest.mark.parametrize("name", COMPILED)
def test_compiled_result_layout_equals_eager(name):
    fn = CASES[name]
    compiled = llgrad.compile(lambda x, p: fn(llgrad, x, p))
    for kind in ("T", "CL"):
        x, p = laid(llgrad, _X, kind), laid(llgrad, _P, kind)
        with warnings.catch_warnings():
            warnings.simplefilter("error")      # (no eager fallback)
            got = compiled(x, p)
        want = fn(llgrad, x, p)
        assert _layout(got) == _layout(want)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


def test_rrelu_training_layout_numbers_and_gradient_as_torch():
    got = []
    for L in (torch, llgrad):
        L.manual_seed(0)
        x = L.tensor(-_X[0]).requires_grad_()
        r = F(L).rrelu(x.transpose(-1, -2), training=True)
        (r * r).sum().backward()
        got.append((_layout(r), type(r.grad_fn).__name__, r.detach().numpy(), x.grad.numpy()))
    assert got[1][:2] == got[0][:2]
    np.testing.assert_array_equal(got[1][2], got[0][2])
    np.testing.assert_allclose(got[1][3], got[0][3], rtol=1e-12)


def test_unreduced_loss_layout_on_meta_as_torch():
    got = []
    for L in (torch, llgrad):
        x = L.empty(2, 3, 4, device="meta").transpose(1, 2)
        got.append([F(L).mse_loss(x, x, reduction="none").stride(),
                    F(L).huber_loss(x, x, reduction="none").stride(),
                    tuple(F(L).mse_loss(x, x).shape)])
    assert got[1] == got[0]
