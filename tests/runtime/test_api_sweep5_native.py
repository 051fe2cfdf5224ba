"""torch names llgrad lacked (fifth sweep), against torch: the native_* functions, ATen's
dropouts, embedding_bag / ctc_loss at top level, the recurrent cells, the sym_* helpers and
Sym* names, the autocast state functions, the build flags, OutOfMemoryError, GradScaler and
empty_permuted."""
import pickle
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from sweep5_harness import same  # noqa: E402

R = np.random.default_rng(1)
X = R.standard_normal((4, 3, 5)).astype(np.float32)


@pytest.mark.parametrize("fn", [
    lambda t, x: t.native_layer_norm(x, [5], None, None, 1e-5),
    lambda t, x: t.native_layer_norm(x, [3, 5], t.ones(3, 5) * 2, t.ones(3, 5), 1e-3),
    lambda t, x: t.native_group_norm(x, None, None, 4, 3, 5, 3, 1e-5),
    lambda t, x: t.native_group_norm(x, t.ones(3) * 3, None, 4, 3, 5, 1, 1e-5),
    lambda t, x: t.native_batch_norm(x, None, None, t.zeros(3), t.ones(3), True, 0.1, 1e-5),
    lambda t, x: t.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5),
    lambda t, x: t.native_batch_norm(x, t.ones(3), t.zeros(3), t.zeros(3) + 0.5, t.ones(3) * 2,
                                     False, 0.1, 1e-5),
    lambda t, x: (lambda rm, rv: (t.native_batch_norm(x, None, None, rm, rv, True, 0.2, 1e-5),
                                  rm, rv))(t.zeros(3), t.ones(3)),
    lambda t, x: t.native_dropout(x, 0.5, False),
    lambda t, x: t.native_dropout(x, 0.0, True),
    lambda t, x: t.native_layer_norm(1.5, [5], None, None, 1e-5),
    lambda t, x: t.alpha_dropout(x, 0.5, False), lambda t, x: t.feature_dropout(x, 0.3, False),
    lambda t, x: t.feature_alpha_dropout(x, 0.0, True), lambda t, x: t.alpha_dropout(x, 1.5, True),
    lambda t, x: t.feature_dropout(x, 1.0, True),
])
def test_native(fn):
    same(fn, X, rtol=1e-5, atol=1e-5)


def test_native_norm_refuses_dense():
    with pytest.raises(NotImplementedError, match="Could not run 'aten::native_norm' with "
                                                  "arguments from the 'CPU' backend"):
        llgrad.native_norm(llgrad.ones(3))


def test_native_dropout_training():
    x = llgrad.ones(2000, requires_grad=True)
    out, mask = llgrad.native_dropout(x, 0.25, True)
    assert mask.dtype == llgrad.bool and type(out.grad_fn).__name__ == "NativeDropoutBackward0"
    kept = mask.float().mean().item()
    assert 0.7 < kept < 0.8
    np.testing.assert_allclose(out.detach().numpy(), mask.numpy() / 0.75, rtol=1e-6)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), mask.numpy() / 0.75, rtol=1e-6)
    y = llgrad.ones(3, 1000)
    assert llgrad.alpha_dropout_(y, 0.5, True) is y and llgrad.feature_dropout_(y, 0.2, True) is y
    z = llgrad.feature_dropout(llgrad.ones(50, 40, 3), 0.5, True)
    per_channel = z.numpy().reshape(50, 40, 3)
    assert (per_channel == per_channel[..., :1]).all()


W = R.standard_normal((10, 3)).astype(np.float32)


@pytest.mark.parametrize("args", [
    (0,), (1,), (2,), (0, False, "psw"), (1, False, None, True), (1, False, None, False, 4),
    (2, False, None, False, 4),
])
def test_embedding_bag(args):
    def fn(t, w):
        a = list(args)
        if len(a) > 2 and a[2] == "psw":
            a[2] = t.tensor(np.linspace(0.1, 1, 5), dtype=t.float32)
        return t.embedding_bag(w, t.tensor([1, 2, 4, 5, 4]), t.tensor([0, 2, 2]), False, *a)
    # (with include_last_offset, torch 2.13's backward counts the indices past the last offset
    # into the last bag, which its forward leaves out: llgrad's gradient is its forward's)
    same(fn, W, names=False, grad=not (len(args) > 3 and args[3]))


def test_ctc_loss_top_level():
    lp = np.log(R.dirichlet(np.ones(4), size=(6, 2))).astype(np.float32)
    for red in ((), (0, 0), (0, 1), (0, 2)):
        same(lambda t, lp: t.ctc_loss(lp, t.tensor([[1, 2], [1, 1]]), [6, 5], [2, 2], *red), lp,
             rtol=1e-5, atol=1e-5, names=False)


