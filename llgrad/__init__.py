"""llgrad: PyTorch's autograd on NumPy-backed strided tensors, and a compiler for it.

Only re-exports live here; see llgrad/runtime (eager), llgrad/ir (op table, IR),
llgrad/compile (compiled functions)."""
import importlib as _importlib
from . import _bytecode
_bytecode.install()     # (llgrad's bytecode in its disk cache where Python writes none)
from .runtime import heap as _heap  # noqa: E402
_heap.keep_freed_memory(_heap.keep_mb_setting())   # (before the first tensor: see heap.py)
from .runtime import Size, Tensor  # noqa: F401
from .runtime.dtypes import (bool_ as bool, double, dtype, float, float16, float32,  # noqa: F401,A004
                             float64, half, int, int8, int16, int32, int64, long, uint8,
                             uint16, uint32, uint64, bfloat16, complex32, complex64,
                             complex128, chalf, cfloat, cdouble)
from .runtime.grad_mode import (enable_grad, inference_mode, is_grad_enabled,  # noqa: F401
                                is_inference_mode_enabled, no_grad, set_grad_enabled)
from .runtime.creation import (arange, as_tensor, empty, empty_like, eye,  # noqa: F401
                               from_numpy, full, full_like, initial_seed, linspace, manual_seed,
                               ones, ones_like, rand, rand_like, randint, randn, randn_like,
                               randperm, tensor, zeros, zeros_like)
from .runtime.functions import *  # noqa: F401,F403
from .runtime.functions import __getattr__ as _functions_getattr  # noqa: E402
from .runtime.einsum import einsum  # noqa: F401,E402
from .runtime.legacy_types import (BoolTensor, ByteTensor, CharTensor,  # noqa: F401,E402
                                   DoubleTensor, FloatTensor, HalfTensor, IntTensor,
                                   LongTensor, ShortTensor, get_device,
                                   set_default_tensor_type)
from .runtime.functions_tensor import meshgrid  # noqa: F401,E402
from .runtime.dtype_info import finfo, iinfo  # noqa: F401,E402
from .runtime.dtypes import get_default_dtype, set_default_dtype  # noqa: F401,E402
from . import autograd, ir, linalg, nn, optim  # noqa: F401,E402
from . import special  # noqa: F401,E402 (torch.special)
from . import signal  # noqa: F401,E402 (torch.signal.windows)
from . import fft  # noqa: F401,E402 (torch.fft)
from .fft import istft, stft  # noqa: F401,E402
from . import sparse  # noqa: F401,E402 (torch.sparse)
from . import return_types  # noqa: F401,E402 (torch.return_types)
from .tracer import trace  # noqa: F401,E402
from .compile.transforms import grad, value_and_grad, vjp  # noqa: F401,E402
# (last: the name `compile` is the function, not the package llgrad/compile/)
from .compile.compiled_function import compile  # noqa: F401,E402,A004
from .compile import eager_native as _eager_native  # noqa: F401,E402 (its dispatcher hook)
from .compile import eager_gemm as _eager_gemm  # noqa: F401,E402 (its matmul hook)
from .compile import eager_axpy as _eager_axpy  # noqa: F401,E402 (its add-alpha hook)
from .compile import eager_binary as _eager_binary  # noqa: F401,E402 (its atan2 hook)
from .compile import eager_twister as _eager_twister  # noqa: F401,E402 (torch_random's hook)
from .compile import eager_bn_stats as _eager_bn_stats  # noqa: F401,E402 (batch_stats' hook)
from .compile import eager_shaped_vjp as _eager_shaped_vjp  # noqa: F401,E402 (its VJP hook)
from . import _dynamo, compiler  # noqa: F401,E402 (torch.compiler's names)
from . import _inductor  # noqa: F401,E402 (torch._inductor.config's settings)
from .threads import get_num_threads, set_num_threads  # noqa: F401,E402
from .runtime.device import device  # noqa: F401,E402
from .runtime.creation import default_generator  # noqa: F401,E402
from .runtime.generator import Generator, get_rng_state, seed, set_rng_state  # noqa: F401,E402
from . import amp, cpu, cuda, random, testing, types, utils  # noqa: F401,E402
from .amp import autocast, get_autocast_dtype, is_autocast_enabled  # noqa: F401,E402
from . import func  # noqa: F401,E402 (torch.func's transforms: ~2 ms of import)
from .func import vmap  # noqa: F401,E402 (torch.vmap)
from . import distributed  # noqa: F401,E402 (mpi4py: loaded by init_process_group)
from . import distributions  # noqa: F401,E402 (torch.distributions)
from . import accelerator, backends, hub, jit, profiler  # noqa: F401,E402 (torch.*'s namesakes)
from . import mps  # noqa: F401,E402 (torch.mps, answering as without MPS)
from .utils.dlpack import from_dlpack  # noqa: F401,E402
from .serialization import load, save  # noqa: F401,E402
from . import functional  # noqa: F401,E402 (torch.functional's names)
from .utils.dlpack import to_dlpack  # noqa: F401,E402
from . import library  # noqa: F401,E402 (torch.library's custom ops)
from .library import ops  # noqa: F401,E402 (torch.ops.<namespace>.<op>)
# torch.* names of nn.functional's functions; llgrad.trace for a matrix or a function
from .functions_nn import *  # noqa: F401,F403,E402
from .functions_nn_more import *  # noqa: F401,F403,E402
from .functions_quant import *  # noqa: F401,F403,E402 (QAT's fake quantisation)
from .quantized_tensor import *  # noqa: F401,F403,E402 (qint8, quantize_per_tensor, ...)
from .functions_native import *  # noqa: F401,F403,E402 (native_*, the cells, ATen's dropouts)
from .functions_sym import *  # noqa: F401,F403,E402 (sym_*, Sym*, build flags, empty_permuted)
from .functions_foreach import *  # noqa: F401,F403,E402 (torch._foreach_*)
from .amp.autocast_state import *  # noqa: F401,F403,E402 (set_autocast_enabled, ...)

from .version import __version__  # noqa: F401,E402

# seeing into compile: LLGRAD_LOG channels, explain, the profiler, debug.compare
from .compile.log import set_logs  # noqa: F401,E402
from .compile.explain import explain  # noqa: F401,E402
from .compile.profile import profile  # noqa: F401,E402
from . import debug  # noqa: F401,E402
from .compile import log as _log  # noqa: E402
_log._configure_from_env()


# submodules loaded on first use (llgrad.multiprocessing: Python's multiprocessing, ~20 ms;
# ao and quantization: post-training dynamic quantization, a dozen modules; onnx,
# __future__, _higher_order_ops and _logging: rarely used torch.* namesakes)
_LAZY_SUBMODULES = ("multiprocessing", "ao", "quantization", "onnx", "__future__",
                    "_higher_order_ops", "_logging", "fx")


def __getattr__(name):
    """llgrad.<name> for a lazily loaded submodule, or a function of an op declared after
    import (runtime/functions.py)."""
    if name in _LAZY_SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    return _functions_getattr(name)
