"""Optimizers' state_dict / load_state_dict / add_param_group and torch.nn.utils against
PyTorch: a training run resumed from a saved state_dict follows torch's trajectory with the
same saved state; clip_grad_norm_ (every norm type, foreach, non-finite), clip_grad_value_,
parameters_to_vector, weight_norm / spectral_norm (old and parametrization forms),
orthogonal, pruning and the rnn pack / pad utilities."""
import io

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
import torch.nn.utils.prune  # noqa: E402,F401  (torch does not import it with torch.nn.utils)


def _np(x):
    return np.asarray(x.detach().tolist(), dtype=np.float64)


def _desc(x):
    if hasattr(x, "dtype") and hasattr(x, "shape"):
        return ("T", str(x.dtype).split(".")[-1], tuple(x.shape), _np(x).round(5).tolist())
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_desc(i) for i in x])
    if isinstance(x, dict):
        return ("dict", {k: _desc(v) for k, v in x.items()})
    return (type(x).__name__, x)


OPTIMIZERS = [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
              ("Adam", dict(lr=0.01, amsgrad=True)), ("AdamW", dict(lr=0.01)),
              ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)), ("Adagrad", dict(lr=0.1)),
              ("Adadelta", {}), ("Adamax", {}),
              ("NAdam", dict(decoupled_weight_decay=True, weight_decay=0.1)), ("RAdam", {}),
              ("Rprop", {}), ("ASGD", dict(t0=2)), ("Adam", dict(lr=0.01, maximize=True))]


def _train(L, name, kw, resume):
    rng = np.random.default_rng(0)
    w = L.nn.Parameter(L.tensor(rng.standard_normal((3, 4)).astype(np.float32)))
    b = L.nn.Parameter(L.tensor(rng.standard_normal(3).astype(np.float32)))
    x = L.tensor(rng.standard_normal((5, 4)).astype(np.float32))

    def make():
        o = getattr(L.optim, name)([w], **kw)
        o.add_param_group({"params": [b], "lr": 0.003})
        return o
    o = make()
    path = []
    for i in range(6):
        o.zero_grad()
        ((x @ w.t() + b) ** 2).mean().backward()
        o.step()
        if i == 2 and resume:       # through torch.save's format, as a checkpoint would
            buf = io.BytesIO()
            L.save(o.state_dict(), buf)
            buf.seek(0)
            o = make()
            o.load_state_dict(L.load(buf))
        path.append((_np(w), _np(b)))
    return path, o.state_dict()


@pytest.mark.parametrize("resume", [False, True], ids=["straight", "resumed"])
@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=[f"{n}{i}" for i, (n, _) in
                                                      enumerate(OPTIMIZERS)])
def test_optimizer_state_dict_equals_torch(name, kw, resume):
    (path, sd), (tpath, tsd) = _train(llgrad, name, kw, resume), _train(torch, name, kw, resume)
    for (w, b), (tw, tb) in zip(path, tpath):
        np.testing.assert_allclose(w, tw, rtol=0, atol=3e-7)
        np.testing.assert_allclose(b, tb, rtol=0, atol=3e-7)
    assert repr(sd["param_groups"]) == repr(tsd["param_groups"])
    assert list(sd["state"]) == list(tsd["state"])
    for k, st in sd["state"].items():
        assert list(st) == list(tsd["state"][k])
        for key, v in st.items():
            tv = tsd["state"][k][key]
            assert str(v.dtype).split(".")[-1] == str(tv.dtype).split(".")[-1], key
            np.testing.assert_allclose(_np(v), _np(tv), rtol=2e-6, atol=1e-7, err_msg=key)


def _param_groups_and_errors(L):
    p = L.nn.Parameter(L.zeros(2))
    o = L.optim.SGD([p], lr=0.1)
    o.add_param_group({"params": [L.nn.Parameter(L.zeros(3))], "momentum": 0.5})
    out = [sorted((k, v) for k, v in o.param_groups[1].items() if k != "params")]
    for bad in ({"params": p}, {"params": {L.nn.Parameter(L.zeros(1))}}):
        try:
            o.add_param_group(bad)
        except Exception as e:
            out.append((type(e).__name__, str(e)))
    two = L.optim.SGD([L.nn.Parameter(L.zeros(2)), L.nn.Parameter(L.zeros(3))], lr=0.1)
    try:
        o.load_state_dict(two.state_dict())
    except Exception as e:
        out.append((type(e).__name__, str(e)))
    named = L.optim.Adam(L.nn.Linear(2, 3).named_parameters(), lr=0.1)
    out.append(named.state_dict()["param_groups"])
    return out


def test_param_groups_and_their_errors_equal_torch():
    assert _param_groups_and_errors(llgrad) == _param_groups_and_errors(torch)


