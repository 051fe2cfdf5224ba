"""Creation functions and the random generator (manual_seed resets it)."""
from __future__ import annotations
import math
import warnings
from collections.abc import Sequence

import numpy as np

from ..ir import OPS, promotion, torch_random
from . import dtypes, ranges, symbolic_uses, trace_state, traced_ranges
from .device import check as _check_device, device as _Device
from .memory_layout import like_layout
from .dispatch import call, scalar_type_name
from .creation_checks import (beyond_int64, check_fits as _check_fits, fill_number, fill_value_fits,
                              int_arange, int_arg, int_array, int_bounds, leaf_dtype,
                              leaf_type_error, number_error, randperm_checks, tensor_scalars,
                              requiring_grad as _requiring_grad, scalar_default, sequence_error)
from .random_bounds import random_bounds
from .shapes import check_nonnegative, creation_size
from .sym_int import plain
from .tensor import Tensor

from .random_state import DEFAULT_SEED, _Generator, _reseed_in_trace  # noqa: F401
from .random_state import default_generator, initial_seed, manual_seed  # noqa: F401
from .random_state import _state, numpy_rng, random_int64  # noqa: F401


def _finish(arr, dtype, requires_grad):
    if dtype is not None:
        arr = dtypes.cast_array(arr, dtypes.to_dtype(dtype))
    elif arr.dtype == dtypes.bfloat16.np:   # (made as float32 values: rounded to bfloat16)
        arr = dtypes.cast_array(arr, dtypes.bfloat16)
    t = Tensor._from_array(arr)
    return _requiring_grad(t) if requires_grad else t


def _is_tensor(x):
    return isinstance(x, Tensor)


def _infer_np(data, want=None):
    """data as an array; Python floats as the default dtype, or as `want` when floating
    (tensor([0.1], dtype=float64) holds the double 0.1), else doubles (1e-300: bool True)."""
    floating = (want if want is not None and want.is_floating_point else dtypes.float64
                if want is not None else dtypes.get_default_dtype()).np
    if isinstance(data, Tensor):
        return np.array(data._data)
    if isinstance(data, Sequence) and not isinstance(data, (list, tuple, str, bytes)):
        data = list(data)       # (a deque, a range: any Python sequence, as torch's)
    if isinstance(data, (list, tuple)):
        data = tensor_scalars(data, _is_tensor)      # (one-element tensors as numbers)
        try:
            arr = np.array(data)
        except ValueError:
            raise (sequence_error(data) or ValueError("not a rectangle")) from None
        if want is not None and arr.dtype.kind == "O" and leaf_type_error(data, want):
            raise leaf_type_error(data, want)       # (NumPy reads None as nan)
        leaf = leaf_dtype(data, floating.name)
        if leaf is not None:    # (NumPy values: their dtypes, promoted by PyTorch's rule)
            return arr.astype(leaf) if want is None else arr
        if not (want is not None and want.is_floating_point) and beyond_int64(arr, data):
            raise number_error(data)    # (ints beyond int64, or not a number)
        if arr.dtype.kind == "c":       # (Python complexes: the default complex dtype)
            return arr.astype(promotion.complex_of(floating.name))
        return arr.astype(floating if arr.dtype.kind in "fuO" else np.int64 if
                          arr.dtype.kind == "i" else arr.dtype)
    if isinstance(data, (np.ndarray, np.generic)):     # (a big-endian one: its values)
        return np.array(data, dtype=np.asarray(data).dtype.newbyteorder("="))
    if isinstance(data, bool):
        return np.array(data)
    if isinstance(data, int):
        return int_array(data, want is not None and want.is_floating_point, floating)
    if isinstance(data, float):
        return np.array(data, dtype=floating)
    if isinstance(data, complex):
        return np.array(data, dtype=promotion.complex_of(floating.name))
    raise number_error([data], scalar=True)


