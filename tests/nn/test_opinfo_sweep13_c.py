"""Differences found by running PyTorch's OpInfo ("nn.functional.*") and ModuleInfo databases
against llgrad (sweep 13, helper C), each kept as a small standalone comparison with torch:
empty-batch fractional max pooling, bilinear on integer dtypes, empty as_strided views past
the end of their storage, half-precision attention computed in float32 as PyTorch's CPU
kernels do."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
F, LF = torch.nn.functional, llgrad.nn.functional


def _ll(t, requires_grad=False):
    return llgrad.tensor(t.detach().numpy(), requires_grad=requires_grad)


@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("return_indices", [False, True])
def test_fractional_max_pool_empty_batch(nd, return_indices):
    shape = (0, 1) + (4, 5, 4)[:nd]
    fn_t, fn_l = getattr(F, f"fractional_max_pool{nd}d"), getattr(LF, f"fractional_max_pool{nd}d")
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    lx = _ll(x, requires_grad=True)
    want = fn_t(x, 2, output_size=2, return_indices=return_indices)
    got = fn_l(lx, 2, output_size=2, return_indices=return_indices)
    want, got = (want, got) if return_indices else ((want,), (got,))
    for w, g in zip(want, got):
        assert tuple(g.shape) == tuple(w.shape)
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
    got[0].sum().backward()
    assert tuple(lx.grad.shape) == shape


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "uint8"])
@pytest.mark.parametrize("bias", [False, True])
def test_bilinear_integer_dtype_kept(dtype, bias):
    g = torch.Generator().manual_seed(0)
    mk = lambda *s: torch.randint(0, 40, s, generator=g).to(getattr(torch, dtype))  # noqa: E731
    a, b, w, c = mk(4, 3), mk(4, 5), mk(2, 3, 5), mk(2)
    want = F.bilinear(a, b, w, c if bias else None)
    got = LF.bilinear(_ll(a), _ll(b), _ll(w), _ll(c) if bias else None)
    assert str(got.dtype) == f"llgrad.{dtype}"
    np.testing.assert_array_equal(got.numpy(), want.numpy())   # wraps around as PyTorch's


@pytest.mark.parametrize("size,stride,offset", [((0,), (2,), 1), ((1, 0, 3), (6, 6, 2), 1),
                                                ((0, 5), (1, 1), 9)])
def test_as_strided_empty_view_needs_no_storage(size, stride, offset):
    n = 4 if offset == 9 else 0
    want = torch.ones(n).as_strided(size, stride, offset)
    got = llgrad.ones(n).as_strided(size, stride, offset)
    assert tuple(got.shape) == tuple(want.shape)
    assert got.storage_offset() == want.storage_offset()
    assert (got + 1).numpy().shape == tuple(size)


def test_as_strided_nonempty_still_checked():
    with pytest.raises(RuntimeError, match="out of bounds for storage"):
        llgrad.ones(4).as_strided((2,), (1,), 3)
    with pytest.raises(RuntimeError, match="out of bounds for storage"):
        torch.ones(4).as_strided((2,), (1,), 3)


def _half(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g, dtype=torch.float64) * 18 - 9).half()


@pytest.mark.parametrize("shape", [(4, 3, 8), (4, 4, 3, 8)])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_float16_rounds_once_as_pytorch(shape, causal):
    q = _half(shape, 0)
    k, v = _half(shape[:-2] + (6, 8), 1), _half(shape[:-2] + (6, 8), 2)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    got = LF.scaled_dot_product_attention(_ll(q), _ll(k), _ll(v), is_causal=causal)
    assert got.dtype == llgrad.float16
    # PyTorch's math kernel (3-D) is float32 then one rounding: bit-equal; its flash kernel
    # (4-D) rounds its probabilities to half before the product with value: within an ulp
    diff = np.abs(got.numpy().astype(np.float64) - want.double().numpy())
    assert diff.max() <= (0 if len(shape) == 3 else 2 ** -6 * 9), diff.max()


def test_sdpa_float16_mask_and_grad():
    q, k, v = _half((2, 3, 4), 3), _half((2, 5, 4), 4), _half((2, 5, 4), 5)
    m = _half((3, 5), 6)
    tq = q.float().requires_grad_()
    want = F.scaled_dot_product_attention(tq.half(), k, v, attn_mask=m)
    lq = _ll(q.float(), requires_grad=True)
    got = LF.scaled_dot_product_attention(lq.half(), _ll(k), _ll(v), attn_mask=_ll(m))
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    want.float().sum().backward()
    got.float().sum().backward()
    np.testing.assert_allclose(lq.grad.numpy(), tq.grad.numpy(), rtol=2e-2, atol=2e-2)


def test_linear_float16_bias_rounds_once():
    # (float16 addmm / linear / baddbmm: PyTorch adds the bias to the float32 product and
    # rounds once; fixed in sweep 14, see tests/runtime/test_opinfo_sweep14_c.py)
    x, w, b = _half((16, 8), 7), _half((4, 8), 8), _half((4,), 9)
    want = F.linear(x, w, b)
    got = LF.linear(_ll(x), _ll(w), _ll(b))
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.slow      # (torch.func's first import)
@pytest.mark.xfail(strict=True, reason="max_unpool1d with duplicate indices: PyTorch's CPU kernel "
                   "keeps the first value (and forward AD its tangent); llgrad keeps the last, "
                   "and llgrad.func.jvp sums the duplicates' tangents")
def test_max_unpool_duplicate_indices():
    x = torch.tensor([[[1.0, 2.0]]], dtype=torch.float64)
    t = torch.tensor([[[0.3, 0.5]]], dtype=torch.float64)
    idx = torch.tensor([[[1, 1]]])
    f = lambda v: F.max_unpool1d(v, idx, 2, output_size=(1, 1, 3))  # noqa: E731
    want, want_t = torch.func.jvp(f, (x,), (t,))
    li = _ll(idx)
    g = lambda v: LF.max_unpool1d(v, li, 2, output_size=(1, 1, 3))  # noqa: E731
    got, got_t = llgrad.func.jvp(g, (_ll(x),), (_ll(t),))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_allclose(got_t.numpy(), want_t.numpy())
