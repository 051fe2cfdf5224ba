"""llgrad.nn.attention.flex_attention: torch.nn.attention.flex_attention's API.

flex_attention(query, key, value, score_mod, block_mask, ...) computes PyTorch's reference
("math") FlexAttention: scores = q @ k^T * scale, score_mod(score, b, h, q_idx, kv_idx) and
block_mask's mask_mod(b, h, q_idx, kv_idx) applied, rows whose keys are all masked giving
zeros, softmax, @ v. PyTorch vmaps the two functions over scalar indices; here they are
called once with int64 index tensors shaped to broadcast against the (B, H, L, S) scores
(b: (B, 1, 1, 1), h: (1, H, 1, 1), q_idx: (1, 1, L, 1), kv_idx: (1, 1, 1, S)), which gives
the same values for the pointwise functions (and captured-tensor lookups like bias[h]) that
PyTorch's compiler accepts. The result is ordinary llgrad ops: eager autograd (PyTorch's CPU
kernel has no backward), and llgrad.compile traces it into one graph.

A BlockMask keeps its mask_mod and sizes; its block structure (to_dense, sparsity,
kv_num_blocks) is worked out from the dense mask when asked for, at BLOCK_SIZE. The mask is
applied densely, so a block PyTorch would skip (all masked for the block mask's own b / h)
still gets the mask_mod's values for the query's own b / h."""
import math
import warnings
from typing import NamedTuple

from ..runtime import dtypes
from ..runtime.creation import arange, full
from ..runtime.functions import where
from ..runtime.tensor import Tensor

__all__ = ["AuxOutput", "AuxRequest", "BlockMask", "and_masks", "create_block_mask",
           "create_mask", "flex_attention", "noop_mask", "or_masks"]

_DEFAULT_SPARSE_BLOCK_SIZE = 128


class AuxRequest(NamedTuple):
    """Which auxiliary outputs flex_attention returns (return_aux=...)."""
    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """flex_attention's auxiliary outputs (None where not requested)."""
    lse: Tensor = None
    max_scores: Tensor = None


def _indices(B, H, L, S, device=None):
    return (arange(B, device=device).view(B, 1, 1, 1), arange(H, device=device).view(1, H, 1, 1),
            arange(L, device=device).view(1, 1, L, 1), arange(S, device=device).view(1, 1, 1, S))


def noop_mask(batch, head, token_q, token_kv):
    """A mask_mod keeping every score."""
    return batch.new_ones(size=(), dtype=dtypes.bool_, device=batch.device)


def _combined(mask_mods, empty, join):
    """The mask_mod joining mask_mods' masks with join, from `empty` (a 0-d bool tensor)."""
    if not all(callable(arg) for arg in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def combined(b, h, q_idx, kv_idx):
        result = empty(b)
        for mask in mask_mods:
            result = join(result, mask(b, h, q_idx, kv_idx))
        return result
    return combined


def and_masks(*mask_mods):
    """The mask_mod that is the intersection of mask_mods."""
    return _combined(mask_mods, lambda b: b.new_ones((), dtype=dtypes.bool_),
                     lambda x, y: x & y)


def or_masks(*mask_mods):
    """The mask_mod that is the union of mask_mods."""
    return _combined(mask_mods, lambda b: b.new_zeros((), dtype=dtypes.bool_),
                     lambda x, y: x | y)


def create_mask(mod_fn, B, H, Q_LEN, KV_LEN, device=None):
    """The dense boolean mask (B, H, Q_LEN, KV_LEN) of a mask_mod (B / H None: 1)."""
    B, H = B or 1, H or 1
    b, h, q, kv = _indices(B, H, Q_LEN, KV_LEN, device)
    return mod_fn(b, h, q, kv).expand(B, H, Q_LEN, KV_LEN).clone()


class BlockMask:
    """A mask_mod with the sizes it was made for (see the module's docstring)."""

    def __init__(self, mask_mod, B, H, Q_LEN, KV_LEN, BLOCK_SIZE, device=None):
        self.mask_mod = mask_mod
        self.seq_lengths = (Q_LEN, KV_LEN)
        self.shape = (B, H, Q_LEN, KV_LEN)
        self.BLOCK_SIZE = BLOCK_SIZE
        self.device = device

    def _dense(self):
        return create_mask(self.mask_mod, *self.shape, device=self.device)

    def to_dense(self):
        """The block-level mask (B, H, ceil(Q / block), ceil(KV / block)): True where a
        block holds any unmasked score."""
        B, H, Q, KV = self.shape
        bq, bkv = self.BLOCK_SIZE
        nq, nkv = -(-Q // bq), -(-KV // bkv)
        mask = self._dense()
        padded = mask.new_zeros((B, H, nq * bq, nkv * bkv))
        padded[:, :, :Q, :KV] = mask
        return padded.view(B, H, nq, bq, nkv, bkv).any(5).any(3).to(mask.dtype)

    @property
    def kv_num_blocks(self):
        return self.to_dense().sum(-1).int()

    def numel(self):
        B, H, Q, KV = self.shape
        return B * H * Q * KV

    def sparsity(self):
        """As PyTorch: 100 * (1 - (blocks computed x block area) / (B H Q KV))."""
        dense = self.to_dense().sum().item() * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1]
        return 100 * (1 - dense / self.numel())

    def _adjust(self, new_q_len, new_kv_len):
        """The block mask cropped to its upper left new_q_len x new_kv_len."""
        return BlockMask(self.mask_mod, self.shape[0], self.shape[1], new_q_len, new_kv_len,
                         self.BLOCK_SIZE, self.device)

    def __repr__(self):
        return f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%)"


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device=None,
                      BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE, _compile=False,
                      separate_full_blocks=True, compute_dq_write_order=False,
                      dq_kv_order=True):
    """A BlockMask of mask_mod for B x H (None: broadcast) x Q_LEN x KV_LEN."""
    block = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else tuple(BLOCK_SIZE)
    return BlockMask(mask_mod, B or 1, H or 1, Q_LEN, KV_LEN, block, device)


