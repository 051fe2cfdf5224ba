"""Dropout masks on inputs that are not row-major contiguous, and attention dropout, equal
PyTorch's after the same manual_seed (ATen fills empty_like(input) in memory order, one
double uniform per element), eagerly and compiled; the layout of logsigmoid's result."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

pytestmark = pytest.mark.torch


def _inputs(lib):
    base = lib.arange(1.0, 61.0)
    return {
        "transposed": base.reshape(3, 4, 5).transpose(0, 2),
        "permuted": base.reshape(3, 4, 5).permute(1, 2, 0),
        "strided": base.reshape(6, 10)[:, ::2],
        "sliced transposed": base.reshape(6, 10)[1:5, 2:9].t(),
        "expanded": base[:5].reshape(5, 1).expand(5, 3),
        "expanded rows": base[:5].expand(3, 5),
        "expanded middle": base[:8].reshape(2, 1, 4).expand(2, 3, 4).transpose(0, 2),
    }


@pytest.mark.parametrize("case", list(_inputs(torch)))
@pytest.mark.parametrize("fn", ["dropout", "dropout_inplace", "alpha_dropout"])
def test_dropout_mask_of_a_strided_input_is_torchs(case, fn):
    got = []
    for lib in (torch, llgrad):
        F = lib.nn.functional
        lib.manual_seed(0)
        x = _inputs(lib)[case]
        if fn == "dropout":
            out = F.dropout(x, 0.4)
        elif fn == "dropout_inplace":
            if not case.startswith("expanded"):     # (an expanded tensor cannot be written)
                x = x.mul(1.0)              # (a copy keeping the layout)
            out = F.dropout(x, 0.4, inplace=not case.startswith("expanded"))
        else:
            out = F.alpha_dropout(x, 0.4, training=True)
        got.append((out.numpy().copy(), lib.rand(3).numpy()))
    np.testing.assert_allclose(got[1][0], got[0][0], rtol=1e-6)
    np.testing.assert_array_equal(got[1][1], got[0][1])


def _attention(lib, compiled, batch_first):
    lib.manual_seed(0)
    layer = lib.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.2, batch_first=batch_first)
    mha = lib.nn.MultiheadAttention(8, 2, dropout=0.3, batch_first=batch_first)
    F = lib.nn.functional

    def step(x):
        a = layer(x)
        b = mha(x, x, x)[0]
        c = mha(x, x, x, need_weights=False)[0]
        d = F.scaled_dot_product_attention(x, x, x, dropout_p=0.25)
        (a.sum() + b.sum() + c.sum() + d.sum()).backward()
        return a.detach(), b.detach(), c.detach(), d.detach()

    step = llgrad.compile(step) if compiled else step
    out = []
    for _ in range(3):
        x = lib.randn(2, 3, 8)
        out.append([t.numpy().copy() for t in step(x)] + [layer.linear1.weight.grad.numpy().copy()])
    return out


@pytest.mark.parametrize("batch_first", [pytest.param(True, marks=pytest.mark.slow), False])
@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_attention_and_transformer_dropout_are_torchs(batch_first, compiled):
    """Attention-weight dropout drew float32 uniforms (`rand_like(x) >= p`), and the
    batch_first layer's dropout of the attention output (a transposed tensor) drew in
    row-major order: a TransformerEncoderLayer in training gave other numbers."""
    want = _attention(torch, False, batch_first)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _attention(llgrad, compiled, batch_first)
    for w, g in zip(want, got):
        for a, b in zip(w, g):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("compiled", [False, True])
def test_logsigmoid_of_a_transposed_tensor_is_contiguous(compiled):
    """PyTorch's logsigmoid kernel writes a contiguous output: `.view(-1)` of it works (llgrad
    kept the transposed layout, and the view raised)."""
    got = []
    for lib in (torch, llgrad):
        x = (lib.arange(6.0).reshape(2, 3) - 2).t().requires_grad_()

        def f(x):
            y = lib.nn.functional.logsigmoid(x)
            return y.view(-1) * 2, y.stride(), y.is_contiguous()

        f = llgrad.compile(f) if compiled and lib is llgrad else f
        for _ in range(2):
            y, stride, contiguous = f(x)
        y.sum().backward()
        got.append((y.detach().numpy().copy(), stride, contiguous, x.grad.numpy().copy()))
    np.testing.assert_allclose(got[1][0], got[0][0], rtol=1e-6)
    assert got[1][1:3] == got[0][1:3]
    np.testing.assert_allclose(got[1][3], got[0][3], rtol=1e-6)
