"""llgrad.backends.cuda: torch.backends.cuda's flags (settable; CUDA is not built)."""
import contextlib
import warnings

from ..runtime import functions_settings


class _Matmul:
    """torch.backends.cuda.matmul: the TF32 / reduced-precision flags. allow_tf32 is the
    float32 matmul precision seen another way, as torch's: True where it is not 'highest';
    setting it sets 'high' or 'highest'."""

    def __init__(self):
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True
        self.fp32_precision = "none"

    @property
    def allow_tf32(self):
        return functions_settings.get_float32_matmul_precision() != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value):
        functions_settings.set_float32_matmul_precision("high" if value else "highest")


matmul = _Matmul()
_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def is_built():
    return False


def flash_sdp_enabled():
    return _sdp["flash"]


def enable_flash_sdp(enabled):
    _sdp["flash"] = bool(enabled)


def mem_efficient_sdp_enabled():
    return _sdp["mem_efficient"]


def enable_mem_efficient_sdp(enabled):
    _sdp["mem_efficient"] = bool(enabled)


def math_sdp_enabled():
    return _sdp["math"]


def enable_math_sdp(enabled):
    _sdp["math"] = bool(enabled)


def cudnn_sdp_enabled():
    return _sdp["cudnn"]


def enable_cudnn_sdp(enabled):
    _sdp["cudnn"] = bool(enabled)


def is_flash_attention_available():
    """False: FlashAttention needs a CUDA build."""
    return False


def is_ck_sdpa_available():
    """False: composable_kernel attention needs a ROCm build."""
    return False


@contextlib.contextmanager
def _sdp_kernel(enable_flash, enable_math, enable_mem_efficient, enable_cudnn):
    """The flags as nn.attention.sdpa_kernel sets them for the chosen backends, restored on
    exit."""
    saved = dict(_sdp)
    _sdp.update(flash=bool(enable_flash), math=bool(enable_math),
                mem_efficient=bool(enable_mem_efficient), cudnn=bool(enable_cudnn))
    try:
        yield {}
    finally:
        _sdp.update(saved)


def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True,
               enable_cudnn=True):
    """The deprecated torch.backends.cuda.sdp_kernel, with PyTorch's warning: a context
    manager enabling the chosen attention backends (sdpa_kernel of them) and restoring
    the flags on exit."""
    warnings.warn("`torch.backends.cuda.sdp_kernel()` is deprecated. In the future, this "
                  "context manager will be removed. Please see `torch.nn.attention.sdpa_kernel()`"
                  " for the new context manager, with updated signature.", FutureWarning,
                  stacklevel=2)
    return _sdp_kernel(enable_flash, enable_math, enable_mem_efficient, enable_cudnn)