def _check(query, key, value, block_mask, enable_gqa):
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise NotImplementedError("NYI: query, key, and value must be 4D tensors")
    if (not enable_gqa) and query.size(-3) != key.size(-3):
        raise ValueError(f"Expect query and key/value to have the same number of heads but got "
                         f"Hq={query.size(-3)} and Hkv={key.size(-3)}. Try setting "
                         f"enable_gqa=True for GQA.")
    if enable_gqa and query.size(1) % key.size(1) != 0:
        raise ValueError(f"Expect number of query heads to be a multiple of kv heads for GQA "
                         f"but got Hq={query.size(1)} and Hkv={key.size(1)}.")
    if query.size(0) != key.size(0):
        raise ValueError(f"Expect query and key/value to have the same batch size, or non-none "
                         f"block_mask, but got block_mask=None, Bq={query.size(0)}, and "
                         f"Bkv={key.size(0)}.")
    if block_mask is None:
        return
    q_len, kv_len = block_mask.seq_lengths
    head = (f"block_mask was created for block_mask.shape={block_mask.shape} but got "
            f"q_len={query.size(-2)} and kv_len={key.size(-2)}. ")
    if query.size(-2) > q_len or key.size(-2) > kv_len:
        raise ValueError(head + "As the block mask was created for a smaller length than "
                         "you're using it for, you likely need to create a new block mask.")
    if query.size(-2) < q_len or key.size(-2) < kv_len:
        raise ValueError(head + "As the block mask was created for a larger length than "
                         "you're using it for, you can either 1. create a new block mask with "
                         "the correct length, or 2. 'adjust' the existing block mask to the "
                         "correct length by calling block_mask._adjust(q_len, kv_len). This "
                         "essentially 'crops' the block mask to the upper left corner, which "
                         "does not work for all mask_mods!")


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None,
                   enable_gqa=False, return_lse=False, kernel_options=None, *,
                   return_aux=None):
    """torch.nn.attention.flex_attention.flex_attention (see the module's docstring)."""
    _check(query, key, value, block_mask, enable_gqa)
    if return_lse and return_aux is not None:
        raise ValueError("Cannot specify both return_lse and return_aux. return_lse is "
                         "deprecated, please use return_aux=AuxRequest(lse=True) instead.")
    if return_lse:
        warnings.warn("return_lse is deprecated and will be removed in v2.10. Please use "
                      "return_aux=AuxRequest(lse=True) instead.", FutureWarning, stacklevel=2)
    B, Hq, L, E = query.shape
    S = key.size(-2)
    if Hq != key.size(1):       # (GQA: query head h reads kv head h // groups)
        groups = Hq // key.size(1)
        key = key.repeat_interleave(groups, dim=1)
        value = value.repeat_interleave(groups, dim=1)
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    work = dtypes.float64 if query.dtype.name == "float64" else dtypes.float32
    scores = query.to(work).matmul(key.to(work).transpose(-2, -1))
    scores = (scores * scale).to(work)
    b, h, q_idx, kv_idx = _indices(B, Hq, L, S, query.device)
    if score_mod is not None:
        scores = score_mod(scores, b, h, q_idx, kv_idx)
    if block_mask is not None:
        keep = block_mask.mask_mod(b, h, q_idx, kv_idx)
        scores = where(keep, scores, full((), float("-inf"), dtype=work))
    scores = scores.expand(B, Hq, L, S)
    # rows with every key masked: weights 0 and lse -inf, with no NaN in values or gradients
    # (their scores are read as zeros, then their weights dropped)
    masked_rows = (scores == float("-inf")).all(-1, keepdim=True)
    safe = where(masked_rows, 0.0, scores)
    weights = where(masked_rows, 0.0, safe.softmax(-1))
    out = weights.to(query.dtype).matmul(value)
    lse = where(masked_rows, float("-inf"), safe.logsumexp(-1, keepdim=True)).squeeze(-1)
    if return_lse:
        return out, lse
    if return_aux is not None:
        return out, AuxOutput(lse=lse if return_aux.lse else None,
                              max_scores=scores.amax(-1) if return_aux.max_scores else None)
    return out
