"""llgrad.nn layers and llgrad.nn.init.

Oracle tests (skipped without torch): the torch module's parameters and buffers are copied into
the llgrad module with load_state_dict, the same input runs through both, and we compare outputs,
the gradients of the inputs and of every parameter, buffers after the forward (running stats,
num_batches_tracked), state_dict keys and repr (with 'torch.' replaced by 'llgrad.').
Torch-free tests: eager NumPy references (loop convolution and pooling), float64 gradcheck,
initialisation statistics, containers and train/eval behaviour."""
import math
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from llgrad.nn import init
from llgrad.nn.layers_conv import conv2d, max_pool2d

RNG = np.random.default_rng(1234)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# ---- oracle harness ------------------------------------------------------------------------------
def _torch():
    return pytest.importorskip("torch")


def _ll(t):
    return llgrad.tensor(t.detach().numpy())


def _close(a, b, what, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol, err_msg=what)


def sync(tm, lm):
    """Copy torch module tm's state into llgrad module lm; state_dict keys and repr must match."""
    sd = tm.state_dict()
    assert list(lm.state_dict()) == list(sd)
    lm.load_state_dict(OrderedDict((k, _ll(v)) for k, v in sd.items()))
    assert repr(lm) == repr(tm).replace("torch.", "llgrad.")


def compare(tm, lm, *inputs, extra=(), train=True, steps=1, rtol=1e-4, atol=1e-5):
    """Run float `inputs` (requiring grad) and `extra` arrays (not requiring grad) through both
    modules `steps` times; compare outputs, input and parameter gradients and buffers."""
    torch = _torch()
    sync(tm, lm)
    tm.train(train)
    lm.train(train)
    for _ in range(steps):
        t_in = [torch.tensor(a, requires_grad=True) for a in inputs]
        l_in = [llgrad.tensor(a, requires_grad=True) for a in inputs]
        t_ex = [torch.tensor(a) for a in extra]
        l_ex = [llgrad.tensor(a) for a in extra]
        tm.zero_grad()
        lm.zero_grad()
        to, lo = tm(*t_in, *t_ex), lm(*l_in, *l_ex)
        assert tuple(lo.shape) == tuple(to.shape)
        assert str(lo.dtype).replace("llgrad.", "") == str(to.dtype).replace("torch.", "")
        _close(lo.detach().numpy(), to.detach().numpy(), "output", rtol, atol)
        if to.requires_grad:
            w = randn(*to.shape).astype(to.detach().numpy().dtype)
            (to * torch.tensor(w)).sum().backward()
            (lo * llgrad.tensor(w)).sum().backward()
            for i, (ti, li) in enumerate(zip(t_in, l_in)):
                if ti.grad is None:
                    assert li.grad is None
                else:
                    _close(li.grad.numpy(), ti.grad.numpy(), f"grad of input {i}", rtol, atol)
        tp, lp = dict(tm.named_parameters()), dict(lm.named_parameters())
        assert list(tp) == list(lp)
        for k in tp:
            if tp[k].grad is None:
                assert lp[k].grad is None, k
            else:
                _close(lp[k].grad.numpy(), tp[k].grad.numpy(), f"grad of {k}", rtol, atol)
        tb, lb = dict(tm.named_buffers()), dict(lm.named_buffers())
        assert list(tb) == list(lb)
        for k in tb:
            assert str(lb[k].dtype).replace("llgrad.", "") == str(tb[k].dtype).replace("torch.", "")
            _close(lb[k].numpy(), tb[k].numpy(), f"buffer {k}", rtol, atol)
    return to, lo


def pair(name, *args, **kwargs):
    """The same module built by torch.nn and llgrad.nn."""
    torch = _torch()
    return getattr(torch.nn, name)(*args, **kwargs), getattr(nn, name)(*args, **kwargs)


# ---- Linear, shapes, activations -----------------------------------------------------------------
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 5), (5,)])
def test_linear(bias, shape):
    compare(*pair("Linear", 5, 3, bias=bias), randn(*shape))


@pytest.mark.parametrize("args", [(), (0,), (0, 1), (1, 2)])
def test_flatten(args):
    compare(*pair("Flatten", *args), randn(2, 3, 4, 2))


@pytest.mark.parametrize("dim,size", [(1, (2, 3)), (-1, [2, 2]), (0, (2, -1))])
def test_unflatten(dim, size):
    x = randn(6, 4) if dim != 0 else randn(4, 3)
    x = randn(4, 6) if dim == 1 else x
    compare(*pair("Unflatten", dim, size), x)


