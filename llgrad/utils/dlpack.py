"""DLPack interchange (torch.utils.dlpack): zero-copy exchange of CPU tensors with NumPy,
PyTorch and any other DLPack producer or consumer. llgrad tensors are NumPy-backed, so the
work is NumPy's: export hands out the NumPy buffer's capsule, import wraps what
np.from_dlpack returns (the producer's memory, kept alive by it)."""
import numpy as np

from ..runtime import tensor_memory
from ..runtime.creation import from_numpy
from ..runtime.tensor import Tensor

__all__ = ["from_dlpack", "to_dlpack"]


class _Capsule:
    """A bare DLPack capsule (torch.utils.dlpack.to_dlpack's result) as a producer object."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        capsule, self._capsule = self._capsule, None
        if capsule is None:
            raise BufferError("a DLPack capsule can be consumed only once")
        return capsule

    def __dlpack_device__(self):
        return (1, 0)


def from_dlpack(ext_tensor: object) -> Tensor:
    """A tensor sharing the memory of `ext_tensor`: an object with __dlpack__ and
    __dlpack_device__ (a NumPy array, a torch tensor on the CPU, another llgrad tensor) or a
    DLPack capsule. Only CPU memory can be imported."""
    if isinstance(ext_tensor, Tensor):
        return ext_tensor
    if not hasattr(ext_tensor, "__dlpack__"):
        if type(ext_tensor).__name__ == "PyCapsule":
            ext_tensor = _Capsule(ext_tensor)
        else:
            raise TypeError(f"from_dlpack: expected an object with __dlpack__ or a DLPack "
                            f"capsule, got {type(ext_tensor).__name__}")
    if hasattr(ext_tensor, "__dlpack_device__"):
        dev_type, dev_id = ext_tensor.__dlpack_device__()
        if int(dev_type) not in (1, 3):      # kDLCPU, kDLCUDAHost (host memory)
            raise RuntimeError("llgrad runs on the CPU only; cannot import a DLPack tensor "
                               f"from device type {int(dev_type)} (device {dev_id}): move it "
                               "to the CPU first")
    arr = np.from_dlpack(ext_tensor)
    if not arr.flags.writeable and isinstance(ext_tensor, _Capsule):
        # a legacy capsule cannot say whether its memory may be written, so NumPy marks it
        # read-only; PyTorch treats it as writable, and so does llgrad
        arr = _writable(arr)
    return from_numpy(arr)      # (memory exported read-only stays read-only)


class _Interface:
    def __init__(self, arr):
        self._keep = arr
        iface = dict(arr.__array_interface__)
        iface["data"] = (iface["data"][0], False)
        self.__array_interface__ = iface


def _writable(arr):
    return np.asarray(_Interface(arr))


def to_dlpack(tensor):
    """A DLPack capsule of the tensor's memory (prefer passing the tensor itself to the
    consumer's from_dlpack)."""
    return tensor.__dlpack__()


tensor_memory.from_capsule = from_dlpack     # (llgrad.asarray of a capsule)
