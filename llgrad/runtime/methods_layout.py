"""The user's reads of where a tensor lies in memory: storage_offset(), data_ptr(),
_version and untyped_storage() (and is_inference(), another flag the guards do not hold). llgrad's own code reads them through Tensor._storage_offset() and the storage;
these report to the tracer, since an input's are Python numbers that change from call to
call while the guards still let the calls share a trace (a slice of a dataset at each
batch, a parameter written by every step)."""
from . import trace_state
from .symbolic_uses import check_layout
from .tensor import Tensor


def storage_offset(self) -> int:
    """The offset of the first element in the storage, in elements, as
    torch.Tensor.storage_offset."""
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.reads_layout(self, "Tensor.storage_offset()")
    return self._storage_offset()


def data_ptr(self) -> int:
    """The address of the first element, as torch.Tensor.data_ptr."""
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.reads_layout(self, "Tensor.data_ptr()")
    return self._data.__array_interface__["data"][0]


def _version(self) -> int:
    """The version counter of the storage (every in-place write bumps it), as
    torch.Tensor._version."""
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.reads_layout(self, "Tensor._version")
    return self._storage.version


def is_inference(self) -> bool:
    """Whether the tensor was made in inference_mode, as torch.Tensor.is_inference."""
    tracer = trace_state.state.tracer
    if tracer is not None:      # (an input's flag is not in the guards)
        tracer.reads_layout(self, "Tensor.is_inference()")
    return self._inference


def untyped_storage(self):
    """The Storage this tensor views: llgrad's own object (its NumPy buffer is .base, its
    version counter .version, and data_ptr()), not a torch.UntypedStorage."""
    tracer = trace_state.state.tracer
    if tracer is not None:      # (of a copy standing for x[i]'s view: symbolic_uses.py)
        check_layout(tracer, self)
    return self._storage


Tensor.is_inference = is_inference
Tensor.untyped_storage = untyped_storage
Tensor.storage_offset = storage_offset
Tensor.data_ptr = data_ptr
Tensor._version = property(_version)