@pytest.mark.parametrize("name,args,kwargs", [
    ("ReLU", (), {}), ("GELU", (), {}), ("GELU", (), {"approximate": "tanh"}), ("Tanh", (), {}),
    ("Sigmoid", (), {}), ("SiLU", (), {}), ("Softmax", (1,), {}), ("Softmax", (), {"dim": -1}),
    ("LogSoftmax", (1,), {}), ("LogSoftmax", (0,), {}), ("Identity", (54,), {"unused": "x"}),
    ("Dropout", (0.3,), {}),
])
def test_activation(name, args, kwargs):
    train = name != "Dropout"          # Dropout: compared in eval (identity)
    compare(*pair(name, *args, **kwargs), randn(3, 4, 5), train=train)


def test_activation_reprs_inplace():
    for name in ("ReLU", "SiLU"):
        tm, lm = pair(name, inplace=True)
        assert repr(lm) == repr(tm)
    tm, lm = pair("Dropout", p=0.2, inplace=True)
    assert repr(lm) == repr(tm) == "Dropout(p=0.2, inplace=True)"


@pytest.mark.parametrize("name", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (2, 3, 4, 2)])
def test_softmax_implicit_dim(name, shape):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(*pair(name), randn(*shape))


# ---- Conv2d --------------------------------------------------------------------------------------
CONV_CASES = [
    ((3, 4, 3), {}, (2, 3, 7, 6)),
    ((3, 4, 3), {"stride": 2, "padding": 1}, (2, 3, 8, 7)),
    ((3, 2, (2, 3)), {"stride": (2, 1), "padding": (1, 2), "bias": False}, (1, 3, 6, 5)),
    ((2, 3, 3), {"dilation": 2, "padding": 2}, (2, 2, 7, 7)),
    ((4, 6, 3), {"groups": 2, "padding": 1}, (2, 4, 5, 5)),
    ((4, 4, 3), {"groups": 4, "stride": 2}, (1, 4, 7, 7)),
    ((2, 3, 4), {"padding": "same"}, (2, 2, 6, 5)),
    ((2, 3, 3), {"padding": "same", "dilation": (1, 2)}, (1, 2, 6, 7)),
    ((2, 3, 3), {"padding": "valid"}, (1, 2, 5, 5)),
    ((2, 3, 3), {"padding": 1, "padding_mode": "reflect"}, (2, 2, 5, 4)),
    ((2, 3, 3), {"padding": (2, 1), "padding_mode": "replicate"}, (1, 2, 4, 5)),
    ((2, 3, 3), {"padding": 2, "padding_mode": "circular", "stride": 2}, (1, 2, 5, 6)),
    ((3, 5, 1), {}, (2, 3, 4, 4)),
    ((3, 4, 3), {"padding": 1}, (3, 6, 5)),                    # unbatched
]


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")
@pytest.mark.parametrize("args,kwargs,shape", CONV_CASES)
def test_conv2d_oracle(args, kwargs, shape):
    compare(*pair("Conv2d", *args, **kwargs), randn(*shape), rtol=1e-4, atol=3e-5)


def test_conv2d_float64_oracle():
    torch = _torch()
    tm = torch.nn.Conv2d(2, 3, 3, stride=2, padding=1, dtype=torch.float64)
    lm = nn.Conv2d(2, 3, 3, stride=2, padding=1, dtype=llgrad.float64)
    _, lo = compare(tm, lm, randn(2, 2, 6, 6, dtype=np.float64), rtol=1e-10, atol=1e-12)
    assert lo.dtype == llgrad.float64 and lo.is_contiguous()


def test_conv2d_errors():
    m = nn.Conv2d(3, 4, 3)
    with pytest.raises(RuntimeError, match="expected input\\[1, 2, 5, 5\\] to have 3 channels"):
        m(llgrad.randn(1, 2, 5, 5))
    with pytest.raises(RuntimeError, match="Kernel size can't be greater"):
        m(llgrad.randn(1, 3, 2, 5))
    with pytest.raises(RuntimeError, match="Expected 3D \\(unbatched\\) or 4D"):
        m(llgrad.randn(3, 5))
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="not supported for strided"):
        nn.Conv2d(3, 4, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="Invalid padding string"):
        nn.Conv2d(3, 4, 3, padding="full")


