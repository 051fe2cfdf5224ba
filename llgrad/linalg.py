"""llgrad.linalg: PyTorch's torch.linalg names llgrad has (the norms: llgrad/runtime/linalg.py;
the products: llgrad/runtime/functions_linalg.py; inv, det, slogdet:
llgrad/runtime/functions_matrix.py)."""
from .runtime.linalg import matrix_norm, norm, vector_norm  # noqa: F401
from .runtime.functions_linalg import linalg_cross as cross  # noqa: F401
from .runtime.functions_linalg import matrix_power, multi_dot, vecdot  # noqa: F401
from .runtime.functions_matrix import LinAlgError, det, inverse as inv  # noqa: F401,E402
from .runtime.functions_matrix import linalg_slogdet as slogdet  # noqa: F401,E402