@pytest.mark.parametrize("fn", [
    lambda t, x, h, c, wi, wh, b: t.lstm_cell(x, (h, c), wi[:20], wh[:20], b[:20], b[20:40]),
    lambda t, x, h, c, wi, wh, b: t.lstm_cell(x, (h, c), wi[:20], wh[:20]),
    lambda t, x, h, c, wi, wh, b: t.gru_cell(x, h, wi[:15], wh[:15], b[:15], b[15:30]),
    lambda t, x, h, c, wi, wh, b: t.gru_cell(x, h, wi[:15], wh[:15]),
    lambda t, x, h, c, wi, wh, b: t.rnn_tanh_cell(x, h, wi[:5], wh[:5], b[:5], b[5:10]),
    lambda t, x, h, c, wi, wh, b: t.rnn_relu_cell(x, h, wi[:5], wh[:5]),
    lambda t, x, h, c, wi, wh, b: t.lstm_cell(x, h, wi[:20], wh[:20]),
    lambda t, x, h, c, wi, wh, b: t.gru_cell(x, h, wi[:5], wh[:15]),
])
def test_cells(fn):
    arrays = [R.standard_normal(s).astype(np.float32)
              for s in ((3, 4), (3, 5), (3, 5), (20, 4), (20, 5), (40,))]
    same(fn, *arrays, rtol=1e-5, atol=1e-5, names=False)


def test_sym_helpers():
    for name, args in (("sym_int", (3.7,)), ("sym_int", (-3.7,)), ("sym_float", (3,)),
                       ("sym_max", (2, 3.5)), ("sym_max", (2.0, 3)), ("sym_max", (2, 3)),
                       ("sym_min", (2, 1)), ("sym_min", (np.float32(2), 5)),
                       ("sym_sqrt", (4,)),
                       ("sym_sum", ([1, 2, 3],)), ("sym_sum", (1, 2.5)), ("sym_sum", ([],)),
                       ("sym_ite", (True, 1, 2)), ("sym_ite", (False, 1.0, 2.0))):
        want = getattr(torch, name)(*args)
        got = getattr(llgrad, name)(*args)
        assert got == want and type(got) is type(want), (name, args)
    for name, args in (("sym_int", ("a",)), ("sym_max", ("a", 1)), ("sym_ite", (1, 1, 2)),
                       ("sym_ite", (True, 1, 2.0))):
        with pytest.raises(Exception) as want:
            getattr(torch, name)(*args)
        with pytest.raises(want.type):
            getattr(llgrad, name)(*args)
    for name, args, kwargs in (("sym_constrain_range", (5,), dict(min=0, max=3)),
                               ("sym_constrain_range", (5,), dict(min=0, max=10)),
                               ("sym_constrain_range", (5,), {}),
                               ("sym_constrain_range_for_size", (5,), {}),
                               ("sym_constrain_range_for_size", (-1,), {}),
                               ("sym_constrain_range_for_size", (5,), dict(min=6)),
                               ("sym_fresh_size", (5,), {}), ("is_vulkan_available", (), {})):
        try:
            want = ("ok", getattr(torch, name)(*args, **kwargs))
        except RuntimeError as e:
            want = ("raise", str(e))
        try:
            got = ("ok", getattr(llgrad, name)(*args, **kwargs))
        except RuntimeError as e:
            got = ("raise", str(e))
        assert got == want, name
    # (torch.sym_not imports sympy: seconds; its answer is `not a`)
    assert llgrad.sym_not(True) is False and llgrad.sym_not(0) is True
    for cls in ("SymInt", "SymFloat", "SymBool"):
        assert isinstance(getattr(llgrad, cls), type)
        assert not isinstance(3, getattr(llgrad, cls))