def _np_conv2d(x, w, b, stride, padding, dilation, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    oh = (xp.shape[2] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (xp.shape[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for ni in range(n):
        for oc in range(o):
            g = oc // og
            for i in range(oh):
                for j in range(ow):
                    acc = 0.0 if b is None else b[oc]
                    for ci in range(cg):
                        for p in range(kh):
                            for q in range(kw):
                                acc += w[oc, ci, p, q] * xp[ni, g * cg + ci,
                                                            i * stride[0] + p * dilation[0],
                                                            j * stride[1] + q * dilation[1]]
                    out[ni, oc, i, j] = acc
    return out


@pytest.mark.parametrize("stride,padding,dilation,groups,bias", [
    ((1, 1), (0, 0), (1, 1), 1, True), ((2, 1), (1, 2), (1, 1), 1, False),
    ((1, 2), (1, 1), (2, 1), 2, True), ((2, 2), (0, 1), (1, 1), 4, True)])
def test_conv2d_matches_numpy_loop(stride, padding, dilation, groups, bias):
    x = randn(2, 4, 6, 5, dtype=np.float64)
    w = randn(4, 4 // groups, 3, 2, dtype=np.float64)
    b = randn(4, dtype=np.float64) if bias else None
    out = conv2d(llgrad.tensor(x), llgrad.tensor(w), None if b is None else llgrad.tensor(b),
                 stride, padding, dilation, groups)
    np.testing.assert_allclose(out.numpy(), _np_conv2d(x, w, b, stride, padding, dilation, groups),
                               rtol=1e-12, atol=1e-12)


def test_conv2d_module_matches_numpy_loop():
    m = nn.Conv2d(2, 3, (2, 3), stride=(1, 2), padding=1)
    x = randn(1, 2, 5, 6)
    ref = _np_conv2d(x.astype(np.float64), m.weight.detach().numpy().astype(np.float64),
                     m.bias.detach().numpy().astype(np.float64), (1, 2), (1, 1), (1, 1), 1)
    np.testing.assert_allclose(m(llgrad.tensor(x)).detach().numpy(), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kwargs", [
    {}, {"stride": 2, "padding": 1}, {"dilation": (2, 1), "padding": (2, 0)}, {"groups": 2},
    {"padding": "same"}, {"padding": 1, "padding_mode": "reflect"},
    {"padding": 1, "padding_mode": "circular"}, {"padding": 1, "padding_mode": "replicate"}])
def test_conv2d_gradcheck(kwargs):
    g = kwargs.get("groups", 1)
    x = llgrad.randn(2, 2, 5, 4, dtype=llgrad.float64, requires_grad=True)
    w = llgrad.randn(2, 2 // g, 3, 2, dtype=llgrad.float64, requires_grad=True)
    b = llgrad.randn(2, dtype=llgrad.float64, requires_grad=True)
    mode = kwargs.pop("padding_mode", "zeros")
    assert llgrad.autograd.gradcheck(
        lambda x, w, b: conv2d(x, w, b, padding_mode=mode, **kwargs), (x, w, b))


def test_conv2d_non_contiguous_input_and_views():
    m = nn.Conv2d(3, 2, 3, padding=1, dtype=llgrad.float64)
    base = llgrad.randn(2, 6, 7, 3, dtype=llgrad.float64)
    x = base.permute(0, 3, 1, 2)[:, :, 1:, :]           # non-contiguous, storage offset
    ref = m(x.contiguous())
    np.testing.assert_allclose(m(x).detach().numpy(), ref.detach().numpy())
    y = llgrad.randn(3, 3, 5, 5, dtype=llgrad.float64)[1:]              # contiguous, offset
    np.testing.assert_allclose(m(y).detach().numpy(), m(y.clone()).detach().numpy())
    np.testing.assert_allclose(nn.MaxPool2d(2)(y).numpy(), nn.MaxPool2d(2)(y.clone()).numpy())


def test_conv2d_input_without_grad():
    m = nn.Conv2d(2, 3, 3, padding=1)
    x = llgrad.randn(2, 2, 4, 4)
    out = m(x)
    assert out.requires_grad and out.is_contiguous() and out.shape == (2, 3, 4, 4)
    out.sum().backward()
    assert x.grad is None and m.weight.grad.shape == (3, 2, 3, 3)
    np.testing.assert_allclose(m.bias.grad.numpy(), np.full(3, 32.0))
    with llgrad.no_grad():
        assert not m(x).requires_grad


# ---- MaxPool2d -----------------------------------------------------------------------------------
POOL_CASES = [
    ((2,), {}, (2, 3, 6, 6)),
    ((3,), {"stride": 2, "padding": 1}, (2, 2, 7, 6)),
    (((2, 3),), {"stride": (1, 2)}, (1, 2, 5, 7)),
    (((3, 2),), {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2)}, (2, 1, 6, 7)),
    ((3,), {"stride": 1, "dilation": 2, "padding": 1}, (1, 2, 7, 7)),
    ((3,), {"stride": 2, "ceil_mode": True}, (1, 2, 8, 7)),
    ((2,), {"stride": 2, "padding": 1, "ceil_mode": True}, (2, 1, 5, 6)),
    ((2,), {}, (3, 6, 5)),                                            # unbatched
]


@pytest.mark.parametrize("args,kwargs,shape", POOL_CASES)
def test_maxpool2d_oracle(args, kwargs, shape):
    compare(*pair("MaxPool2d", *args, **kwargs), randn(*shape))


@pytest.mark.parametrize("args,kwargs,shape", POOL_CASES[:3])
def test_maxpool2d_ties_route_gradient_like_torch(args, kwargs, shape):
    x = RNG.integers(0, 3, shape).astype(np.float32)                  # many ties per window
    compare(*pair("MaxPool2d", *args, **kwargs), x)


@pytest.mark.parametrize("args,kwargs,shape", POOL_CASES)
def test_maxpool2d_return_indices(args, kwargs, shape):
    torch = _torch()
    tm, lm = pair("MaxPool2d", *args, return_indices=True, **kwargs)
    x = randn(*shape)
    (tv, ti), (lv, li) = tm(torch.tensor(x)), lm(llgrad.tensor(x))
    _close(lv.numpy(), tv.numpy(), "values")
    assert li.dtype == llgrad.int64
    np.testing.assert_array_equal(li.numpy(), ti.numpy())


def _np_maxpool(x, k, s, p, d):
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-np.inf)
    oh, ow = (h + 2 * p - d * (k - 1) - 1) // s + 1, (w + 2 * p - d * (k - 1) - 1) // s + 1
    out = np.empty((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * s:i * s + d * (k - 1) + 1:d, j * s:j * s + d * (k - 1) + 1:d]
            out[:, :, i, j] = win.max((2, 3))
    return out


@pytest.mark.parametrize("k,s,p,d", [(2, 2, 0, 1), (3, 1, 1, 1), (3, 2, 1, 2), (2, 1, 0, 2)])
def test_maxpool2d_matches_numpy(k, s, p, d):
    x = randn(2, 3, 7, 6, dtype=np.float64)
    out = nn.MaxPool2d(k, s, p, d)(llgrad.tensor(x))
    np.testing.assert_array_equal(out.numpy(), _np_maxpool(x, k, s, p, d))


@pytest.mark.parametrize("kwargs", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2,
                                                         "padding": 1},
                                    {"kernel_size": 2, "dilation": 2, "ceil_mode": True}])
def test_maxpool2d_gradcheck(kwargs):
    vals = RNG.permutation(2 * 2 * 5 * 6).astype(np.float64).reshape(2, 2, 5, 6) / 10
    x = llgrad.tensor(vals, requires_grad=True)                       # distinct: no ties
    assert llgrad.autograd.gradcheck(lambda x: max_pool2d(x, **kwargs), (x,))


def test_maxpool2d_errors_and_repr():
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel"):
        nn.MaxPool2d(2, padding=2)(llgrad.randn(1, 1, 4, 4))
    with pytest.raises(RuntimeError, match="Output size is too small"):
        nn.MaxPool2d(3)(llgrad.randn(1, 1, 2, 2))
    assert repr(nn.MaxPool2d((2, 3), padding=1)) == \
        "MaxPool2d(kernel_size=(2, 3), stride=(2, 3), padding=1, dilation=1, ceil_mode=False)"


# ---- normalisation -------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [{}, {"momentum": None}, {"momentum": 0.3, "eps": 1e-3},
                                    {"affine": False}, {"bias": False},
                                    {"track_running_stats": False}])
