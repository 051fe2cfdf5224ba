"""llgrad.device: PyTorch's torch.device for a library that runs on the CPU (and makes
shape-only tensors on the meta device: meta_tensor.py). Device objects of any type can be
made, compared, printed and pickled (a checkpoint may name 'cuda:0'), but creating a tensor
on, or moving one to, another device raises a clear error instead of being ignored."""

import re

# PyTorch's device types, in the order its error lists them
_KNOWN = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve",
          "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")
_FORM = re.compile(r"([a-zA-Z_]+)(?::([1-9]\d*|0))?")     # PyTorch's device-string grammar


class NoCudaError(RuntimeError, AssertionError):
    """A CUDA device asked of llgrad (CPU only). PyTorch raises RuntimeError for a missing
    device, but AssertionError ("Torch not compiled with CUDA enabled") for CUDA in a CPU
    build: both, so code written against either build catches it."""


class device:
    """device(type_or_string, index=None): 'cpu', 'cuda', 'cuda:1', or device('cuda', 1)."""
    __slots__ = ("_type", "_index")

    def __init__(self, type, index=None):  # noqa: A002  (PyTorch's parameter name)
        if isinstance(type, device):
            if index is not None:
                raise TypeError("device(): an index cannot be given with a device")
            self._type, self._index = type._type, type._index
            return
        if isinstance(type, int) and not isinstance(type, bool) and index is None:
            type, index = "cuda", type      # device(0): PyTorch's accelerator index form
        if not isinstance(type, str):
            raise TypeError("device() received an invalid combination of arguments - got "
                            f"({_typename(type)})")
        form = _FORM.fullmatch(type)
        if form is None:
            raise RuntimeError(f"Invalid device string: '{type}'")
        name, idx = form.groups()
        if idx is not None:
            if index is not None:
                raise RuntimeError("type (string) must not include an index because index was "
                                   f"passed explicitly: {type}")
            index = int(idx)
        if name not in _KNOWN:
            raise RuntimeError("Expected one of " + ", ".join(_KNOWN) + " device type at start "
                               f"of device string: {name}")
        if index is not None and (not isinstance(index, int) or index < 0):
            raise RuntimeError("Device index must not be negative")
        self._type, self._index = name, index

    @property
    def type(self):
        """The device type ('cpu', 'cuda', ...), as torch.device.type."""
        return self._type

    @property
    def index(self):
        """The device index, or None, as torch.device.index."""
        return self._index

    def __repr__(self):
        if self._index is None:
            return f"device(type='{self._type}')"
        return f"device(type='{self._type}', index={self._index})"

    def __str__(self):
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __eq__(self, other):
        return isinstance(other, device) and (self._type, self._index) == \
            (other._type, other._index)

    def __hash__(self):
        return hash((self._type, self._index))

    def __reduce__(self):
        return (device, (self._type,) if self._index is None else (self._type, self._index))

    def __enter__(self):     # `with llgrad.device("meta"):` the factories' default inside
        if self._type != "meta":
            check(self, "make tensors on")
        _entered.append(_default[0])
        _default[0] = self if self._type == "meta" else None
        return self

    def __exit__(self, *exc):
        _default[0] = _entered.pop()
        return False


CPU = device("cpu")
_default = [None]   # the factories' device when none is given: None (the CPU) or meta
_entered = []       # the defaults that `with device(...)` blocks replaced, innermost last


def default_device():
    """The factories' device when none is given (None: the CPU), as torch's default device
    (set_default_device, or a `with device(...)` block)."""
    return _default[0]


def set_default(d):
    """Make d (None, the CPU or meta) the factories' default device."""
    dev = None if d is None else as_device(d)
    if dev is not None and dev.type != "meta":
        check(dev, "make tensors on")
        dev = None
    _default[0] = dev


def _typename(x):
    return type(x).__name__


def as_device(d):
    """An llgrad.device from a string, an int, an llgrad.device or a device-like object of
    another library (torch.device: anything with .type and .index)."""
    if isinstance(d, device):
        return d
    if isinstance(d, (str, int)) and not isinstance(d, bool):
        return device(d)
    t, i = getattr(d, "type", None), getattr(d, "index", None)
    if isinstance(t, str):
        return device(t, i)
    raise TypeError(f"expected a device (a string such as 'cpu', or a device), got "
                    f"{_typename(d)}")


def is_device_like(x):
    """Whether x names a device (as .to() tells a device from a dtype)."""
    if isinstance(x, device):
        return True
    if isinstance(x, str):
        return True
    t = getattr(x, "type", None)
    return isinstance(t, str) and hasattr(x, "index")


def check(d, what="create a tensor on"):
    """Raise unless d is None or names the CPU (index None or 0); the meta device is made
    by the factories' own path (meta_factories.py), before they call this."""
    if d is None or d is CPU or d == "cpu":
        return
    dev = as_device(d)
    if dev.type != "cpu" or dev.index not in (None, 0):
        err = NoCudaError if dev.type == "cuda" else RuntimeError
        raise err(f"llgrad runs on the CPU only; cannot {what} device '{dev}' (use "
                  "device='cpu' or leave device unset)")
