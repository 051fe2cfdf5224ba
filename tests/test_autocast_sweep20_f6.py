"""Tutorial programs under CPU autocast against PyTorch, eagerly and through llgrad.compile:
a DCGAN step (ConvTranspose2d generator, Conv2d discriminator with BatchNorm and LeakyReLU,
BCEWithLogits, two Adam optimizers; losses compared), and a model whose forward is
decorated `@torch.autocast("cpu")` with a float32 region inside (`autocast(enabled=False)`
around a softmax over .float() logits) trained by SGD."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

R = np.random.default_rng(4)


def _load(src, dst):
    with llgrad.no_grad():
        for v, w in zip(dst.state_dict().values(), src.state_dict().values()):
            v.copy_(llgrad.tensor(w.detach().numpy().copy()))


def _gan(L):
    nn = L.nn
    g = nn.Sequential(nn.ConvTranspose2d(8, 16, 4, 1, 0, bias=False), nn.BatchNorm2d(16),
                      nn.ReLU(), nn.ConvTranspose2d(16, 3, 4, 2, 1, bias=False), nn.Tanh())
    d = nn.Sequential(nn.Conv2d(3, 16, 4, 2, 1, bias=False), nn.LeakyReLU(0.2),
                      nn.Conv2d(16, 1, 4, 1, 0, bias=False), nn.Flatten())
    return g, d


def _gan_step(L, g, d, og, od, real, z):
    crit = L.nn.BCEWithLogitsLoss()
    with L.autocast("cpu", dtype=L.bfloat16):
        fake = g(z)
        out_r, out_f = d(real), d(fake.detach())
        loss_d = crit(out_r, L.ones_like(out_r)) + crit(out_f, L.zeros_like(out_f))
    od.zero_grad()
    loss_d.backward()
    od.step()
    with L.autocast("cpu", dtype=L.bfloat16):
        out = d(fake)
        loss_g = crit(out, L.ones_like(out))
    og.zero_grad()
    loss_g.backward()
    og.step()
    return loss_d.detach(), loss_g.detach(), fake.dtype


REAL = R.standard_normal((3, 4, 3, 8, 8)).astype(np.float32)
Z = R.standard_normal((3, 4, 8, 1, 1)).astype(np.float32)


def _gan_run(L, init, compiled=False):
    g, d = _gan(L)
    for m, i in zip((g, d), init):
        _load(i, m) if L is llgrad else m.load_state_dict(i.state_dict())
    og = L.optim.Adam(g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    od = L.optim.Adam(d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    step = L.compile(_gan_step) if compiled else _gan_step
    out = [step(L, g, d, og, od, L.tensor(REAL[i]), L.tensor(Z[i])) for i in range(3)]
    return [(a.item(), b.item(), str(c).split(".")[-1]) for a, b, c in out], g, d


def test_dcgan_follows_torch_and_compiled_is_eager():
    torch.manual_seed(0)
    init = _gan(torch)
    want, _, _ = _gan_run(torch, init)
    got, g, d = _gan_run(llgrad, init)
    assert [x[2] for x in got] == [x[2] for x in want] == ["bfloat16"] * 3
    np.testing.assert_allclose([x[:2] for x in got], [x[:2] for x in want], rtol=1e-2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cgot, cg, cd = _gan_run(llgrad, init, compiled=True)
    assert cgot == got
    for a, b in zip(list(cg.state_dict().values()) + list(cd.state_dict().values()),
                    list(g.state_dict().values()) + list(d.state_dict().values())):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    msgs = [str(x.message) for x in w if "running eagerly" in str(x.message)]
    assert len(msgs) == 1 and "test_autocast_sweep20_f6.py" in msgs[0]


def _attn_net(L):
    nn = L.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v = nn.Linear(6, 8), nn.Linear(6, 8), nn.Linear(6, 8)
            self.out = nn.Linear(8, 3)

        @L.autocast("cpu", dtype=L.bfloat16)
        def forward(self, x):
            q, k, v = self.q(x), self.k(x), self.v(x)
            scores = q @ k.transpose(-1, -2) / 8 ** 0.5
            with L.autocast("cpu", enabled=False):
                attn = scores.float().softmax(-1)       # (in float32, as HF models do)
                mixed = attn @ v.float()
            return self.out(mixed).mean(1), attn
    return Net()


def _attn_step(L, model, opt, x, y):
    logits, attn = model(x)
    loss = L.nn.functional.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.detach(), attn.dtype, logits.dtype


def test_decorated_forward_with_a_float32_region_follows_torch_and_compiled_is_eager():
    xs = R.standard_normal((3, 4, 5, 6)).astype(np.float32)
    ys = R.integers(0, 3, (3, 4))
    torch.manual_seed(0)
    init = _attn_net(torch)
    runs = []
    for L, compiled in ((torch, False), (llgrad, False), (llgrad, True)):
        m = _attn_net(L)
        _load(init, m) if L is llgrad else m.load_state_dict(init.state_dict())
        opt = L.optim.SGD(m.parameters(), lr=0.5)
        step = L.compile(_attn_step) if compiled else _attn_step
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = [step(L, m, opt, L.tensor(xs[i]), L.tensor(ys[i])) for i in range(3)]
        runs.append(([o[0].item() for o in out], [str(o[1]).split(".")[-1] for o in out],
                     [str(o[2]).split(".")[-1] for o in out],
                     [p.detach().numpy().copy() for p in m.parameters()], w))
    (tl, ta, tg, tw, _), (el, ea, eg, ew, _), (cl, ca, cg, cw, cwarn) = runs
    assert ea == ta == ["float32"] * 3 and eg == tg == ["bfloat16"] * 3
    # (bfloat16 losses: cross_entropy outside the region, on bfloat16 logits; a bfloat16 ulp
    # apart where nll_loss's mean rounds differently)
    np.testing.assert_allclose(el, tl, rtol=1e-2)
    for a, b in zip(ew, tw):
        np.testing.assert_allclose(a, b, atol=1e-2)
    assert (cl, ca, cg) == (el, ea, eg)
    for a, b in zip(cw, ew):
        np.testing.assert_array_equal(a, b)
    assert len([x for x in cwarn if "running eagerly" in str(x.message)]) == 1


def test_bfloat16_log_softmax_over_the_last_dim_is_torch_s():
    # (PyTorch rounds the sum of exponentials and its log to bfloat16 before the subtraction)
    x = np.random.default_rng(0).standard_normal((200, 3)).astype(np.float32)
    want = torch.log_softmax(torch.tensor(x).bfloat16(), -1).float().numpy()
    got = llgrad.log_softmax(llgrad.tensor(x).bfloat16(), -1).float().numpy()
    np.testing.assert_array_equal(got, want)