@pytest.mark.parametrize("shape", [(8, 4), (6, 4, 5)])
def test_batchnorm1d_train(kwargs, shape):
    compare(*pair("BatchNorm1d", 4, **kwargs), randn(*shape), steps=3)


@pytest.mark.parametrize("kwargs", [{}, {"momentum": None}, {"affine": False},
                                    {"track_running_stats": False}])
def test_batchnorm2d_train_then_eval(kwargs):
    tm, lm = pair("BatchNorm2d", 3, **kwargs)
    compare(tm, lm, randn(4, 3, 5, 5) * 2 + 1, steps=2)
    compare(tm, lm, randn(2, 3, 4, 4), train=False, steps=2)          # stats frozen in eval


def test_batchnorm_eval_uses_running_stats_and_freezes_them():
    m = nn.BatchNorm1d(3, momentum=0.5)
    x = llgrad.tensor(randn(16, 3) * 3 + 2)
    m(x)
    assert m.num_batches_tracked.dtype == llgrad.int64 and int(m.num_batches_tracked) == 1
    mean, var = m.running_mean.clone(), m.running_var.clone()
    np.testing.assert_allclose(mean.numpy(), 0.5 * x.numpy().mean(0), rtol=1e-5)
    np.testing.assert_allclose(var.numpy(), 0.5 + 0.5 * x.numpy().var(0, ddof=1), rtol=1e-5)
    m.eval()
    y = m(x)
    np.testing.assert_allclose(m.running_mean.numpy(), mean.numpy())
    np.testing.assert_allclose(m.running_var.numpy(), var.numpy())
    assert int(m.num_batches_tracked) == 1
    ref = (x.numpy() - mean.numpy()) / np.sqrt(var.numpy() + 1e-5)
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchNorm2d(3)(llgrad.randn(2, 3, 4))


