"""The 3-D modules (Conv3d, ConvTranspose3d, MaxPool3d, AvgPool3d, AdaptiveAvgPool3d,
AdaptiveMaxPool3d, LPPool3d, MaxUnpool3d, BatchNorm3d, InstanceNorm3d and the lazy
LazyConv3d, LazyConvTranspose3d, LazyBatchNorm3d, LazyInstanceNorm1d/2d/3d) against torch's
with the same parameters: outputs, gradients, running statistics, repr, state_dict keys;
and PyTorch's errors (type and message) for bad input to the 3-D functions."""
import numpy as np
import pytest

import llgrad
import llgrad.nn as nn

RNG = np.random.default_rng(47)


def _torch():
    return pytest.importorskip("torch")


def _pair(make, x, train=True, steps=2):
    """make(lib) in both libraries, llgrad's parameters and buffers copied from torch's, run
    `steps` forward/backward passes on x: outputs, input gradients, parameter gradients and
    buffers must agree."""
    torch = _torch()
    tm, lm = make(torch), make(llgrad)
    lm.load_state_dict({k: llgrad.tensor(v.detach().numpy()) for k, v in
                        tm.state_dict().items()})
    assert list(lm.state_dict()) == list(tm.state_dict())
    assert repr(lm) == repr(tm)
    tm.train(train)
    lm.train(train)
    for step in range(steps):
        xs = [lib.tensor(x + step, requires_grad=True) for lib in (llgrad, torch)]
        outs = [m(t) for m, t in zip((lm, tm), xs)]
        outs = [o[0] if isinstance(o, tuple) else o for o in outs]
        cot = np.random.default_rng(step).standard_normal(tuple(outs[1].shape))
        for o, lib in zip(outs, (llgrad, torch)):
            (o * lib.tensor(cot)).sum().backward()
        np.testing.assert_allclose(outs[0].detach().numpy(), outs[1].detach().numpy(),
                                   rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(xs[0].grad.numpy(), xs[1].grad.numpy(), rtol=1e-10,
                                   atol=1e-10)
    for (k, a), (_, b) in zip(lm.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-10,
                                   err_msg=k)
    for (k, a), (_, b) in zip(lm.named_buffers(), tm.named_buffers()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12, err_msg=k)


X5 = RNG.standard_normal((2, 4, 5, 6, 5))


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, bias=False),
                                dict(padding="same", padding_mode="reflect", dilation=(1, 2, 1)),
                                dict(padding=(1, 0, 2), padding_mode="circular", groups=2),
                                dict(padding=1, padding_mode="replicate", stride=(1, 2, 1)),
                                dict(padding="valid", groups=2, stride=(2, 1, 1))])
def test_conv3d_module_matches_torch(kw):
    _pair(lambda L: L.nn.Conv3d(4, 4, 3, dtype=L.float64, **kw), X5)
    _pair(lambda L: L.nn.Conv3d(4, 2, (2, 3, 1), dtype=L.float64, **kw), X5[0])


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, output_padding=1, groups=2),
                                dict(stride=(1, 2, 2), padding=1, dilation=2, bias=False)])
def test_conv_transpose3d_module_matches_torch(kw):
    _pair(lambda L: L.nn.ConvTranspose3d(4, 6, 3, dtype=L.float64, **kw), X5)


def test_conv_transpose3d_output_size_matches_torch():
    torch = _torch()
    for lib in (llgrad, torch):
        m = lib.nn.ConvTranspose3d(4, 2, 3, stride=2, dtype=lib.float64)
        y = m(lib.tensor(X5), output_size=(12, 14, 11))
        assert tuple(y.shape) == (2, 2, 12, 14, 11)
        with pytest.raises(ValueError, match="requested an output size of"):
            m(lib.tensor(X5), output_size=(15, 14, 11))


