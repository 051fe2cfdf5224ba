"""Compiled training steps against eager llgrad and PyTorch on the nn corners of
tests/nn/test_adversarial_nn.py: BCEWithLogits with float64 targets (the loss has the
target's dtype) over a DataLoader whose last batch is smaller, a bicubic-upsampling
autoencoder, a tied-weights model loaded strictly from PyTorch's state_dict with a
scheduler stepping between calls, and the classification losses' target checks."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _np(t):
    return t.detach().numpy()


def _copy(tm, lm):
    lm.load_state_dict({k: llgrad.tensor(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})


def _train(L, model, opt, loader, loss_fn, compiled, sched=None):
    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(L, model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    f = llgrad.compile(step) if compiled else step
    out = []
    for _ in range(2):
        for x, y in loader:
            out.append(f(x, y))
        if sched is not None:
            sched.step()
    return out


def _check(runs, models):
    (tl, tm), (el, em), (cl, cm) = zip(runs, models)
    for t, e, c in zip(tl, el, cl):
        assert str(e.dtype).split(".")[1] == str(c.dtype).split(".")[1] == \
            str(t.dtype).split(".")[1]
        np.testing.assert_allclose(_np(e), _np(t), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(_np(c), _np(e), rtol=1e-6, atol=1e-7)
    for (n, t), e, c in zip(tm.state_dict().items(), em.state_dict().values(),
                            cm.state_dict().values()):
        np.testing.assert_allclose(_np(e), _np(t), rtol=1e-4, atol=1e-5, err_msg=n)
        np.testing.assert_allclose(_np(c), _np(e), rtol=1e-6, atol=1e-7, err_msg=n)


def _run_all(build, make_opt, data, loss_fn, make_sched=None, batch_size=4):
    torch.manual_seed(0)
    ref = build(torch)
    inits = [build(llgrad), build(llgrad)]
    for m in inits:
        _copy(ref, m)
    runs, models = [], []
    for L, compiled in ((torch, False), (llgrad, False), (llgrad, True)):
        m = ref if L is torch else inits[compiled]
        opt = make_opt(L, m)
        sched = make_sched(L, opt) if make_sched else None
        ds = L.utils.data.TensorDataset(*(L.tensor(a) for a in data))
        loader = L.utils.data.DataLoader(ds, batch_size=batch_size)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs.append(_train(L, m, opt, loader, loss_fn, compiled, sched))
        models.append(m)
    _check(runs, models)


def test_bce_with_logits_float64_targets_compiled():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((10, 5)).astype(np.float32)
    y = (rng.random((10, 3)) > 0.5).astype(np.float64)       # NumPy labels: float64

    def build(L):
        return L.nn.Sequential(L.nn.Linear(5, 8), L.nn.Tanh(), L.nn.Linear(8, 3))

    def loss_fn(L, out, t):
        return L.nn.BCEWithLogitsLoss(pos_weight=L.tensor([1., 2., 0.5]))(out, t)
    _run_all(build, lambda L, m: L.optim.Adam(m.parameters(), lr=0.01), (x, y), loss_fn)


def test_bicubic_autoencoder_compiled():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 1, 8, 8)).astype(np.float32)

    def build(L):
        return L.nn.Sequential(L.nn.Conv2d(1, 4, 3, stride=2, padding=1), L.nn.ReLU(),
                               L.nn.Upsample(scale_factor=2, mode="bicubic"),
                               L.nn.Conv2d(4, 1, 3, padding=1))

    def loss_fn(L, out, t):
        return L.nn.functional.mse_loss(out, t)
    _run_all(build, lambda L, m: L.optim.SGD(m.parameters(), lr=0.05, momentum=0.9),
             (x, x), loss_fn)


def test_tied_weights_with_scheduler_compiled():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((9, 6)).astype(np.float32)
    y = rng.integers(0, 3, 9)

    def build(L):
        class Tied(L.nn.Module):
            def __init__(self):
                super().__init__()
                self.body = L.nn.Linear(6, 6)
                self.again = self.body                      # the same layer twice
                self.head = L.nn.Linear(6, 3)

            def forward(self, v):
                return self.head(self.again(self.body(v).relu()).relu())
        return Tied()

    def loss_fn(L, out, t):
        return L.nn.functional.cross_entropy(out, t, label_smoothing=0.1)
    _run_all(build, lambda L, m: L.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
             (x, y), loss_fn,
             make_sched=lambda L, o: L.optim.lr_scheduler.StepLR(o, 1, gamma=0.5))


@pytest.mark.parametrize("case", ["ce_int32", "ce_float_n", "bce_long"])
def test_loss_target_checks_compiled(case):
    def f(L, x, t):
        if case == "bce_long":
            return L.nn.functional.binary_cross_entropy_with_logits(x, t)
        return L.nn.functional.cross_entropy(x, t)
    t = {"ce_int32": np.array([0, 2], dtype=np.int32), "ce_float_n": np.array([0., 2.]),
         "bce_long": np.ones((2, 3), dtype=np.int64)}[case]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(RuntimeError) as want:
        f(torch, torch.tensor(x), torch.tensor(t))
    c = llgrad.compile(lambda a, b: f(llgrad, a, b))
    for _ in range(2):
        with pytest.raises(RuntimeError) as got:
            c(llgrad.tensor(x), llgrad.tensor(t))
        assert str(got.value) == str(want.value)


def test_step_returning_a_sum_of_backpropagated_losses_compiles():
    """Neural style's LBFGS closure: `loss.backward(); return style + content` (a new node
    over graphs the backward freed) compiles; as in torch the result requires grad and a
    second backward raises."""
    rng = np.random.default_rng(3)
    x0, tgt = rng.random((4, 4)).astype(np.float32), rng.random((4, 4)).astype(np.float32)

    def run(L, compiled):
        img = L.tensor(x0.copy()).requires_grad_()
        target = L.tensor(tgt)
        opt = L.optim.SGD([img], lr=0.1)

        def closure():
            opt.zero_grad()
            style = L.nn.functional.mse_loss(img.mm(img.t()), target) * 10
            content = L.nn.functional.mse_loss(img, target)
            loss = style + content
            loss.backward()
            return style + content
        f = llgrad.compile(closure) if compiled else closure
        outs = []
        for _ in range(3):
            out = f()
            opt.step()
            outs.append(float(out.detach()))
        assert out.requires_grad and out.grad_fn is not None
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            out.backward()
        return outs, _np(img), (f.entries if compiled else None)
    want = run(torch, False)
    for compiled in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = run(llgrad, compiled)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
        assert not compiled or got[2], "no compiled code"


def test_step_setting_requires_grad_on_its_input_compiles():
    """FGSM: `data.requires_grad = True` on the input, backward, data.grad.sign(): each
    compiled call leaves the input requiring grad with its .grad, as eager (and torch) do."""
    rng = np.random.default_rng(4)
    w0 = rng.standard_normal((5, 3)).astype(np.float32)
    xs = [rng.random((2, 5)).astype(np.float32) for _ in range(3)]

    def run(L, compiled):
        lin = L.nn.Linear(5, 3, bias=False)
        with L.no_grad():
            lin.weight.copy_(L.tensor(w0.T.copy()))

        def attack(data, target, epsilon):
            data.requires_grad = True
            loss = L.nn.functional.cross_entropy(lin(data), target)
            lin.zero_grad()
            loss.backward()
            perturbed = L.clamp(data + epsilon * data.grad.data.sign(), 0, 1)
            return loss.item(), perturbed.detach()
        f = llgrad.compile(attack) if compiled else attack
        out = []
        for x in xs:
            data = L.tensor(x)
            loss, pert = f(data, L.tensor([0, 2]), 0.1)
            out += [loss, _np(pert), data.requires_grad, data.is_leaf, _np(data.grad)]
        return out + [_np(lin.weight.grad)], (f.entries if compiled else None)
    want, _ = run(torch, False)
    for compiled in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got, entries = run(llgrad, compiled)
        assert not compiled or entries, "no compiled code"
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_step_calling_model_train_after_eval_compiles():
    """model.train() inside the step, model.eval() for validation between calls: each call
    sets the modules' `training` flags, which compiled calls replay (not kept, every call
    used to trace again and run eagerly, silently)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    y = np.array([0, 1, 2, 0, 1, 2])

    def run(L, compiled):
        L.manual_seed(0)
        model = L.nn.Sequential(L.nn.Linear(4, 5), L.nn.BatchNorm1d(5), L.nn.Linear(5, 3))
        if L is llgrad:
            _copy(ref, model)
        else:
            ref.load_state_dict(model.state_dict())
        opt = L.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            model.train()
            opt.zero_grad()
            loss = L.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        f = llgrad.compile(step) if compiled else step
        out = []
        for _ in range(3):
            out.append(_np(f(L.tensor(x), L.tensor(y))))
            out.append([m.training for m in model.modules()])
            model.eval()
            with L.no_grad():
                out.append(_np(model(L.tensor(x))))
        return out + [_np(p) for p in model.state_dict().values()], \
            (f.entries if compiled else None)
    ref = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.BatchNorm1d(5),
                              torch.nn.Linear(5, 3))      # (the initial weights)
    want, _ = run(torch, False)
    for compiled in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got, entries = run(llgrad, compiled)
        assert not compiled or entries, "no compiled code"
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_packed_sequence_lengths_tensor_in_a_compiled_step():
    """pack_padded_sequence(x, lengths) with lengths a tensor input reads its values
    (lengths.tolist()): value guards, as item()'s, not a fallback; new lengths trace again."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)

    def run(L, compiled):
        lstm = L.nn.LSTM(4, 3, batch_first=True)
        if L is llgrad:
            _copy(ref, lstm)
        rnn = L.nn.utils.rnn

        def step(x, lengths):
            packed = rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                              enforce_sorted=False)
            out, _ = rnn.pad_packed_sequence(lstm(packed)[0], batch_first=True)
            out.sum().backward()
            return out
        f = llgrad.compile(step) if compiled else step
        outs = [_np(f(L.tensor(x), L.tensor(n))) for n in ([4, 5, 2], [4, 5, 2], [3, 1, 3])]
        return outs + [_np(p.grad) for p in lstm.parameters()], lstm, \
            (f if compiled else None)
    want, ref, _ = run(torch, False)
    for compiled in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got, _, f = run(llgrad, compiled)
        assert not compiled or f.entries and not f.graph_breaks, "no compiled code"
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_embedding_max_norm_renormalises_by_each_calls_weights():
    """nn.Embedding(max_norm=...) rescales the looked-up rows whose norm exceeds max_norm
    in place before the lookup: a compiled step decides which rows and by how much from
    its own call's weights and indices (the renorm once read them out of the first
    trace's example values, so later compiled calls rescaled by stale norms)."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((12, 6)).astype(np.float32) * 2
    idx = [rng.integers(0, 12, (4, 3)) for _ in range(4)]

    def run(L, compiled):
        emb = L.nn.Embedding(12, 6, padding_idx=0, max_norm=1.0)
        with L.no_grad():
            emb.weight.copy_(L.tensor(w))
        opt = L.optim.SGD(emb.parameters(), lr=2.0)

        def step(i):
            opt.zero_grad()
            loss = (emb(i) * L.arange(6.0)).sum()
            loss.backward()
            opt.step()
            return loss.detach()
        f = llgrad.compile(step) if compiled else step
        out = [_np(f(L.tensor(i))) for i in idx]
        return out + [_np(emb.weight)], f
    want, _ = run(torch, False)
    for compiled in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got, f = run(llgrad, compiled)
        assert not compiled or f.entries and not f.graph_breaks, "no compiled code"
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
