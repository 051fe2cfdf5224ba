"""Sweep 15 (b), continued: more of PyTorch's test/test_nn.py (TestNN) side by side with torch
(tests/nn/oracle_sweep15_b.py): weight_norm / spectral_norm, parameters_to_vector, clip_grad,
embedding, RNN argument checks and outputs, packed sequences, BCE losses, cross_entropy's
ignore_index / weights / label smoothing, empty-batch losses, pad modes, fold / unfold,
normalisation layers, softmax edge cases, grid_sample / affine_grid, interpolate."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from oracle_sweep15_b import check, raised, randn  # noqa: E402


def _set_weights(T, m, fn=lambda T, n, i: T.sin(T.arange(n).double() + i) * 0.3):
    with T.no_grad():
        for i, p in enumerate(m.parameters()):
            p.copy_(fn(T, p.numel(), i).view(p.shape))
    return m


def test_weight_norm_and_spectral_norm_registration():
    def s(T):
        U = T.nn.utils
        m = U.weight_norm(T.nn.Linear(4, 5), dim=1)
        out = [m.weight_g.shape, m.weight_v.shape, U.weight_norm(T.nn.Linear(4, 5), dim=None)
               .weight_g.shape, raised(lambda: U.weight_norm(m)),
               raised(lambda: U.remove_weight_norm(T.nn.Linear(2, 2)))]
        lstm = U.weight_norm(T.nn.LSTM(4, 4, proj_size=2), name="weight_hr_l0")
        out.append(sum(isinstance(p, T.nn.Parameter) for p in lstm._flat_weights))
        lstm = U.remove_weight_norm(lstm, name="weight_hr_l0")
        out.append(sorted(n for n, _ in lstm.named_parameters()))
        sn = U.spectral_norm(T.nn.ConvTranspose2d(3, 4, (5, 6)))
        out += [sn.weight_u.shape, sorted(sn.state_dict()), "weight" in sn._parameters,
                raised(lambda: U.spectral_norm(sn))]
        return out
    check(s)


def test_spectral_norm_forward_matches_one_power_iteration():
    def s(T):
        m = T.nn.utils.spectral_norm(T.nn.Linear(5, 7).double())
        w, u = m.weight_orig.detach().clone(), m.weight_u.clone()
        v = T.nn.functional.normalize(T.mv(w.t(), u), dim=0, eps=1e-12)
        u2 = T.nn.functional.normalize(T.mv(w, v), dim=0, eps=1e-12)
        x = randn(T, 3, 5, dtype=np.float64)
        ref = T.nn.functional.linear(x, w / T.dot(u2, T.mv(w, v)), m.bias)
        out = m(x)
        m.eval()
        return [float((out - ref).abs().max()) < 1e-10, m(x), m.weight_u]
    check(s)


def test_parameters_to_vector_and_back():
    def s(T):
        model = T.nn.Sequential(T.nn.Conv2d(3, 10, 5), T.nn.Linear(10, 20))
        vec = T.nn.utils.parameters_to_vector(model.parameters())
        T.nn.utils.vector_to_parameters(T.arange(0., 980), model.parameters())
        return [vec.shape, next(model.parameters())[0, 0, 0],
                raised(lambda: T.nn.utils.vector_to_parameters(T.arange(0., 10),
                                                               model.parameters())),
                raised(lambda: T.nn.utils.parameters_to_vector(T.zeros(3)))]
    check(s)


@pytest.mark.parametrize("norm_type", [2, 1, float("inf"), 0.5, 3])
def test_clip_grad_norm_and_value(norm_type):
    def s(T):
        ps = [T.zeros(4, 3, requires_grad=True), T.zeros(3, requires_grad=True)]
        for p in ps:
            p.grad = randn(T, *p.shape) * 3
        total = T.nn.utils.clip_grad_norm_(ps, 1.25, norm_type=norm_type)
        q = T.zeros(3, requires_grad=True)
        q.grad = T.tensor([-2., 0.3, 0.7])
        T.nn.utils.clip_grad_value_([q], 0.5)
        nan = T.zeros(3, requires_grad=True)
        nan.grad = T.tensor([float("nan"), 1., 2.])
        return [total, ps[0].grad, ps[1].grad, q.grad,
                raised(lambda: T.nn.utils.clip_grad_norm_([nan], 1., error_if_nonfinite=True)),
                T.nn.utils.clip_grad_norm_([], 1.)]
    check(s)


def test_embedding_padding_idx_max_norm_and_errors():
    def s(T):
        e = T.nn.Embedding(10, 3, padding_idx=0)
        e(T.tensor([[0, 2, 0, 5]])).sum().backward()
        w = randn(T, 6, 4) * 3
        e3 = T.nn.Embedding.from_pretrained(w.clone(), max_norm=1.0)
        looked = e3(T.tensor([1, 2, 1, 5]))
        e5 = T.nn.Embedding(5, 2, scale_grad_by_freq=True)
        e5(T.tensor([1, 1, 2])).sum().backward()
        return [e.weight[0], e.weight.grad, T.nn.Embedding(10, 3, padding_idx=-2).padding_idx,
                raised(lambda: T.nn.Embedding(10, 3, padding_idx=10)), looked, e3.weight,
                raised(lambda: T.nn.Embedding(4, 2)(T.tensor([4]))),
                raised(lambda: T.nn.Embedding(4, 2)(T.tensor([1.0]))), e5.weight.grad,
                repr(T.nn.Embedding(4, 2, padding_idx=1, max_norm=2.0))]
    check(s)


def test_rnn_argument_checks():
    def s(T):
        out = []
        for mode in ("RNN", "GRU", "LSTM"):
            m = getattr(T.nn, mode)(3, 5, 2)
            for x, h in (((6, 7, 3), (2, 4, 5)), ((6, 4, 3), (2, 7, 5)), ((6, 4, 7), (2, 4, 5)),
                         ((6, 4, 3), (2, 4, 7)), ((6, 4, 3), (7, 4, 5))):
                hx = T.ones(*h)
                out.append(raised(lambda: m(T.ones(*x), (hx, hx) if mode == "LSTM" else hx)))
        p = T.nn.LSTM(3, 5, 2, proj_size=2)
        for h, c in (((2, 4, 5), (2, 4, 5)), ((2, 4, 2), (2, 4, 2)), ((2, 4, 2), (7, 4, 5))):
            out.append(raised(lambda: p(T.ones(6, 4, 3), (T.ones(*h), T.ones(*c)))))
        out += [raised(lambda: T.nn.GRU(3, 4, proj_size=2)),
                raised(lambda: T.nn.LSTM(3, 4, proj_size=4)),
                raised(lambda: T.nn.RNN(3, 4, nonlinearity="garbage")),
                raised(lambda: T.nn.RNN(3, 4, 2, dropout=1.5)),
                raised(lambda: T.nn.RNNCell(10, 20)(T.ones(3, 10), T.ones(1, 20))),
                raised(lambda: T.nn.LSTMCell(10, 20)(T.ones(3, 11), (T.ones(3, 20),) * 2))]
        return out
    check(s)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_projection_outputs_and_grads(batch_first, bidirectional):
    def s(T):
        m = _set_weights(T, T.nn.LSTM(4, 6, 2, proj_size=3, batch_first=batch_first,
                                      bidirectional=bidirectional).double())
        x = randn(T, 2, 5, 4, dtype=np.float64, requires_grad=True)
        o, (h, c) = m(x if batch_first else x.transpose(0, 1))
        g, = T.autograd.grad(o.sum() + h.sum() + c.sum(), x)
        o2, _ = m(x if batch_first else x.transpose(0, 1), (T.zeros_like(h), T.zeros_like(c)))
        return [o, h, c, g, bool((o == o2).all())]
    check(s, tol=1e-9)


@pytest.mark.parametrize("mode", ["GRU", "RNN"])
def test_multilayer_rnn_with_dropout_in_eval_and_unbatched(mode):
    def s(T):
        m = _set_weights(T, getattr(T.nn, mode)(3, 4, 2, dropout=0.5, bidirectional=True).double(),
                         lambda T, n, i: T.cos(T.arange(n).double() * (i + 1)) * 0.4).eval()
        x = randn(T, 5, 2, 3, dtype=np.float64, requires_grad=True)
        o, h = m(x)
        g, = T.autograd.grad(o.sum() + h.sum(), x)
        return [o, h, g, m(x[:, 0])[0]]
    check(s, tol=1e-9)


def test_packed_sequences_through_gru():
    def s(T):
        U = T.nn.utils.rnn
        seqs = [randn(T, n, 3, dtype=np.float64) for n in (4, 2, 3)]
        ps = U.pack_sequence(seqs, enforce_sorted=False)
        m = _set_weights(T, T.nn.GRU(3, 2, bidirectional=True).double())
        o, h = m(ps)
        padded, lens = U.pad_packed_sequence(o, batch_first=True)
        out = [raised(lambda: U.pack_sequence(seqs)), ps.batch_sizes, ps.sorted_indices, padded,
               lens, h, U.pad_packed_sequence(o, total_length=6, padding_value=-1.)[0],
               raised(lambda: U.pad_packed_sequence(o, total_length=2)),
               U.pad_sequence(seqs, padding_side="left")]
        pk = U.pack_padded_sequence(U.pad_sequence(seqs, batch_first=True), T.tensor([4, 2, 3]),
                                    batch_first=True, enforce_sorted=False)
        return out + [pk.data, raised(lambda: U.pack_padded_sequence(
            U.pad_sequence(seqs), [4, 0, 3], enforce_sorted=False)), U.unpack_sequence(ps)]
    check(s, tol=1e-9)


def test_small_module_behaviours_from_test_nn_tail():
    def s(T):
        x = randn(T, 4, 4, 16, requires_grad=True)
        ln = T.nn.LayerNorm((16,), 1e-5, True)
        ln.weight = T.nn.Parameter(0.1 * T.ones(16))
        asfm = T.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4, 8], div_value=2., head_bias=True)
        xx = randn(T, 6, 8)
        res = asfm(xx, T.tensor([0, 1, 4, 8, 9, 3]))
        return [T.nn.CrossEntropyLoss()(T.rand(5, 0), T.rand(5, 0)),
                T.nn.CrossEntropyLoss(label_smoothing=0.1, reduction="sum")(T.rand(5, 0),
                                                                            T.rand(5, 0)),
                T.nn.Flatten(1, -1)(randn(T, 2, 1, 2, 3)).shape,
                T.nn.Unflatten(1, [2, 5, 5])(randn(T, 2, 50)).shape,
                raised(lambda: T.nn.Unflatten(1, (2, 5, 5.0))),
                T.autograd.grad(ln(x).sum(), x, create_graph=True)[0],
                T.nn.LayerNorm(2, eps=1e-6, elementwise_affine=False)(
                    T.tensor([[[2.0, 2.0], [14.0, 14.0]]])),
                T.nn.ConvTranspose2d(2, 3, kernel_size=3, padding=[1, 1])(T.ones(1, 2, 4, 4)).shape,
                raised(lambda: T.nn.FractionalMaxPool2d(kernel_size=[2, 1], output_ratio=[
                    0.5, 0.5, 0.6])(T.rand(2, 3, 10, 8))),
                raised(lambda: T.nn.MaxPool1d(3, stride=255)(T.tensor([[0.3204]]))),
                T.constant_pad_nd(T.tensor([[1, 2], [3, 4]]), [1, 2, 1, 0], 9),
                bool((asfm.predict(xx) == asfm.log_prob(xx).argmax(1)).all()),
                res.output.shape, raised(lambda: asfm(xx, T.tensor([0, 1, 4, 8, 10, 3])))]
    check(s)


def test_max_unpool_nets_values_and_grads():
    def s(T):
        out = []
        for k, shape in ((1, (1, 1, 4)), (2, (1, 1, 2, 4)), (3, (1, 1, 2, 4, 6)), (2, (1, 2, 4))):
            pool = getattr(T.nn, f"MaxPool{k}d")(2, return_indices=True)
            x = randn(T, *shape, dtype=np.float64, requires_grad=True)
            o = getattr(T.nn, f"MaxUnpool{k}d")(2)(*pool(x))
            out += [o, T.autograd.grad((o * o).sum(), x)[0]]
        return out
    check(s)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_instance_norm_running_stats_and_eval(k):
    def s(T):
        cls = getattr(T.nn, f"InstanceNorm{k}d")
        x = randn(T, *(3, 4, 5, 2, 3)[:k + 2], dtype=np.float64, requires_grad=True)
        plain = cls(4, eps=0).double()(x)
        tracked = cls(4, track_running_stats=True, momentum=0.3).double()
        o = tracked(x)
        out = [plain, o, tracked.running_mean, tracked.running_var, tracked.eval()(x)]
        cum = cls(4, track_running_stats=True, momentum=None).double()
        cum(x)
        cum(x * 2)
        return out + [cum.running_mean, cum.running_var, T.autograd.grad((o * plain).sum(), x)[0],
                      raised(lambda: cls(4)(T.ones(*(1, 4, 1, 1, 1)[:k + 2])))]
    check(s, tol=1e-9)


def _cos_weights(T, m):
    with T.no_grad():
        for p in m.parameters():
            p.copy_(T.cos(T.arange(0, p.numel()).float().view(p.shape)))
    return m


@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_layers_with_fixed_weights(batch_first):
    def s(T):
        def perm(x):
            return x.transpose(0, 1) if batch_first else x
        dec = _cos_weights(T, T.nn.TransformerDecoderLayer(4, 2, 16, 0.0, "gelu",
                                                           batch_first=batch_first))
        enc = _cos_weights(T, T.nn.TransformerEncoderLayer(4, 2, 16, 0.0, norm_first=True,
                                                           batch_first=batch_first))
        tgt, mem = perm(T.tensor(np.random.rand(3, 2, 4).astype(np.float32))), \
            perm(T.tensor(np.random.rand(5, 2, 4).astype(np.float32)))
        kp = T.tensor([[False, False, True], [False, True, True]])
        mk = T.tensor([[False] * 5, [False, False, False, True, False]])
        stack = T.nn.TransformerDecoder(dec, 2, norm=T.nn.LayerNorm(4))
        return [dec(tgt, mem), dec(tgt, mem, tgt_key_padding_mask=kp),
                dec(tgt, mem, memory_key_padding_mask=mk), stack(tgt, mem), enc(mem),
                T.nn.TransformerEncoder(enc, 2, enable_nested_tensor=False)(mem)]
    check(s)


def test_submodule_access_duplicates_and_zero_grad():
    def s(T):
        nn = T.nn
        net = nn.Module()
        net.t = nn.Module()
        lin = nn.Linear(1, 2)
        out = [raised(lambda: net.set_submodule("", lin)),
               raised(lambda: net.set_submodule("a.l", lin)),
               raised(lambda: net.set_submodule("0", lin, True))]
        net.set_submodule("0", lin, False)
        net.foo = "bar"
        out += [net.get_submodule("0") is lin, raised(lambda: net.set_submodule("foo", lin)),
                raised(lambda: net.set_submodule("t.l", "bazz")),
                raised(lambda: net.get_submodule("t.x")), raised(lambda: net.get_parameter("t.w"))]

        class Twice(nn.Module):
            def __init__(self):
                super().__init__()
                self.p1 = nn.Parameter(T.zeros(3))
                self.p2 = self.p1
                self.m1 = nn.Linear(2, 2, bias=False)
                self.m2 = self.m1
        m = Twice()
        out += [[k for k, _ in m.named_parameters()],
                [k for k, _ in m.named_parameters(remove_duplicate=False)]]
        lin5 = nn.Linear(5, 5)
        lin5(T.ones(2, 5)).sum().backward()
        lin5.zero_grad(set_to_none=False)
        out.append(lin5.weight.grad)
        lin5.zero_grad()
        return out + [lin5.weight.grad, raised(lambda: nn.Module()(T.ones(1)))]
    check(s)


def test_load_state_dict_errors_and_assign():
    def s(T):
        a, b = T.nn.Linear(3, 2), T.nn.Linear(3, 2)
        sd = a.state_dict()
        sd["extra"] = T.ones(1)
        out = []
        for bad in (sd, {"weight": T.ones(3, 3), "bias": T.ones(2)}, {"weight": T.ones(2, 3)},
                    {"weight": "x", "bias": T.zeros(2)}):
            try:
                b.load_state_dict(bad)
                out.append("returned")
            except RuntimeError as e:
                out.append(str(e))
        keys = b.load_state_dict(sd, strict=False)
        w = T.ones(2, 3) * 7
        b.load_state_dict({"weight": w, "bias": T.zeros(2)}, assign=True)
        bn = T.nn.BatchNorm1d(2)
        bsd = bn.state_dict()
        del bsd["num_batches_tracked"]
        return out + [keys.missing_keys, keys.unexpected_keys, b.weight is w,
                      type(b.weight).__name__, b.weight.requires_grad,
                      raised(lambda: b.load_state_dict([1, 2])),
                      raised(lambda: bn.load_state_dict(bsd))]
    check(s)


def test_packed_input_through_bidirectional_projected_lstm():
    def s(T):
        U = T.nn.utils.rnn
        seqs = [randn(T, n, 3, dtype=np.float64, requires_grad=True) for n in (4, 2, 3)]
        m = _set_weights(T, T.nn.LSTM(3, 4, 2, proj_size=2, bidirectional=True).double())
        o, (h, c) = m(U.pack_sequence(seqs, enforce_sorted=False))
        padded, lens = U.pad_packed_sequence(o, batch_first=True)
        return [padded, lens, h, c, T.autograd.grad(padded.sum() + h.sum() + c.sum(), seqs)]
    check(s, tol=1e-9)


def test_clip_grad_norm_mixed_dtypes_and_infinite_norms():
    def s(T):
        a = T.zeros(3, requires_grad=True)
        b = T.zeros(2, dtype=T.float64, requires_grad=True)
        out = []
        for kw in ({"foreach": True}, {"norm_type": "inf", "foreach": False}):
            a.grad, b.grad = T.tensor([3., 4., 0.]), T.tensor([1., 2.], dtype=T.float64)
            out += [T.nn.utils.clip_grad_norm_([a, b], 1.0, **kw), a.grad, b.grad]
        a.grad = T.tensor([float("inf"), 4., 0.])
        return out + [T.nn.utils.clip_grad_norm_([a], 1.0), a.grad]
    check(s)
