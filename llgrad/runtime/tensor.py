"""Tensor: a strided view (shape, strides, storage offset, dtype) over a Storage, plus
autograd metadata. The payload `_data` is a NumPy view of the storage's buffer, so every
view of a storage sees every write. Op methods are attached in `methods.py`."""
from __future__ import annotations
import numpy as np

from ..ir.geometry import contiguous_strides
from . import dtypes, grad_mode, rendered_text, size_reads, trace_state
from .device import CPU, check as _check_device, device as _Device
from .creation_checks import check_dlpack_export, check_moved_in_place, check_set_data
from .formatting import tensor_repr
from .memory_formats import channels_contiguous
from .size import Size  # noqa: F401 (llgrad.Size lives with the Tensor it shapes)
from .tensor_view import view_of


_new_object = object.__new__
_BY_NP = dtypes._BY_NP
_RENDERED_DTYPES = frozenset(("float32", "float64", "float16", "int64", "int32", "int16",
                              "int8", "uint8", "bool"))   # (NumPy's item() is the tensor's)
_grad_state = grad_mode.state       # (the thread-local object itself: it is never replaced)


def _same_layout(a, b):
    """Whether NumPy arrays a and b are the same elements of one buffer."""
    return a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype and \
        a.__array_interface__["data"][0] == b.__array_interface__["data"][0]


class Storage:
    """A buffer and the version counter that every view of it shares."""
    __slots__ = ("base", "version", "write_loc")

    def __init__(self, base):
        self.base = base          # the NumPy array that owns the memory (first element lowest)
        self.version = 0
        self.write_loc = None     # user's line of the latest in-place write (for errors)

    def data_ptr(self):
        """The address of the buffer's first element."""
        return self.base.__array_interface__["data"][0]


