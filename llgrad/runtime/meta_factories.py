"""The factories on the meta device: `device="meta"` (or the default device set by
set_default_device('meta') / `with device('meta')`) makes a meta tensor of the shape and
dtype the factory would make, without data and without a draw from the generator; the
`*_like` factories and Tensor.new_* follow their tensor's device. Wrapped once, after every
factory is defined (runtime/__init__.py), under the names llgrad exports them by; a CPU
call reads one default and goes straight to the factory."""
import functools

from . import creation, dtypes, functions, random_state
from .creation_checks import fill_value_fits, scalar_default
from .device import _default, as_device
from .memory_layout import like_layout
from .meta_tensor import MetaStorage, is_meta_device, meta_tensor, no_data_error
from .shapes import creation_size, unpack_shape
from .tensor import Tensor

# factories whose result is a shape and a dtype: made directly
_SHAPED = ("zeros", "ones", "empty", "rand", "randn")
# the others: made on the CPU (the generator's state kept) and given to the meta device
_CONVERTED = ("tensor", "as_tensor", "asarray", "arange", "range", "linspace", "logspace", "eye",
              "randint", "randperm", "tril_indices", "triu_indices", "scalar_tensor",
              "hann_window", "hamming_window", "blackman_window", "bartlett_window",
              "kaiser_window")
_FROM_DATA = ("tensor", "as_tensor", "asarray")     # (the ones whose data may be a tensor)
_LIKE = ("zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
         "randint_like")
_DRAWS = ("rand", "randn")


def _dtype(dtype):
    return dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()


def _shaped(name, args, kw):
    shape = creation_size(name, args, kw.get("size"))
    d = _dtype(kw.get("dtype"))
    if name in _DRAWS and not d.is_floating_point:
        creation._float_draw(d, "normal_kernel_cpu" if name == "randn" else
                             "check_uniform_bounds")
    return meta_tensor(shape, d, requires_grad=kw.get("requires_grad", False))


def _full(args, kw):
    names = ("size", "fill_value", "dtype")
    kw = {**dict(zip(names, args)), **kw}
    value = kw["fill_value"]
    d = dtypes.to_dtype(kw["dtype"]) if kw.get("dtype") is not None else \
        scalar_default("full", value) if not isinstance(value, Tensor) else value._dtype
    if not isinstance(value, Tensor):
        fill_value_fits(value, d)
    return meta_tensor(creation_size("full", (tuple(kw["size"]),)), d,
                       requires_grad=kw.get("requires_grad", False))


def to_meta(t, requires_grad=None):
    """A meta leaf with t's shape, dtype and layout (requires_grad as t's unless given)."""
    r = meta_tensor(t._data.shape, t._dtype, t.stride())
    return r.requires_grad_(True) if (t.requires_grad if requires_grad is None
                                      else requires_grad) else r


def _converted(fn, args, kw):
    gen = random_state.default_generator
    kept = None if gen._state is None else gen._state.copy()
    try:
        t = fn(*args, **kw)
    finally:            # (a draw on the meta device takes nothing from the generator)
        if kept is None or gen._state is None:
            gen._state = kept
        else:
            gen._state[...] = kept
    return to_meta(t)


def _meta_data(args, kw):
    data = args[0] if args else kw.get("data", kw.get("obj"))
    return isinstance(data, Tensor) and data._storage.__class__ is MetaStorage


def _wrap(fn, name):
    @functools.wraps(fn)
    def factory(*args, device=None, **kw):
        if device is None:
            device = _default[0]        # (device.default_device(), without its call)
            if device is None:
                return fn(*args, **kw)
        if not is_meta_device(device):
            if name in _FROM_DATA and _meta_data(args, kw):
                as_device(device)
                raise no_data_error()       # (the CPU copy of a meta tensor's values)
            return fn(*args, device=device, **kw)
        as_device(device)       # (a malformed string raises as torch.device's)
        if name in _SHAPED:
            return _shaped(name, args, kw)
        if name == "full":
            return _full(args, kw)
        if name == "empty_strided":
            size, stride = (list(args) + [kw.get("size"), kw.get("stride")])[:2]
            return meta_tensor(tuple(size), _dtype(kw.get("dtype")), tuple(stride),
                               requires_grad=kw.get("requires_grad", False))
        return _converted(fn, args, kw)
    return factory


def _wrap_like(fn):
    @functools.wraps(fn)
    def factory(input, *args, device=None, **kw):
        if not hasattr(input, "_storage"):     # (a list, None: PyTorch's TypeError, not ours)
            raise TypeError(f"{fn.__name__}(): argument 'input' (position 1) must be Tensor, "
                            f"not {type(input).__name__}")
        on_meta = is_meta_device(device) if device is not None else \
            input._storage.__class__ is MetaStorage
        if not on_meta:
            if input._storage.__class__ is MetaStorage and device is not None:
                return fn(meta_stand_in(input), *args, device=device, **kw)
            return fn(input, *args, **kw) if device is None else fn(input, *args, device=device, **kw)
        dtype = kw.get("dtype")
        if dtype is None and fn.__name__ == "full_like" and len(args) > 1:
            dtype = args[1]
        d = dtypes.to_dtype(dtype) if dtype is not None else input._dtype
        r = like_layout(input, lambda s: meta_tensor(s, d), kw.get("memory_format"))
        return r.requires_grad_(True) if kw.get("requires_grad") else r
    return factory


def meta_stand_in(t):
    """A CPU tensor of meta tensor t's shape, dtype and layout (zeros, no memory: a view of
    the zero mapping), for a factory that reads only those of t."""
    return Tensor._from_array(t._data)


def _wrap_new(fn, name):
    @functools.wraps(fn)
    def method(self, *args, device=None, **kw):
        meta = self._storage.__class__ is MetaStorage
        if device is None and not meta:
            return fn(self, *args, **kw)
        if device is not None and not is_meta_device(device):
            return fn(meta_stand_in(self) if meta else self, *args, device=device, **kw)
        d = dtypes.to_dtype(kw["dtype"]) if kw.get("dtype") is not None else self._dtype
        grad = kw.get("requires_grad", False)
        if name in ("new_empty", "new_zeros", "new_ones"):
            return meta_tensor(unpack_shape(args) if args else (), d, requires_grad=grad)
        if name == "new_full":
            return meta_tensor(tuple(args[0]), d, requires_grad=grad)
        if name == "new_empty_strided":
            return meta_tensor(tuple(args[0]), d, tuple(args[1]), requires_grad=grad)
        return to_meta(fn(meta_stand_in(self) if meta else self, *args, **kw))
    return method


def wrap_meta_factories():
    """Give each factory, *_like factory and Tensor.new_* its meta-device path, in
    creation.py and under llgrad.<name> (before creation_args wraps them: their layout=
    and memory_format= then apply to meta tensors too)."""
    for name in _SHAPED + _CONVERTED + _LIKE + ("full", "empty_strided"):
        fn = getattr(functions, name, None) or getattr(creation, name, None)
        if fn is None:
            continue
        wrapped = _wrap_like(fn) if name in _LIKE else _wrap(fn, name)
        if getattr(creation, name, None) is fn:
            setattr(creation, name, wrapped)
        if getattr(functions, name, None) is fn:
            functions.export(wrapped, name)
    for name in ("new_empty", "new_zeros", "new_ones", "new_full", "new_tensor",
                 "new_empty_strided", "new"):
        setattr(Tensor, name, _wrap_new(getattr(Tensor, name), name))
