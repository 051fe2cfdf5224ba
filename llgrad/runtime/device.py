"""llgrad.device: PyTorch's torch.device for a library that runs on the CPU only. Device
objects of any type can be made, compared, printed and pickled (a checkpoint may name
'cuda:0'), but creating a tensor on, or moving one to, a device other than the CPU raises
a clear error instead of being ignored."""

_KNOWN = ("cpu", "cuda", "mps", "xpu", "meta", "hip", "xla", "ipu", "mtia", "hpu", "vulkan",
          "privateuseone", "lazy", "ve", "fpga", "maia", "ort", "mkldnn", "opengl", "opencl",
          "ideep")


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
        name, sep, idx = type.partition(":")
        if sep:
            if index is not None:
                raise RuntimeError("type (string) must not include an index because index was "
                                   f"passed explicitly: {type}")
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}'")
            index = int(idx)
        if name not in _KNOWN:
            raise RuntimeError("Expected one of " + ", ".join(_KNOWN) + " device type at start "
                               f"of device string: {type}")
        if index is not None and (not isinstance(index, int) or index < 0):
            raise RuntimeError(f"Device index must not be negative: {index}")
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

    def __enter__(self):     # `with llgrad.device("cpu"):` (the default device is the CPU)
        check(self, "make tensors on")
        return self

    def __exit__(self, *exc):
        return False


CPU = device("cpu")


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
    """Raise unless d is None or names the CPU (index None or 0)."""
    if d is None or d is CPU or d == "cpu":
        return
    dev = as_device(d)
    if dev.type != "cpu" or dev.index not in (None, 0):
        raise RuntimeError(f"llgrad runs on the CPU only; cannot {what} device '{dev}' "
                           "(use device='cpu' or leave device unset)")