class Tensor:
    """A strided view over a NumPy-backed storage, with PyTorch's autograd, as torch.Tensor.

    Views (view, transpose, slicing, expand, ...) share their base's storage and version
    counter, so writes through one are seen by all and in-place writes invalidate what
    backward saved exactly as in PyTorch. Op methods and their in-place forms come from the
    op table (llgrad/ir/optable.py); those that match PyTorch say "As torch.Tensor.<name>."
    Inside llgrad.compile a tensor method is recorded into the trace; what cannot be
    (numpy(), tolist(), hooks made inside) makes the call run eagerly with a warning."""
    __slots__ = ("_data", "_storage", "_dtype", "_requires_grad", "_grad", "_grad_fn",
                 "_output_nr", "_base", "_view_version", "_retains_grad", "_hooks",
                 "_inference", "_acc", "_multi_view", "__weakref__", "__dict__")

    # How a view was created when not in plain grad mode (PyTorch's CreationMeta): None, or
    # "no_grad" / "inference" for a view made under no_grad / inference_mode of a normal
    # tensor. Such a view requires grad when its base does but is a leaf with no gradient
    # edge, and modifying it (or its base) in place with grad mode on is an error. A class
    # attribute, set per instance only on those views: the allocation paths stay as they are.
    _creation = None

    # ---- construction (internal) ---------------------------------------------------------
    @classmethod
    def _from_array(cls, arr, storage=None):
        if type(arr) is not np.ndarray:
            arr = np.asarray(arr)
        t = _new_object(cls)
        t._data = arr
        if storage is None:         # = Storage(arr), filled in place: cheaper than its __init__
            storage = _new_object(Storage)
            storage.base, storage.version, storage.write_loc = arr, 0, None
        t._storage = storage
        try:
            t._dtype = _BY_NP[arr.dtype]
        except KeyError:
            raise dtypes.unsupported(arr.dtype) from None
        t._requires_grad = t._retains_grad = t._multi_view = False
        t._grad = t._grad_fn = t._base = t._hooks = t._acc = None
        t._output_nr = t._view_version = 0
        t._inference = _grad_state.inference
        return t

    _view_of = classmethod(view_of)     # (a view of src with memory arr: tensor_view.py)

    def _alias(self):
        """Same memory and storage (same version counter), no autograd history."""
        t = Tensor._from_array(self._data, self._storage)
        t._inference = self._inference
        return t

    def __reduce_ex__(self, proto):     # (pickle and copy.deepcopy: a copy of the values now)
        if trace_state.state.tracer is not None:
            trace_state.state.tracer.graph_break("a copy of a tensor's values by pickle or "
                                                 "copy.deepcopy")
        rv = (_rebuild, (np.array(self._data), self.requires_grad, self._dtype.name))
        state = user_attributes(self)
        return rv + (state,) if state else rv

    # ---- metadata ----------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        """The size of each dimension, as an llgrad.Size (as torch.Tensor.shape)."""
        s = Size(self._data.shape)
        return s if trace_state.state.tracer is None else size_reads.noted(s)

    def size(self, dim: int | None = None) -> Size | int:
        """The shape (an llgrad.Size), or the size of dimension dim, as torch.Tensor.size."""
        s = self._data.shape
        if dim is None:
            return Size(s) if trace_state.state.tracer is None else size_reads.noted(Size(s))
        if not s:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        if not -len(s) <= dim < len(s):
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-len(s)}, {len(s) - 1}], but got {dim})")
        return s[dim] if trace_state.state.tracer is None else size_reads.noted(s[dim])

    @property
    def dtype(self) -> dtypes.dtype:
        """The element type (an llgrad.dtype), as torch.Tensor.dtype."""
        return self._dtype

    @property
    def ndim(self) -> int:
        """The number of dimensions, as torch.Tensor.ndim."""
        return self._data.ndim

    def dim(self) -> int:
        """The number of dimensions, as torch.Tensor.dim."""
        return self._data.ndim

    def numel(self) -> int:
        """The number of elements, as torch.Tensor.numel."""
        n = self._data.size
        return n if trace_state.state.tracer is None else size_reads.noted(n)

    nelement = numel

    def element_size(self) -> int:
        """Bytes per element, as torch.Tensor.element_size."""
        return self._dtype.itemsize

    @property
    def device(self) -> _Device:
        """llgrad.device('cpu') (a meta tensor's is 'meta': meta_methods.py replaces this)."""
        return CPU

    @property
    def is_cuda(self) -> bool:
        """Always False (llgrad runs on the CPU only)."""
        return False

    def stride(self, dim: int | None = None) -> tuple[int, ...] | int:
        """Strides in elements (of dimension dim if given), as torch.Tensor.stride; a
        tensor with a zero-size dimension reports contiguous strides, as PyTorch does."""
        item = self._data.itemsize
        s = tuple(x // item for x in self._data.strides)
        if 0 in self._data.shape:
            s = contiguous_strides(self._data.shape)   # NumPy leaves these arbitrary
        s = s if dim is None else s[dim]
        return s if trace_state.state.tracer is None else size_reads.noted(s)

    def _storage_offset(self) -> int:
        """storage_offset() as llgrad reads it (methods_layout.py: the user's reads)."""
        return (self._data.__array_interface__["data"][0] - self._storage.data_ptr()) \
            // self._data.itemsize

    def is_contiguous(self, memory_format: object = None) -> bool:
        """Whether the strides are row-major (size-1 dimensions ignored), or dense in the
        channels_last(_3d) order memory_format names, as torch.Tensor.is_contiguous."""
        shape, strides = self._data.shape, self.stride()
        if memory_format in ("channels_last", "channels_last_3d"):
            return channels_contiguous(shape, strides, memory_format)
        if 0 in shape:              # (no elements: contiguous, as PyTorch's)
            return True
        expected = 1
        for n, s in zip(reversed(shape), reversed(strides)):
            if n != 1 and s != expected:
                return False
            expected *= n
        return True

    def is_floating_point(self) -> bool:
        """Whether the dtype is a floating type, as torch.Tensor.is_floating_point."""
        return self._dtype.is_floating_point

    def is_inference(self) -> bool:
        """Whether the tensor was made in inference_mode, as torch.Tensor.is_inference."""
        return self._inference

    def type(self, dtype: dtypes.dtype | None = None) -> str | Tensor:
        """With no dtype the type name ('llgrad.FloatTensor', ...); with one, the tensor
        cast to it (to(dtype)), as torch.Tensor.type."""
        if dtype is None:
            return "llgrad." + self._dtype._tensor_type
        if getattr(dtype, "is_cuda", False) is True or \
                isinstance(dtype, str) and ".cuda." in dtype:    # (torch.cuda.FloatTensor)
            _check_device("cuda", "move a tensor to")
        if isinstance(dtype, str):      # 'llgrad.LongTensor' (or PyTorch's 'torch.LongTensor')
            name = dtype.split(".")[-1]
            found = [d for d in dtypes.ALL if d._tensor_type == name]
            if dtype.split(".")[0] not in ("llgrad", "torch") or not found:
                raise ValueError(f"invalid type: '{dtype}'")
            dtype = found[0]
        return self.to(dtype)

    # ---- autograd metadata ---------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        """Whether autograd records operations on this tensor, as
        torch.Tensor.requires_grad (settable on leaves)."""
        if self._creation is not None or self._multi_view:  # never reads grad_fn (may raise)
            return self._requires_grad or self._grad_fn is not None or \
                (self._base is not None and self._base.requires_grad)
        return self._requires_grad or (self._base is not None and self.grad_fn is not None)

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        if type(flag) is not bool:      # (PyTorch's: 1, "yes", np.True_ and tensor(True) too)
            raise RuntimeError("requires_grad must be a bool")
        if flag and self._dtype._cat < 2:     # (PyTorch's words, lower case)
            raise RuntimeError("only Tensors of floating point and complex dtype can require "
                               "gradients")
        if flag and self._grad_fn is not None:     # (requires_grad_(True) lets it pass)
            raise RuntimeError("you can only change requires_grad flags of leaf variables.")
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set requires_grad in place and return self, as torch.Tensor.requires_grad_
        (floating dtypes only; leaves only to turn it off)."""
        if self._grad_fn is not None and not requires_grad:
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If "
                               "you want to use a computed variable in a subgraph that doesn't "
                               "require differentiation use var_no_grad = var.detach().")
        if requires_grad and self._dtype._cat < 2:
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if requires_grad and self._inference and not grad_mode.state.inference:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside "
                               "InferenceMode is not allowed.")
        self._requires_grad = bool(requires_grad)
        return self

    def detach(self) -> Tensor:
        """The same memory and version counter without autograd history, as
        torch.Tensor.detach."""
        if self._dtype._cat >= 2:   # (an integer or bool tensor has no gradient to stop:
            trace_state.stops_gradient("detach()")      # `logits.argmax(-1).detach()`)
        return self._alias()

    @property
    def data(self) -> Tensor:
        """The same memory without autograd history and, unlike detach(), under a version
        counter of its own (PyTorch's .data): writing through it does not invalidate what
        backward saved of this tensor."""
        trace_state.stops_gradient(".data")
        t = Tensor._from_array(self._data, self._storage.__class__(self._storage.base))
        t._inference = self._inference
        return t

    @data.setter
    def data(self, value):
        check_set_data(self._requires_grad, value)
        if value._storage.base is self._storage.base and _same_layout(value._data, self._data):
            return      # (`w.data *= mask` sets w's own memory back: w keeps its version)
        check_moved_in_place(value, self._storage)
        self._data, self._storage, self._dtype = value._data, value._storage, value._dtype

    # ---- conversion ----------------------------------------------------------------------------
    def numpy(self, force: bool = False) -> np.ndarray:
        """The tensor's data as a NumPy array view of its memory, as torch.Tensor.numpy; force=True
        or grad mode off (as in an autograd.Function's forward) allows one that requires grad.
        Compiled, a small tensor's values become value guards, as tolist()'s (a large one runs
        eagerly)."""
        if self.requires_grad and not force and _grad_state.grad_enabled:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        if self._dtype is dtypes.bfloat16:     # (NumPy has no bfloat16)
            raise TypeError("Got unsupported ScalarType BFloat16")
        tracer = trace_state.state.tracer
        if tracer is not None and tracer.knows(self):
            return tracer.numpy_view(self)      # (guarded values, read-only: numpy_reads.py)
        return self._data

    def item(self) -> float | int | bool:
        """The value of a one-element tensor as a Python number, as torch.Tensor.item.
        Inside llgrad.compile the trace keeps the value as a guard: a call with another
        value traces again, unless `return t.item()` is an output."""
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted "
                               "to Scalar")
        value = self._data.reshape(()).item()
        tracer = trace_state.state.tracer
        # (the trace is valid for this value only, or stands on it: tracer/item_reads.py)
        return value if tracer is None else tracer.item_value(self, value)

    def tolist(self) -> list | float | int | bool:
        """The data as nested Python lists, as torch.Tensor.tolist (inside llgrad.compile
        a small tensor's values become value guards, as item()'s; a large one runs eagerly)."""
        if trace_state.state.tracer is not None:
            trace_state.state.tracer.reads_out(self, "Tensor.tolist()", guard=True)
        return self._data.tolist()

    def __float__(self):
        trace_state.scalar_conversion_warning(self, _grad_state.grad_enabled)
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return float(self.item())

    def __int__(self):
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return int(self.item())

    def __index__(self):
        if self._dtype._cat >= 2 or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return int(self.item())

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with "
                               f"{'no values' if not self._data.size else 'more than one value'}"
                               " is ambiguous")
        return bool(self.item())           # item() records the guard when tracing

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        n = self._data.shape[0]
        return n if trace_state.state.tracer is None else size_reads.noted(n, symbolic=False)

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __hash__(self):
        return id(self)

    def __array__(self, dtype=None, copy=None):
        if self.requires_grad or self._dtype is dtypes.bfloat16:    # (t.numpy(), as PyTorch)
            self.numpy()
        if trace_state.state.tracer is not None:
            trace_state.state.tracer.reads_out(self, "NumPy's conversion of a tensor")
        return self._data if dtype is None else self._data.astype(dtype)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """DLPack export (zero-copy, through NumPy's own exporter): np.from_dlpack(t) and
        torch.from_dlpack(t) share this tensor's memory."""
        check_dlpack_export(self)
        if trace_state.state.tracer is not None:
            trace_state.state.tracer.reads_out(self, "Tensor.__dlpack__()")
        kw = {k: v for k, v in (("max_version", max_version), ("dl_device", dl_device),
                                ("copy", copy)) if v is not None}
        if stream is not None and stream != -1:
            raise BufferError("stream must be None (or -1) for a CPU tensor")
        try:
            return self._data.__dlpack__(**kw)
        except TypeError:
            if not kw:
                raise
            return self._data.__dlpack__()     # NumPy < 2.1: a legacy (unversioned) capsule

    def __dlpack_device__(self):
        return (1, 0)       # (kDLCPU, 0)

    def __repr__(self):
        return tensor_repr(self)

    __str__ = __repr__

    def __format__(self, spec):     # PyTorch's: f"{loss}" of a 0-d tensor is its number
        if self._data.ndim == 0 and type(self) is Tensor:
            rendering = rendered_text.active()
            if rendering is not None and trace_state.state.tracer.knows(self) and \
                    self._dtype.name in _RENDERED_DTYPES and rendered_text.value_free(spec):
                text = format(self._data.item(), spec)
                return rendering.add(self, lambda a: format(a.item(), spec), text,
                                     lambda at: self.item(), True)
            return format(self.item(), spec)
        return object.__format__(self, spec)


def user_attributes(t):
    """The attributes set on tensor t (its __dict__ but grad_dtype's slot, which pickle and
    copies leave behind as PyTorch's do)."""
    return {k: v for k, v in t.__dict__.items() if k != "_grad_dtype"}


def _rebuild(arr, requires_grad, dtype=None):     # (pickle gives '>f4' back as float32)
    t = Tensor._from_array(arr.astype(dtypes.bfloat16.np) if dtype == "bfloat16" else arr)
    t._requires_grad = requires_grad
    return t
