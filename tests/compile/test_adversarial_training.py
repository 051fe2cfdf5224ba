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
