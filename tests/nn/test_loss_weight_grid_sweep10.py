"""A class weight that requires grad is refused by nll_loss (named as PyTorch's kernel:
nll_loss_forward, or nll_loss2d_forward past 2-d) and multi_margin_loss, with grad mode on
only; F.affine_grid's grad_fn is AffineGridGeneratorBackward0. Against torch."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _calls(lib):
    F = lib.nn.functional
    w = lib.ones(4, requires_grad=True)
    x = lib.tensor(np.linspace(-1, 1, 12).reshape(3, 4).astype(np.float32))
    t = lib.tensor([1, 0, 3])
    return [lambda: F.nll_loss(x, t, weight=w),
            lambda: F.nll_loss(x[0], t[0], weight=w),
            lambda: F.nll_loss(x.reshape(3, 4, 1), t.reshape(3, 1), weight=w, reduction="none"),
            lambda: F.nll_loss(x.reshape(3, 4, 1, 1), t.reshape(3, 1, 1), weight=w),
            lambda: F.cross_entropy(x, t, weight=w, label_smoothing=0.2),
            lambda: lib.nn.CrossEntropyLoss(weight=w)(x, t),
            lambda: F.multi_margin_loss(x, t, weight=w),
            lambda: lib.nn.MultiMarginLoss(p=2, weight=w)(x, t)]


def _outcome(lib, fn, grad):
    try:
        with lib.set_grad_enabled(grad):
            return ("ok", fn().sum().item())
    except RuntimeError as e:
        return ("err", str(e))


@pytest.mark.parametrize("grad", [True, False])
def test_weight_requiring_grad(grad):
    for i, (t, l) in enumerate(zip(_calls(torch), _calls(llgrad))):
        want, got = _outcome(torch, t, grad), _outcome(llgrad, l, grad)
        assert got[0] == want[0], i
        if want[0] == "ok":
            assert np.isclose(got[1], want[1], rtol=1e-6), i
        else:       # (llgrad adds the user's line to this message)
            assert got[1].startswith(want[1]), i


def test_affine_grid_grad_fn():
    out = []
    for lib in (torch, llgrad):
        theta = lib.tensor(np.linspace(-1, 1, 24).reshape(2, 3, 4).astype(np.float32),
                           requires_grad=True)
        g = lib.nn.functional.affine_grid(theta, [2, 1, 2, 2, 3], align_corners=False)
        (g * lib.arange(g.numel()).reshape(g.shape).cos()).sum().backward()
        out.append((type(g.grad_fn).__name__, theta.grad.numpy()))
    assert out[1][0] == out[0][0]
    np.testing.assert_allclose(out[1][1], out[0][1], rtol=1e-5, atol=1e-6)
