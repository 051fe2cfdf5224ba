"""F.scaled_dot_product_attention and F.multi_head_attention_forward, written with existing
ops (matmul, softmax, where, the dropout formula), so they trace and compile as any other code.

scaled_dot_product_attention follows PyTorch's CPU results: a row every key of which is masked
gives zeros (and zero gradients), not NaN. multi_head_attention_forward is PyTorch's function:
with need_weights it computes the weights explicitly (a fully masked row gives NaN there, as in
PyTorch), otherwise it calls scaled_dot_product_attention.

This module sits below nn.functional (which re-exports its public names), so it does not import
it: the few lines of dropout it needs are written here."""
import math
import warnings

import numpy as np

from ..backends import cuda as _backends
from ..runtime import autocast_cast, dispatch, trace_state
from ..runtime.creation import arange, zeros
from ..runtime.functions import cat
from ..runtime.node_names import rename
from ..runtime.tensor import Tensor
from .dropout_noise import uniform_noise_like
from .functional_linear import linear as _linear

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]


def _dropout(x, p):
    """F.dropout(x, p, training=True): PyTorch's mask (a double uniform per element, kept
    below 1 - p), so attention dropout draws what PyTorch's does; traced, an RNG node."""
    if not 0.0 <= p <= 1.0:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    if p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    keep = uniform_noise_like(x) < 1.0 - p
    return x * (keep.to(x.dtype) / (1.0 - p))


def _bias_from_mask(mask, dtype):
    """An additive float mask: a bool mask's False becomes -inf; a float mask stays."""
    if mask.dtype.is_floating_point:
        return mask
    return zeros(tuple(mask.shape), dtype=dtype, device=mask.device).masked_fill(
        mask.logical_not(), float("-inf"))