@pytest.mark.parametrize("make", [
    lambda L: L.nn.MaxPool3d(2), lambda L: L.nn.MaxPool3d((3, 2, 2), (1, 2, 1), 1, 1, True, True),
    lambda L: L.nn.AvgPool3d(2), lambda L: L.nn.AvgPool3d(3, 2, 1, True, False, 5),
    lambda L: L.nn.AdaptiveAvgPool3d((2, None, 3)), lambda L: L.nn.AdaptiveMaxPool3d(3, True),
    lambda L: L.nn.AdaptiveMaxPool3d((1, 2, 5)), lambda L: L.nn.LPPool3d(2, 2),
    lambda L: L.nn.LPPool3d(1.5, (2, 3, 2), 1, True)])
def test_pool_modules_match_torch(make):
    _pair(make, np.abs(X5) + 0.1)
    _pair(make, np.abs(X5[1]) + 0.1)


def test_max_unpool3d_module_repr_matches_torch():
    torch = _torch()
    for args in ((2,), ((2, 3, 2), 1, (1, 0, 1))):
        assert repr(nn.MaxUnpool3d(*args)) == repr(torch.nn.MaxUnpool3d(*args))
        assert nn.MaxUnpool3d(*args).stride == torch.nn.MaxUnpool3d(*args).stride


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("kw", [dict(), dict(momentum=None), dict(affine=False),
                                dict(track_running_stats=False), dict(bias=False)])
def test_batch_norm3d_matches_torch(train, kw):
    _pair(lambda L: L.nn.BatchNorm3d(4, dtype=L.float64, **kw), X5, train, steps=3)


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("kw", [dict(), dict(affine=True), dict(track_running_stats=True),
                                dict(affine=True, track_running_stats=True, momentum=0.3)])
def test_instance_norm3d_matches_torch(train, kw):
    _pair(lambda L: L.nn.InstanceNorm3d(4, dtype=L.float64, **kw), X5, train)
    _pair(lambda L: L.nn.InstanceNorm3d(4, dtype=L.float64, **kw), X5[0], train)


def test_norm3d_input_checks_match_torch():
    torch = _torch()
    for lib in (llgrad, torch):
        with pytest.raises(ValueError, match=r"expected 5D input \(got 4D input\)"):
            lib.nn.BatchNorm3d(4)(lib.zeros(4, 5, 6, 5))
        with pytest.raises(ValueError, match=r"expected 4D or 5D input \(got 3D input\)"):
            lib.nn.InstanceNorm3d(4)(lib.zeros(4, 5, 6))


@pytest.mark.parametrize("name,args,x", [
    ("LazyConv3d", (3, 2), X5), ("LazyConv3d", (3, (2, 1, 2), 2, 1), X5[0]),
    ("LazyConvTranspose3d", (3, 2), X5), ("LazyBatchNorm3d", (), X5),
    ("LazyInstanceNorm3d", (), X5), ("LazyInstanceNorm2d", (), X5[0]),
    ("LazyInstanceNorm1d", (), X5[0, :, 0])])
def test_lazy_modules_match_torch(name, args, x):
    torch = _torch()
    llgrad.manual_seed(0)
    mods = [getattr(lib.nn, name)(*args, dtype=lib.float64) for lib in (llgrad, torch)]
    assert repr(mods[0]) == repr(mods[1])
    assert mods[0].has_uninitialized_params()
    outs = [m(lib.tensor(x)) for m, lib in zip(mods, (llgrad, torch))]
    assert type(mods[0]).__name__ == type(mods[1]).__name__       # (became cls_to_become)
    assert repr(mods[0]) == repr(mods[1])
    assert list(mods[0].state_dict()) == list(mods[1].state_dict())
    for (k, a), (_, b) in zip(mods[0].state_dict().items(), mods[1].state_dict().items()):
        assert tuple(a.shape) == tuple(b.shape), k
    if "Norm" in name:          # (no random initialisation: the same numbers)
        np.testing.assert_allclose(outs[0].detach().numpy(), outs[1].detach().numpy(),
                                   rtol=1e-10, atol=1e-10)
    m = nn.LazyInstanceNorm1d()
    assert (m.affine, m.track_running_stats) == (True, True)     # (torch's lazy defaults)


