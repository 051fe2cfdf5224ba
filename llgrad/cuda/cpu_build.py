"""The torch.cuda names a CPU-only PyTorch build still answers without raising, so that
PyTorch programs calling them unguarded (saving every generator's state in a checkpoint,
`with torch.cuda.device_of(x):`, `isinstance(x, torch.cuda.FloatTensor)`, annotations
naming torch.cuda.Stream) run as they do on a machine without CUDA: each answers what
torch 2.13's CPU build answers (an empty list, an empty dict, 0, a context manager that does
nothing) and raises where it raises."""
import collections
import importlib.util
import warnings

from ..runtime import dtypes
from ..runtime.device import device as _torch_device

__all__ = ["get_rng_state_all", "set_rng_state_all", "set_rng_state", "memory_stats",
           "memory_stats_as_nested_dict", "host_memory_stats", "host_memory_stats_as_nested_dict",
           "memory_cached", "max_memory_cached", "get_arch_list", "is_tf32_supported",
           "has_half", "has_magma", "default_generators", "device", "device_of", "stream",
           "StreamContext", "Stream", "Event", "amp_definitely_not_available",
           "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
           "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor",
           "get_gencode_flags", "set_stream", "init", "get_device_capability",
           "current_stream", "default_stream", "set_per_process_memory_fraction",
           "get_per_process_memory_fraction", "set_sync_debug_mode", "get_sync_debug_mode",
           "can_device_access_peer", "current_blas_handle"]

has_half = True
has_magma = False
default_generators = ()          # (one generator per CUDA device: none)


def get_rng_state_all():
    """[]: the generator states of every CUDA device (there is none)."""
    return []


def set_rng_state(new_state, device="cuda"):
    """Does nothing, as PyTorch without CUDA (it keeps the state for a CUDA initialisation
    that never comes); new_state must still be a tensor."""
    new_state.clone()
    if isinstance(device, str):
        _torch_device(device)


def set_rng_state_all(new_states):
    """Sets each device's state (there is no device: nothing is set)."""
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def memory_stats_as_nested_dict(device=None):
    """{}: CUDA is never initialised, so the allocator has no statistics."""
    return {}


def memory_stats(device=None):
    """An empty OrderedDict, as torch.cuda.memory_stats without CUDA."""
    return collections.OrderedDict()


def host_memory_stats_as_nested_dict():
    """{}: no pinned host memory is ever allocated."""
    return {}


def host_memory_stats():
    """An empty OrderedDict, as torch.cuda.host_memory_stats without CUDA."""
    return collections.OrderedDict()


def memory_cached(device=None):
    """0, with PyTorch's deprecation warning (memory_cached is memory_reserved now)."""
    warnings.warn("`torch.cuda.memory_cached` has been renamed to `torch.cuda.memory_reserved`",
                  FutureWarning, stacklevel=2)
    return 0


def max_memory_cached(device=None):
    """0, with PyTorch's deprecation warning (max_memory_reserved now)."""
    warnings.warn("`torch.cuda.max_memory_cached` has been renamed to "
                  "`torch.cuda.max_memory_reserved`", FutureWarning, stacklevel=2)
    return 0


def get_arch_list():
    """[]: no CUDA architecture is compiled in."""
    return []


def is_tf32_supported():
    """False: there is no CUDA device."""
    return False


def get_gencode_flags():
    """'': no CUDA code is compiled in."""
    return ""


def set_stream(stream):
    """Does nothing for stream None (the only stream there can be without CUDA)."""
    if stream is None:
        return
    raise RuntimeError("PyTorch was compiled without CUDA support")


def _not_compiled(*args, **kwargs):
    """Raises PyTorch's AssertionError: the question needs CUDA, which is not compiled in."""
    raise AssertionError("Torch not compiled with CUDA enabled")


init = get_device_capability = current_stream = default_stream = \
    set_per_process_memory_fraction = get_per_process_memory_fraction = set_sync_debug_mode = \
    get_sync_debug_mode = can_device_access_peer = current_blas_handle = _not_compiled


def amp_definitely_not_available():
    """True unless torch_xla is installed (as torch.cuda.amp's: there is no CUDA)."""
    return importlib.util.find_spec("torch_xla") is None


def _device_index(dev):
    """torch.cuda._get_device_index(dev, optional=True): an int as given, a CUDA device's
    index (None without one), None as None; any other device is an error."""
    if isinstance(dev, str):
        dev = _torch_device(dev)
    if isinstance(dev, _torch_device):
        if dev.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {dev}")
        return dev.index
    return dev


def _exchange_device(idx):
    """torch.cuda._exchange_device of a build without CUDA: a negative index selects
    nothing; any other is an error (None compares as in PyTorch: a TypeError)."""
    if idx < 0:
        return -1
    raise RuntimeError("PyTorch was compiled without CUDA support")


class device:
    """Context manager selecting a CUDA device, as torch.cuda.device: a negative index is a
    no-op; entering with a device index fails, as there is no CUDA."""

    def __init__(self, device):
        self.idx = _device_index(device)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = _exchange_device(self.idx)

    def __exit__(self, type, value, traceback):
        self.idx = _exchange_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager selecting the device of a tensor: a no-op for a CPU tensor."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_cuda else -1)


class _NoCudaClass:
    """A class PyTorch's CPU build names but cannot make (torch's dummy base classes)."""

    def __new__(cls, *args, **kwargs):
        raise RuntimeError(f"Tried to instantiate dummy base class {cls.__name__}")


class Stream(_NoCudaClass):
    """torch.cuda.Stream: nameable (annotations, isinstance), not constructible."""


class Event(_NoCudaClass):
    """torch.cuda.Event: nameable (annotations, isinstance), not constructible."""


class StreamContext:
    """Context manager selecting a stream, as torch.cuda.StreamContext: without a CUDA
    device (or with stream None) it does nothing."""

    def __init__(self, stream):
        self.stream = stream
        self.idx = -1
        self.src_prev_stream = self.dst_prev_stream = None

    def __enter__(self):
        return None

    def __exit__(self, type, value, traceback):
        return None


def stream(stream):
    """StreamContext(stream), as torch.cuda.stream."""
    return StreamContext(stream)


class _CudaTensorType(type):
    """torch.cuda's typed tensor classes on a build without CUDA: no tensor is one, and
    calling one raises PyTorch's TypeError."""

    def __call__(cls, *args, **kwargs):
        raise TypeError(f"type torch.cuda.{cls.__name__} not available. Torch not compiled "
                        "with CUDA enabled.")

    def __instancecheck__(cls, obj):
        return False

    def __repr__(cls):
        return f"<class 'llgrad.cuda.{cls.__name__}'>"


def _cuda_typed(d):
    return _CudaTensorType(d._tensor_type, (), {
        "dtype": d, "is_cuda": True, "is_sparse": False,
        "__doc__": f"torch.cuda.{d._tensor_type} (llgrad.{d.name} on a CUDA device): no "
                   "tensor is one, and it cannot be made."})


FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor, LongTensor, IntTensor, ShortTensor, \
    CharTensor, ByteTensor, BoolTensor = (_cuda_typed(d) for d in (
        dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16, dtypes.int64,
        dtypes.int32, dtypes.int16, dtypes.int8, dtypes.uint8, dtypes.bool_))