def _causal_bias(L, S, query):
    """_bias_from_mask(arange(L).unsqueeze(1) >= arange(S), query.dtype) on the query's
    device: the same zeros and -infs made in one NumPy call where nothing traces, batches or
    records ops and the query is a float32/float64 CPU tensor (the seven ops cost ~90 us for
    a 64 x 64 mask, a third of PyTorch's whole attention forward)."""
    at = query.device       # (the mask on the query's device: a meta one too)
    dt = query._dtype.np
    if trace_state.state.tracer is None and dispatch.batching is None and \
            dispatch.profiler is None and dispatch.forward_ad is None and \
            at.type == "cpu" and dt in (np.float32, np.float64):
        return Tensor._from_array(np.where(np.arange(L)[:, None] >= np.arange(S), dt.type(0),
                                           dt.type(-np.inf)))
    causal = arange(L, device=at).unsqueeze(1) >= arange(S, device=at)
    return _bias_from_mask(causal, query.dtype)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """As torch.nn.functional.scaled_dot_product_attention (PyTorch's CPU results: a query
    row whose keys are all masked gives zeros and zero gradients, not NaN; dropout from
    llgrad's generator)."""
    query, key, value, attn_mask = autocast_cast.autocast_lower(query, key, value, attn_mask)
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise RuntimeError(f"Expected query, key, and value to all be  at least 2 dimensional, "
                           f"but got query.dim: {query.dim()} key.dim: {key.dim()} and "
                           f"value.dim: {value.dim()} instead.")
    if not (query.dtype == key.dtype == value.dtype):
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {_cname(query.dtype)} key.dtype: {_cname(key.dtype)} "
                           f"and value.dtype: {_cname(value.dtype)} instead.")
    if attn_mask is not None and attn_mask.dtype.name != "bool" and \
            not attn_mask.dtype.is_floating_point and attn_mask.dtype != query.dtype:
        raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query "
                           f"dtype, but got attn_mask.dtype: {_cname(attn_mask.dtype)} and  "
                           f"query.dtype: {_cname(query.dtype)} instead.")
    flash = _backends.flash_sdp_enabled() and _flash_usable(query, key, value, attn_mask,
                                                             dropout_p, enable_gqa)
    if is_causal and attn_mask is not None and not flash:   # (the flash kernel takes both)
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set "
                           "when is_causal=True")
    if not flash and not _backends.math_sdp_enabled():
        if _backends.flash_sdp_enabled():
            raise RuntimeError("No available kernel.  Aborting execution.")
        raise RuntimeError("No viable backend for scaled_dot_product_attention was found. This "
                           "is likely due to turning off both the math kernel and the fused "
                           "kernels.")
    q = query
    if enable_gqa and query.dim() < 3:      # (PyTorch's query.size(-3))
        raise IndexError(f"Dimension out of range (expected to be in range of [-{query.dim()}, "
                         f"{query.dim() - 1}], but got -3)")
    if enable_gqa and key.size(-3) != query.size(-3):
        if query.size(-3) % key.size(-3):       # (PyTorch's message ends there)
            raise RuntimeError("Number of heads in key and value must divide the number of "
                               "heads in ")
        groups = query.size(-3) // key.size(-3)
        key = _repeat_heads(key, groups)
        value = _repeat_heads(value, groups)
    L, S = query.size(-2), key.size(-2)
    scale_factor = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    half = query.dtype.name == "float16"
    if half:    # PyTorch's CPU kernels compute half attention in float32, rounding once
        query, key_acc, value_acc = query.float(), key.float(), value.float()
        if attn_mask is not None and attn_mask.dtype.name == "float16":
            attn_mask = attn_mask.float()
    else:
        key_acc, value_acc = key, value
    scores = (query * scale_factor).matmul(key_acc.transpose(-2, -1))
    valid = None
    if is_causal and attn_mask is None:
        scores = scores + _causal_bias(L, S, query)
    elif attn_mask is not None:
        bias = _bias_from_mask(attn_mask, query.dtype)
        if is_causal:       # (the flash kernel masks the keys after the query on top)
            at = query.device
            bias = bias.masked_fill(arange(L, device=at).unsqueeze(1) < arange(S, device=at),
                                    float("-inf"))
        # rows where every key is masked: a finite row (no NaN, in values or gradients)
        # whose weights are then zeroed, as PyTorch's CPU kernels give
        valid = (bias != float("-inf")).any(-1, keepdim=True)
        scores = scores + bias.masked_fill(valid.logical_not(), 0.0)
    attn = scores.softmax(-1)
    if valid is not None:
        attn = attn.masked_fill(valid.logical_not(), 0.0)
    if dropout_p > 0.0:
        attn = _dropout(attn, dropout_p)
    out = attn.matmul(value_acc)
    if half:
        out = out.half()
    if not flash:
        return out
    # PyTorch's CPU flash kernel: its own node, its output laid out as the query is
    order = _dense_order(q)
    if order is not None:
        back = [order.index(d) for d in range(4)]
        out = out.permute(order).contiguous().permute(back)
    return rename(out, "ScaledDotProductFlashAttentionForCpuBackward0", (q, key, value))


def _flash_usable(q, k, v, mask, dropout_p, enable_gqa):
    """Whether PyTorch's CPU dispatch picks its flash kernel (sdp_utils_cpp's checks)."""
    if dropout_p > 0.0 or not (q.dim() == k.dim() == v.dim() == 4):
        return False
    if q.dtype.name not in ("float32", "float64", "float16", "bfloat16"):
        return False
    if not q.size(0) == k.size(0) == v.size(0):
        return False
    if enable_gqa:
        if q.size(1) % k.size(1) or k.size(1) != v.size(1):
            return False
    elif not q.size(1) == k.size(1) == v.size(1):
        return False
    if mask is not None:
        if mask.requires_grad or mask.size(-2) not in (q.size(2), 1) \
                or mask.size(-1) not in (k.size(2), 1):
            return False
        if mask.dim() == 4:
            if mask.size(0) not in (1, q.size(0)) or mask.size(1) not in (1, q.size(1)):
                return False
        elif mask.dim() != 2:
            return False
    if not q.size(3) == k.size(3) == v.size(3):
        return False
    if not (q.size(2) and k.size(2)):
        return False
    return q.stride(3) == k.stride(3) == v.stride(3) == 1


def _dense_order(t):
    """The order of t's dims from outermost to innermost in memory when t is dense and not
    contiguous (empty_like keeps such a layout), else None."""
    if t.is_contiguous():
        return None
    order = sorted(range(t.dim()), key=lambda d: (-t.stride(d), d))
    expected = 1
    for d in reversed(order):
        if t.size(d) != 1 and t.stride(d) != expected:
            return None
        expected *= t.size(d)
    return order