def test_lazy_instance_norm_unbatched_reads_dim_1_as_torch():
    """PyTorch's lazy norms take num_features from input.shape[1], also for an unbatched
    instance-norm input (there the spatial size): affine then fails in forward, in both."""
    torch = _torch()
    got = []
    for lib in (llgrad, torch):
        with pytest.raises(ValueError) as info:
            lib.nn.LazyInstanceNorm3d(dtype=lib.float64)(lib.tensor(X5[0]))
        got.append(str(info.value))
    assert got[0] == got[1]


def _errors(cases, x):
    torch = _torch()
    for case in cases:
        got = []
        for lib in (llgrad, torch):
            t = lib.tensor(x)
            with pytest.raises(Exception) as info:
                case(lib, lib.nn.functional, t)
            got.append((info.type.__name__, str(info.value)))
        assert got[0] == got[1]


def W(L, *shape):
    return L.zeros(*shape, dtype=L.float64)


def test_conv3d_errors_match_torch():
    cases = [
        lambda L, F, x: F.conv3d(x[0, 0], W(L, 6, 2, 3, 2, 3)),
        lambda L, F, x: F.conv3d(x, W(L, 6, 2, 3, 2, 3)),
        lambda L, F, x: F.conv3d(x, W(L, 6, 2, 3, 2)),
        lambda L, F, x: F.conv3d(x, W(L, 6, 4, 6, 2, 2)),
        lambda L, F, x: F.conv3d(x, W(L, 6, 4, 2, 2, 2), stride=2, padding="same"),
        lambda L, F, x: F.conv3d(x, W(L, 6, 4, 2, 2, 2), padding="full"),
        lambda L, F, x: F.conv3d(x, W(L, 6, 4, 2, 2, 2), L.zeros(6, dtype=L.float32)),
        lambda L, F, x: F.conv3d(x, W(L, 6, 4, 2, 2, 2), W(L, 5)),
        lambda L, F, x: F.conv3d(x, W(L, 6, 4, 2, 2, 2), stride=0),
        lambda L, F, x: F.conv3d(x, W(L, 6, 4, 2, 2, 2), padding=-1),
        lambda L, F, x: F.conv3d(x, W(L, 6, 4, 2, 2, 2), stride=(1, 2)),
        lambda L, F, x: F.conv3d(x, W(L, 6, 4, 2, 2, 2), groups=0),
        lambda L, F, x: F.conv3d(x, W(L, 6, 4, 2, 2, 2), dilation=0),
        lambda L, F, x: F.conv3d(x.float(), W(L, 6, 4, 2, 2, 2).float(), dilation=0),
        lambda L, F, x: F.conv3d(x, W(L, 6, 4, 2, 2, 2), dilation=(1, -1, 1)),
        lambda L, F, x: F.conv3d(x, W(L, 5, 2, 2, 2, 2), groups=2),
        lambda L, F, x: F.conv_transpose3d(x, W(L, 4, 3, 2, 2, 2), None, 1, 0, 1),
        lambda L, F, x: F.conv_transpose3d(x, W(L, 3, 3, 2, 2, 2)),
        lambda L, F, x: F.conv_transpose3d(x[0, 0], W(L, 4, 3, 2, 2, 2)),
        lambda L, F, x: F.conv_transpose3d(x, W(L, 4, 3, 2, 2, 2), W(L, 2)),
        lambda L, F, x: F.conv_transpose3d(x[:, :, :1, :1, :1], W(L, 4, 3, 1, 1, 1),
                                           padding=(0, 0, 1)),
    ]
    _errors(cases, X5)


