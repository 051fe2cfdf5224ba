"""llgrad.linalg: PyTorch's torch.linalg names llgrad has (the norms; see
llgrad/runtime/linalg.py)."""
from .runtime.linalg import matrix_norm, norm, vector_norm  # noqa: F401
