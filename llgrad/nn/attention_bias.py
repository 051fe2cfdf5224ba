"""llgrad.nn.attention.bias: torch.nn.attention.bias's causal attention biases.

causal_upper_left(q, kv) and causal_lower_right(q, kv) make a CausalBias: a Tensor subclass
for scaled_dot_product_attention's attn_mask. PyTorch's holds no data and expands to its
mask inside scaled_dot_product_attention (by __torch_function__, which llgrad has not); here
the tensor IS that boolean mask (True: attend), so scaled_dot_product_attention, and
llgrad.compile tracing it, take it as any boolean mask, with the same numbers. Other ops
on it compute with the mask where PyTorch's refuses them."""
from enum import IntEnum
import warnings

import numpy as np

from ..runtime.tensor import Tensor

__all__ = ["CausalVariant", "CausalBias", "causal_upper_left", "causal_lower_right"]


class CausalVariant(IntEnum):
    """Where a non-square causal mask is aligned, as torch.nn.attention.bias.CausalVariant."""
    UPPER_LEFT = 1
    LOWER_RIGHT = 2


def _mask(variant, seq_len_q, seq_len_kv):
    # (upper left: query i sees keys 0..i; lower right: the last query sees the last key)
    offset = 0 if variant == CausalVariant.UPPER_LEFT else seq_len_kv - seq_len_q
    return np.tri(seq_len_q, seq_len_kv, offset, dtype=bool)


class CausalBias(Tensor):
    """A causal attention mask of seq_len_q x seq_len_kv (see the module's docstring)."""

    def __new__(cls, variant, seq_len_q, seq_len_kv):
        if not isinstance(variant, CausalVariant):
            raise AssertionError(
                f"variant must be a CausalVariant, got {type(variant).__name__}")
        t = cls._from_array(_mask(variant, seq_len_q, seq_len_kv))
        t.variant, t.seq_len_q, t.seq_len_kv = variant, seq_len_q, seq_len_kv
        return t

    def __init__(self, variant, seq_len_q, seq_len_kv):
        if seq_len_q > seq_len_kv and variant == CausalVariant.LOWER_RIGHT:
            warnings.warn("Lower right causal bias will produce NaNs in the output when "
                          "seq_len_q > seq_len_kv!", stacklevel=3)

    def _materialize(self, device=None):
        """The mask as a plain boolean tensor."""
        return Tensor._from_array(_mask(self.variant, self.seq_len_q, self.seq_len_kv))

    def __repr__(self):
        return self._materialize().__repr__()

    __str__ = __repr__


def causal_upper_left(*size):
    """A CausalBias aligned to the attention matrix's upper left corner (is_causal's)."""
    if len(size) != 2:
        raise AssertionError("causal_upper_left only supports 2D tensors")
    return CausalBias(CausalVariant.UPPER_LEFT, size[0], size[1])


def causal_lower_right(*size):
    """A CausalBias aligned to the attention matrix's lower right corner."""
    if len(size) != 2:
        raise AssertionError("causal_lower_right only supports 2D tensors")
    return CausalBias(CausalVariant.LOWER_RIGHT, size[0], size[1])
