"""Session 74 (h), nn activations with their parameters and simple layers against torch: RReLU
(eval, and train under a seed: torch's random stream), Hardtanh / ReLU6 / Softplus (beta,
threshold) / CELU / SELU / GLU(dim) / Threshold / PReLU(C) on 4-D / Softmin / Softmax2d /
LogSigmoid / Hardswish / Hardsigmoid / Mish / SiLU / Tanhshrink / Soft- and Hardshrink /
GELU(tanh), each at its kinks; Bilinear, Fold / Unfold with dilation and stride, Upsample's
modes, reflection / replication / circular / zero pads (negative ones too), ChannelShuffle,
Identity / Flatten / Unflatten, Embedding.from_pretrained; nn.RNN(nonlinearity='relu')
(packed, bias=False, dropout in eval), RNNCell / LSTMCell / GRUCell with bias=False and
unbatched; their exceptions: torch, llgrad eager and llgrad.compile
(adversarial_harness_s69_a10.check)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402
from adversary_s74_h_common import _fill, G, IMG, K, pg, TOL, X  # noqa: E402
W46 = (X[:4].copy() * 1.3).astype(np.float32)
SEQ = (((np.arange(60, dtype=np.float32).reshape(2, 5, 6) * 7) % 13) - 6) / 6


def rrelu_eval(torch, x):
    m = torch.nn.RReLU(0.1, 0.3).eval()
    return m(x), torch.nn.functional.rrelu(x, 0.2, 0.25, training=False)


def rrelu_train_seed(torch, x):
    torch.manual_seed(0)
    y = torch.nn.RReLU(0.1, 0.3)(x)
    z = torch.nn.functional.rrelu(x * 2, 0.2, 0.4, training=True)
    return y, z, torch.rand(2)


def hardtanh_relu6(torch, x):
    return (torch.nn.Hardtanh(-0.5, 1.5)(x), torch.nn.ReLU6()(x * 4), torch.nn.functional.hardtanh(x, 0.0, 0.25),
            torch.nn.Hardtanh(-1.0, -0.5)(x))


def softplus_beta(torch, x):
    F = torch.nn.functional
    return (torch.nn.Softplus(beta=2.0, threshold=1.0)(x), F.softplus(x * 10, beta=0.5, threshold=3.0),
            F.softplus(x, beta=-1.0))


def celu_selu(torch, x):
    return torch.nn.CELU(alpha=0.5)(x), torch.nn.CELU(2.0)(x), torch.nn.SELU()(x), torch.nn.ELU(alpha=0.3)(x)


def glu_threshold(torch, x):
    return (torch.nn.GLU(dim=0)(x), torch.nn.GLU()(x), torch.nn.functional.glu(x.reshape(2, 2, 6), 1),
            torch.nn.Threshold(0.25, -2.0)(x), torch.nn.functional.threshold(x, -0.5, 7.0))


def prelu_4d(torch, x):
    m = torch.nn.PReLU(num_parameters=3, init=0.1)
    with torch.no_grad():
        m.weight.copy_(torch.tensor([0.1, -0.5, 2.0]))
    y = m(x)
    return y, pg(torch, y, m), torch.nn.PReLU()(x[0])


def softmin_softmax2d(torch, x):
    return (torch.nn.Softmin(dim=1)(x), torch.nn.Softmax2d()(x), torch.nn.Softmax2d()(x[0]),
            torch.nn.LogSigmoid()(x * 20), torch.nn.functional.softmin(x, 0, dtype=torch.float64))


def hard_family(torch, x):
    F = torch.nn.functional
    z = x * 4
    return (torch.nn.Hardswish()(z), torch.nn.Hardsigmoid()(z), F.hardswish(x), F.hardsigmoid(x * 3),
            torch.nn.Mish()(z), torch.nn.SiLU()(z), torch.nn.Tanhshrink()(z))


def shrink(torch, x):
    return (torch.nn.Softshrink(0.3)(x), torch.nn.Hardshrink(lambd=0.75)(x), torch.nn.Softshrink()(x),
            torch.nn.functional.hardshrink(x, 0.0), torch.nn.functional.softshrink(x, 0.0))


def gelu_tanh(torch, x):
    return torch.nn.GELU(approximate="tanh")(x * 3), torch.nn.GELU()(x * 3), torch.nn.functional.gelu(x, approximate="none")


def bilinear(torch, a, b):
    m = _fill(torch, torch.nn.Bilinear(6, 5, 3))
    y = m(a, b)
    m2 = _fill(torch, torch.nn.Bilinear(6, 5, 2, bias=False))
    return y, pg(torch, y, m), m2(a, b)


def fold_unfold(torch, x):
    u = torch.nn.Unfold(kernel_size=(2, 3), dilation=(1, 2), stride=(2, 1), padding=1)(x)
    f = torch.nn.Fold(output_size=(4, 5), kernel_size=2, dilation=2, stride=(1, 2), padding=(1, 0))
    cols = x.reshape(2, 12, 4)[:, :, :3].repeat(1, 1, 1)
    return u, torch.nn.functional.unfold(x, 3, dilation=2, padding=2, stride=3), f(cols), \
        torch.nn.functional.fold(u, (4, 4), (2, 3), dilation=(1, 2), stride=(2, 1), padding=1)


def upsample_modes(torch, x):
    U = torch.nn.Upsample
    return (U(scale_factor=2)(x), U(size=(5, 7), mode="bilinear")(x), U(scale_factor=1.5, mode="bilinear", align_corners=True)(x),
            U(size=(3, 6), mode="bicubic")(x), U(scale_factor=(2, 1), mode="nearest-exact")(x),
            torch.nn.UpsamplingNearest2d(size=(6, 6))(x), torch.nn.UpsamplingBilinear2d(scale_factor=2)(x))


def upsample_1d_3d(torch, x):
    U = torch.nn.Upsample
    return (U(scale_factor=3, mode="linear")(x.reshape(2, 3, 16)), U(size=7, mode="linear", align_corners=True)(x.reshape(2, 3, 16)),
            U(scale_factor=2, mode="trilinear")(x.reshape(2, 3, 2, 2, 4)), U(size=(3, 3, 5), mode="nearest")(x.reshape(2, 3, 2, 2, 4)))


def pads(torch, x):
    nn = torch.nn
    return (nn.ReflectionPad3d((1, 0, 1, 1, 0, 1))(x.reshape(1, 2, 3, 4, 4)), nn.ReplicationPad1d((3, 1))(x.reshape(2, 3, 16)),
            nn.CircularPad2d((1, 2, 3, 0))(x), nn.ZeroPad1d((2, -1))(x.reshape(2, 3, 16)), nn.ZeroPad1d(1)(x.reshape(6, 16)),
            nn.CircularPad1d(2)(x.reshape(2, 3, 16)), nn.ReplicationPad3d(1)(x.reshape(1, 2, 3, 4, 4)),
            nn.ConstantPad2d((1, -1, 0, 2), 3.5)(x), nn.ReflectionPad2d((0, 3, 2, 1))(x))


def channel_shuffle(torch, x):
    y = x.reshape(2, 6, 2, 4)
    return torch.nn.ChannelShuffle(3)(y), torch.nn.ChannelShuffle(2)(y), torch.nn.functional.channel_shuffle(y, 6)


def identity_flatten(torch, x):
    nn = torch.nn
    idm = nn.Identity(54, foo="bar")
    return (idm(x), nn.Flatten()(x), nn.Flatten(1, 2)(x), nn.Flatten(start_dim=-2, end_dim=-1)(x), nn.Flatten(0, -1)(x),
            nn.Unflatten(1, (3, 1))(x), nn.Unflatten(-1, (2, 2))(x), nn.Sequential(nn.Flatten(2), nn.Unflatten(2, (2, 8)))(x))


def embedding_from_pretrained(torch, w):
    e = torch.nn.Embedding.from_pretrained(w, freeze=False, padding_idx=1)
    idx = torch.tensor([[0, 1, 3], [3, 3, 2]])
    y = e(idx)
    e2 = torch.nn.Embedding.from_pretrained(w, max_norm=1.0)
    y2 = e2(torch.tensor([0, 2]))
    return y, e.weight.requires_grad, e2.weight.requires_grad, y2, e.padding_idx


def kinks_a(torch, x):
    F = torch.nn.functional
    return (F.hardtanh(x, -1.0, 1.0), F.relu6(x), F.hardswish(x), F.hardsigmoid(x), F.softshrink(x, 0.5),
            F.hardshrink(x, 0.5), F.threshold(x, 0.5, -1.0), F.relu(x), F.leaky_relu(x, 0.2))


def kinks_b(torch, x):
    F = torch.nn.functional
    return (F.elu(x, 0.5), F.celu(x, 2.0), F.selu(x), F.softplus(x, beta=2.0, threshold=2.0), F.rrelu(x, training=False),
            F.prelu(x, torch.tensor([0.25])), F.gelu(x, approximate="tanh"), F.mish(x), F.logsigmoid(x), F.tanhshrink(x))


def act_raises_glu_odd(torch, x):
    return torch.nn.GLU(dim=0)(x[:3])


def act_raises_prelu_channels(torch, x):
    return torch.nn.PReLU(4)(x)


def act_raises_hardtanh_order(torch, x):
    return torch.nn.functional.hardtanh(x, 1.0, 0.0)


def threshold_inplace_view(torch, x):
    y = x * 1
    torch.nn.Threshold(0.1, 20.0, inplace=True)(y[:, 1:4])
    z = x * 2
    torch.nn.functional.hardtanh_(z[1])
    torch.nn.functional.relu6(z, inplace=True)
    return y, z, torch.nn.functional.softshrink(y, 1.0), torch.nn.functional.celu(y, 0.5, inplace=False)


def upsample_more(torch, x):
    U = torch.nn.Upsample
    return (U(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True)(x), U(scale_factor=0.6, mode="area")(x) if False else U(size=(2, 3), mode="area")(x),
            U(size=(7, 5), mode="bicubic", align_corners=True)(x), U(scale_factor=2.5, mode="nearest")(x))


def embedding_from_pretrained_opts(torch, w):
    e = torch.nn.Embedding.from_pretrained(w, freeze=True, scale_grad_by_freq=True)
    e2 = torch.nn.functional.embedding(torch.tensor([[0, 0, 2], [3, 0, 1]]), w, scale_grad_by_freq=True, padding_idx=2)
    return e(torch.tensor([1, 1, 2])), e2


def rrelu_lower_gt_upper(torch, x):
    return torch.nn.functional.rrelu(x, 0.4, 0.2, training=False)


def pad_edges(torch, x):
    F = torch.nn.functional
    return (F.pad(x, (-1, 2, 1, -2), mode="constant", value=-1.0), F.pad(x, (3, 3, 0, 0), mode="reflect"),
            F.pad(x, (-1, 1, 2, 0), mode="circular"), torch.nn.ZeroPad2d((-1, 0, 2, -3))(x),
            F.pad(x.reshape(2, 3, 16), (4, 0), mode="circular"), F.pad(x, (0, 5, 0, 5), mode="replicate"))


def circular_pad_too_big_raises(torch, x):
    return torch.nn.CircularPad2d((5, 0, 0, 0))(x)


def interp_antialias(torch, x):
    F = torch.nn.functional
    big = torch.cat([x, x.flip(-1)], -1).repeat(1, 1, 2, 1)
    return (F.interpolate(big, size=(3, 5), mode="bilinear", antialias=True), F.interpolate(big, scale_factor=0.4, mode="bicubic", antialias=True),
            F.interpolate(big, scale_factor=(0.75, 0.3), mode="nearest"), F.interpolate(big, size=(5, 3), mode="nearest-exact"),
            F.interpolate(big, scale_factor=0.55, mode="area"))


def upsample_scale_recompute(torch, x):
    F = torch.nn.functional
    return (F.interpolate(x, scale_factor=1.3, mode="nearest"), F.interpolate(x, scale_factor=1.3, mode="nearest", recompute_scale_factor=True),
            F.interpolate(x, scale_factor=2.6, mode="bilinear"), F.interpolate(x, scale_factor=2.6, mode="bicubic", recompute_scale_factor=True))


def unflatten_two_neg_raises(torch, x):
    return torch.nn.Unflatten(2, (-1, -1))(x)


def from_pretrained_1d_raises(torch, w):
    return torch.nn.Embedding.from_pretrained(w[0])


def upsample_nearest_align_raises(torch, x):
    return torch.nn.Upsample(scale_factor=2, mode="nearest", align_corners=True)(x)


def bilinear_shapes(torch, a, b):
    m = _fill(torch, torch.nn.Bilinear(6, 5, 2))
    return m(a[0], b[0]), m(a.reshape(2, 2, 6), b.reshape(2, 2, 5)), m.in1_features, m.in2_features, m.out_features, tuple(m.weight.shape)


def rnn_relu_packed_nobias(torch, x):
    nn = torch.nn
    m = _fill(torch, nn.RNN(6, 3, nonlinearity="relu", bias=False))
    pk = nn.utils.rnn.pack_padded_sequence(x.transpose(0, 1), torch.tensor([5, 3]))
    y, h = m(pk)
    out, lens = nn.utils.rnn.pad_packed_sequence(y)
    return out, h, lens, pg(torch, out, m)

def cells_nobias(torch, x):
    nn = torch.nn
    rc = _fill(torch, nn.RNNCell(6, 3, bias=False, nonlinearity="relu"))
    lc = _fill(torch, nn.LSTMCell(6, 3, bias=False))
    gc = _fill(torch, nn.GRUCell(6, 3, bias=False))
    h = torch.linspace(-1, 1, 6).reshape(2, 3)
    outs = []
    hr, hl, cl, hg = h, h, h * 0.5, h
    for t in range(3):
        hr = rc(x[:, t], hr)
        hl, cl = lc(x[:, t], (hl, cl))
        hg = gc(x[:, t], hg)
    tot = hr.sum() + hl.sum() * 2 + cl.sum() + hg.sum() * 3
    ps = list(rc.parameters()) + list(lc.parameters()) + list(gc.parameters())
    return hr, hl, cl, hg, list(torch.autograd.grad(tot, ps, retain_graph=True)), gc(x[0, 0])

def cells_unbatched_none(torch, x):
    nn = torch.nn
    g = _fill(torch, nn.GRUCell(6, 3))
    l = _fill(torch, nn.LSTMCell(6, 3, bias=False))
    r = _fill(torch, nn.RNNCell(6, 3, nonlinearity="tanh", bias=False))
    return g(x[0, 0]), l(x[0, 1]), r(x[0]), l(x[:, 0])

def rnn_relu_dropout_eval(torch, x):
    nn = torch.nn
    m = _fill(torch, nn.RNN(6, 3, num_layers=3, nonlinearity="relu", dropout=0.5)).eval()
    y, h = m(x)
    y1, h1 = m(x[:, 0])
    return y, h, y1, h1, pg(torch, y, m)


CASES = [
    (rrelu_eval, [G(X)], {}),
    (rrelu_train_seed, [G(X)], dict(compiled_warns="running eagerly")),
    (hardtanh_relu6, [G(X)], {}),
    (softplus_beta, [G(X)], TOL),
    (celu_selu, [G(X)], TOL),
    (glu_threshold, [G(X)], TOL),
    (prelu_4d, [G(IMG)], TOL),
    (softmin_softmax2d, [G(IMG)], TOL),
    (hard_family, [G(X)], TOL),
    (shrink, [G(X)], TOL),
    (gelu_tanh, [G(X)], TOL),
    (bilinear, [G(X), G(X[:, :5].copy())], TOL),
    (fold_unfold, [G(IMG)], TOL),
    (upsample_modes, [G(IMG)], TOL),
    (upsample_1d_3d, [G(IMG)], TOL),
    (pads, [G(IMG)], TOL),
    (channel_shuffle, [G(IMG)], TOL),
    (identity_flatten, [G(IMG[:, :, :, :].reshape(2, 3, 4, 4))], TOL),
    (embedding_from_pretrained, [G(W46)], dict(TOL, compiled_warns="running eagerly")),
    (kinks_a, [G(K)], TOL),
    (kinks_b, [G(K)], TOL),
    (act_raises_glu_odd, [G(X)], TOL),
    (act_raises_prelu_channels, [G(IMG)], TOL),
    (act_raises_hardtanh_order, [G(X)], TOL),
    (threshold_inplace_view, [G(X)], TOL),
    (upsample_more, [G(IMG)], TOL),
    (embedding_from_pretrained_opts, [G(W46)], TOL),
    (rrelu_lower_gt_upper, [G(X)], TOL),
    (pad_edges, [G(IMG)], TOL),
    (circular_pad_too_big_raises, [G(IMG)], TOL),
    (interp_antialias, [G(IMG)], dict(rtol=1e-5, atol=1e-5)),
    (upsample_scale_recompute, [G(IMG)], TOL),
    (unflatten_two_neg_raises, [G(IMG)], TOL),
    (from_pretrained_1d_raises, [G(X)], TOL),
    (upsample_nearest_align_raises, [G(IMG)], TOL),
    (bilinear_shapes, [G(X), G(X[:, :5].copy())], TOL),
    (rnn_relu_packed_nobias, [G(SEQ)], TOL),
    (cells_nobias, [G(SEQ)], TOL),
    (cells_unbatched_none, [G(SEQ)], TOL),
    (rnn_relu_dropout_eval, [G(X.reshape(4, 1, 6).repeat(2, 1))], TOL),
]


@pytest.mark.slow       # (a compile a case)
@pytest.mark.parametrize("fn,specs,kw", CASES, ids=[c[0].__name__ for c in CASES])
def test_activations_layers(fn, specs, kw):
    check(fn, *specs, **kw)