@pytest.mark.parametrize("shape,kwargs", [((5,), {}), ((4, 5), {"eps": 1e-3}),
                                          ((5,), {"elementwise_affine": False}),
                                          ([5], {"bias": False})])
def test_layernorm(shape, kwargs):
    tm, lm = pair("LayerNorm", shape, **kwargs)
    _torch().nn.init.normal_(tm.weight) if tm.weight is not None else None
    compare(tm, lm, randn(3, 4, 5))


# ---- Embedding -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [{}, {"padding_idx": 0}, {"padding_idx": -1},
                                    {"scale_grad_by_freq": True},
                                    {"max_norm": 1.0}, {"max_norm": 1.5, "norm_type": 1.0}])
def test_embedding(kwargs):
    torch = _torch()
    tm, lm = pair("Embedding", 10, 4, **kwargs)
    idx = np.array([[0, 2, 2, 9], [9, 3, 2, 0]], dtype=np.int64)
    sync(tm, lm)
    to, lo = tm(torch.tensor(idx)), lm(llgrad.tensor(idx))
    _close(lo.detach().numpy(), to.detach().numpy(), "output")
    _close(lm.weight.detach().numpy(), tm.weight.detach().numpy(), "renormed weight")
    w = randn(*to.shape)
    (to * torch.tensor(w)).sum().backward()
    (lo * llgrad.tensor(w)).sum().backward()
    _close(lm.weight.grad.numpy(), tm.weight.grad.numpy(), "weight grad")


def test_embedding_init_and_from_pretrained():
    m = nn.Embedding(50, 8, padding_idx=3)
    assert (m.weight[3].detach().numpy() == 0).all() and m.weight.is_leaf
    assert repr(m) == "Embedding(50, 8, padding_idx=3)"
    e = nn.Embedding.from_pretrained(llgrad.ones(4, 2))
    assert not e.weight.requires_grad and e(llgrad.tensor([1, 3])).shape == (2, 2)
    with pytest.raises(AssertionError):
        nn.Embedding(5, 2, padding_idx=5)


# ---- losses --------------------------------------------------------------------------------------
def _loss_case(kwargs, n=6, c=5, spatial=()):
    x = randn(n, c, *spatial)
    t = RNG.integers(0, c, (n,) + spatial).astype(np.int64)
    if "ignore_index" in kwargs:
        t.reshape(-1)[::3] = kwargs["ignore_index"]
    return x, t


@pytest.mark.parametrize("kwargs", [
    {}, {"reduction": "sum"}, {"reduction": "none"}, {"ignore_index": 1},
    {"ignore_index": 2, "reduction": "none"}, {"label_smoothing": 0.2},
    {"label_smoothing": 0.1, "ignore_index": 0, "reduction": "sum"},
    {"weight": "w"}, {"weight": "w", "label_smoothing": 0.3, "ignore_index": 4}])
@pytest.mark.parametrize("spatial", [(), (3, 2)])
def test_cross_entropy_loss(kwargs, spatial):
    torch = _torch()
    kwargs = dict(kwargs)
    wt = RNG.uniform(0.5, 2.0, 5).astype(np.float32)
    tk, lk = dict(kwargs), dict(kwargs)
    if "weight" in kwargs:
        tk["weight"], lk["weight"] = torch.tensor(wt), llgrad.tensor(wt)
    x, t = _loss_case(kwargs, spatial=spatial)
    compare(torch.nn.CrossEntropyLoss(**tk), nn.CrossEntropyLoss(**lk), x, extra=(t,))


def test_cross_entropy_loss_probability_targets():
    torch = _torch()
    x = randn(4, 3)
    p = np.abs(randn(4, 3))
    p /= p.sum(1, keepdims=True)
    compare(torch.nn.CrossEntropyLoss(label_smoothing=0.1),
            nn.CrossEntropyLoss(label_smoothing=0.1), x, extra=(p,))


