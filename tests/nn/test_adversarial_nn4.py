"""llgrad.nn against PyTorch, fourth sweep: max_pool2d's padding check, grad_fn names of
max_unpool / grid_sample / channel_shuffle / rrelu / interpolate, Embedding's
scale_grad_by_freq through F.embedding, hardswish's gradient at its kinks, PReLU on 1-D
inputs, the batch-first RNN/GRU output, area interpolation of 5-D inputs, unfold/fold and
unflatten messages, Module registration checks, state_dict metadata, hooks and
load_state_dict (assign, non-tensors, BatchNorm without num_batches_tracked), dtype checks
of activations, norms, convolutions and embedding, empty-batch BatchNorm."""
import io
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

LIBS = (torch, llgrad)


def _np(t):
    return t.detach().numpy()


def _name(t):
    return None if t.grad_fn is None else type(t.grad_fn).__name__


def _raises_like_torch(f):
    """f(lib) raises in PyTorch; llgrad raises the same type with the same first line (the
    library's name aside)."""
    with pytest.raises(Exception) as want:
        f(torch)
    with pytest.raises(type(want.value)) as got:
        f(llgrad)
    first = lambda e: str(e.value).split("\n")[0].replace("torch", "llgrad")  # noqa: E731
    assert first(got) == first(want)


def _rnd(*shape, seed=0):
    return np.random.RandomState(seed).randn(*shape).astype(np.float32)


