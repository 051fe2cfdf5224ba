"""torch.nn.attention.bias (the SDPA tutorial's "Using SDPA with attn_bias subclasses"):
causal_upper_left / causal_lower_right make a CausalBias, a Tensor subclass that
scaled_dot_product_attention takes as its attn_mask, eagerly and under llgrad.compile."""
import importlib
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
F = llgrad.nn.functional


def _inputs(lib, q, kv, seed=0):
    rng = np.random.default_rng(seed)
    return [lib.tensor(rng.standard_normal((2, 3, n, 4)).astype(np.float32))
            for n in (q, kv, kv)]


@pytest.mark.parametrize("q, kv", [(2, 5), (4, 4), (1, 3)])
@pytest.mark.parametrize("variant", ["causal_upper_left", "causal_lower_right"])
def test_bias_mask_and_attention_equal_torch(variant, q, kv):
    ours = getattr(importlib.import_module("llgrad.nn.attention.bias"), variant)(q, kv)
    theirs = getattr(importlib.import_module("torch.nn.attention.bias"), variant)(q, kv)
    assert isinstance(ours, llgrad.Tensor)
    assert type(ours).__name__ == type(theirs).__name__ == "CausalBias"
    np.testing.assert_array_equal(ours._materialize().numpy(), theirs._materialize().numpy())
    assert repr(ours) == repr(theirs)
    out = F.scaled_dot_product_attention(*_inputs(llgrad, q, kv), ours)
    ref = torch.nn.functional.scaled_dot_product_attention(*_inputs(torch, q, kv), theirs)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)


def test_upper_left_is_is_causal_and_compiles():
    from llgrad.nn.attention.bias import causal_lower_right, causal_upper_left
    q, k, v = _inputs(llgrad, 2, 5)
    upper, lower = causal_upper_left(2, 5), causal_lower_right(2, 5)
    eager_upper = F.scaled_dot_product_attention(q, k, v, upper)
    assert llgrad.allclose(eager_upper, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert not llgrad.allclose(eager_upper, F.scaled_dot_product_attention(q, k, v, lower))
    compiled = llgrad.compile(F.scaled_dot_product_attention, fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for bias in (upper, lower):
            np.testing.assert_allclose(compiled(q, k, v, bias).numpy(),
                                       F.scaled_dot_product_attention(q, k, v, bias).numpy(),
                                       rtol=1e-6, atol=1e-7)


def test_lower_right_longer_query_warns_and_bad_arguments_raise():
    bias = importlib.import_module("llgrad.nn.attention.bias")
    with pytest.warns(UserWarning, match="Lower right causal bias will produce NaNs"):
        bias.causal_lower_right(3, 2)
    with pytest.raises(AssertionError, match="only supports 2D tensors"):
        bias.causal_upper_left(1, 2, 3)
    with pytest.raises(AssertionError, match="variant must be a CausalVariant"):
        bias.CausalBias(1, 2, 2)