@pytest.mark.parametrize("kwargs", [{}, {"reduction": "sum"}, {"reduction": "none"},
                                    {"ignore_index": 3}, {"weight": "w"},
                                    {"weight": "w", "ignore_index": 0, "reduction": "sum"}])
def test_nll_loss(kwargs):
    torch = _torch()
    wt = RNG.uniform(0.5, 2.0, 5).astype(np.float32)
    tk, lk = dict(kwargs), dict(kwargs)
    if "weight" in kwargs:
        tk["weight"], lk["weight"] = torch.tensor(wt), llgrad.tensor(wt)
    x, t = _loss_case(kwargs)
    compare(torch.nn.NLLLoss(**tk), nn.NLLLoss(**lk), x, extra=(t,))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(reduction):
    compare(*pair("MSELoss", reduction=reduction), randn(3, 4), randn(3, 4))


@pytest.mark.parametrize("kwargs", [{}, {"reduction": "sum"}, {"reduction": "none"},
                                    {"weight": "w"}, {"pos_weight": "p"},
                                    {"weight": "w", "pos_weight": "p", "reduction": "sum"}])
def test_bce_with_logits_loss(kwargs):
    torch = _torch()
    w, p = RNG.uniform(0.5, 2, 4).astype(np.float32), RNG.uniform(0.5, 3, 4).astype(np.float32)
    tk, lk = dict(kwargs), dict(kwargs)
    for key, val in (("weight", w), ("pos_weight", p)):
        if key in kwargs:
            tk[key], lk[key] = torch.tensor(val), llgrad.tensor(val)
    y = RNG.integers(0, 2, (3, 4)).astype(np.float32)
    compare(torch.nn.BCEWithLogitsLoss(**tk), nn.BCEWithLogitsLoss(**lk), randn(3, 4) * 3,
            extra=(y,))


# ---- containers ----------------------------------------------------------------------------------
def _cnn(lib):
    n = lib.nn
    return n.Sequential(
        n.Conv2d(3, 6, 3, padding=1), n.BatchNorm2d(6), n.ReLU(), n.MaxPool2d(2),
        n.Conv2d(6, 4, 3, stride=2, padding=1, bias=False), n.GELU(), n.Flatten(),
        n.Dropout(0.2), n.Linear(16, 10), n.LayerNorm(10), n.Tanh())


def test_sequential_cnn_oracle():
    torch = _torch()
    tm, lm = _cnn(torch), _cnn(llgrad)
    compare(tm, lm, randn(2, 3, 8, 8), train=False, atol=3e-5)
    tm[7].p = lm[7].p = 0.0                       # no dropout: train mode comparable
    compare(tm, lm, randn(3, 3, 8, 8), steps=2, atol=3e-5)


def test_sequential_api():
    a, b, c = nn.ReLU(), nn.Tanh(), nn.Sigmoid()
    s = nn.Sequential(a, b)
    assert len(s) == 2 and s[0] is a and s[-1] is b and list(s) == [a, b]
    assert isinstance(s[0:1], nn.Sequential) and list(s[0:1]) == [a]
    s.append(c)
    assert list(s._modules) == ["0", "1", "2"] and s[2] is c
    del s[0]
    assert list(s._modules) == ["0", "1"] and s[0] is b
    s.insert(0, a)
    assert list(s) == [a, b, c]
    s[1] = nn.Identity()
    assert isinstance(s[1], nn.Identity)
    assert s.pop(1) is not None and len(s) == 2
    s.extend([b])
    assert len(s + nn.Sequential(a)) == 4 and len(s * 2) == 6
    with pytest.raises(IndexError):
        s[5]
    d = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 3)), ("act", nn.ReLU())]))
    assert list(d.state_dict()) == ["fc.weight", "fc.bias"] and d.fc is d[0]
    x = llgrad.randn(4, 2)
    np.testing.assert_allclose(d(x).detach().numpy(), d.act(d.fc(x)).detach().numpy())


def test_modulelist_moduledict_oracle():
    torch = _torch()

    def build(lib):
        n = lib.nn
        ml = n.ModuleList([n.Linear(2, 2) for _ in range(3)] + [n.ReLU(), n.BatchNorm1d(2)])
        md = n.ModuleDict({"b": n.Linear(2, 3), "a": n.Conv2d(1, 1, 1), "c": ml})
        return md

    tm, lm = build(torch), build(llgrad)
    sync(tm, lm)                                    # keys and (compressed) repr match
    ml = nn.ModuleList()
    assert repr(ml) == repr(torch.nn.ModuleList()) == "ModuleList()"


