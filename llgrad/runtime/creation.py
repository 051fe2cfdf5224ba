"""Creation functions and the random generator (manual_seed resets it)."""
import numpy as np

from ..ir import OPS
from . import dtypes, trace_state
from .device import check as _check_device
from .dispatch import call
from .shapes import unpack_shape
from .tensor import Tensor

DEFAULT_SEED = 67280421310721      # PyTorch's default seed


class _Generator:
    def __init__(self):
        self.manual_seed(DEFAULT_SEED)

    def manual_seed(self, seed):
        self._seed = int(seed)
        self._rng = None
        return self

    # made on first use: importing numpy.random costs ~10 ms of `import llgrad`
    @property
    def rng(self):
        if self._rng is None:
            self._rng = np.random.Generator(np.random.PCG64(self._seed))
        return self._rng

    @rng.setter
    def rng(self, value):
        self._rng = value

    def initial_seed(self):
        return self._seed


default_generator = _Generator()


def manual_seed(seed):
    return default_generator.manual_seed(seed)


def initial_seed():
    return default_generator._seed


def _finish(arr, dtype, requires_grad):
    if dtype is not None:
        arr = arr.astype(dtypes.to_dtype(dtype).np, copy=False)
    t = Tensor._from_array(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _infer_np(data):
    if isinstance(data, Tensor):
        return np.array(data._data)
    if isinstance(data, (list, tuple)):
        if any(isinstance(x, Tensor) for x in data):
            data = [_infer_np(x) for x in data]
        arr = np.array(data)
        if arr.dtype.kind == "f":
            arr = arr.astype(dtypes.get_default_dtype().np)
        return arr
    if isinstance(data, np.ndarray):
        return np.array(data)
    if isinstance(data, np.generic):
        return np.array(data)
    if isinstance(data, bool):
        return np.array(data)
    if isinstance(data, int):
        return np.array(data, dtype=np.int64)
    if isinstance(data, float):
        return np.array(data, dtype=dtypes.get_default_dtype().np)
    raise TypeError(f"Could not infer dtype of {type(data).__name__}")


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    _check_device(device)
    tracer = trace_state.state.tracer
    if tracer is not None and type(data) is np.ndarray and tracer.array_storage(data):
        # a copy of an array the compiled function reads: a copy of that input
        t = from_numpy(data).clone()
        t = t if dtype is None else t.to(dtype)
        return t.requires_grad_(True) if requires_grad else t
    arr = _infer_np(data)
    if arr.dtype.kind in "iu" and arr.dtype != np.uint8 and not isinstance(data, np.ndarray):
        arr = arr.astype(np.int64)
    if arr.dtype.kind == "O" or arr.dtype.kind in "US":
        raise TypeError(f"Could not infer dtype of {type(data).__name__}")
    return _finish(arr, dtype, requires_grad)


def as_tensor(data, dtype=None, device=None):
    _check_device(device)
    if isinstance(data, Tensor) and (dtype is None or dtypes.to_dtype(dtype) is data._dtype):
        return data
    if isinstance(data, np.ndarray) and dtype is None:
        return from_numpy(data)
    return tensor(data, dtype=dtype)


def from_numpy(arr):
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(arr).__name__})")
    if any(s < 0 for s in arr.strides):
        raise ValueError("At least one stride in the given numpy array is negative, and tensors "
                         "with negative strides are not currently supported. (You can probably "
                         "work around this by making a copy of your array  with array.copy().) ")
    if any(s % arr.itemsize for s in arr.strides):
        raise ValueError("given numpy array strides not a multiple of the element byte size. "
                         "Copy the numpy array to reallocate the memory.")
    dtypes.from_numpy_dtype(arr.dtype)
    if not arr.dtype.isnative:
        raise ValueError("given numpy array has byte order different from the native byte "
                         "order. Conversion between byte orders is currently not supported.")
    tracer = trace_state.state.tracer
    if tracer is not None:      # an array the compiled function reads: that input's memory
        return Tensor._from_array(arr, tracer.array_storage(arr))
    return Tensor._from_array(arr)