def _pair(make):
    """make(lib) for both libraries, llgrad's loaded with PyTorch's seeded state."""
    torch.manual_seed(0)
    tm = make(torch)
    lm = make(llgrad)
    lm.load_state_dict({k: llgrad.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    return tm, lm


@pytest.mark.parametrize("k,p,d", [(3, 2, 1), ((3, 5), (1, 3), 1), (3, 2, (1, 2)),
                                   (3, (2, 2), (2, 1)), (2, 2, 1)])
def test_max_pool2d_padding_over_half_the_effective_kernel(k, p, d):
    _raises_like_torch(lambda L: L.nn.functional.max_pool2d(L.ones(1, 1, 9, 8), k, padding=p,
                                                            dilation=d))


@pytest.mark.parametrize("dim", [1, 2, 3])
def test_max_unpool_grad_fn_and_values(dim):
    x0 = _rnd(*((2, 3) + (6,) * dim))
    res = []
    for L in LIBS:
        x = L.tensor(x0, requires_grad=True)
        o, i = getattr(L.nn.functional, f"max_pool{dim}d")(x, 2, return_indices=True)
        u = getattr(L.nn.functional, f"max_unpool{dim}d")(o, i, 2)
        (u * L.tensor(_rnd(*u.shape, seed=1))).sum().backward()
        res.append((_name(u), _np(u), _np(x.grad)))
    assert res[0][0] == res[1][0]
    for a, b in zip(res[0][1:], res[1][1:]):
        np.testing.assert_allclose(b, a, rtol=1e-6)


def test_embedding_scale_grad_by_freq():
    idx = np.array([[0, 2, 4, 2], [1, 0, 2, 3]])
    w0 = _rnd(5, 3)
    res = []
    for L in LIBS:
        w = L.tensor(w0, requires_grad=True)
        o = L.nn.functional.embedding(L.tensor(idx), w, padding_idx=0, scale_grad_by_freq=True)
        (o * L.tensor(_rnd(*o.shape, seed=1))).sum().backward()
        m = L.nn.Embedding(5, 3, scale_grad_by_freq=True)
        mo = m(L.tensor(idx))
        mo.sum().backward()
        res.append((_name(o), _name(mo), _np(w.grad), _np(m.weight.grad)))
    assert res[0][:2] == res[1][:2] == ("EmbeddingBackward0",) * 2
    for a, b in zip(res[0][2:], res[1][2:]):
        np.testing.assert_allclose(b, a, rtol=1e-6)


@pytest.mark.slow
def test_embedding_scale_grad_by_freq_compiled():
    idx = llgrad.tensor([[0, 2, 2, 1], [4, 0, 0, 0]])
    m = llgrad.nn.Embedding(5, 3, scale_grad_by_freq=True)

    def step(i):
        m.weight.grad = None
        (m(i) * llgrad.arange(3.)).sum().backward()
        return m.weight.grad.clone()

    want = step(idx)
    compiled = llgrad.compile(step)
    for _ in range(2):
        np.testing.assert_allclose(compiled(idx).numpy(), want.numpy())
    tm = torch.nn.Embedding(5, 3, scale_grad_by_freq=True)
    (tm(torch.tensor(idx.numpy())) * torch.arange(3.)).sum().backward()
    np.testing.assert_allclose(want.numpy(), tm.weight.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("inplace", [False, True])
def test_rrelu_grad_fn_names(training, inplace):
    names = []
    for L in LIBS:
        x = L.tensor(_rnd(4), requires_grad=True) * 1
        names.append(_name(L.nn.functional.rrelu(x, training=training, inplace=inplace)))
    assert names[0] == names[1]


def test_hardswish_gradient_at_its_kinks():
    grads = []
    for L in LIBS:
        x = L.tensor([-3., 3., -2.9, 2.9, -3.1, 3.1, 0.], requires_grad=True)
        L.nn.functional.hardswish(x).sum().backward()
        grads.append(_np(x.grad))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6)


def test_prelu_on_a_1d_input_has_one_channel():
    _raises_like_torch(lambda L: L.nn.functional.prelu(L.ones(3), L.ones(3)))
    _raises_like_torch(lambda L: L.nn.PReLU(3)(L.ones(3)))


@pytest.mark.parametrize("mode", ["RNN", "GRU"])
def test_batch_first_output_is_transposed_as_torch(mode):
    tm, lm = _pair(lambda L: getattr(L.nn, mode)(4, 3, num_layers=2, bidirectional=True,
                                                 batch_first=True))
    x0 = _rnd(2, 5, 4)
    res = []
    for L, m in ((torch, tm), (llgrad, lm)):
        x = L.tensor(x0, requires_grad=True)
        out = m(x)[0]
        out.sin().sum().backward()
        res.append((_name(out), out._base is None, tuple(out.stride()), _np(out), _np(x.grad)))
    assert res[0][:3] == res[1][:3]
    for a, b in zip(res[0][3:], res[1][3:]):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_gru_batch_first_compiled_matches_eager():
    llgrad.manual_seed(0)
    m = llgrad.nn.GRU(4, 3, batch_first=True)
    x = llgrad.randn(2, 5, 4)

    def step(x):
        m.zero_grad()
        out, h = m(x)
        (out.sin().sum() + h.sum()).backward()
        return out, [p.grad.clone() for p in m.parameters()]

    want_out, want_g = step(x)
    compiled = llgrad.compile(step)
    for _ in range(2):
        out, g = compiled(x)
        np.testing.assert_allclose(out.detach().numpy(), want_out.detach().numpy(), rtol=1e-5,
                                   atol=1e-7)
        for a, b in zip(g, want_g):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_interpolate_nearest_to_the_same_size_is_a_new_tensor(mode):
    res = []
    for L in LIBS:
        x = L.tensor(_rnd(1, 2, 3, 4, 5), requires_grad=True)
        o = L.nn.functional.interpolate(x, size=(3, 4, 5), mode=mode)
        res.append((o is x, _name(o)))
    assert res[0] == res[1]


@pytest.mark.parametrize("kw", [{"size": 4}, {"scale_factor": 1.5}, {"size": (2, 3, 7)}])
def test_interpolate_area_5d(kw):
    x0 = _rnd(1, 2, 3, 4, 5)
    res = []
    for L in LIBS:
        x = L.tensor(x0, requires_grad=True)
        o = L.nn.functional.interpolate(x, mode="area", **kw)
        (o * o).sum().backward()
        res.append((_np(o), _np(x.grad)))
    for a, b in zip(*res):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_grid_sample_and_channel_shuffle_grad_fn_names():
    for dims in (2, 3):
        names = []
        for L in LIBS:
            x = L.tensor(_rnd(*((1, 1) + (4,) * dims)), requires_grad=True)
            g = L.tensor(np.tanh(_rnd(*((1,) + (2,) * dims + (dims,)), seed=1)))
            names.append(_name(L.nn.functional.grid_sample(x, g, align_corners=True)))
        assert names[0] == names[1]
    names = [_name(L.nn.ChannelShuffle(2)(L.ones(2, 4, 3, requires_grad=True))) for L in LIBS]
    assert names[0] == names[1]


@pytest.mark.parametrize("shape", [(6, 7), (7,), (), (1, 2, 3, 4, 5), (1, 0, 4, 4)])
def test_unfold_input_checks(shape):
    _raises_like_torch(lambda L: L.nn.functional.unfold(L.ones(shape), 2))


@pytest.mark.parametrize("shape", [(7,), (1, 2, 3, 4), ()])
def test_fold_input_checks(shape):
    _raises_like_torch(lambda L: L.nn.functional.fold(L.ones(shape), (3, 3), 2))


@pytest.mark.parametrize("sizes", [(2, 2), (2, -1), (-1, -1), ()])
def test_unflatten_messages(sizes):
    _raises_like_torch(lambda L: L.ones(2, 3).unflatten(-1, sizes))
    if sizes:
        _raises_like_torch(lambda L: L.nn.Unflatten(1, sizes)(L.ones(2, 3)))


@pytest.mark.parametrize("case", ["param_empty", "param_dot", "param_int_name", "param_exists",
                                  "param_tensor", "module_empty", "module_dot", "module_int",
                                  "module_exists", "module_not_module", "assign_tensor",
                                  "buffer_int"])
def test_module_registration_checks(case):
    def f(L):
        m = L.nn.Linear(2, 2)
        {"param_empty": lambda: m.register_parameter("", None),
         "param_dot": lambda: m.register_parameter("a.b", None),
         "param_int_name": lambda: m.register_parameter(3, None),
         "param_exists": lambda: m.register_parameter("in_features", None),
         "param_tensor": lambda: m.register_parameter("q", L.ones(2)),
         "module_empty": lambda: m.add_module("", L.nn.ReLU()),
         "module_dot": lambda: m.add_module("a.b", None),
         "module_int": lambda: m.add_module(3, None),
         "module_exists": lambda: m.register_module("weight", None),
         "module_not_module": lambda: m.add_module("x", 3),
         "assign_tensor": lambda: setattr(m, "weight", L.ones(2, 2)),
         "buffer_int": lambda: m.register_buffer("x", 3)}[case]()
    _raises_like_torch(f)


def _net(L):
    return L.nn.Sequential(L.nn.Linear(3, 4), L.nn.BatchNorm1d(4), L.nn.Sequential(
        L.nn.Linear(4, 2)))


def test_state_dict_metadata_and_positional_args():
    for L in LIBS:
        m = _net(L)
        assert dict(m.state_dict()._metadata) == {"": {"version": 1}, "0": {"version": 1},
                                                   "1": {"version": 2}, "2": {"version": 1},
                                                   "2.0": {"version": 1}}
        assert list(m.state_dict(prefix="p.")._metadata) == ["p", "p.0", "p.1", "p.2", "p.2.0"]
        with pytest.warns(FutureWarning, match="Positional args are being deprecated"):
            assert list(m.state_dict(None, "a.")) == ["a." + k for k in m.state_dict()]


def test_load_plain_dict_without_num_batches_tracked():
    """A dict without _metadata is an old checkpoint: BatchNorm keeps its count; a state
    dict that has PyTorch's _metadata reports the missing key."""
    for L in LIBS:
        m = _net(L)
        m[1].num_batches_tracked.fill_(7)
        sd = m.state_dict()
        del sd["1.num_batches_tracked"]
        r = m.load_state_dict({k: v for k, v in sd.items()})
        assert (r.missing_keys, r.unexpected_keys) == ([], [])
        assert int(m[1].num_batches_tracked) == 7
        with pytest.raises(RuntimeError, match='Missing key.*"1.num_batches_tracked"'):
            m.load_state_dict(sd)


def test_load_state_dict_errors_and_key_order():
    _raises_like_torch(lambda L: L.nn.Linear(3, 2).load_state_dict([("weight", L.ones(2, 3))]))
    _raises_like_torch(lambda L: L.nn.Linear(3, 2).load_state_dict(
        {"weight": L.ones(2, 3), "bias": [0., 0.]}))
    keys = []
    for L in LIBS:
        m = L.nn.Sequential(L.nn.Linear(3, 2), L.nn.Linear(2, 2))
        r = m.load_state_dict({"1.zz": L.ones(1), "zz": L.ones(1), "0.weight": L.ones(2, 3),
                               "2.weight": L.ones(1)}, strict=False)
        keys.append((r.unexpected_keys, r.missing_keys))
    assert keys[0] == keys[1]


def test_load_state_dict_assign():
    for L in LIBS:
        m = L.nn.Linear(3, 2)
        m.weight.requires_grad_(False)
        w, b = L.ones(2, 3), L.zeros(2, dtype=L.float64)
        m.load_state_dict({"weight": w, "bias": b}, assign=True)
        assert type(m.weight).__name__ == "Parameter" and not m.weight.requires_grad
        assert m.bias.requires_grad and m.bias.dtype == L.float64
        np.testing.assert_array_equal(_np(m.weight), np.ones((2, 3)))


def test_state_dict_hooks():
    logs = []
    for L in LIBS:
        log = []
        m = L.nn.Sequential(L.nn.Linear(3, 2))
        m[0].register_state_dict_pre_hook(lambda mod, prefix, kv: log.append(("pre", prefix)))
        m.register_state_dict_post_hook(lambda mod, sd, prefix, meta: log.append(
            ("post", prefix, sorted(sd))))
        m[0].register_load_state_dict_pre_hook(lambda mod, sd, prefix, *a: log.append(
            ("lpre", prefix, sorted(sd))))
        m.register_load_state_dict_post_hook(lambda mod, keys: log.append(
            ("lpost", list(keys.missing_keys))) or keys.missing_keys.clear())
        sd = m.state_dict()
        r = m.load_state_dict({"0.weight": sd["0.weight"]})
        log.append(list(r.missing_keys))
        logs.append(log)
    assert logs[0] == logs[1]


def test_module_to_converts_gradients():
    for L in LIBS:
        m = L.nn.Linear(3, 2)
        m.weight.grad = L.ones(2, 3)
        m.double()
        assert m.weight.grad.dtype == L.float64 and m.bias.grad is None


@pytest.mark.parametrize("name", ["elu", "selu", "celu", "hardsigmoid", "glu", "softshrink",
                                  "hardshrink", "mish", "silu", "gelu", "softplus",
                                  "leaky_relu", "logsigmoid", "hardswish"])
@pytest.mark.parametrize("dtype", ["int64", "bool"])
def test_activations_refuse_integers(name, dtype):
    _raises_like_torch(lambda L: getattr(L.nn.functional, name)(
        L.ones(2, 2, dtype=getattr(L, dtype))))


def test_activations_that_take_integers_still_do():
    for name in ("relu", "hardtanh", "relu6", "tanhshrink", "softsign"):
        a, b = (getattr(L.nn.functional, name)(L.tensor([-2, 3])) for L in LIBS)
        assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1]
        np.testing.assert_allclose(_np(b), _np(a))


@pytest.mark.parametrize("case", ["ln_f32_w64", "ln_f64_w32", "ln_f64_b32", "ln_w32_b64",
                                  "bn_f64_eval", "bn_f64_train", "bn_f32_stats64",
                                  "gn_f64_w32", "gn_f32_w64"])
def test_norms_refuse_mixed_dtypes(case):
    def f(L):
        F, d = L.nn.functional, L.float64
        {"ln_f32_w64": lambda: F.layer_norm(L.ones(2, 3), (3,), L.ones(3, dtype=d)),
         "ln_f64_w32": lambda: F.layer_norm(L.ones(2, 3, dtype=d), (3,), L.ones(3)),
         "ln_f64_b32": lambda: F.layer_norm(L.ones(2, 3, dtype=d), (3,), None, L.ones(3)),
         "ln_w32_b64": lambda: F.layer_norm(L.ones(2, 3), (3,), L.ones(3), L.ones(3, dtype=d)),
         "bn_f64_eval": lambda: F.batch_norm(L.ones(2, 3, dtype=d), L.zeros(3), L.ones(3)),
         "bn_f64_train": lambda: F.batch_norm(L.ones(2, 3, dtype=d), None, None, L.ones(3),
                                              training=True),
         "bn_f32_stats64": lambda: F.batch_norm(L.ones(2, 3), L.zeros(3, dtype=d),
                                                L.ones(3, dtype=d)),
         "gn_f64_w32": lambda: F.group_norm(L.ones(2, 4, dtype=d), 2, L.ones(4)),
         "gn_f32_w64": lambda: F.group_norm(L.ones(2, 4), 2, L.ones(4, dtype=d))}[case]()
    _raises_like_torch(f)


@pytest.mark.parametrize("case", ["conv2d_bias", "conv1d_bias", "convt2d_weight",
                                  "convt1d_weight", "convt2d_weight_f32"])
def test_convolution_dtype_checks(case):
    def f(L):
        F, d = L.nn.functional, L.float64
        {"conv2d_bias": lambda: F.conv2d(L.ones(1, 1, 3, 3, dtype=d), L.ones(1, 1, 2, 2),
                                         L.ones(1)),
         "conv1d_bias": lambda: F.conv1d(L.ones(1, 1, 3, dtype=d), L.ones(1, 1, 2), L.ones(1)),
         "convt2d_weight": lambda: F.conv_transpose2d(L.ones(1, 1, 3, 3, dtype=d),
                                                      L.ones(1, 1, 2, 2), L.ones(1)),
         "convt1d_weight": lambda: F.conv_transpose1d(L.ones(1, 1, 3, dtype=d),
                                                      L.ones(1, 1, 2)),
         "convt2d_weight_f32": lambda: F.conv_transpose2d(L.ones(1, 1, 3, 3),
                                                          L.ones(1, 1, 2, 2, dtype=d))}[case]()
    _raises_like_torch(f)


@pytest.mark.parametrize("fn", ["adaptive_avg_pool2d", "adaptive_max_pool2d",
                                "adaptive_avg_pool1d", "adaptive_max_pool1d"])
def test_adaptive_pools_refuse_integers(fn):
    shape = (1, 2, 4, 4) if fn.endswith("2d") else (1, 2, 4)
    _raises_like_torch(lambda L: getattr(L.nn.functional, fn)(
        L.ones(shape, dtype=L.int64), 2))


def test_embedding_refuses_uint8_indices():
    _raises_like_torch(lambda L: L.nn.Embedding(4, 2)(L.tensor([[0, 1]], dtype=L.uint8)))


def test_batch_norm_of_an_empty_batch():
    res = []
    for L in LIBS:
        m = L.nn.BatchNorm2d(3)
        with L.no_grad():
            m.weight.fill_(2.)
        x = L.zeros(0, 3, 4, 4, requires_grad=True)
        o = m(x)
        o.sum().backward()
        res.append((tuple(o.shape), _name(o), _np(m.running_mean).tolist(),
                    int(m.num_batches_tracked), tuple(x.grad.shape), _np(m.weight.grad).tolist()))
    assert res[0] == res[1]
    _raises_like_torch(lambda L: L.nn.BatchNorm1d(3)(L.ones(1, 3)))


def test_batch_norm_eval_without_statistics():
    _raises_like_torch(lambda L: L.nn.functional.batch_norm(L.ones(2, 3), None, L.ones(3)))
    _raises_like_torch(lambda L: L.nn.functional.batch_norm(L.ones(2, 3), L.ones(3), None))


def test_log_softmax_implicit_dim_warning_names_log_softmax():
    msgs = []
    for L in LIBS:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            L.nn.functional.log_softmax(L.ones(2, 3))
        msgs.append([str(x.message) for x in w])
    assert msgs[0] == msgs[1]


def test_pad_sequence_padding_side_error():
    _raises_like_torch(lambda L: L.nn.utils.rnn.pad_sequence([L.ones(2)], padding_side="mid"))


@pytest.mark.parametrize("ishape,tshape,dtype,kw", [
    ((3, 5), (3, 4), "float32", {}), ((3, 5), (3, 4), "int64", {}),
    ((3, 5, 2), (3, 3), "int64", {}), ((3, 5, 2), (3, 3), "float32", {}),
    ((3, 5, 2, 2), (3, 2, 3), "int64", {}), ((3, 5, 2, 2), (3, 2), "int64", {}),
    ((3, 5, 2), (3, 2, 1), "int64", {}), ((3, 5, 2, 2, 2), (3, 2, 2, 3), "int64", {}),
    ((3, 5, 2), (3, 3), "int64", {"reduction": "none"}),
    ((3, 5, 2, 2, 2), (3, 2, 2, 3), "int64", {"reduction": "none"}),
    ((3, 5, 2), (3, 3), "int64", {"label_smoothing": 0.1}),
    ((3, 5, 2), (2, 2), "int64", {})])
def test_cross_entropy_target_shape_checks(ishape, tshape, dtype, kw):
    _raises_like_torch(lambda L: L.nn.functional.cross_entropy(
        L.ones(ishape), L.zeros(tshape, dtype=getattr(L, dtype)), **kw))
    kw.pop("label_smoothing", None)
    _raises_like_torch(lambda L: L.nn.functional.nll_loss(
        L.ones(ishape), L.zeros(tshape, dtype=getattr(L, dtype)), **kw))


@pytest.mark.parametrize("kind", ["linear", "seq", "tanh", "bilinear"])
def test_non_full_backward_hook(kind):
    """register_backward_hook: a hook of the node of the module's output (grad_input are
    that node's input gradients), its return value replacing them, PyTorch's warning."""
    res = []
    for L in LIBS:
        torch.manual_seed(0)
        make = {"linear": lambda: L.nn.Linear(3, 2),
                "seq": lambda: L.nn.Sequential(L.nn.Linear(3, 2), L.nn.Tanh()),
                "tanh": lambda: L.nn.Tanh(), "bilinear": lambda: L.nn.Bilinear(3, 3, 2)}[kind]
        m = make()
        with L.no_grad():
            for i, p in enumerate(m.parameters()):
                p.copy_(L.tensor(_rnd(*p.shape, seed=i)))
        ins = [L.tensor(_rnd(4, 3), requires_grad=True)] + \
            ([L.tensor(_rnd(4, 3, seed=1))] if kind == "bilinear" else [])
        log = []

        def hook(mod, gi, go):
            # (copies: PyTorch's AccumulateGrad may adopt a gradient as .grad and add to it)
            log.append(([None if g is None else _np(g).copy() for g in gi],
                        [_np(g).copy() for g in go]))
            return (gi[0] * 2,) if kind == "tanh" else None

        handle = m.register_backward_hook(hook)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = m(*ins)
        (out * L.tensor(_rnd(*out.shape, seed=5))).sum().backward()
        handle.remove()
        m(*ins).sum().backward()
        res.append((log, _np(ins[0].grad), [(x.category, str(x.message)) for x in w]))
    (tlog, tgrad, twarn), (llog, lgrad, lwarn) = res
    assert lwarn == twarn
    assert len(tlog) == len(llog) == 1
    for a, b in zip(tlog[0][0] + tlog[0][1], llog[0][0] + llog[0][1]):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lgrad, tgrad, rtol=1e-5, atol=1e-6)