def _grads(L, seed=1):
    ps = [L.nn.Parameter(L.zeros(3, 4)), L.nn.Parameter(L.zeros(5))]
    for i, p in enumerate(ps):
        p.grad = L.tensor(np.random.default_rng(seed + i).standard_normal(p.shape)
                          .astype(np.float32))
    return ps


@pytest.mark.parametrize("foreach", [None, False, True])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3.0, 0.5, "inf"])
def test_clip_grad_norm_equals_torch(norm_type, foreach):
    def run(L):
        ps = _grads(L)
        n = L.nn.utils.clip_grad_norm_((p for p in ps), 0.7, norm_type=norm_type,
                                       foreach=foreach)
        return _np(n), [_np(p.grad) for p in ps]
    (n, g), (tn, tg) = run(llgrad), run(torch)
    np.testing.assert_allclose(n, tn, rtol=1e-6)
    for a, b in zip(g, tg):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_clip_grad_norm_nonfinite_equals_torch():
    def run(L):
        out = []
        for bad, nt in ((float("nan"), 2.0), (float("inf"), 2.0), (float("inf"), "inf")):
            p = L.nn.Parameter(L.zeros(3))
            p.grad = L.tensor([1.0, bad, 2.0])
            out.append((_desc(L.nn.utils.clip_grad_norm_([p], 1.0, norm_type=nt)), _desc(p.grad)))
            try:
                L.nn.utils.clip_grad_norm_([p], 1.0, norm_type=nt, error_if_nonfinite=True)
            except RuntimeError as e:
                out.append(str(e))
        q = L.nn.Parameter(L.zeros(2, dtype=L.float64))
        q.grad = L.ones(2, dtype=L.float64) * 3
        r = L.nn.Parameter(L.zeros(2))
        r.grad = L.ones(2) * 4
        out.append((_desc(L.nn.utils.clip_grad_norm_([q, r], 1.0)), _desc([q.grad, r.grad])))
        out.append(_desc(L.nn.utils.clip_grad_norm_([], 1.0)))
        return repr(out).replace("torch", "L").replace("llgrad", "L")
    assert run(llgrad) == run(torch)


def test_clip_value_and_vector_round_trip_equal_torch():
    def run(L):
        p = L.nn.Parameter(L.zeros(6))
        p.grad = L.linspace(-3, 3, 6)
        L.nn.utils.clip_grad_value_(p, 1.5)
        q = L.nn.Parameter(L.zeros(6))
        q.grad = L.linspace(-3, 3, 6)
        L.nn.utils.clip_grad_value_([q], 0.5, foreach=False)
        L.manual_seed(0)
        m = L.nn.Sequential(L.nn.Linear(3, 2), L.nn.ReLU(), L.nn.Linear(2, 1))
        v = L.nn.utils.parameters_to_vector(m.parameters())
        L.nn.utils.vector_to_parameters(L.arange(v.numel(), dtype=L.float32) - 5, m.parameters())
        return _desc(p.grad), _desc(q.grad), _desc(v), _desc(list(m.parameters()))
    assert run(llgrad) == run(torch)


def _norm_wrappers(L):
    L.manual_seed(0)
    out = []
    m = L.nn.utils.weight_norm(L.nn.Linear(3, 4), dim=0)
    y = m(L.ones(2, 3)).sum()
    y.backward()
    out += [sorted(n for n, _ in m.named_parameters()), _desc(y), _desc(m.weight_g.grad),
            _desc(L.nn.utils.remove_weight_norm(m).weight)]
    s = L.nn.utils.spectral_norm(L.nn.Linear(5, 4))
    out += [_desc(s(L.ones(2, 5))), _desc(s(L.ones(2, 5))), sorted(s.state_dict())]
    s.eval()
    out.append(_desc(s(L.ones(2, 5))))
    P = L.nn.utils.parametrizations
    ps = P.spectral_norm(L.nn.Linear(5, 4))
    ps(L.ones(2, 5)).sum().backward()
    out += [_desc(ps.parametrizations.weight.original.grad), sorted(ps.state_dict())]
    pw = P.weight_norm(L.nn.Linear(3, 4))
    pw(L.ones(2, 3)).sum().backward()
    out += [_desc(pw.parametrizations.weight.original0.grad),
            _desc(pw.parametrizations.weight.original1.grad), sorted(pw.state_dict())]
    return out


def test_weight_and_spectral_norm_equal_torch():
    assert _norm_wrappers(llgrad) == _norm_wrappers(torch)


@pytest.mark.parametrize("shape,kw", [((4, 3), {}), ((3, 5), {}),
                                      ((4, 4), {"orthogonal_map": "cayley"}),
                                      ((4, 4), {"orthogonal_map": "householder"}),
                                      ((5, 3), {"use_trivialization": False})])
