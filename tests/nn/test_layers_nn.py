"""The nn modules of issue 21 against PyTorch's: repr (extra_repr), parameters and buffers
(state_dict keys and shapes), constructor checks, and forward values and gradients with the
same parameters, in training and evaluation mode."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

# (constructor source, input shapes): built as `nn.<source>` in both libraries
MODULES = [
    ("ELU()", [(3, 4)]), ("ELU(alpha=0.5, inplace=True)", [(3, 4)]), ("CELU(2.0)", [(3, 4)]),
    ("SELU()", [(3, 4)]), ("Hardtanh(-0.5, 0.8)", [(3, 4)]), ("ReLU6(inplace=True)", [(3, 4)]),
    ("LogSigmoid()", [(3, 4)]), ("GLU()", [(3, 4)]), ("GLU(dim=0)", [(4, 3)]), ("Mish()", [(3, 4)]),
    ("Hardswish()", [(3, 4)]), ("Hardsigmoid(inplace=True)", [(3, 4)]), ("Softsign()", [(3, 4)]),
    ("Tanhshrink()", [(3, 4)]), ("Threshold(0.1, 20.0)", [(3, 4)]), ("LeakyReLU(0.2)", [(3, 4)]),
    ("Softplus(beta=2.0)", [(3, 4)]), ("Softmin(dim=1)", [(3, 4)]), ("Hardshrink(0.3)", [(3, 4)]),
    ("Softshrink()", [(3, 4)]), ("PReLU(3)", [(2, 3, 4)]), ("PReLU()", [(2, 3)]),
    ("L1Loss()", [(3, 4), (3, 4)]), ("SmoothL1Loss(beta=0.5)", [(3, 4), (3, 4)]),
    ("HuberLoss(reduction='sum', delta=2.0)", [(3, 4), (3, 4)]),
    ("KLDivLoss(reduction='batchmean', log_target=True)", [(3, 4), (3, 4)]),
    ("CosineSimilarity(dim=0)", [(3, 4), (3, 4)]), ("PairwiseDistance(p=1.0, keepdim=True)",
                                                     [(3, 4), (3, 4)]),
    ("ZeroPad2d((1, 0, 2, 1))", [(1, 2, 3, 3)]), ("ZeroPad1d(2)", [(2, 3)]),
    ("ConstantPad3d(1, 3.5)", [(1, 2, 2, 2)]), ("ReflectionPad1d((2, 1))", [(2, 3, 4)]),
    ("ReflectionPad2d(1)", [(1, 2, 3, 3)]), ("ReplicationPad2d((1, 2, 0, 1))", [(2, 3, 3)]),
    ("ReplicationPad3d(1)", [(1, 1, 2, 2, 2)]), ("CircularPad2d(1)", [(1, 2, 3, 3)]),
    ("AvgPool1d(3, 2, 1)", [(2, 3, 7)]), ("AvgPool2d(2)", [(1, 2, 4, 4)]),
    ("AvgPool2d((3, 2), stride=(2, 1), padding=1, ceil_mode=True, count_include_pad=False)",
     [(1, 2, 5, 5)]),
    ("AdaptiveAvgPool1d(3)", [(2, 3, 7)]), ("AdaptiveAvgPool2d((2, None))", [(1, 2, 5, 4)]),
    ("AdaptiveMaxPool1d(2)", [(2, 3, 7)]), ("AdaptiveMaxPool2d(3, return_indices=True)",
                                            [(1, 2, 5, 4)]),
    ("Upsample(scale_factor=2)", [(1, 2, 3, 3)]), ("Upsample(size=(4, 5), mode='bilinear')",
                                                   [(1, 2, 3, 3)]),
    ("UpsamplingNearest2d(scale_factor=3)", [(1, 2, 2, 2)]),
    ("UpsamplingBilinear2d(size=4)", [(1, 2, 3, 3)]),
    ("Conv1d(4, 6, 3, stride=2, padding=1, groups=2)", [(2, 4, 9)]),
    ("Conv1d(3, 4, 5, padding='same', padding_mode='reflect', bias=False)", [(2, 3, 7)]),
    ("ConvTranspose1d(3, 4, 3, stride=2, output_padding=1)", [(2, 3, 5)]),
    ("ConvTranspose2d(4, 6, 3, stride=2, output_padding=1, groups=2, bias=False)",
     [(2, 4, 3, 3)]),
    ("ConvTranspose2d(2, 3, (2, 3), padding=(1, 0), dilation=2)", [(1, 2, 4, 4)]),
    ("GroupNorm(2, 4)", [(2, 4, 3)]), ("GroupNorm(1, 3, affine=False, eps=1e-3)", [(2, 3, 2, 2)]),
    ("InstanceNorm1d(3)", [(2, 3, 5)]), ("InstanceNorm1d(3, affine=True)", [(3, 5)]),
    ("InstanceNorm2d(3, affine=True, track_running_stats=True)", [(2, 3, 2, 3)]),
    ("RMSNorm(4)", [(2, 3, 4)]), ("RMSNorm([3, 4], eps=1e-3, elementwise_affine=False)",
                                  [(2, 3, 4)]),
]


def _pair(src, shapes, seed):
    """The module in both libraries (llgrad's parameters and buffers copied from torch's)
    and inputs (positive where a loss needs them)."""
    t_mod = eval("torch.nn." + src)               # noqa: S307 (the test's own sources)
    l_mod = eval("llgrad.nn." + src)              # noqa: S307
    with torch.no_grad():
        for name, t in t_mod.state_dict().items():
            if t.is_floating_point():
                t.copy_(torch.randn(t.shape, dtype=t.dtype) * 0.5 + (1.0 if "var" in name
                                                                     else 0.0))
    l_mod.load_state_dict({k: llgrad.tensor(v.numpy()) for k, v in t_mod.state_dict().items()})
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-1.5, 1.5, s) for s in shapes]
    return t_mod.double(), l_mod.double(), arrays


@pytest.mark.parametrize("src,shapes", MODULES, ids=[m[0] for m in MODULES])
def test_module_matches_torch(src, shapes):
    t_mod, l_mod, arrays = _pair(src, shapes, 0)
    assert repr(l_mod) == repr(t_mod)
    assert {k: tuple(v.shape) for k, v in l_mod.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in t_mod.state_dict().items()}
    for training in (True, False):
        t_mod.train(training)
        l_mod.train(training)
        tx = [torch.tensor(a, requires_grad=True) for a in arrays]
        lx = [llgrad.tensor(a, requires_grad=True) for a in arrays]
        # (the in-place modules write their input: they get a copy)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            to, lo = t_mod(*[x * 1 for x in tx]), l_mod(*[x * 1 for x in lx])
        to, lo = (to if isinstance(to, tuple) else (to,)), (lo if isinstance(lo, tuple) else (lo,))
        for a, b in zip(lo, to):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10,
                                       atol=1e-12)
        l_bufs = dict(l_mod.named_buffers())
        for name, buf in t_mod.named_buffers():
            np.testing.assert_allclose(l_bufs[name].numpy(), buf.numpy(), rtol=1e-10)
        t_out, l_out = to[0], lo[0]
        if not t_out.requires_grad:
            continue
        g = np.random.default_rng(1).standard_normal(tuple(t_out.shape))
        t_out.backward(torch.tensor(g))
        l_out.backward(llgrad.tensor(g))
        for a, b in zip(lx, tx):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-11)
        for (name, p), (_, q) in zip(l_mod.named_parameters(), t_mod.named_parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-9, atol=1e-11,
                                       err_msg=name)


def test_bce_loss_weight_is_a_buffer():
    w = np.array([0.5, 2.0, 1.0])
    lm, tm = llgrad.nn.BCELoss(llgrad.tensor(w)), torch.nn.BCELoss(torch.tensor(w))
    assert list(lm.state_dict()) == list(tm.state_dict()) == ["weight"]
    x, t = np.array([[0.2, 0.7, 0.4]]), np.array([[0.0, 1.0, 0.5]])
    np.testing.assert_allclose(lm(llgrad.tensor(x), llgrad.tensor(t)).item(),
                               tm(torch.tensor(x), torch.tensor(t)).item(), rtol=1e-12)


def test_conv_transpose_output_size():
    lm, tm = llgrad.nn.ConvTranspose2d(2, 3, 3, stride=2), torch.nn.ConvTranspose2d(2, 3, 3,
                                                                                    stride=2)
    for size in ([9, 10], [1, 3, 10, 9]):
        shape = lm(llgrad.zeros(1, 2, 4, 4), output_size=size).shape
        assert tuple(shape) == tuple(tm(torch.zeros(1, 2, 4, 4), output_size=size).shape)
    for T, m in ((torch, tm), (llgrad, lm)):
        with pytest.raises(ValueError, match="requested an output size of"):
            m(T.zeros(1, 2, 4, 4), output_size=[12, 12])


CHECKS = ["Hardtanh(1.0, -1.0)", "HuberLoss(delta='a')", "GroupNorm(4, 6)",
          "Conv1d(4, 6, 3, groups=3)", "Conv1d(3, 4, 3, stride=2, padding='same')",
          "ConvTranspose2d(2, 3, 3, padding_mode='reflect')", "Conv1d(3, 4, 3, padding='foo')"]


@pytest.mark.parametrize("src", CHECKS)
def test_constructor_checks_match_torch(src):
    errors = []
    for lib in ("torch", "llgrad"):
        with pytest.raises(Exception) as info:
            eval(f"{lib}.nn.{src}")                # noqa: S307
        errors.append(info.value)
    assert type(errors[1]) is type(errors[0]) and str(errors[1]) == str(errors[0])


@pytest.mark.parametrize("src,shape", [("CircularPad1d(1)", (3,)),
                                       ("InstanceNorm2d(3, affine=True)", (2, 4, 2, 2)),
                                       ("InstanceNorm1d(3)", (2, 3, 4, 5))])
def test_forward_checks_match_torch(src, shape):
    errors = []
    for lib in (torch, llgrad):
        with pytest.raises(Exception) as info:
            eval(f"lib.nn.{src}")(lib.zeros(*shape))     # noqa: S307
        errors.append(info.value)
    assert type(errors[1]) is type(errors[0]) and str(errors[1]) == str(errors[0])
