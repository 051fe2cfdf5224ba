"""Options of the losses and layers against torch (sweep 60, H2): a bool (or integer) target
of mse_loss / smooth_l1_loss (PyTorch's kernels take it; llgrad's backward subtracted a bool
tensor and raised), kl_div of integer or bool operands (PyTorch refuses them; llgrad returned
a number), F.embedding(sparse=True) with a weight that requires grad (PyTorch's gradient is
sparse; llgrad's was silently dense, where Embedding(sparse=True) and embedding_bag refuse).
Eager and compiled."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

A = np.random.RandomState(0).randn(5, 4).astype(np.float32)
B = A > 0.1


def _loss_and_grad(lib, name, x, t, **kw):
    xt = lib.tensor(x, requires_grad=True)
    loss = getattr(lib.nn.functional, name)(xt, lib.tensor(t), **kw)
    (loss * lib.tensor(np.cos(np.arange(loss.numel())).reshape(tuple(loss.shape))
                       .astype(x.dtype))).sum().backward()
    return loss.detach().numpy(), xt.grad.numpy()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("target", ["bool", "int64", "int32"])
@pytest.mark.parametrize("name,kw", [("mse_loss", {}), ("smooth_l1_loss", {"beta": 0.5}),
                                     ("smooth_l1_loss", {"beta": 0.0}), ("l1_loss", {})])
def test_integer_target_loss_and_grad_as_torch(name, kw, target, reduction):
    t = B.astype(target)
    ours = _outcome(lambda: _loss_and_grad(llgrad, name, A, t, reduction=reduction, **kw))
    theirs = _outcome(lambda: _loss_and_grad(torch, name, A, t, reduction=reduction, **kw))
    # (l1_loss, and smooth_l1_loss with beta 0, are PyTorch's x - t: a bool target raises)
    assert ours[0] == theirs[0]
    if ours[0] == "ok":
        for a, b in zip(ours[1], theirs[1]):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    else:
        assert ours[1] == theirs[1]


def test_bool_target_broadcast_and_float64():
    for lib_x in (A.astype(np.float64),):
        ours = _loss_and_grad(llgrad, "mse_loss", lib_x, B[:1])
        theirs = _loss_and_grad(torch, "mse_loss", lib_x, B[:1])
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-12)


def test_bool_target_compiled_step_is_eagers():
    F = llgrad.nn.functional

    def f(x, y):
        return F.mse_loss(x, y) + F.smooth_l1_loss(x, y, beta=0.3)

    cf = llgrad.compile(f)
    for _ in range(2):
        xc = llgrad.tensor(A, requires_grad=True)
        lc = cf(xc, llgrad.tensor(B))
        lc.backward()
    xt = torch.tensor(A, requires_grad=True)
    lt = torch.nn.functional.mse_loss(xt, torch.tensor(B)) + \
        torch.nn.functional.smooth_l1_loss(xt, torch.tensor(B), beta=0.3)
    lt.backward()
    np.testing.assert_allclose(float(lc), float(lt), rtol=1e-6)
    np.testing.assert_allclose(xc.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-7)


def _outcome(fn):
    try:
        return "ok", fn()
    except RuntimeError as e:
        return "RuntimeError", str(e)


@pytest.mark.parametrize("pair", ["float-long", "long-float", "float-bool", "bool-float",
                                  "long-long"])
@pytest.mark.parametrize("which", ["F", "torch"])
def test_kl_div_refuses_integral_operands(pair, which):
    def run(lib):
        x = lib.tensor(A[0])
        a, b = [x if n == "float" else (x > 0) if n == "bool" else x.long()
                for n in pair.split("-")]
        fn = lib.nn.functional.kl_div if which == "F" else lib.kl_div
        return _outcome(lambda: fn(a, b, reduction="sum") if which == "F" else fn(a, b))
    ours, theirs = run(llgrad), run(torch)
    assert ours[0] == theirs[0] == "RuntimeError"
    assert ours[1] == theirs[1]


def test_kl_div_float_operands_still_compute():
    x, t = A[0], np.abs(A[1])
    ours = llgrad.nn.functional.kl_div(llgrad.tensor(x), llgrad.tensor(t.astype(np.float64)),
                                       reduction="sum")
    theirs = torch.nn.functional.kl_div(torch.tensor(x), torch.tensor(t.astype(np.float64)),
                                        reduction="sum")
    assert ours.dtype == llgrad.float64
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)


def test_functional_embedding_sparse_gives_a_sparse_gradient():
    w = llgrad.randn(6, 3, requires_grad=True)
    idx = llgrad.tensor([1, 2, 2])
    llgrad.nn.functional.embedding(idx, w, sparse=True).sum().backward()
    assert w.grad.is_sparse and w.grad._indices().tolist() == [[1, 2, 2]]
    # (the rest: tests/test_api_s63_a6_sparse_grad.py)
    # no gradient asked: the lookup is the same as PyTorch's
    with llgrad.no_grad():
        out = llgrad.nn.functional.embedding(idx, w, sparse=True)
    np.testing.assert_array_equal(out.numpy(), w.detach().numpy()[[1, 2, 2]])
    out = llgrad.nn.functional.embedding(idx, w.detach(), sparse=True)
    assert not out.requires_grad


# ---- integer and bool inputs the CPU kernels refuse ----------------------------------------

_KERNEL_CASES = {
    "avg_pool2d": (2, lambda F, x: F.avg_pool2d(x, 2)),
    "avg_pool1d": (2, lambda F, x: F.avg_pool1d(x[0], 2)),
    "avg_pool2d_ceil": (2, lambda F, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True,
                                                     count_include_pad=False)),
    "reflect2d": (2, lambda F, x: F.pad(x, (1, 1, 1, 1), mode="reflect")),
    "replicate1d": (2, lambda F, x: F.pad(x[0], (1, 2), mode="replicate")),
    "replicate3d": (3, lambda F, x: F.pad(x, (1, 1, 1, 1, 1, 1), mode="replicate")),
    "circular": (2, lambda F, x: F.pad(x, (1, 1, 1, 1), mode="circular")),
    "conv2d": (2, lambda F, x: F.conv2d(x, x[..., :2, :2], stride=2, padding=1)),
    "conv1d": (2, lambda F, x: F.conv1d(x[0], x[0])),
    "conv3d": (3, lambda F, x: F.conv3d(x, x[..., :2, :2, :2])),
    "conv2d_dilated": (2, lambda F, x: F.conv2d(x, x[..., :2, :2], dilation=(1, 2))),
    "conv1d_dilated": (2, lambda F, x: F.conv1d(x[0], x[0][..., :2], dilation=2)),
    "conv3d_dilated": (3, lambda F, x: F.conv3d(x, x[..., :2, :2, :2], dilation=2)),
    "conv_same": (2, lambda F, x: F.conv2d(x, x[..., :2, :2], padding="same")),
    "conv_transpose2d": (2, lambda F, x: F.conv_transpose2d(x, x[..., :2, :2], stride=2,
                                                            output_padding=1)),
    "conv_transpose1d": (2, lambda F, x: F.conv_transpose1d(x[:, :, 0], x[:, :, 0])),
    "conv_transpose3d": (3, lambda F, x: F.conv_transpose3d(x, x)),
}


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64", "bool",
                                   "float32"])
@pytest.mark.parametrize("case", sorted(_KERNEL_CASES))
def test_integer_and_bool_kernels_as_torch(case, dtype):
    nd, fn = _KERNEL_CASES[case]

    def run(lib):
        x = lib.tensor(np.arange(1, 4 ** nd + 1).reshape((1, 1) + (4,) * nd) % 7).to(
            getattr(lib, dtype))
        try:
            out = fn(lib.nn.functional, x)
        except NotImplementedError as e:
            return "NotImplementedError", str(e)
        return str(out.dtype).split(".")[-1], out.numpy().tolist()
    assert run(llgrad) == run(torch)


# ---- max_norm's norm_type: ATen's row.norm(p) --------------------------------------------

@pytest.mark.parametrize("norm_type", [float("inf"), 0.0, 0.5, 1.0, 2.0, 3.0, -1.0,
                                       float("-inf")])
@pytest.mark.parametrize("fn", ["embedding", "embedding_bag"])
def test_max_norm_norm_type_as_torch(norm_type, fn):
    # (norm_type=inf renormalised nothing: sum(|x|^inf)^(1/inf) is 1; 0 divided by zero)
    w0 = np.random.RandomState(3).randn(10, 4).astype(np.float32) * 3
    w0[2, 1] = 0
    idx = np.array([[1, 2, 0, 9], [3, 3, 0, 1]])
    out = []
    for lib in (llgrad, torch):
        w = lib.tensor(w0.copy())
        kw = {"mode": "max"} if fn == "embedding_bag" else {}
        e = getattr(lib.nn.functional, fn)(lib.tensor(idx), w, max_norm=1.5,
                                           norm_type=norm_type, **kw)
        out.append((e.numpy(), w.numpy()))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_max_norm_inf_compiled_is_eagers():
    w0 = np.random.RandomState(4).randn(10, 4).astype(np.float32) * 3
    idx = llgrad.tensor([[1, 2], [3, 1]])

    def f(w, i):
        return llgrad.nn.functional.embedding(i, w, max_norm=1.0, norm_type=float("inf")) * 2

    cf = llgrad.compile(f)
    for _ in range(2):
        wc = llgrad.tensor(w0.copy())
        yc = cf(wc, idx)
    we = llgrad.tensor(w0.copy())
    ye = f(we, idx)
    np.testing.assert_array_equal(yc.numpy(), ye.numpy())
    np.testing.assert_array_equal(wc.numpy(), we.numpy())
    assert np.abs(we.numpy()[[1, 2, 3]]).max() <= 1.0 + 1e-6


@pytest.mark.parametrize("pads", [(True, 1), (np.float64(1.0), 1), (1, 1.5), [1, 2.0], (1, 2),
                                  (np.int32(1), 1)])
@pytest.mark.parametrize("mode", ["constant", "reflect"])
def test_pad_refuses_float_and_bool_pads_as_torch(pads, mode):
    # (int() truncated a pad of 1.5 to 1 silently)
    def run(lib):
        x = lib.ones(1, 3, 4)
        try:
            return tuple(lib.nn.functional.pad(x, pads, mode=mode).shape)
        except TypeError as e:
            return str(e)
    assert run(llgrad) == run(torch)