def test_pool3d_errors_match_torch():
    cases = [
        lambda L, F, x: F.max_pool3d(x[0, 0], 2), lambda L, F, x: F.max_pool3d(x, 0),
        lambda L, F, x: F.max_pool3d(x, 0, 1), lambda L, F, x: F.max_pool3d(x, 2, 0),
        lambda L, F, x: F.max_pool3d(x, 2, -1), lambda L, F, x: F.max_pool3d(x, 2, 1, 2),
        lambda L, F, x: F.max_pool3d(x, 2, 1, -1), lambda L, F, x: F.max_pool3d(x, 2, 1, 0, 0),
        lambda L, F, x: F.max_pool3d(x, 2, 1, 2, 3), lambda L, F, x: F.max_pool3d(x, (6, 2, 2)),
        lambda L, F, x: F.max_pool3d(x, (2, 2)), lambda L, F, x: F.max_pool3d(x, 2, (1, 1)),
        lambda L, F, x: F.max_pool3d(x, 2, 1, (1, 1)),
        lambda L, F, x: F.max_pool3d(x, 2, 1, 0, (1, 1)), lambda L, F, x: F.max_pool3d(x > 0, 2),
        lambda L, F, x: F.max_pool3d(x[:, :0], 2),
        lambda L, F, x: F.avg_pool3d(x[0, 0], 2), lambda L, F, x: F.avg_pool3d(x, 0),
        lambda L, F, x: F.avg_pool3d(x, 2, 0), lambda L, F, x: F.avg_pool3d(x, 2, 1, 2),
        lambda L, F, x: F.avg_pool3d(x, 2, divisor_override=0),
        lambda L, F, x: F.avg_pool3d(x, (6, 2, 2)), lambda L, F, x: F.avg_pool3d(x, (2, 2)),
        lambda L, F, x: F.avg_pool3d(x.half(), 2), lambda L, F, x: F.avg_pool3d(x.int(), 2),
        lambda L, F, x: F.avg_pool3d(x[:, :0], 2),
        lambda L, F, x: F.adaptive_avg_pool3d(x[0, 0], 2),
        lambda L, F, x: F.adaptive_avg_pool3d(x, (2, 3)),
        lambda L, F, x: F.adaptive_avg_pool3d(x, (2, 3, -1)),
        lambda L, F, x: F.adaptive_avg_pool3d(x[:, :, :0], 2),
        lambda L, F, x: F.adaptive_avg_pool3d(x.long(), 2),
        lambda L, F, x: F.adaptive_max_pool3d(x[0, 0], 2),
        lambda L, F, x: F.adaptive_max_pool3d(x, (2, 3)),
        lambda L, F, x: F.adaptive_max_pool3d(x, (2, 3, -1)),
        lambda L, F, x: F.adaptive_max_pool3d(x[:, :, :0], 2),
        lambda L, F, x: F.adaptive_max_pool3d(x.long(), 2),
        lambda L, F, x: F.adaptive_max_pool3d(x, (2, 3, 4, 5)),
    ]
    _errors(cases, X5)


def test_max_unpool3d_errors_match_torch():
    def pooled(L, F, x):
        return F.max_pool3d(x, 2, return_indices=True)

    def bad(L, F, x):
        v, i = pooled(L, F, x)
        i = i.clone()
        i[0, 1, 0, 1, 0] = 500          # (one invalid index: ATen reports one per thread)
        return F.max_unpool3d(v, i, 2, output_size=(5, 6, 5))
    cases = [
        bad,
        lambda L, F, x: F.max_unpool3d(pooled(L, F, x)[0], pooled(L, F, x)[1].int(), 2),
        lambda L, F, x: F.max_unpool3d(pooled(L, F, x)[0], pooled(L, F, x)[1][:1], 2),
        lambda L, F, x: F.max_unpool3d(pooled(L, F, x)[0][0, 0], pooled(L, F, x)[1][0, 0], 2),
        lambda L, F, x: F.max_unpool3d(*pooled(L, F, x), 2, output_size=(9, 6, 5)),
        lambda L, F, x: F.max_unpool3d(*pooled(L, F, x), 2, output_size=(9, 6)),
        lambda L, F, x: F.max_unpool3d(pooled(L, F, x)[0].long(), pooled(L, F, x)[1], 2),
    ]
    _errors(cases, X5)