def tensor(data: object, dtype: dtypes.dtype | None = None, device: str | _Device | None = None,
           requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """A new tensor copying data (a number, nested lists, a NumPy array or a tensor), as
    torch.tensor; Python floats take the default dtype, ints int64. device must be the CPU."""
    _check_device(device)
    tracer = trace_state.state.tracer
    if tracer is not None and type(data) is np.ndarray and tracer.array_storage(data):
        # a copy of an array the compiled function reads: a copy of that input
        t = from_numpy(data).clone()
        t = t if dtype is None else t.to(dtype)
        return _requiring_grad(t) if requires_grad else t
    if isinstance(data, Tensor):
        copy_construct_warning("torch.tensor(sourceTensor)")
        return copy_of(data, dtype, requires_grad)
    arr = _infer_np(data, None if dtype is None else dtypes.to_dtype(dtype))
    if dtype is not None and not isinstance(data, (np.ndarray, Tensor)):
        _check_fits(arr, dtypes.to_dtype(dtype), data)
    if arr.dtype.kind in "OUS":     # (an array of these: from_numpy_dtype's TypeError)
        raise number_error(data) if type(data) is not np.ndarray else \
            dtypes.from_numpy_dtype(arr.dtype)
    return _finish(arr, dtype, requires_grad)


def copy_construct_warning(what):
    """PyTorch's warning for torch.tensor(t) / t.new_tensor(t) of a tensor (what: which)."""
    warnings.warn("To copy construct from a tensor, it is recommended to use "
                  "sourceTensor.detach().clone() or sourceTensor.detach().clone()."
                  f"requires_grad_(True), rather than {what}.", UserWarning, stacklevel=3)


def copy_of(data, dtype=None, requires_grad=False):
    """A new contiguous tensor of data's values (a tensor), made of ops, not of its array:
    inside a compiled function the values are the call's, not the traced call's."""
    t = data.detach().clone().contiguous()
    t = t if dtype is None else t.to(dtypes.to_dtype(dtype))
    return _requiring_grad(t) if requires_grad else t


def as_tensor(data: object, dtype: dtypes.dtype | None = None,
              device: str | _Device | None = None) -> Tensor:
    """data as a tensor without a copy where possible (a tensor of the same dtype is
    returned, a NumPy array shares its memory), as torch.as_tensor."""
    _check_device(device)
    if isinstance(data, Tensor) and (dtype is None or dtypes.to_dtype(dtype) is data._dtype):
        return data
    if isinstance(data, np.ndarray) and dtype is None:
        return from_numpy(data)
    if isinstance(data, Tensor):            # (another dtype: a copy, without a warning)
        return copy_of(data, dtype)
    return tensor(data, dtype=dtype)


def from_numpy(arr: np.ndarray) -> Tensor:
    """A tensor sharing the NumPy array's memory (writes are seen both ways), as
    torch.from_numpy. Inside llgrad.compile, an array the function reads this way is an
    input of the graph read at each call."""
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
    return _requiring_grad(t) if requires_grad else t


def zeros(*dims: int | tuple[int, ...], size=None, dtype: dtypes.dtype | None = None,
          device: str | _Device | None = None, requires_grad: bool = False) -> Tensor:
    """A tensor filled with 0, as torch.zeros."""
    _check_device(device)
    return _full(creation_size("zeros", dims, size), 0, dtype, requires_grad)


def ones(*dims: int | tuple[int, ...], size=None, dtype: dtypes.dtype | None = None,
         device: str | _Device | None = None, requires_grad: bool = False) -> Tensor:
    """A tensor filled with 1, as torch.ones."""
    _check_device(device)
    return _full(creation_size("ones", dims, size), 1, dtype, requires_grad)


def empty(*dims: int | tuple[int, ...], size=None, dtype: dtypes.dtype | None = None,
          device: str | _Device | None = None, requires_grad: bool = False) -> Tensor:
    """A new tensor, as torch.empty (llgrad fills it with zeros)."""
    _check_device(device)
    return _full(creation_size("empty", dims, size), 0, dtype, requires_grad)


def full(size: tuple[int, ...] | list[int], fill_value: float | Tensor,
         dtype: dtypes.dtype | None = None, device: str | _Device | None = None,
         requires_grad: bool = False) -> Tensor:
    """A tensor filled with fill_value, as torch.full (its dtype fill_value's by default)."""
    _check_device(device)
    default = scalar_default("full", fill_number(fill_value))
    d = dtypes.to_dtype(dtype) if dtype is not None else default
    if d is not None:       # (or a compiled function's changing number: symbolic_uses.py)
        fill_value = symbolic_uses.fill_value_fits(fill_value, d)
    shape = creation_size("full", (tuple(size),))
    return _full(shape, fill_value, dtype, requires_grad, default)


def _like(fn):
    def f(input, dtype=None, device=None, requires_grad=False, memory_format=None, **kw):
        _check_device(device)
        r = like_layout(input, lambda s: fn(s, dtype=dtype or input._dtype), memory_format)
        return _requiring_grad(r) if requires_grad else r
    f.__doc__ = f"A tensor of input's shape, dtype (unless given), layout, as torch.{fn.__name__}_like."
    f.__name__ = f.__qualname__ = fn.__name__ + "_like"
    return f


zeros_like, ones_like, empty_like = _like(zeros), _like(ones), _like(empty)


def full_like(input: Tensor, fill_value: float, dtype: dtypes.dtype | None = None,
              requires_grad: bool = False, **kw) -> Tensor:
    """A tensor of input's shape (and dtype unless given) filled with fill_value, as
    torch.full_like."""
    _check_device(kw.get("device"))
    fill_number(fill_value, "full_like")        # (PyTorch's TypeError for some tensors)
    r = like_layout(input, lambda s: full(s, fill_value, dtype=dtype or input._dtype),
                    kw.get("memory_format"))
    return _requiring_grad(r) if requires_grad else r


def arange(start: float | None = None, end: float | None = None, step: float = 1,
           dtype: dtypes.dtype | None = None, device: str | _Device | None = None,
           requires_grad: bool = False) -> Tensor:
    """Values from start to end (exclusive) by step, as torch.arange (int64 unless a bound
    is a float)."""
    _check_device(device)
    if end is None or start is None:    # (arange(5), arange(end=5): PyTorch's arange(end))
        start, end = 0, (start if end is None else end)
    if (t := traced_ranges.shifted_arange(start, end, step, dtype, requires_grad)) is not None:
        return t        # (a window arange(p, p + n) of a moving int p: traced_ranges.py)
    vals = tuple(v.item() if isinstance(v, Tensor) else plain(v) for v in (start, end, step))
    start, end, step = vals
    floating = any(isinstance(v, float) for v in vals)
    default = dtypes.get_default_dtype() if floating else dtypes.int64
    d = dtypes.to_dtype(dtype) if dtype is not None else default
    if d is dtypes.bool_ or d.is_complex:
        raise NotImplementedError(f'"arange_cpu" not implemented for \'{scalar_type_name(d)}\'')
    n = ranges.arange_size(start, end, step, d.np)
    if n is not None and trace_state.state.tracer is not None:  # (one node, numbers attributes)
        return traced_ranges.arange_node(start, step, n, d, requires_grad)
    if not d.is_floating_point and floating:
        return _finish(int_arange(start, end, step, d), None, requires_grad)
    return _finish(ranges.arange_values(start, end, step, d.np), None, requires_grad)


def linspace(start: float, end: float, steps: int, dtype: dtypes.dtype | None = None,
             device: str | _Device | None = None, requires_grad: bool = False) -> Tensor:
    """steps values evenly spaced from start to end (inclusive), as torch.linspace."""
    _check_device(device)
    d = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    steps = ranges.checked_steps("linspace", steps)
    ranges.check_bounds("linspace", start, end)
    if d.is_complex:            # (real bounds: the real parts' values, as complex)
        return _finish(ranges.linspace_values(start, end, steps, d.to_real().np)
                       .astype(d.np), None, requires_grad)
    if not d.is_floating_point:     # (PyTorch truncates the bounds to integers first)
        start, end = (int(float(fill_value_fits(v, d))) for v in (start, end))
    return _finish(ranges.linspace_values(start, end, steps, d.np), None, requires_grad)


def eye(n: int, m: int | None = None, dtype: dtypes.dtype | None = None,
        device: str | _Device | None = None, requires_grad: bool = False) -> Tensor:
    """An n x m identity matrix, as torch.eye."""
    _check_device(device)
    d = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    for name, v in (("n", n), ("m", m)):
        if v is not None and int_arg("eye", name, v) < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {v}")
    return _finish(np.eye(n, m, dtype=d.np), None, requires_grad)


def randn(*dims: int | tuple[int, ...], size=None, dtype: dtypes.dtype | None = None,
          generator: _Generator | None = None, device: str | _Device | None = None,
          requires_grad: bool = False, _fill=True) -> Tensor:
    """Standard normal samples, as torch.randn (PyTorch's numbers for a seed). Traced, a draw
    of the default generator is an op: compiled calls give eager's numbers."""
    _check_device(device)
    d = _float_draw(dtype, "normal_kernel_cpu")
    shape = creation_size("randn", dims, size)
    if d.is_complex:
        # (PyTorch's: normal_ of the real view with std 1/sqrt(2), each double draw scaled)
        t = empty(shape, dtype=d).normal_(generator=generator)
        return _requiring_grad(t) if requires_grad else t
    # _fill=False: ATen's per-element draws (its fill takes 16+ contiguous values)
    arr = torch_random.normal(_state(generator), math.prod(shape), d.name, contiguous=_fill)
    arr.shape = shape                   # (in place: the array keeps owning its memory)
    t = _finish(arr, d if d is dtypes.bfloat16 else None, requires_grad)
    if generator is None and trace_state.state.tracer is not None:
        trace_state.state.tracer.random("rng_normal", t, **({} if _fill else {"fill": False}))
    return t


def _float_draw(dtype, kernel):
    """The dtype of rand / randn samples; an integer or bool one raises as PyTorch's."""
    d = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    if d._cat < 2:
        raise NotImplementedError(f'"{kernel}" not implemented for \'{scalar_type_name(d)}\'')
    return d


def random_integers(shape, of, low=0, high=1, full=False, generator=None):
    """Tensor.random_'s int64 draws for a tensor of dtype name `of` (torch_random.integers).
    Traced, a draw of the default generator is an rng_integers op."""
    arr = torch_random.integers(_state(generator), math.prod(shape), of, low, high, full)
    arr.shape = tuple(shape)
    t = _finish(arr, None, False)
    if generator is None and trace_state.state.tracer is not None:
        trace_state.state.tracer.random("rng_integers", t, of=of, low=int(low),
                                        high=int(high), full=bool(full))
    return t


def rand(*dims: int | tuple[int, ...], size=None, dtype: dtypes.dtype | None = None,
         generator: _Generator | None = None, device: str | _Device | None = None,
         requires_grad: bool = False) -> Tensor:
    """Uniform samples on [0, 1), as torch.rand (PyTorch's numbers for a seed). Traced, a
    draw of the default generator is an op: compiled calls give eager's numbers."""
    _check_device(device)
    d = _float_draw(dtype, "check_uniform_bounds")
    shape = creation_size("rand", dims, size)
    if d.is_complex:        # (PyTorch's: real and imaginary parts each uniform on [0, 1))
        t = rand(*shape, 2, dtype=d.to_real(), generator=generator)._op("view_as_complex")
        return _requiring_grad(t) if requires_grad else t
    arr = torch_random.uniform(_state(generator), math.prod(shape), d.name)
    arr.shape = shape
    t = _finish(arr, d if d is dtypes.bfloat16 else None, requires_grad)
    if generator is None and trace_state.state.tracer is not None:
        trace_state.state.tracer.random("rng_uniform", t)
    return t


def randint(low: int = 0, high: int | None = None, size: tuple[int, ...] | None = None,
            dtype: dtypes.dtype | None = None, generator: _Generator | None = None,
            device: str | _Device | None = None, requires_grad: bool = False) -> Tensor:
    """Random integers in [low, high), as torch.randint (PyTorch's numbers for a seed).
    Traced, a draw of the default generator is an rng_integers op (negative sampling inside
    a compiled step)."""
    _check_device(device)
    tracer = trace_state.state.tracer
    if tracer is not None and (generator is not None or requires_grad):
        tracer.untraceable("randint with a generator or requires_grad")
    if high is None or not isinstance(high, (int, np.integer)) and size is None:
        low, high, size = 0, low, (size if high is None else high)     # randint(high, size)
    if size is None:        # (randint(5), randint(2, 5): PyTorch's TypeError, not a 0-d draw)
        raise TypeError("randint() received an invalid combination of arguments - got no size")
    low, high = int_bounds("randint", low, high)
    shape = check_nonnegative(tuple(size), "randint")
    d = dtypes.to_dtype(dtype) if dtype is not None else dtypes.int64
    low, high = random_bounds(d, low, high)     # (random_(from, to)'s checks, before a draw)
    if tracer is not None:      # (the same draws as below, as int64 then cast)
        t = random_integers(shape, d.name, int(low), int(high))
        return t if d == dtypes.int64 else t.to(d)
    arr = torch_random.randint(_state(generator), int(np.prod(shape)), low, high, d.name)
    arr.shape = shape
    return _finish(arr, d, requires_grad)


def randperm(n: int, dtype: dtypes.dtype | None = None, generator: _Generator | None = None,
             device: str | _Device | None = None) -> Tensor:
    """A random permutation of 0..n-1, as torch.randperm (PyTorch's numbers for a seed).
    Traced, a draw of the default generator is an rng_randperm op (mixup's shuffle inside a
    compiled step); one of another generator runs the call eagerly."""
    _check_device(device)
    tracer = trace_state.state.tracer
    if tracer is not None and generator is not None:
        tracer.untraceable("randperm with a generator")
    randperm_checks(n, dtype)
    t = _finish(torch_random.randperm(_state(generator), int(n)), None, False)
    if tracer is None:
        return t if dtype is None else _finish(t._data, dtype, False)
    tracer.random("rng_randperm", t)
    return t if dtype is None else t.to(dtypes.to_dtype(dtype))


def randn_like(input: Tensor, dtype: dtypes.dtype | None = None, requires_grad: bool = False,
               **kw) -> Tensor:
    """N(0, 1) samples of t's shape and dtype in t's layout (or memory_format's), as
    torch.randn_like."""
    _check_device(kw.get("device"))
    # ATen's vectorised fill serves a contiguous result: empty_like's layout, which is
    # row-major for a view that is not dense (a chunk, a column slice, an expand)
    fmt = kw.get("memory_format")
    fill = like_layout(input, lambda s: empty(s, dtype=input._dtype), fmt).is_contiguous()
    r = like_layout(input, lambda s: randn(s, dtype=dtype or input._dtype, _fill=fill), fmt)
    return r.requires_grad_(True) if requires_grad else r


def rand_like(input: Tensor, dtype: dtypes.dtype | None = None, requires_grad: bool = False,
              **kw) -> Tensor:
    """U[0, 1) samples of t's shape and dtype in t's layout (or memory_format's), as
    torch.rand_like."""
    _check_device(kw.get("device"))
    r = like_layout(input, lambda s: rand(s, dtype=dtype or input._dtype), kw.get("memory_format"))
    return r.requires_grad_(True) if requires_grad else r
