"""F.scaled_dot_product_attention, written with existing ops (matmul, softmax, where, the
dropout formula), so it traces and compiles as any other code (F.multi_head_attention_forward,
which calls it: functional_multi_head.py).

scaled_dot_product_attention follows PyTorch's CPU results: a row every key of which is masked
gives zeros (and zero gradients), not NaN.

This module sits below nn.functional (which re-exports its public names), so it does not import
it: the few lines of dropout it needs are written here."""
import math

import numpy as np

from ..backends import cuda as _backends
from ..runtime import autocast_cast, dispatch, trace_state
from ..runtime.creation import arange, zeros
from ..runtime.node_names import rename
from ..runtime.tensor import Tensor
from .dropout_noise import uniform_noise_like

__all__ = ["scaled_dot_product_attention"]


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
    scale_factor = scale if scale is not None else \
        1.0 / math.sqrt(query.size(-1)) if query.size(-1) else math.inf  # (C++'s 1/0)
    half = query.dtype.name in ("float16", "bfloat16")
    low = query.dtype
    if half:    # PyTorch's CPU kernels compute half/bfloat16 attention in float32, rounding once
        query, key_acc, value_acc = query.float(), key.float(), value.float()
        if attn_mask is not None and attn_mask.dtype.name in ("float16", "bfloat16"):
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
        out = out.to(low)
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