def test_modulelist_moduledict_api():
    ml = nn.ModuleList([nn.ReLU(), nn.Tanh()])
    ml.append(nn.Sigmoid())
    ml += [nn.Identity()]
    assert len(ml) == 4 and isinstance(ml[-1], nn.Identity)
    assert isinstance(ml[1:3], nn.ModuleList) and len(ml[1:3]) == 2
    ml.insert(1, nn.GELU())
    assert isinstance(ml[1], nn.GELU) and isinstance(ml[2], nn.Tanh)
    del ml[0]
    assert list(ml._modules) == ["0", "1", "2", "3"] and isinstance(ml[0], nn.GELU)
    assert isinstance(ml.pop(0), nn.GELU) and len(ml) == 3
    ml[0] = nn.Linear(1, 1)
    assert list(ml.state_dict()) == ["0.weight", "0.bias"]
    with pytest.raises(IndexError):
        ml[3]
    md = nn.ModuleDict([("x", nn.Linear(1, 2)), ("y", nn.ReLU())])
    md["z"] = nn.Tanh()
    assert list(md) == ["x", "y", "z"] and "y" in md and len(md) == 3
    assert list(md.keys()) == ["x", "y", "z"] and isinstance(md.pop("y"), nn.ReLU)
    md.update({"w": nn.Linear(2, 2)})
    assert list(md.state_dict()) == ["x.weight", "x.bias", "w.weight", "w.bias"]
    md.clear()
    assert len(md) == 0


def test_cnn_compiled_matches_eager():
    def build():
        llgrad.manual_seed(0)
        return nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(12, 4))
    eager, comp = build(), build()
    x = llgrad.randn(2, 2, 4, 4)
    le = eager(x).sum()
    lc = llgrad.compile(lambda x: comp(x).sum())(x)
    le.backward()
    lc.backward()
    np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-6)
    for (name, p), q in zip(eager.named_parameters(), comp.parameters()):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    for (name, b), c in zip(eager.named_buffers(), comp.buffers()):
        np.testing.assert_allclose(c.numpy(), b.numpy(), rtol=1e-6, err_msg=name)


# ---- train / eval -------------------------------------------------------------------------------
def test_dropout_train_eval():
    m = nn.Dropout(0.25)
    x = llgrad.ones(200, 100)
    llgrad.manual_seed(0)
    y = m(x).numpy()
    frac = (y == 0).mean()
    assert 0.22 < frac < 0.28
    np.testing.assert_allclose(y[y != 0], 1 / 0.75)
    m.eval()
    assert m(x) is x
    assert (nn.Dropout(1.0)(x).numpy() == 0).all()
    with pytest.raises(ValueError):
        nn.Dropout(1.5)
    s = nn.Sequential(nn.Linear(3, 3), nn.Dropout())
    s.eval()
    assert not s[1].training and not s.training


# ---- init ---------------------------------------------------------------------------------------
def test_default_init_bounds():
    llgrad.manual_seed(0)
    lin = nn.Linear(400, 300)
    w = lin.weight.detach().numpy()
    bound = 1 / math.sqrt(400)                     # kaiming_uniform_(a=sqrt(5)) on fan_in 400
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert abs(w.var() - bound ** 2 / 3) < 0.03 * bound ** 2
    assert np.abs(lin.bias.detach().numpy()).max() <= bound
    conv = nn.Conv2d(8, 16, 3)
    cb = 1 / math.sqrt(8 * 9)
    assert np.abs(conv.weight.detach().numpy()).max() <= cb
    assert np.abs(conv.bias.detach().numpy()).max() <= cb
    emb = nn.Embedding(1000, 64).weight.detach().numpy()
    assert abs(emb.mean()) < 0.02 and abs(emb.std() - 1) < 0.02
    bn, ln = nn.BatchNorm2d(5), nn.LayerNorm((2, 3))
    for m in (bn, ln):
        assert (m.weight.detach().numpy() == 1).all() and (m.bias.detach().numpy() == 0).all()
    assert lin.weight.requires_grad and lin.weight.is_leaf and lin.weight.grad_fn is None


def test_manual_seed_makes_init_deterministic():
    llgrad.manual_seed(7)
    a = nn.Linear(5, 4)
    llgrad.manual_seed(7)
    b = nn.Linear(5, 4)
    np.testing.assert_array_equal(a.weight.detach().numpy(), b.weight.detach().numpy())
    np.testing.assert_array_equal(a.bias.detach().numpy(), b.bias.detach().numpy())
    c = nn.Linear(5, 4)
    assert not np.array_equal(a.weight.detach().numpy(), c.weight.detach().numpy())
    g = llgrad.runtime.creation._Generator().manual_seed(3)
    t1 = init.normal_(llgrad.empty(10), generator=g).numpy().copy()
    g.manual_seed(3)
    np.testing.assert_array_equal(init.normal_(llgrad.empty(10), generator=g).numpy(), t1)