def test_full_and_non_full_backward_hooks_exclude_each_other():
    def full_then_old(L):
        m = L.nn.Linear(2, 2)
        m.register_full_backward_hook(lambda *a: None)
        m.register_backward_hook(lambda *a: None)

    def old_then_full(L):
        m = L.nn.Linear(2, 2)
        m.register_backward_hook(lambda *a: None)
        m.register_full_backward_hook(lambda *a: None)

    _raises_like_torch(full_then_old)
    _raises_like_torch(old_then_full)


def test_state_dict_metadata_survives_save_and_load_both_ways():
    m = llgrad.nn.Sequential(llgrad.nn.Linear(2, 2), llgrad.nn.BatchNorm1d(2))
    tm = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    buf = io.BytesIO()
    llgrad.save(m.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf)
    assert sd._metadata == tm.state_dict()._metadata
    del sd["1.num_batches_tracked"]
    with pytest.raises(RuntimeError, match="num_batches_tracked"):
        tm.load_state_dict(sd)        # (the metadata says version 2: the key is missing)
    buf = io.BytesIO()
    torch.save(tm.state_dict(), buf)
    buf.seek(0)
    sd = llgrad.load(buf)
    assert sd._metadata == m.state_dict()._metadata
    del sd["1.num_batches_tracked"]
    with pytest.raises(RuntimeError, match="num_batches_tracked"):
        m.load_state_dict(sd)


