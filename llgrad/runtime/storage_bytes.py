"""PyTorch's UntypedStorage API on llgrad's Storage (Tensor.untyped_storage()): the storage
read as bytes. nbytes / size / len, indexing (a byte as an int; a slice is a Storage sharing
the memory), writes (values wrap modulo 256, as PyTorch's), tolist, fill_, copy_, clone,
and the CPU-only predicates. Writes go straight to memory: like PyTorch's, they do not bump
the version counter of the tensors that view the storage."""
import numpy as np

from . import size_reads, trace_state
from .device import CPU
from .tensor import Storage


def _byte_view(st):
    """A uint8 array over the bytes from the storage's first element to its last."""
    base = st.base
    if base.size == 0:
        return np.zeros(0, np.uint8)
    span = sum((n - 1) * s for n, s in zip(base.shape, base.strides)) + base.itemsize
    first = base[(slice(0, 1),) * base.ndim].reshape(1).view(np.uint8)
    return np.lib.stride_tricks.as_strided(first, (span,), (1,),
                                           writeable=base.flags.writeable)


def _check_index(st, i):
    if isinstance(i, bool) or not isinstance(i, (int, slice, np.integer)):
        raise TypeError(f"can't index a torch.UntypedStorage with {type(i).__name__}")
    n = _byte_view(st).size
    if not isinstance(i, slice) and not -n <= i < n:
        raise IndexError(f"index {i} out of range for storage of size {n}")


def nbytes(self):
    """As torch.UntypedStorage.nbytes: the storage's size in bytes (a size the user's code
    reads: size_reads.py)."""
    n = _byte_view(self).size
    return n if trace_state.state.tracer is None else size_reads.noted(n, symbolic=False)


def element_size(self):
    """1: an untyped storage's elements are bytes."""
    return 1


def getitem(self, i):
    """As torch.UntypedStorage.__getitem__: a byte as an int, or a slice as a Storage over
    the same memory."""
    _check_index(self, i)
    if isinstance(i, slice):
        return Storage(_byte_view(self)[i])
    return int(_byte_view(self)[i])


def setitem(self, i, value):
    """As torch.UntypedStorage.__setitem__: bytes written, values modulo 256."""
    _check_index(self, i)
    _byte_view(self)[i] = np.asarray(value).astype(np.int64) % 256


def tolist(self):
    """The bytes as a list of ints."""
    return _byte_view(self).tolist()


def fill_(self, value):
    """As torch.UntypedStorage.fill_: every byte set to value (modulo 256)."""
    _byte_view(self)[...] = int(value) % 256
    return self


def copy_(self, src, non_blocking=None):
    """As torch.UntypedStorage.copy_: src's bytes copied in (sizes must match)."""
    dst, s = _byte_view(self), _byte_view(src)
    if dst.size != s.size:
        raise RuntimeError(f"size does not match, self was {dst.size} bytes but src was "
                           f"{s.size} bytes")
    dst[...] = s
    return self


def clone(self):
    """As torch.UntypedStorage.clone: a Storage over a copy of the bytes."""
    return Storage(_byte_view(self).copy())


def _repr(self):
    body = "".join(f" {v}\n" for v in tolist(self))
    return f"{body}[llgrad.storage.UntypedStorage(device=cpu) of size {nbytes(self)}]"


for _name, _fn in (("nbytes", nbytes), ("size", nbytes), ("__len__", nbytes),
                   ("element_size", element_size), ("__getitem__", getitem),
                   ("__setitem__", setitem), ("tolist", tolist), ("fill_", fill_),
                   ("copy_", copy_), ("clone", clone), ("__repr__", _repr)):
    setattr(Storage, _name, _fn)
Storage.__iter__ = lambda self: iter(tolist(self))
Storage.cpu = lambda self: self
Storage.untyped = lambda self: self
Storage.is_shared = lambda self: False
Storage.is_pinned = lambda self, device="cuda": False
Storage.device = property(lambda self: CPU, doc="Always the CPU.")
Storage.is_cuda = False