def full_op(shape, value, dtype):
    """zeros/ones/full as the `full` op: traced, it is one node and no literal data."""
    if isinstance(value, Tensor):
        value = value.item()
    return call(OPS["full"], (), {"shape": tuple(shape), "value": value,
                                  "dtype": dtype.name})


def _full(shape, value, dtype, requires_grad, default=None):
    d = dtypes.to_dtype(dtype) if dtype is not None else (default or dtypes.get_default_dtype())
    t = full_op(shape, value, d)
    return t.requires_grad_(True) if requires_grad else t


def zeros(*size, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    return _full(unpack_shape(size), 0, dtype, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    return _full(unpack_shape(size), 1, dtype, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    return _full(unpack_shape(size), 0, dtype, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    default = dtypes.default_for_scalar(fill_value) if not isinstance(fill_value, Tensor) else None
    return _full(tuple(size), fill_value, dtype, requires_grad, default)


def _like(fn):
    def f(t, dtype=None, device=None, requires_grad=False, **kw):
        _check_device(device)
        return fn(*t._data.shape, dtype=dtype or t._dtype, requires_grad=requires_grad)
    return f


zeros_like, ones_like, empty_like = _like(zeros), _like(ones), _like(empty)


def full_like(t, fill_value, dtype=None, requires_grad=False, **kw):
    _check_device(kw.get("device"))
    return full(t._data.shape, fill_value, dtype=dtype or t._dtype, requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    if end is None:
        start, end = 0, start
    vals = (start, end, step)
    floating = any(isinstance(v, float) for v in vals)
    default = dtypes.get_default_dtype() if floating else dtypes.int64
    d = dtypes.to_dtype(dtype) if dtype is not None else default
    return _finish(np.arange(start, end, step).astype(d.np), None, requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    d = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    return _finish(np.linspace(start, end, steps).astype(d.np), None, requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    d = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    return _finish(np.eye(n, m, dtype=d.np), None, requires_grad)


# called before every draw while a vmap is active (llgrad.func: randomness="error" raises)
random_hook = None


def _rng(generator):
    if random_hook is not None:
        random_hook()
    return (generator or default_generator).rng


def randn(*size, dtype=None, generator=None, device=None, requires_grad=False):
    _check_device(device)
    d = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    arr = _rng(generator).standard_normal(unpack_shape(size), dtype=np.float64).astype(d.np)
    t = _finish(arr, None, requires_grad)
    if generator is None and trace_state.state.tracer is not None:
        trace_state.state.tracer.random("rng_normal", t)
    return t


def rand(*size, dtype=None, generator=None, device=None, requires_grad=False):
    _check_device(device)
    d = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    arr = _rng(generator).random(unpack_shape(size), dtype=np.float64).astype(d.np)
    t = _finish(arr, None, requires_grad)
    if generator is None and trace_state.state.tracer is not None:
        trace_state.state.tracer.random("rng_uniform", t)
    return t


def randint(low, high=None, size=(), dtype=None, generator=None, device=None,
            requires_grad=False):
    _check_device(device)
    if trace_state.state.tracer is not None:
        trace_state.state.tracer.untraceable("randint")
    if high is None:
        low, high = 0, low
    arr = _rng(generator).integers(low, high, size=tuple(size), dtype=np.int64)
    return _finish(arr, dtype, requires_grad)


def randperm(n, dtype=None, generator=None, device=None):
    _check_device(device)
    if trace_state.state.tracer is not None:
        trace_state.state.tracer.untraceable("randperm")
    return _finish(_rng(generator).permutation(n).astype(np.int64), dtype, False)


def randn_like(t, dtype=None, requires_grad=False, **kw):
    _check_device(kw.get("device"))
    return randn(*t._data.shape, dtype=dtype or t._dtype, requires_grad=requires_grad)


def rand_like(t, dtype=None, requires_grad=False, **kw):
    _check_device(kw.get("device"))
    return rand(*t._data.shape, dtype=dtype or t._dtype, requires_grad=requires_grad)