def test_orthogonal_parametrization_equals_torch(shape, kw):
    def run(L):
        L.manual_seed(0)
        m = L.nn.utils.parametrizations.orthogonal(L.nn.Linear(shape[1], shape[0]), **kw)
        w = _np(m.weight)
        m(L.ones(1, shape[1])).sum().backward()
        return w, _np(m.parametrizations.weight.original.grad)
    for a, b in zip(run(llgrad), run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _pruning(L):
    prune = L.nn.utils.prune
    L.manual_seed(0)
    m = L.nn.Linear(4, 3)
    prune.l1_unstructured(m, "weight", amount=0.5)
    prune.random_unstructured(m, "bias", amount=1)
    out = [_desc(m.weight_mask), _desc(m.bias_mask), sorted(n for n, _ in m.named_buffers()),
           sorted(n for n, _ in m.named_parameters())]
    prune.ln_structured(m, "weight", amount=0.34, n=2, dim=0)
    out.append(_desc(m.weight_mask))
    prune.remove(m, "weight")
    out += [_desc(m.weight), prune.is_pruned(m)]
    a, b = L.nn.Linear(4, 3), L.nn.Linear(3, 2)
    prune.global_unstructured([(a, "weight"), (b, "weight")], pruning_method=prune.L1Unstructured,
                              amount=7)
    c = L.nn.Linear(6, 5)
    prune.random_structured(c, "weight", amount=0.4, dim=1)
    out += [_desc(a.weight_mask), _desc(b.weight_mask), _desc(c.weight_mask), L.rand(1).item()]
    return out


def test_pruning_equals_torch():
    assert _pruning(llgrad) == _pruning(torch)


def _rnn_utils(L):
    R = L.nn.utils.rnn
    seqs = [L.arange(1., 4.), L.arange(10., 15.), L.tensor([7.])]
    padded = R.pad_sequence(seqs, batch_first=True, padding_value=-1)
    packed = R.pack_padded_sequence(padded, L.tensor([3, 5, 1]), batch_first=True,
                                    enforce_sorted=False)
    unpacked, lengths = R.pad_packed_sequence(packed, batch_first=True, total_length=6,
                                              padding_value=9)
    ps = R.pack_sequence(seqs, enforce_sorted=False)
    out = [_desc(padded), _desc(R.pad_sequence(seqs, padding_side="left")), _desc(packed.data),
           _desc(packed.batch_sizes), _desc(packed.sorted_indices), _desc(packed.unsorted_indices),
           _desc(unpacked), _desc(lengths), _desc(ps.data),
           _desc(R.unpad_sequence(padded, L.tensor([3, 5, 1]), batch_first=True)),
           _desc(R.unpack_sequence(ps))]
    try:
        R.pack_sequence([L.ones(1), L.ones(3)])
    except RuntimeError as e:
        out.append(str(e))
    return out


def test_rnn_pack_pad_utilities_equal_torch():
    assert _rnn_utils(llgrad) == _rnn_utils(torch)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_clip_grad_norm_half_gradients_equal_torch(dtype, norm_type):
    """Regression: llgrad squared float16 gradients in float16 (inf past 255), so the norm
    was inf and clipping zeroed every gradient, silently; PyTorch accumulates in float32."""
    g = np.random.default_rng(0).standard_normal((50, 40)).astype(np.float32) * 30

    def run(L):
        dt = getattr(L, dtype)
        p, q = L.nn.Parameter(L.zeros(50, 40, dtype=dt)), L.nn.Parameter(L.zeros(7, dtype=dt))
        p.grad, q.grad = L.tensor(g).to(dt), L.tensor(g[0, :7]).to(dt)
        n = L.nn.utils.clip_grad_norm_([p, q], 1.0, norm_type=norm_type)
        return _np(n.float()), _np(p.grad.float()), _np(q.grad.float())
    for a, b in zip(run(llgrad), run(torch)):
        np.testing.assert_array_equal(a, b)
    assert np.isfinite(run(llgrad)[0])


@pytest.mark.xfail(strict=True, reason="ATen computes float16 add / sub with an alpha "
                   "(SGD's p.add_(buf, alpha=-lr)) as one float32 FMA in its vectorised body "
                   "but as Half(a + Half(alpha * b)), rounding twice, in the scalar loop over "
                   "the elements past the last full vector block (all of a tensor under 32 "
                   "elements); llgrad rounds once everywhere (ir/ops_elementwise.py "
                   "_half_alpha), so a small float16 parameter ends 1 float16 ulp off in about "
                   "a third of its elements. Target: torch's values bit for bit.")
def test_sgd_step_on_small_float16_parameter_equals_torch():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 5)).astype(np.float16)
    grads = [rng.standard_normal((6, 5)).astype(np.float16) for _ in range(4)]

    def run(L):
        p = L.nn.Parameter(L.tensor(w))
        o = L.optim.SGD([p], lr=0.1, momentum=0.9)
        for g in grads:
            p.grad = L.tensor(g)
            o.step()
        return _np(p.float())
    np.testing.assert_array_equal(run(llgrad), run(torch))