def test_autocast_state():
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        assert llgrad.get_autocast_cpu_dtype() is llgrad.bfloat16
        assert llgrad.is_autocast_cpu_enabled() is False
    assert [str(w.message) for w in rec] == [
        "torch.get_autocast_cpu_dtype() is deprecated. Please use "
        "torch.get_autocast_dtype('cpu') instead.",
        "torch.is_autocast_cpu_enabled() is deprecated. Please use "
        "torch.is_autocast_enabled('cpu') instead."]
    assert all(w.category is DeprecationWarning for w in rec)
    llgrad.set_autocast_dtype("cuda", llgrad.float32)
    try:
        assert llgrad.get_autocast_dtype("cuda") is llgrad.float32
    finally:
        llgrad.set_autocast_dtype("cuda", llgrad.float16)
    llgrad.set_autocast_enabled(True)
    try:
        assert llgrad.is_autocast_enabled() and llgrad.is_autocast_enabled("cuda")
        assert not llgrad.is_autocast_enabled("cpu")
    finally:
        llgrad.set_autocast_enabled(False)
    assert not llgrad.is_autocast_enabled()
    llgrad.set_autocast_enabled("cpu", True)
    try:
        assert (llgrad.ones(2, 2) @ llgrad.ones(2, 2)).dtype is llgrad.bfloat16
    finally:
        llgrad.set_autocast_enabled("cpu", False)
    assert (llgrad.ones(2, 2) @ llgrad.ones(2, 2)).dtype is llgrad.float32
    assert llgrad.is_autocast_cache_enabled() is torch.is_autocast_cache_enabled() is True
    llgrad.set_autocast_cache_enabled(False)
    assert llgrad.is_autocast_cache_enabled() is False
    llgrad.set_autocast_cache_enabled(True)
    assert llgrad.clear_autocast_cache() is None
    with pytest.raises(TypeError, match=r"set_autocast_dtype\(\): argument 'device_type' "
                                        r"\(position 1\) must be str, not float"):
        llgrad.set_autocast_dtype(1.5, llgrad.float16)


def test_flags_and_classes():
    for name in ("has_lapack", "has_spectral"):
        assert getattr(llgrad, name) is getattr(torch, name) is True
    assert llgrad.GradScaler is llgrad.amp.GradScaler
    assert llgrad.OutOfMemoryError is llgrad.cuda.OutOfMemoryError
    assert issubclass(llgrad.OutOfMemoryError, RuntimeError)


@pytest.mark.parametrize("args", [((2, 3, 4), (0, 2, 1)), ((2, 3, 4), (2, 1, 0)), ((5,), (0,)),
                                  ((2, 3, 4), (0, 1)), ((2, 3, 4), (0, 1, 1)),
                                  ((2, 3), (0, 3))])
def test_empty_permuted(args):
    same(lambda t: (lambda e: (tuple(e.shape), e.stride(), str(e.dtype).split('.')[-1]))(
        t.empty_permuted(*args, dtype=t.float64)), grad=False)
    e = llgrad.empty_permuted((2, 3), (1, 0), requires_grad=True)
    assert e.requires_grad and e.is_leaf


def test_wide_unsigned_dtype_names():
    for name in ("uint16", "uint32", "uint64"):
        ours, theirs = getattr(llgrad, name), getattr(torch, name)
        assert repr(ours) == repr(theirs).replace("torch", "llgrad")
        assert (ours.is_floating_point, ours.is_signed, ours.itemsize) == \
            (theirs.is_floating_point, theirs.is_signed, theirs.itemsize)
        assert repr(llgrad.iinfo(ours)) == repr(torch.iinfo(theirs))
        assert pickle.loads(pickle.dumps(ours)) is ours
        # (llgrad has no tensors of them: PyTorch's partial op support is not reproduced)
        with pytest.raises(NotImplementedError, match=f"llgrad has no {name} tensors"):
            llgrad.zeros(2, dtype=ours)
        with pytest.raises(NotImplementedError, match=f"llgrad has no {name} tensors"):
            llgrad.ones(2).to(ours)


@pytest.mark.parametrize("kind, layers, bidirectional, bias, batch_first", [
    ("LSTM", 2, True, True, False), ("LSTM", 1, False, False, True),
    ("GRU", 2, False, True, True), ("GRU", 1, True, False, False),
    ("RNN", 2, True, True, False), ("RNN_relu", 1, False, True, True),
])
def test_full_recurrent_functions(kind, layers, bidirectional, bias, batch_first):
    torch.manual_seed(0)
    cls = torch.nn.RNN if kind.startswith("RNN") else getattr(torch.nn, kind)
    extra = {"nonlinearity": "relu"} if kind == "RNN_relu" else {}
    m = cls(4, 5, num_layers=layers, bidirectional=bidirectional, bias=bias,
            batch_first=batch_first, **extra)
    dirs = 2 if bidirectional else 1
    x = R.standard_normal((2, 3, 4)).astype(np.float32)
    h = R.standard_normal((layers * dirs, 3, 5)).astype(np.float32)
    if batch_first:
        x = x.transpose(1, 0, 2).copy()
    weights = [w.detach().numpy() for w in m._flat_weights]
    name = {"LSTM": "lstm", "GRU": "gru", "RNN": "rnn_tanh", "RNN_relu": "rnn_relu"}[kind]

    def fn(t, x, h, *ws):
        hx = (h, h * 0.5) if name == "lstm" else h
        return getattr(t, name)(x, hx, list(ws), bias, layers, 0.0, False, bidirectional,
                                batch_first)
    same(fn, x, h, *weights, rtol=1e-5, atol=1e-5, names=False)
