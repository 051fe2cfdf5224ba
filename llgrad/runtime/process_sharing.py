"""Shared memory that other processes can map, for Tensor.share_memory_: the mapping is made
over a memory file (Linux's memfd) whose descriptor travels with the tensor when
multiprocessing pickles it for another process (a spawn or forkserver Process's arguments,
a Queue), as torch's file_descriptor sharing strategy does. The other process maps the same
memory, so Hogwild training (model.share_memory(), then workers that step the optimiser)
writes into the parent's parameters under every start method, not only fork. Where the
system has no memory files the mapping is anonymous: forked processes see it, and a pickle
carries a copy of the values, as any tensor's does."""
import mmap
import os
import weakref
from multiprocessing import reduction

import numpy as np

from . import trace_state
from .tensor import Tensor

# id(mapping) -> its memory file's descriptor (sent to other processes), closed with it
_descriptors = {}


def shared_mapping(nbytes):
    """A new shared mapping of nbytes (at least one byte)."""
    n = max(nbytes, 1)
    if not hasattr(os, "memfd_create"):
        return mmap.mmap(-1, n)
    fd = os.memfd_create("llgrad-shared", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, n)
        mm = mmap.mmap(fd, n)
    except BaseException:
        os.close(fd)
        raise
    _keep(mm, fd)
    return mm


def _keep(mm, fd):
    _descriptors[id(mm)] = fd
    weakref.finalize(mm, _forget, id(mm), fd)


def _forget(key, fd):
    _descriptors.pop(key, None)
    os.close(fd)


def mapping_of(arr):
    """The mmap under arr (through NumPy bases and memoryviews), or None."""
    while arr is not None:
        if isinstance(arr, mmap.mmap):
            return arr
        arr = arr.obj if isinstance(arr, memoryview) else getattr(arr, "base", None)
    return None


def reduce_for_process(t, wrap=None):
    """How multiprocessing pickles t: a leaf over share_memory_'s memory file as that file
    (its descriptor) and where t lies in it; any other tensor as pickle does (a copy).
    wrap: the class (Parameter) the other process makes of the tensor."""
    base, d = t._storage.base, t._data
    mm = mapping_of(base)
    fd = _descriptors.get(id(mm)) if mm is not None else None
    if fd is None or not t.is_leaf or t.__dict__ or trace_state.state.tracer is not None:
        return t.__reduce_ex__(2)
    offset = d.__array_interface__["data"][0] - base.__array_interface__["data"][0] \
        if d.size else 0
    return (_rebuild, (reduction.DupFd(fd), len(mm), base.dtype.str, base.shape, d.dtype.str,
                       d.shape, d.strides, offset, t.requires_grad, wrap))


def _rebuild(dup, nbytes, base_dtype, base_shape, dtype, shape, strides, offset,
             requires_grad, wrap):
    fd = dup.detach()
    try:
        mm = mmap.mmap(fd, nbytes)
    except BaseException:
        os.close(fd)
        raise
    _keep(mm, fd)
    base = Tensor._from_array(np.ndarray(base_shape, base_dtype, buffer=mm))
    t = Tensor._from_array(np.ndarray(shape, dtype, buffer=mm, offset=offset, strides=strides),
                           base._storage)
    if wrap is not None:
        return wrap(t, requires_grad)
    t._requires_grad = requires_grad
    return t


reduction.ForkingPickler.register(Tensor, reduce_for_process)
