"""llgrad.backends.quantized: torch.backends.quantized's engine setting. llgrad's dynamic
quantized kernels compute what PyTorch's fbgemm kernels compute (engines x86 and fbgemm);
under 'onednn' (another order of the float steps) or 'qnnpack' (PyTorch's ARM kernels, no
reduced range) they refuse to run rather than give other numbers."""
import sys
import types

SUPPORTED_ENGINES = ["qnnpack", "onednn", "x86", "fbgemm"]
X86_ENGINES = ("x86", "fbgemm")
DEFAULT_ENGINE = "x86"


class _QuantizedModule(types.ModuleType):
    """The module object, with `engine` a checked property (as PyTorch's)."""
    _engine = DEFAULT_ENGINE

    @property
    def engine(self):
        """The quantized engine's name ('x86' by default)."""
        return type(self)._engine

    @engine.setter
    def engine(self, name):
        if name not in SUPPORTED_ENGINES:
            raise RuntimeError(f"{name} is not a valid value for quantized engine")
        type(self)._engine = name

    @property
    def supported_engines(self):
        """The engines that can be set."""
        return list(SUPPORTED_ENGINES)


def check_engine():
    """Raise unless the engine's kernels are the ones llgrad reproduces."""
    engine = _QuantizedModule._engine
    if engine not in X86_ENGINES:
        raise NotImplementedError(f"llgrad: dynamic quantized kernels of the '{engine}' engine "
                                  f"are not reproduced; set torch.backends.quantized.engine "
                                  f"to one of {list(X86_ENGINES)}")


sys.modules[__name__].__class__ = _QuantizedModule
