"""PyTorch's constants and global settings in the llgrad namespace: pi, e, inf, nan, newaxis,
the dtype alias short, the memory formats; set_printoptions (formatting.py reads them), get_default_device /
set_default_device (the CPU only), is_inference, and the anomaly-mode flags
(is_anomaly_enabled, set_anomaly_enabled, is_anomaly_check_nan_enabled)."""
import math

from . import dtypes, formatting
from .anomaly import _state as _anomaly_state, is_anomaly_check_nan_enabled, \
    is_anomaly_enabled
from . import functions as _functions
from .device import default_device, device, set_default
from .functions import export
from .tensor import Tensor


def _constant(name, value):
    """value as llgrad.<name> (the functions module's namespace is llgrad's)."""
    setattr(_functions, name, value)
    if name not in _functions.__all__:
        _functions.__all__.append(name)


class memory_format(str):
    """As torch.memory_format (llgrad.contiguous_format, preserve_format, channels_last,
    channels_last_3d): clone / contiguous / to / the *_like functions and is_contiguous
    take them (runtime/memory_formats.py). A str, as llgrad's own code names the formats."""
    def __repr__(self):
        return "llgrad." + str.__str__(self)

    __str__ = __repr__


for _name, _value in (("pi", math.pi), ("e", math.e), ("inf", math.inf), ("nan", math.nan),
                      ("newaxis", None), ("short", dtypes.int16),
                      ("memory_format", memory_format)):
    _constant(_name, _value)
for _name in ("contiguous_format", "preserve_format", "channels_last", "channels_last_3d"):
    _constant(_name, memory_format(_name))


class layout(str):
    """As torch.layout: llgrad.strided, every llgrad tensor's (Tensor.layout); the sparse
    layouts' names exist for the comparisons scripts make (no llgrad tensor has them)."""
    def __repr__(self):
        return "llgrad." + str.__str__(self)

    __str__ = __repr__


_constant("layout", layout)
for _name in ("strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc",
              "jagged"):
    _constant(_name, layout(_name))
Tensor.layout = property(lambda self: _functions.strided,
                         doc="As torch.Tensor.layout: llgrad.strided.")
# (what library code asks of a tensor before treating it as a dense CPU one)
for _name in ("is_sparse", "is_sparse_csr", "is_quantized", "is_mkldnn", "is_mps", "is_xpu",
              "is_ipu", "is_vulkan", "is_nested", "is_xla", "is_maia", "is_mtia"):
    setattr(Tensor, _name, property(lambda self: False,
                                    doc=f"As torch.Tensor.{_name}: False (a dense CPU tensor)."))

export(formatting.set_printoptions)


# ---- the default device -----------------------------------------------------------------------

def get_default_device():
    """As torch.get_default_device: where factory functions put tensors (the CPU, or the
    meta device once set_default_device('meta') or inside `with device('meta')`)."""
    return default_device() or device("cpu")


def set_default_device(device_):
    """As torch.set_default_device: None or the CPU (the default), or 'meta'; any other
    device raises."""
    if device_ is None:
        set_default(None)
        return
    d = device_ if isinstance(device_, device) else device(device_)
    if d.type not in ("cpu", "meta"):
        raise RuntimeError(f"set_default_device({str(device_)!r}): llgrad runs on the CPU only, "
                           f"so it cannot make '{d}' the default device (use None or 'cpu')")
    set_default(d)


def is_inference(input):
    """As torch.is_inference: whether input was made in inference mode."""
    if not isinstance(input, Tensor):
        raise TypeError(f"is_inference(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    return input.is_inference()


# ---- anomaly mode -----------------------------------------------------------------------------

def set_anomaly_enabled(enabled, check_nan=True):
    """As torch.set_anomaly_enabled(enabled, check_nan=True): turn anomaly mode on or off
    (the switch torch.autograd.set_detect_anomaly / detect_anomaly also set)."""
    _anomaly_state.update(enabled=bool(enabled), check_nan=bool(check_nan))


for _f in (get_default_device, set_default_device, is_inference, is_anomaly_enabled,
           is_anomaly_check_nan_enabled, set_anomaly_enabled):
    export(_f)
