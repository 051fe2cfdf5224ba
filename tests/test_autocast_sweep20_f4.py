"""Tutorial programs under CPU autocast against PyTorch, eagerly and through llgrad.compile:
an LSTM sequence classifier (the LSTM layer on autocast's lower-precision list) and a small
ViT (patch Conv2d, class token, nn.TransformerEncoder with norm_first) trained by SGD. The
compiled steps run eagerly (bfloat16 values) with one warning, eager's numbers exactly."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

R = np.random.default_rng(1)


def _load(src, dst):
    with llgrad.no_grad():
        for (k, v), w in zip(dst.state_dict().items(), src.state_dict().values()):
            v.copy_(llgrad.tensor(w.detach().numpy().copy()))


def _lstm(L):
    nn = L.nn

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 8)
            self.lstm = nn.LSTM(8, 12, num_layers=2, batch_first=True)
            self.head = nn.Linear(12, 3)

        def forward(self, idx):
            out, (h, c) = self.lstm(self.emb(idx))
            return self.head(out[:, -1]), h
    return Tagger()


def _vit(L):
    nn = L.nn

    class ViT(nn.Module):
        def __init__(self, d=16):
            super().__init__()
            self.patch = nn.Conv2d(3, d, 4, stride=4)
            self.cls = nn.Parameter(L.zeros(1, 1, d))
            self.pos = nn.Parameter(L.randn(1, 5, d) * 0.02)
            layer = nn.TransformerEncoderLayer(d, 2, 32, dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=True)
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 4)

        def forward(self, img):
            x = self.patch(img).flatten(2).transpose(1, 2)
            x = L.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
            return self.head(self.norm(self.enc(x))[:, 0]), x
    return ViT()


def _step(L, model, opt, x, y):
    with L.autocast(device_type="cpu", dtype=L.bfloat16):
        logits, inner = model(x)
        loss = L.nn.functional.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    L.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    opt.step()
    return loss.detach(), inner.dtype


DATA = {"lstm": (R.integers(0, 20, (3, 4, 7)), R.integers(0, 3, (3, 4))),
        "vit": (R.standard_normal((3, 4, 3, 8, 8)).astype(np.float32), R.integers(0, 4, (3, 4)))}
MAKE = {"lstm": _lstm, "vit": _vit}


def _run(L, name, init, compiled=False):
    model = MAKE[name](L)
    if L is llgrad:
        _load(init, model)
    else:
        model.load_state_dict(init.state_dict())
    opt = L.optim.SGD(model.parameters(), lr=0.2)
    step = L.compile(_step) if compiled else _step
    xs, ys = DATA[name]
    res = [step(L, model, opt, L.tensor(xs[i]), L.tensor(ys[i])) for i in range(3)]
    return [r[0].item() for r in res], str(res[0][1]).split(".")[-1], model


@pytest.mark.parametrize("name", ["lstm", "vit"])
def test_sequence_models_follow_torch_and_compiled_is_eager(name):
    torch.manual_seed(0)
    init = MAKE[name](torch)
    try:
        tl, tdt, tm = _run(torch, name, init)
    except RuntimeError as e:       # (PyTorch's oneDNN has no bfloat16 LSTM on some CPUs)
        if "could not create a primitive descriptor" not in str(e):
            raise
        pytest.skip(f"torch's CPU kernel refuses this host: {e}")
    el, edt, em = _run(llgrad, name, init)
    assert edt == tdt
    np.testing.assert_allclose(el, tl, rtol=5e-3)
    for (k, a), b in zip(em.state_dict().items(), tm.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-2, err_msg=k)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cl, cdt, cm = _run(llgrad, name, init, compiled=True)
    assert cl == el and cdt == edt
    for a, b in zip(cm.state_dict().values(), em.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    msgs = [str(x.message) for x in w if "running eagerly" in str(x.message)]
    assert len(msgs) == 1 and "test_autocast_sweep20_f4.py" in msgs[0]


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("grad", [False, True])
def test_encoder_inference_fast_path_under_autocast_is_torch_s(norm_first, grad):
    """An eval-mode TransformerEncoder without autograd runs PyTorch's fused layer kernel,
    whose residual adds go in place into the attention's and feed-forward's autocast-dtype
    outputs: its result is bfloat16 (the ordinary path's is float32)."""
    src = R.standard_normal((2, 5, 8)).astype(np.float32)
    res = []
    for L in (torch, llgrad):
        L.manual_seed(0)
        layer = L.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                             norm_first=norm_first, activation="gelu")
        enc = L.nn.TransformerEncoder(layer, 2, norm=L.nn.LayerNorm(8),
                                      enable_nested_tensor=False)
        if L is llgrad:
            _load(res[0][2], enc)
        enc.eval()
        with L.set_grad_enabled(grad), L.autocast("cpu", dtype=L.bfloat16):
            one = enc.layers[0](L.tensor(src))
            out = enc(L.tensor(src))
        res.append((one, out, enc))
    for got, want in zip(res[1][:2], res[0][:2]):
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_allclose(got.detach().float().numpy(), want.detach().float().numpy(),
                                   atol=3e-2)
