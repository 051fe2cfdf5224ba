"""Sweep 9: F.scaled_dot_product_attention as PyTorch's CPU dispatch gives it: 4-D inputs
(no dropout, equal head dims, unit last strides, a mask of 2 or 4 dims without grad) take
the flash kernel, whose result has its own node and the query's layout (a transposed query
gives a transposed result); sdpa_kernel / torch.backends.cuda's flags choose the kernel (or
none is left: an error). Against torch, the same script run with each library; a compiled
call gives eager's."""
import subprocess
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _text(x):
    return str(x).replace("torch", "llgrad")


def _cases(lib):
    F = lib.nn.functional
    B, H, L, E = 2, 4, 3, 8
    lib.manual_seed(0)
    base = lib.randn(B, L, H, E, requires_grad=True)
    qt, qc = base.transpose(1, 2), lib.randn(B, H, L, E, requires_grad=True)
    out = []
    for q, k, v, kw in (
            (qc, qc, qc, {}), (qt, qt, qt, {}), (qc, qt, qt, {}), (qt, qc, qc, {}),
            (lib.randn(H, B, L, E).transpose(0, 1), qc, qc, {}),
            (lib.randn(B, H, E, L).transpose(2, 3), qc, qc, {}),
            (qt, qc, qc, {"dropout_p": 0.1}),
            (qt, qc, qc, {"attn_mask": lib.zeros(L, L, requires_grad=True)}),
            (qt, qc, qc, {"attn_mask": lib.zeros(1, L, L)}),
            (qt, qc, qc, {"attn_mask": lib.zeros(B, 1, L, L)}),
            (qt, qc, qc, {"attn_mask": lib.ones(L, L, dtype=lib.bool), "scale": 0.5}),
            (qt, qc[:1], qc[:1], {}), (qt, qc[:, :2], qc[:, :2], {"enable_gqa": True}),
            (qt, qc, qc[..., :5], {}), (qc.double(), qc.double(), qc.double(), {}),
            (qt, qt, qt, {"is_causal": True}), (qt[0], qt[0], qt[0], {}),
            (qc[:, :1].expand(B, H, L, E), qc, qc, {})):
        y = F.scaled_dot_product_attention(q, k, v, **kw)
        out.append((tuple(y.shape), y.stride(), type(y.grad_fn).__name__,
                    y.detach().numpy().copy()))
    y = F.scaled_dot_product_attention(qt, qt, qt)
    (y * lib.arange(8.)).sum().backward()
    out.append(base.grad.numpy().copy())
    try:
        F.scaled_dot_product_attention(qc[0, 0], qc[0, 0], qc[0, 0], enable_gqa=True)
    except IndexError as e:
        out.append(str(e))
    return out


def test_sdpa_flash_node_and_layout_as_torch():
    a, b = _cases(torch), _cases(llgrad)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if isinstance(x, tuple):
            assert x[:3] == y[:3]
            np.testing.assert_allclose(x[3], y[3], rtol=1e-5, atol=1e-6)
        elif isinstance(x, str):
            assert x == y
        else:
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def _backends(lib):
    F = lib.nn.functional
    A = lib.nn.attention
    flags = lib.backends.cuda
    q = lib.randn(2, 3, 4, 8, requires_grad=True).transpose(1, 2)
    out = []
    for chosen in (A.SDPBackend.MATH, [A.SDPBackend.FLASH_ATTENTION],
                   [A.SDPBackend.EFFICIENT_ATTENTION],
                   [A.SDPBackend.EFFICIENT_ATTENTION, A.SDPBackend.MATH]):
        with A.sdpa_kernel(chosen):
            out.append((flags.flash_sdp_enabled(), flags.math_sdp_enabled(),
                        flags.mem_efficient_sdp_enabled(), flags.cudnn_sdp_enabled()))
            for x, kw in ((q, {}), (q, {"dropout_p": 0.5}), (q[0], {})):
                try:
                    y = F.scaled_dot_product_attention(x, x, x, **kw)
                    out.append((y.stride(), type(y.grad_fn).__name__))
                except RuntimeError as e:
                    out.append(str(e))
    out.append((flags.flash_sdp_enabled(), flags.math_sdp_enabled()))
    flags.enable_flash_sdp(False)
    try:
        out.append(type(F.scaled_dot_product_attention(q, q, q).grad_fn).__name__)
    finally:
        flags.enable_flash_sdp(True)
    return out


def test_sdpa_backend_choice_as_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (PyTorch's C++ notes of why flash was not used)
        assert _text(_backends(llgrad)) == _text(_backends(torch))


def test_sdpa_flash_compiled_as_eager():
    F = llgrad.nn.functional

    def f(x, w):
        q = (x * w).view(2, 3, 4, 8).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        return y.transpose(1, 2).reshape(2, 3, 32).sum(-1)

    g = llgrad.compile(f)
    x = llgrad.tensor(np.random.default_rng(0).standard_normal((2, 3, 32)).astype(np.float32))
    w1 = llgrad.ones(32, requires_grad=True)
    w2 = llgrad.ones(32, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, b = f(x, w1), g(x, w2)
    a.sum().backward()
    b.sum().backward()
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w1.grad.numpy(), w2.grad.numpy(), rtol=1e-5, atol=1e-6)


_NESTED_SCRIPT = """
import warnings
import {lib} as lib
lib.manual_seed(0)
layer = lib.nn.TransformerEncoderLayer(4, 2, 8, batch_first=True)
enc = lib.nn.TransformerEncoder(layer, 2).eval()
mask = lib.tensor([[False] * 5, [False] * 3 + [True] * 2])
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    with lib.no_grad():
        for _ in range(2):
            y = enc(lib.randn(2, 5, 4), src_key_padding_mask=mask)
print(repr([(x.category.__name__, str(x.message).split(" (Triggered internally")[0])
            for x in w]), y[1, 3:].abs().sum().item())
"""


@pytest.mark.slow
def test_encoder_nested_tensor_warning_as_torch():
    # (each library warns once per process: each runs in a fresh one)
    out = [subprocess.run([sys.executable, "-c", _NESTED_SCRIPT.format(lib=lib)],
                          capture_output=True, text=True, check=True).stdout
           for lib in ("torch", "llgrad")]
    assert _text(out[1]) == _text(out[0])
