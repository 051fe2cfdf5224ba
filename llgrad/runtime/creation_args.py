"""The factory keywords PyTorch programs pass that llgrad's factories answer as torch's CPU
build does: layout= (strided; zeros in llgrad.sparse_coo is an empty sparse tensor, other
factories cannot make one), pin_memory= (True raises: there is no accelerator to pin for),
and empty's memory_format= (channels_last / channels_last_3d strides). Wrapped once, after
every factory is defined (runtime/__init__.py), under the names llgrad exports them by."""
import functools
import inspect

import numpy as np

from . import creation, functions
from .sparse_coo import SparseCOOTensor, _index_tensor

FACTORIES = ("zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm",
             "arange", "range", "linspace", "logspace", "eye", "empty_strided",
             "tril_indices", "triu_indices", "scalar_tensor", "hann_window", "hamming_window",
             "blackman_window", "bartlett_window", "kaiser_window")
_PINNED = ("pin_memory=True requires a CUDA or other accelerator backend; no pinned memory "
           "allocator is available on this system.")
_RANKS = {"channels_last": 4, "channels_last_3d": 5}


def _in_format(t, fmt):
    """empty(..., memory_format=fmt): t laid out in fmt (a leaf as t is)."""
    if fmt is None or fmt == "contiguous_format":
        return t
    if fmt == "preserve_format":
        raise RuntimeError("unsupported memory format Preserve")
    rank = _RANKS.get(fmt) if isinstance(fmt, str) else None
    if rank is None:
        raise TypeError(f"empty(): argument 'memory_format' must be torch.memory_format, not "
                        f"{type(fmt).__name__}")
    name = str.__str__(fmt)
    if t.dim() != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {name} format")
    out = t.detach().contiguous(memory_format=fmt)
    return out.requires_grad_(True) if t.requires_grad else out


def _sparse(name, made, layout):
    if layout is not functions.sparse_coo:
        raise NotImplementedError(f"llgrad has the strided and sparse COO layouts only, not "
                                  f"{layout}")
    if name != "zeros":
        raise NotImplementedError(f"Could not run 'aten::{name}' with arguments from the "
                                  "'SparseCPU' backend (llgrad makes sparse tensors with "
                                  "sparse_coo_tensor, to_sparse or zeros)")
    values = creation.zeros((0,), dtype=made.dtype)
    if made.requires_grad:
        values.requires_grad_(True)
    return SparseCOOTensor._make(_index_tensor(np.zeros((made.dim(), 0))), values, made.shape,
                                 True)


def _wrap(fn, name):
    takes = set(inspect.signature(fn).parameters)
    formats = name == "empty" and "memory_format" not in takes

    @functools.wraps(fn)
    def factory(*args, layout=None, pin_memory=False, **kwargs):
        if pin_memory:
            raise RuntimeError(_PINNED)
        fmt = kwargs.pop("memory_format", None) if formats else None
        made = fn(*args, **kwargs)
        if layout is not None and layout is not functions.strided:
            return _sparse(name, made, layout)
        return _in_format(made, fmt) if formats else made
    return factory


def wrap_factory_args():
    """Give each factory that lacks them the layout= and pin_memory= keywords (and empty its
    memory_format=), in creation.py and under llgrad.<name>."""
    for name in FACTORIES:
        fn = getattr(functions, name, None) or getattr(creation, name, None)
        if fn is None or {"layout", "pin_memory"} <= set(inspect.signature(fn).parameters):
            continue
        wrapped = _wrap(fn, name)
        if getattr(creation, name, None) is fn:
            setattr(creation, name, wrapped)
        if getattr(functions, name, None) is fn:
            functions.export(wrapped, name)
