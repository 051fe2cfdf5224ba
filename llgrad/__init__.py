"""llgrad: PyTorch's autograd on NumPy-backed strided tensors, and a compiler for it.

Only re-exports live here; see llgrad/runtime (eager), llgrad/ir (op table, IR)."""
from .runtime import Size, Tensor  # noqa: F401
from .runtime.dtypes import (bool_ as bool, double, dtype, float, float16, float32,  # noqa: F401,A004
                             float64, half, int, int8, int16, int32, int64, long, uint8)
from .runtime.grad_mode import (enable_grad, inference_mode, is_grad_enabled,  # noqa: F401
                                is_inference_mode_enabled, no_grad, set_grad_enabled)
from .runtime.creation import (arange, as_tensor, empty, empty_like, eye,  # noqa: F401
                               from_numpy, full, full_like, initial_seed, linspace, manual_seed,
                               ones, ones_like, rand, rand_like, randint, randn, randn_like,
                               randperm, tensor, zeros, zeros_like)
from .runtime.functions import *  # noqa: F401,F403
from . import autograd, ir, nn, optim  # noqa: F401,E402
from .tracer import trace  # noqa: F401,E402
from .runtime.compiled import compile  # noqa: F401,E402,A004
from .runtime.transforms import grad, value_and_grad, vjp  # noqa: F401,E402


def set_num_threads(n):
    """Threads that compiled (native) loops use, like torch.set_num_threads: an int >= 1.
    As torch's sets its BLAS's, this sets NumPy's OpenBLAS thread count too (matmuls)."""
    from .codegen.parallel import set_num_threads as _set  # (llvmlite loads only when used)
    from .codegen.blas import set_num_threads as _set_blas
    _set(n)
    _set_blas(n)


def get_num_threads():
    """The thread count native loops use (LLGRAD_NUM_THREADS, else the usable CPUs)."""
    from .codegen.parallel import get_num_threads as _get
    return _get()


__version__ = "0.1.0"
