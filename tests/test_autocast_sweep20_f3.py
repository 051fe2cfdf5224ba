"""Tutorial programs under CPU autocast against PyTorch, eagerly and through llgrad.compile:
Karpathy's build-nanogpt training step (`with torch.autocast(device_type="cpu",
dtype=torch.bfloat16): logits, loss = model(x, y)`, then backward outside, grad clipping,
AdamW fused=False with decayed/undecayed groups and the cosine lr with warm-up) and a
ResNet-ish CNN with BatchNorm trained by SGD. The compiled step runs eagerly (bfloat16
values) with one warning naming the user's line, and its numbers are eager's exactly."""
import math
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

R = np.random.default_rng(0)


def _copy_weights(src, dst):
    sd = {k: v.detach().numpy().copy() for k, v in src.state_dict().items()}
    with llgrad.no_grad():
        for k, v in dst.state_dict().items():
            v.copy_(llgrad.tensor(sd[k]))


def _gpt(L):
    nn, F = L.nn, L.nn.functional

    class Block(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.ln_1, self.ln_2, self.h = nn.LayerNorm(d), nn.LayerNorm(d), h
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * d, d))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, vocab=64, block=16, d=32, n_layer=2, h=2):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block, d)
            self.blocks = nn.ModuleList([Block(d, h) for _ in range(n_layer)])
            self.ln_f, self.lm_head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
            self.wte.weight = self.lm_head.weight         # (weight tying)

        def forward(self, idx, targets=None):
            T = idx.size(1)
            x = self.wte(idx) + self.wpe(L.arange(0, T, dtype=L.long))
            for b in self.blocks:
                x = b(x)
            logits = self.lm_head(self.ln_f(x))
            loss = None if targets is None else F.cross_entropy(
                logits.view(-1, logits.size(-1)), targets.view(-1))
            return logits, loss
    return GPT()


def _get_lr(it, max_lr=6e-4, warmup=2, max_steps=6):
    if it < warmup:
        return max_lr * (it + 1) / warmup
    ratio = (it - warmup) / (max_steps - warmup)
    return max_lr * 0.1 + 0.5 * (1.0 + math.cos(math.pi * ratio)) * max_lr * 0.9


_GPT_DATA = R.integers(0, 64, (4, 4, 17))


def _gpt_step(L, model, opt, x, y, it):
    with L.autocast(device_type="cpu", dtype=L.bfloat16):
        logits, loss = model(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    norm = L.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    for group in opt.param_groups:
        group["lr"] = _get_lr(it)
    opt.step()
    return loss.detach(), norm


def _gpt_run(L, weights_from, steps, compiled=False):
    L.manual_seed(0)
    model = _gpt(L)
    if weights_from is not None:
        _copy_weights(weights_from, model)
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = L.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=False)
    step = L.compile(_gpt_step) if compiled else _gpt_step
    data, out = _GPT_DATA, []
    for it in range(steps):
        x, y = L.tensor(data[it][:, :-1]), L.tensor(data[it][:, 1:])
        loss, norm = step(L, model, opt, x, y, it)
        out.append((loss.item(), norm.item()))
    return model, out


def test_nanogpt_step_follows_torch_and_compiled_is_eager():
    tmodel, tout = _gpt_run(torch, None, 4)
    torch.manual_seed(0)
    tm0 = _gpt(torch)       # (the same initial weights as tmodel's)
    _, eout = _gpt_run(llgrad, tm0, 4)
    np.testing.assert_allclose([o[0] for o in eout], [o[0] for o in tout], rtol=2e-3)
    np.testing.assert_allclose([o[1] for o in eout], [o[1] for o in tout], rtol=2e-2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cmodel, cout = _gpt_run(llgrad, tm0, 4, compiled=True)
    emodel, eout2 = _gpt_run(llgrad, tm0, 4)
    assert cout == eout2 == eout
    for a, b in zip(cmodel.parameters(), emodel.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    msgs = [str(x.message) for x in w if "running eagerly" in str(x.message)]
    assert len(msgs) == 1 and "bfloat16" in msgs[0] and "test_autocast_sweep20_f3.py" in msgs[0]


def _resnet(L):
    nn = L.nn

    class Res(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
            self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

        def forward(self, x):
            h = L.relu(self.b1(self.c1(x)))
            return L.relu(x + self.b2(self.c2(h)))

    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         Res(8), nn.MaxPool2d(2), Res(8), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, 5))


def _cnn_step(L, model, opt, x, y):
    model.train()
    with L.autocast("cpu", dtype=L.bfloat16):
        out = model(x)
        loss = L.nn.functional.cross_entropy(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.detach(), out.detach()


def _cnn_run(L, init, compiled=False):
    model = _resnet(L)
    _copy_weights(init, model) if L is llgrad else model.load_state_dict(init.state_dict())
    opt = L.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = L.compile(_cnn_step) if compiled else _cnn_step
    losses = []
    for i in range(3):
        loss, out = step(L, model, opt, L.tensor(_CNN_X[i]), L.tensor(_CNN_Y[i]))
        losses.append(loss.item())
    model.eval()
    with L.no_grad(), L.autocast("cpu", dtype=L.bfloat16):
        ev = model(L.tensor(_CNN_X[0]))
    return losses, out, ev, model


_CNN_X = R.standard_normal((3, 4, 3, 8, 8)).astype(np.float32)
_CNN_Y = R.integers(0, 5, (3, 4))


def test_resnet_with_batchnorm_follows_torch_and_compiled_is_eager():
    torch.manual_seed(0)
    init = _resnet(torch)
    tl, tout, tev, tm = _cnn_run(torch, init)
    el, eout, eev, em = _cnn_run(llgrad, init)
    assert str(eout.dtype) == "llgrad.bfloat16" and str(tout.dtype) == "torch.bfloat16"
    assert eev.dtype is llgrad.bfloat16
    np.testing.assert_allclose(el, tl, rtol=1e-2)
    np.testing.assert_allclose(eev.float().numpy(), tev.float().numpy(), atol=0.1, rtol=0.05)
    for (k, a), b in zip(em.state_dict().items(), tm.state_dict().values()):
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], k
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=2e-2, rtol=2e-2, err_msg=k)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cl, cout, cev, cm = _cnn_run(llgrad, init, compiled=True)
    assert cl == el
    np.testing.assert_array_equal(cout.float().numpy(), eout.float().numpy())
    for a, b in zip(cm.state_dict().values(), em.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    msgs = [str(x.message) for x in w if "running eagerly" in str(x.message)]
    assert len(msgs) == 1 and "test_autocast_sweep20_f3.py" in msgs[0]
