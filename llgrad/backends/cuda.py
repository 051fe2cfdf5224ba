"""llgrad.backends.cuda: torch.backends.cuda's flags (settable; CUDA is not built)."""
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
