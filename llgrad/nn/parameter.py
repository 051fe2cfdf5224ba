"""torch.nn.parameter: Parameter (a tensor a Module registers as a parameter), Buffer, and the
uninitialised parameters and buffers of lazy modules (layers_lazy.py), which hold no data until
`materialize(shape)` fills the same tensor object in place."""
import copy
from multiprocessing import reduction

import numpy as np

from ..runtime.creation import empty
from ..runtime.process_sharing import reduce_for_process
from ..runtime.tensor import Tensor, user_attributes

__all__ = ["Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer",
           "UninitializedTensorMixin", "is_lazy"]


class Parameter(Tensor):
    """A tensor that a Module registers as a parameter (requires grad by default)."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = empty(0)
        p = cls._from_array(data.detach()._data, data._storage)
        p._requires_grad = False
        if requires_grad:
            if p._dtype._cat < 2:
                # (PyTorch's message on this path, capitalised unlike requires_grad_'s)
                raise RuntimeError("Only Tensors of floating point and complex dtype can "
                                   "require gradients")
            p.requires_grad_(True)
        return p

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __reduce_ex__(self, proto):     # (a meta parameter's data: none, meta_tensor.reduce)
        data = self.detach() if self.is_meta else Tensor._from_array(self._data.copy())
        state = user_attributes(self)
        return (Parameter, (data, self.requires_grad)) + ((state,) if state else ())

    def __copy__(self):     # (on the same memory, as copy.copy of a torch.nn.Parameter)
        if type(self) is not Parameter or self.is_meta:
            return copy._reconstruct(self, None, *self.__reduce_ex__(4))
        new = Parameter(self.detach(), self.requires_grad)
        new.__dict__.update(user_attributes(self))
        return new


class Buffer(Tensor):
    """Buffer(data, persistent=True): assigned as a Module attribute, the tensor is
    registered as a buffer (in state_dict() unless persistent=False), as torch.nn.Buffer.
    What it makes is the tensor itself, detached, marked for that registration."""

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = empty(0)
        t = data.detach().requires_grad_(data.requires_grad)
        t.persistent = persistent
        t._is_buffer = True
        return t


class _NoData(np.ndarray):
    """The empty array of an uninitialized parameter or buffer: NumPy computing with it
    raises PyTorch's error for using one (attributes, views and copies stay allowed)."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        raise _uninitialized_use(ufunc.__name__)

    def __array_function__(self, func, types, args, kwargs):
        if func in (np.shares_memory, np.may_share_memory):     # (the tracer's alias checks)
            return func(*(np.asarray(a).view(np.ndarray) for a in args), **kwargs)
        raise _uninitialized_use(func.__name__)


def _uninitialized_use(name):
    e = ValueError(
        f"Attempted to use an uninitialized parameter in {name}. This error happens when you "
        "are using a `LazyModule` or explicitly manipulating "
        "`torch.nn.parameter.UninitializedParameter` objects. When using LazyModules Call "
        "`forward` with a dummy batch to initialize the parameters before calling torch "
        "functions")
    e.keep_type = True      # the dispatcher raises it as it is, not as the op's RuntimeError
    return e


def _without_data(t):
    arr = t._data.view(_NoData)
    t._data = t._storage.base = arr
    return t


class UninitializedTensorMixin:
    """materialize(shape, dtype=None): give the tensor its shape (uninitialised values) in
    place and make it a plain Parameter (or Tensor)."""
    cls_to_become = Parameter

    def materialize(self, shape, device=None, dtype=None):
        dt = (self._data.dtype if dtype is None else np.dtype(dtype.name))
        fresh = Tensor._from_array(np.empty(tuple(shape), dtype=dt))
        self._data, self._storage, self._dtype = fresh._data, fresh._storage, fresh._dtype
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError("Can't access the shape of an uninitialized parameter or buffer. This "
                           "error usually happens in `load_state_dict` when trying to load an "
                           "uninitialized parameter into an initialized one. Call `forward` to "
                           "initialize the parameters before accessing their attributes.")

    def __reduce_ex__(self, proto):
        # (a copy or a pickle stays uninitialized, as PyTorch's)
        return (type(self), (self.requires_grad, None, self.dtype))

    def detach(self):
        # (PyTorch's detach keeps the subclass: a lazy module's state_dict holds
        # uninitialized entries, which refuse to load into an initialized module)
        return type(self)(requires_grad=False, dtype=self.dtype)

    def numel(self):
        raise _uninitialized_use("numel")

    def dim(self):
        raise _uninitialized_use("dim")

    def __repr__(self):
        return f"<{type(self).__name__}>"

    __str__ = __repr__


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter without data yet (see UninitializedTensorMixin)."""
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        return _without_data(Parameter.__new__(cls, empty(0, dtype=dtype), requires_grad))

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer without data yet (see UninitializedTensorMixin)."""
    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None):
        t = cls._from_array(empty(0, dtype=dtype)._data)
        if requires_grad:
            t.requires_grad_(True)
        return _without_data(t)

    def __init__(self, requires_grad=False, device=None, dtype=None):
        pass


def is_lazy(t):
    return isinstance(t, UninitializedTensorMixin)


# a parameter in shared memory reaches another process as that memory (Hogwild's workers)
reduction.ForkingPickler.register(Parameter, lambda p: reduce_for_process(p, Parameter))
