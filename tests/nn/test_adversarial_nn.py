"""llgrad.nn against PyTorch on the corners an adversarial tester probes: index checks of
embedding, target dtypes and shapes of the classification losses, the dtype rules of
binary_cross_entropy_with_logits / huber_loss / soft_margin_loss, bicubic interpolation,
shared submodules in state_dict, load_state_dict's messages and Module's path lookups."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

LIBS = (torch, llgrad)


def _np(t):
    return t.detach().numpy()


def _raises_like_torch(f):
    """f(lib) raises in PyTorch; llgrad raises the same type with the same message."""
    with pytest.raises(Exception) as want:
        f(torch)
    with pytest.raises(type(want.value)) as got:
        f(llgrad)
    assert str(got.value).split("\n")[0] == str(want.value).split("\n")[0]


@pytest.mark.parametrize("idx", [[-1, 0], [1, -3]])
def test_embedding_index_out_of_range(idx):
    _raises_like_torch(lambda L: L.nn.functional.embedding(L.tensor(idx), L.ones(3, 2)))
    _raises_like_torch(lambda L: L.nn.Embedding(3, 2)(L.tensor([idx])))


@pytest.mark.parametrize("case", ["int32", "float_n", "float_kdim", "nll_int32", "nll_1d_int32",
                                  "prob_long", "prob_ignore", "smoothing_gt1"])
def test_cross_entropy_target_checks(case):
    F = lambda L: L.nn.functional  # noqa: E731
    f = {
        "int32": lambda L: F(L).cross_entropy(L.ones(2, 3), L.tensor([0, 1], dtype=L.int32)),
        "float_n": lambda L: F(L).cross_entropy(L.ones(2, 3), L.tensor([0., 1.])),
        "float_kdim": lambda L: F(L).cross_entropy(L.ones(2, 3, 4), L.ones(2, 4)),
        "nll_int32": lambda L: F(L).nll_loss(L.ones(2, 3), L.tensor([0, 1], dtype=L.int32)),
        "nll_1d_int32": lambda L: F(L).nll_loss(L.ones(3), L.tensor(1, dtype=L.int32)),
        "prob_long": lambda L: F(L).cross_entropy(L.ones(2, 3), L.ones(2, 3, dtype=L.int64)),
        "prob_ignore": lambda L: F(L).cross_entropy(L.ones(2, 3), L.ones(2, 3) / 3,
                                                    ignore_index=1),
        "smoothing_gt1": lambda L: F(L).cross_entropy(L.ones(2, 3), L.tensor([0, 1]),
                                                      label_smoothing=1.5),
    }[case]
    _raises_like_torch(f)


def test_cross_entropy_negative_smoothing_and_batch_order():
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 3
    got, want = (L.nn.functional.cross_entropy(L.tensor(x), L.tensor([0, 2]),
                                               label_smoothing=-0.2) for L in LIBS)
    np.testing.assert_allclose(_np(got), _np(want), rtol=1e-6)
    # a batch mismatch is reported before the target's dtype, as in PyTorch
    _raises_like_torch(lambda L: L.nn.functional.cross_entropy(
        L.ones(2, 3), L.tensor([0., 1., 1.])))


def test_nll_weight_dtype_must_match():
    _raises_like_torch(lambda L: L.nn.functional.nll_loss(
        L.ones(2, 3), L.tensor([0, 2]), weight=L.ones(3, dtype=L.float64)))
    _raises_like_torch(lambda L: L.nn.functional.cross_entropy(
        L.ones(2, 3, dtype=L.float64), L.tensor([0, 2]), weight=L.ones(3)))


@pytest.mark.parametrize("case", ["int_target", "long_target", "bool_target", "int_input",
                                  "weight_bcast", "pos_weight_bcast"])
def test_bce_with_logits_errors(case):
    F = lambda L: L.nn.functional  # noqa: E731
    f = {
        "int_target": lambda L: F(L).binary_cross_entropy_with_logits(
            L.ones(3), L.ones(3, dtype=L.int32)),
        "long_target": lambda L: L.nn.BCEWithLogitsLoss()(L.ones(2, 3), L.ones(2, 3).long()),
        "bool_target": lambda L: F(L).binary_cross_entropy_with_logits(
            L.ones(3), L.ones(3, dtype=L.bool)),
        "int_input": lambda L: F(L).binary_cross_entropy_with_logits(
            L.ones(3, dtype=L.int64), L.ones(3)),
        "weight_bcast": lambda L: F(L).binary_cross_entropy_with_logits(
            L.ones(3), L.ones(3), weight=L.ones(2, 1), reduction="none"),
        "pos_weight_bcast": lambda L: F(L).binary_cross_entropy_with_logits(
            L.ones(3), L.ones(3), pos_weight=L.ones(2, 1)),
    }[case]
    _raises_like_torch(f)


@pytest.mark.parametrize("dx,dt", [("float32", "float64"), ("float64", "float32")])
@pytest.mark.parametrize("pos_weight", [False, True])
def test_bce_with_logits_result_has_target_dtype(dx, dt, pos_weight):
    x = np.array([[-1.5, 0.2, 2.0], [0.7, -0.3, 0.0]])
    t = np.array([[0., 1., 1.], [1., 0., 0.5]])
    res = []
    for L in LIBS:
        xi = L.tensor(x, dtype=getattr(L, dx), requires_grad=True)
        kw = {"pos_weight": L.tensor([1., 2., 3.])} if pos_weight else {}
        loss = L.nn.functional.binary_cross_entropy_with_logits(
            xi, L.tensor(t, dtype=getattr(L, dt)), **kw)
        loss.backward()
        res.append((loss, xi.grad))
    (tl, tg), (ll, lg) = res
    assert str(ll.dtype).split(".")[1] == str(tl.dtype).split(".")[1]
    assert str(lg.dtype).split(".")[1] == str(tg.dtype).split(".")[1]
    np.testing.assert_allclose(_np(ll), _np(tl), rtol=1e-6)
    np.testing.assert_allclose(_np(lg), _np(tg), rtol=1e-5)


def test_huber_dtype_mismatch_and_soft_margin_dtype():
    # forward: input's dtype; a gradient: PyTorch's backward refuses the mismatch
    for t in (lambda L: L.ones(3).double(), lambda L: L.arange(3)):
        got, want = (L.nn.functional.huber_loss(L.tensor([0.5, 2., -1.]), t(L)) for L in LIBS)
        assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1] == "float32"
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-6)
        _raises_like_torch(lambda L: L.nn.HuberLoss()(L.ones(3, requires_grad=True),
                                                      t(L)).backward())
    got, want = (L.nn.functional.soft_margin_loss(L.tensor([0.5, -1.]),
                                                  L.tensor([1., -1.], dtype=L.float64))
                 for L in LIBS)
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1] == "float32"
    np.testing.assert_allclose(_np(got), _np(want), rtol=1e-6)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("kw", [{"size": (5, 13)}, {"scale_factor": 1.7},
                                {"scale_factor": (2.3, 0.6), "recompute_scale_factor": True}])
def test_interpolate_bicubic(align_corners, kw):
    x = np.random.default_rng(0).standard_normal((2, 3, 7, 8)).astype(np.float32)
    res = []
    for L in LIBS:
        xi = L.tensor(x, requires_grad=True)
        y = L.nn.functional.interpolate(xi, mode="bicubic", align_corners=align_corners, **kw)
        (y * L.arange(y.numel()).reshape(y.shape).float().sin()).sum().backward()
        res.append((y, xi.grad))
    (ty, tg), (ly, lg) = res
    assert tuple(ly.shape) == tuple(ty.shape)
    np.testing.assert_allclose(_np(ly), _np(ty), atol=1e-5)
    np.testing.assert_allclose(_np(lg), _np(tg), atol=1e-5)


def test_upsample_bicubic_module():
    x = np.arange(32, dtype=np.float64).reshape(1, 2, 4, 4) ** 1.5
    got, want = (L.nn.Upsample(scale_factor=2, mode="bicubic")(L.tensor(x)) for L in LIBS)
    np.testing.assert_allclose(_np(got), _np(want), rtol=1e-12, atol=1e-12)


def _shared_net(L):
    class Net(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = L.nn.Linear(4, 3)
            self.bn = L.nn.BatchNorm1d(3)
            self.tied = self.enc                     # a submodule under two names
            self.head = L.nn.Sequential(L.nn.Linear(3, 2))

        def forward(self, x):
            return self.head(self.bn(self.tied(x)))
    return Net()


def test_state_dict_lists_shared_submodule_under_each_name():
    want, got = (list(_shared_net(L).state_dict()) for L in LIBS)
    assert got == want
    want, got = ([n for n, _ in _shared_net(L).named_parameters(remove_duplicate=False)]
                 for L in LIBS)
    assert got == want
    want, got = ([n for n, _ in _shared_net(L).named_parameters()] for L in LIBS)
    assert got == want


def test_state_dict_from_torch_with_shared_module_loads_strictly():
    torch.manual_seed(0)
    tnet = _shared_net(torch)
    lnet = _shared_net(llgrad)
    r = lnet.load_state_dict({k: llgrad.tensor(v.numpy()) for k, v in tnet.state_dict().items()})
    assert r.missing_keys == [] and r.unexpected_keys == []
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(_np(lnet(llgrad.tensor(x))), _np(tnet(torch.tensor(x))),
                               rtol=1e-5, atol=1e-6)


def test_load_state_dict_messages():
    def load(L, edit, strict=True):
        net = _shared_net(L)
        sd = net.state_dict()
        edit(L, sd)
        return net.load_state_dict(sd, strict=strict)

    def missing_extra(L, sd):
        del sd["head.0.bias"]
        sd["extra"] = L.ones(1)

    def wrong_size(L, sd):
        sd["bn.weight"] = L.ones(4)
    for edit in (missing_extra, lambda L, sd: (missing_extra(L, sd), wrong_size(L, sd))):
        with pytest.raises(RuntimeError) as want:
            load(torch, edit)
        with pytest.raises(RuntimeError) as got:
            load(llgrad, edit)
        # (the sizes print as torch.Size / llgrad.Size)
        assert str(got.value).replace("llgrad.", "") == str(want.value).replace("torch.", "")
    want, got = (load(L, missing_extra, strict=False) for L in LIBS)
    assert (got.missing_keys, got.unexpected_keys) == (want.missing_keys, want.unexpected_keys)
    # a size mismatch raises even when not strict
    _raises_like_torch(lambda L: load(L, wrong_size, strict=False))


def test_module_half_and_path_lookups():
    for L in LIBS:
        net = _shared_net(L).half()
        assert [str(p.dtype).split(".")[1] for p in net.parameters()] == ["float16"] * 6
        assert str(net.bn.num_batches_tracked.dtype).split(".")[1] == "int64"
    want, got = (_shared_net(L) for L in LIBS)
    assert type(got.get_submodule("head.0")).__name__ == "Linear"
    assert got.get_submodule("") is got
    assert tuple(got.get_parameter("head.0.weight").shape) == (2, 3)
    assert got.get_buffer("bn.running_mean") is got.bn.running_mean
    for path in ("head.1", "enc.nope"):
        _raises_like_torch(lambda L: _shared_net(L).get_submodule(path))
    _raises_like_torch(lambda L: _shared_net(L).get_parameter("bn.running_mean"))
    _raises_like_torch(lambda L: _shared_net(L).get_buffer("bn.weight"))


def test_float_of_tensor_requiring_grad_warns_once():
    from llgrad.runtime import trace_state
    trace_state.given_once["scalar conversion"] = False
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        x = llgrad.ones(1, requires_grad=True) * 2
        assert float(x) == 2.0
        float(x)
        float(x.detach())
        x.item()
    msgs = [str(m.message) for m in w]
    assert len(msgs) == 1 and msgs[0].startswith("Converting a tensor with requires_grad=True")


def test_float_of_tensor_requiring_grad_is_silent_under_no_grad():
    """As PyTorch (LBFGS's float(loss) in its no_grad step): no warning, and the one warning
    is still to come."""
    from llgrad.runtime import trace_state
    trace_state.given_once["scalar conversion"] = False
    x = llgrad.ones(1, requires_grad=True) * 2
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with llgrad.no_grad():
            assert float(x) == 2.0
        assert not w
        float(x)
    assert len(w) == 1