def test_sync_batch_norm_in_one_process():
    res = []
    for L in LIBS:
        torch.manual_seed(0)
        net = L.nn.Sequential(L.nn.Conv2d(1, 3, 3), L.nn.BatchNorm2d(3), L.nn.Sequential(
            L.nn.InstanceNorm2d(3, affine=True), L.nn.BatchNorm2d(3, affine=False)))
        with L.no_grad():
            for i, p in enumerate(net.parameters()):
                p.copy_(L.tensor(_rnd(*p.shape, seed=i)))
        w = net[1].weight
        sync = L.nn.SyncBatchNorm.convert_sync_batchnorm(net)
        x = L.tensor(_rnd(2, 1, 5, 5), requires_grad=True)
        out = sync(x)
        out.sum().backward()
        res.append((repr(sync), sync is net, sync[1].weight is w, list(sync.state_dict()),
                    _np(out), _np(x.grad), _np(sync[1].running_var), _name(out)))
    (*a, ta, tg, tv, tn), (*b, la, lg, lv, ln) = res
    assert a == b and tn == ln
    for u, v in ((ta, la), (tg, lg), (tv, lv)):
        np.testing.assert_allclose(v, u, rtol=1e-4, atol=1e-5)
    _raises_like_torch(lambda L: L.nn.SyncBatchNorm(3)(L.ones(3)))
