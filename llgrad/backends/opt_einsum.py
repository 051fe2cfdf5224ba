"""llgrad.backends.opt_einsum: whether einsum may order its contractions with the opt_einsum
package (PyTorch's flag: enabled and strategy 'auto' when the package is installed, else
False and None). llgrad's einsum contracts left to right either way."""
import importlib.util

_available = importlib.util.find_spec("opt_einsum") is not None
enabled = _available
strategy = "auto" if _available else None


def is_available():
    return _available


def get_opt_einsum():
    """The opt_einsum module if installed, else None."""
    return importlib.import_module("opt_einsum") if _available else None