def test_init_functions_statistics():
    llgrad.manual_seed(1)
    t = llgrad.empty(500, 400)
    fan_in, fan_out = init._calculate_fan_in_and_fan_out(llgrad.empty(16, 8, 3, 3))
    assert (fan_in, fan_out) == (72, 144)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(llgrad.empty(3))
    assert init.calculate_gain("relu") == math.sqrt(2)
    assert init.calculate_gain("tanh") == 5 / 3 and init.calculate_gain("conv2d") == 1
    assert init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("foo")

    def stats(fn, *a, **k):
        x = fn(t, *a, **k)
        assert x is t
        return t.numpy().min(), t.numpy().max(), t.numpy().mean(), t.numpy().std()

    lo, hi, mean, _ = stats(init.uniform_, -2, 3)
    assert -2 <= lo < -1.99 and 2.99 < hi <= 3 and abs(mean - 0.5) < 0.02
    _, _, mean, std = stats(init.normal_, 1.0, 0.5)
    assert abs(mean - 1) < 0.01 and abs(std - 0.5) < 0.01
    lo, hi, mean, std = stats(init.trunc_normal_, 0.0, 1.0, -1.0, 2.0)
    assert -1 <= lo and hi <= 2 and abs(mean - 0.2288) < 0.01 and abs(std - 0.7148) < 0.01
    lo, hi, _, _ = stats(init.xavier_uniform_, 2.0)
    b = 2.0 * math.sqrt(6 / 900)
    assert -b <= lo < -0.99 * b and 0.99 * b < hi <= b
    _, _, _, std = stats(init.xavier_normal_)
    assert abs(std - math.sqrt(2 / 900)) < 0.01 * math.sqrt(2 / 900) * 5
    lo, hi, _, _ = stats(init.kaiming_uniform_, 0, "fan_in", "relu")
    b = math.sqrt(2) * math.sqrt(3 / 400)
    assert -b <= lo < -0.99 * b and 0.99 * b < hi <= b
    _, _, _, std = stats(init.kaiming_normal_, mode="fan_out", nonlinearity="relu")
    assert abs(std - math.sqrt(2 / 500)) < 0.02 * math.sqrt(2 / 500)
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_uniform_(t, mode="fan_avg")
    assert (init.constant_(t, 0.3).numpy() == np.float32(0.3)).all()
    assert (init.ones_(t).numpy() == 1).all() and (init.zeros_(t).numpy() == 0).all()
    np.testing.assert_array_equal(init.eye_(llgrad.empty(2, 3)).numpy(), np.eye(2, 3))
    q = init.orthogonal_(llgrad.empty(3, 5, dtype=llgrad.float64)).numpy()
    np.testing.assert_allclose(q @ q.T, np.eye(3), atol=1e-12)
    d = init.dirac_(llgrad.empty(2, 2, 3, 3)).numpy()
    assert d.sum() == 2 and d[0, 0, 1, 1] == 1 and d[1, 1, 1, 1] == 1
    with pytest.warns(UserWarning, match="zero-element"):
        init.kaiming_uniform_(llgrad.empty(0, 3))


def test_init_in_place_on_parameters_without_grad_history():
    p = nn.Parameter(llgrad.empty(3, 4))
    for fn in (init.uniform_, init.normal_, init.trunc_normal_, init.xavier_uniform_,
               init.kaiming_normal_, init.zeros_, init.ones_):
        assert fn(p) is p
        assert p.is_leaf and p.grad_fn is None and p.requires_grad
    assert init.constant_(llgrad.empty(2, dtype=llgrad.float64), 2.5).dtype == llgrad.float64


def test_init_trunc_normal_matches_torch_distribution():
    torch = _torch()
    t = llgrad.empty(200000)
    init.trunc_normal_(t, mean=0.5, std=2.0, a=-1.0, b=4.0)
    r = torch.empty(200000)
    torch.nn.init.trunc_normal_(r, mean=0.5, std=2.0, a=-1.0, b=4.0)
    a, b = t.numpy(), r.numpy()
    assert a.min() >= -1 and a.max() <= 4
    assert abs(a.mean() - b.mean()) < 0.02 and abs(a.std() - b.std()) < 0.02
    np.testing.assert_allclose(np.quantile(a, [0.1, 0.5, 0.9]), np.quantile(b, [0.1, 0.5, 0.9]),
                               atol=0.05)