def _repeat_heads(x, groups):
    """repeat_interleave(groups, dim=-3) by expand and reshape."""
    shape = tuple(x.shape)
    return x.unsqueeze(-3).expand(shape[:-2] + (groups,) + shape[-2:]) \
        .reshape(shape[:-3] + (shape[-3] * groups,) + shape[-2:])


def _cname(dtype):
    """A dtype as PyTorch's C++ messages name it (float, double, long int, ...)."""
    return {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int",
            "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
            "bool": "bool"}.get(dtype.name, dtype.name)


# ---- multi-head attention (PyTorch's F.multi_head_attention_forward) ----------------------------
def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    if query.dim() == 3:
        if key.dim() != 3 or value.dim() != 3:
            raise AssertionError("For batched (3-D) `query`, expected `key` and `value` to be 3-D"
                                 f" but found {key.dim()}-D and {value.dim()}-D tensors "
                                 "respectively")
        if key_padding_mask is not None and key_padding_mask.dim() != 2:
            raise AssertionError("For batched (3-D) `query`, expected `key_padding_mask` to be "
                                 f"`None` or 2-D but found {key_padding_mask.dim()}-D tensor "
                                 "instead")
        if attn_mask is not None and attn_mask.dim() not in (2, 3):
            raise AssertionError("For batched (3-D) `query`, expected `attn_mask` to be `None`, "
                                 f"2-D or 3-D but found {attn_mask.dim()}-D tensor instead")
        return True
    if query.dim() == 2:
        if key.dim() != 2 or value.dim() != 2:
            raise AssertionError("For unbatched (2-D) `query`, expected `key` and `value` to be "
                                 f"2-D but found {key.dim()}-D and {value.dim()}-D tensors "
                                 "respectively")
        if key_padding_mask is not None and key_padding_mask.dim() != 1:
            raise AssertionError("For unbatched (2-D) `query`, expected `key_padding_mask` to be "
                                 f"`None` or 1-D but found {key_padding_mask.dim()}-D tensor "
                                 "instead")
        if attn_mask is not None:
            if attn_mask.dim() not in (2, 3):
                raise AssertionError("For unbatched (2-D) `query`, expected `attn_mask` to be "
                                     f"`None`, 2-D or 3-D but found {attn_mask.dim()}-D tensor "
                                     "instead")
            if attn_mask.dim() == 3:
                expected = (num_heads, query.shape[0], key.shape[0])
                if tuple(attn_mask.shape) != expected:
                    raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got "
                                         f"{attn_mask.shape}")
        return False
    raise AssertionError("query should be unbatched 2D or batched 3D tensor but received "
                         f"{query.dim()}-D query tensor")


def _canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """PyTorch's: a bool mask becomes an additive float one (-inf where True)."""
    if mask is None:
        return None
    is_float = mask.dtype.is_floating_point
    if mask.dtype.name != "bool" and not is_float:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype != other_type:
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. Use "
                      "same type for both instead.", stacklevel=3)
    if not is_float:
        mask = zeros(tuple(mask.shape), dtype=target_type).masked_fill(mask, float("-inf"))
    return mask


def _none_or_dtype(input):
    return None if input is None else input.dtype


def _in_projection(query, key, value, w_q, w_k, w_v, b):
    b_q = b_k = b_v = None
    if b is not None:
        b_q, b_k, b_v = b.chunk(3)
    return _linear(query, w_q, b_q), _linear(key, w_k, b_k), _linear(value, w_v, b_v)


