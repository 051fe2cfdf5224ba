"""Tutorial programs under CPU autocast against PyTorch, eagerly and through llgrad.compile:
a model with HF-style custom autograd Functions (torch.amp.custom_fwd / custom_bwd: one
whose backward runs under the forward's autocast, one with cast_inputs=float32), trained in
float16 autocast with torch.amp.GradScaler("cpu") (scale, unscale_, clip, step, update)."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

R = np.random.default_rng(2)
XS = R.standard_normal((4, 8, 10)).astype(np.float32)
YS = R.integers(0, 4, (4, 8))


def _model(L):
    nn = L.nn

    class LinearFn(L.autograd.Function):
        @staticmethod
        @L.amp.custom_fwd(device_type="cpu")
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x @ w.t()

        @staticmethod
        @L.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return g @ w, g.t() @ x          # (in float16: the forward's autocast)

    class Norm(L.autograd.Function):
        @staticmethod
        @L.amp.custom_fwd(device_type="cpu", cast_inputs=L.float32)
        def forward(ctx, x):
            r = (x.pow(2).mean(-1, keepdim=True) + 1e-6).rsqrt()
            ctx.save_for_backward(x, r)
            return x * r

        @staticmethod
        @L.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            x, r = ctx.saved_tensors
            y = x * r
            return r * (g - y * (g * y).mean(-1, keepdim=True))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Parameter(L.randn(16, 10) * 0.3)
            self.w2 = nn.Parameter(L.randn(4, 16) * 0.3)

        def forward(self, x):
            h = Norm.apply(LinearFn.apply(x, self.w1))
            return LinearFn.apply(L.relu(h), self.w2)
    return Net()


def _step(L, model, opt, scaler, x, y):
    with L.autocast("cpu", dtype=L.float16):
        out = model(x)
        loss = L.nn.functional.cross_entropy(out, y)
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    L.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
    return loss.detach(), out.dtype


def _run(L, init, compiled=False):
    model = _model(L)
    with L.no_grad():
        for p, w in zip(model.parameters(), init):
            p.copy_(L.tensor(w))
    opt = L.optim.SGD(model.parameters(), lr=0.3)
    scaler = L.amp.GradScaler("cpu", init_scale=2.0 ** 8)
    step = L.compile(_step) if compiled else _step
    res = [step(L, model, opt, scaler, L.tensor(XS[i]), L.tensor(YS[i])) for i in range(4)]
    return ([r[0].item() for r in res], str(res[0][1]).split(".")[-1], scaler.get_scale(),
            [p.detach().numpy().copy() for p in model.parameters()])


def test_custom_functions_and_grad_scaler_follow_torch_and_compiled_is_eager():
    torch.manual_seed(0)
    init = [p.detach().numpy().copy() for p in _model(torch).parameters()]
    tl, tdt, ts, tw = _run(torch, init)
    el, edt, es, ew = _run(llgrad, init)
    assert edt == tdt == "float16" and es == ts
    np.testing.assert_allclose(el, tl, rtol=2e-3)
    for a, b in zip(ew, tw):
        np.testing.assert_allclose(a, b, atol=2e-3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cl, cdt, cs, cw = _run(llgrad, init, compiled=True)
    assert (cl, cdt, cs) == (el, edt, es)
    for a, b in zip(cw, ew):
        np.testing.assert_array_equal(a, b)
    assert len([x for x in w if "running eagerly" in str(x.message)]) <= 1
