"""llgrad.functional: torch.functional's names (the functions PyTorch writes in Python over
its ops), each the llgrad function of that name. stft and istft are not there (no complex
tensors)."""
from .runtime.einsum import einsum  # noqa: F401
from .runtime.functions import (atleast_1d, atleast_2d, atleast_3d, block_diag,  # noqa: F401
                                broadcast_shapes, broadcast_tensors, cartesian_prod, cdist,
                                chain_matmul, lu, norm, pca_lowrank, split, svd_lowrank,
                                tensordot, unique, unique_consecutive, unravel_index)
from .runtime.functions_tensor import meshgrid  # noqa: F401

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "broadcast_shapes", "broadcast_tensors",
           "cartesian_prod", "block_diag", "cdist", "chain_matmul", "einsum", "lu", "norm",
           "meshgrid", "pca_lowrank", "split", "svd_lowrank", "tensordot", "unique",
           "unique_consecutive", "unravel_index"]