def _in_projection_packed(q, k, v, w, b):
    E = q.size(-1)
    if k is v and q is k:                         # self-attention: one product
        return _linear(q, w, b).chunk(3, -1)
    if k is v:                                    # encoder-decoder: q apart, k and v together
        w_q, w_kv = w.split([E, 2 * E])
        b_q, b_kv = (None, None) if b is None else b.split([E, 2 * E])
        kv = _linear(k, w_kv, b_kv).chunk(2, -1)
        return _linear(q, w_q, b_q), kv[0], kv[1]
    w_q, w_k, w_v = w.chunk(3)
    return _in_projection(q, k, v, w_q, w_k, w_v, b)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """As torch.nn.functional.multi_head_attention_forward (static_k / static_v are not
    supported)."""
    if static_k is not None or static_v is not None:
        raise NotImplementedError("llgrad's multi_head_attention_forward does not support "
                                  "static_k / static_v")
    is_batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not is_batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                       _none_or_dtype(attn_mask), "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to "
                           "create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None          # the hint: scaled_dot_product_attention makes the mask
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype,
                                    check_other=False)
        if key_padding_mask is not None:
            is_causal = False
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but "
                             f"got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if key.shape[:2] != value.shape[:2]:
            raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match "
                                 f"value's {value.shape[:2]}")
        q, k, v = _in_projection(query, key, value, q_proj_weight, k_proj_weight, v_proj_weight,
                                 in_proj_bias)
    else:
        if key.shape != value.shape:
            raise AssertionError(f"key shape {key.shape} does not match value shape "
                                 f"{value.shape}")
        q, k, v = _in_projection_packed(query, key, value, in_proj_weight, in_proj_bias)
    if attn_mask is not None:
        src_len0 = key.shape[0]
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len0):
                raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but "
                                   f"should be {(tgt_len, src_len0)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len0):
            raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should "
                               f"be {(bsz * num_heads, tgt_len, src_len0)}.")
    if bias_k is not None and bias_v is not None:
        k = cat([k, bias_k.expand(1, bsz, embed_dim)])
        v = cat([v, bias_v.expand(1, bsz, embed_dim)])
        attn_mask = _pad_last(attn_mask)
        key_padding_mask = _pad_last(key_padding_mask)
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k is set but bias_v is None" if bias_k is not None else
                             "bias_v is set but bias_k is None")
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    v = v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    if add_zero_attn:
        z = zeros(bsz * num_heads, 1, head_dim, dtype=k.dtype)
        k, v = cat([k, z], dim=1), cat([v, z], dim=1)
        attn_mask = _pad_last(attn_mask)
        key_padding_mask = _pad_last(key_padding_mask)
    src_len = k.size(1)
    if key_padding_mask is not None:
        if key_padding_mask.shape[0] != bsz:
            raise AssertionError(f"Expected key_padded_mask.shape[0] to be {bsz}, but got "
                                 f"{key_padding_mask.shape[0]}")
        if key_padding_mask.shape[1] != src_len:
            raise AssertionError(f"Expected key_padded_mask.shape[1] to be {src_len}, but got "
                                 f"{key_padding_mask.shape[1]}")
        key_padding_mask = key_padding_mask.view(bsz, 1, 1, src_len) \
            .expand(-1, num_heads, -1, -1).reshape(bsz * num_heads, 1, src_len)
        attn_mask = key_padding_mask if attn_mask is None else attn_mask + key_padding_mask
    if not training:
        dropout_p = 0.0
    if need_weights:
        scores = (q * math.sqrt(1.0 / float(head_dim))).bmm(k.transpose(-2, -1))
        if attn_mask is not None:
            scores = scores + attn_mask
        weights = scores.softmax(-1)
        if dropout_p > 0.0:
            weights = _dropout(weights, dropout_p)
        out = weights.bmm(v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = _linear(out, out_proj_weight, out_proj_bias).view(tgt_len, bsz, -1)
        weights = weights.view(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(1)
        if not is_batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights
    if attn_mask is not None:
        attn_mask = attn_mask.unsqueeze(0) if attn_mask.size(0) == 1 and attn_mask.dim() == 3 \
            else attn_mask.view(bsz, num_heads, -1, src_len)
    q = q.view(bsz, num_heads, tgt_len, head_dim)
    k = k.view(bsz, num_heads, src_len, head_dim)
    v = v.view(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = _linear(out, out_proj_weight, out_proj_bias).view(tgt_len, bsz, -1)
    return (out if is_batched else out.squeeze(1)), None


def _pad_last(mask):
    """F.pad(mask, (0, 1)): one more (zero) column."""
    if mask is None:
        return None
    return cat([mask, zeros(tuple(mask.shape[:-1]) + (1,), dtype=mask.dtype)], dim=-1)
