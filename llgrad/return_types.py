"""llgrad.return_types: the named tuples ops return, as torch.return_types (max, sort, topk,
linalg_qr, ...), for isinstance checks and for pickle to find them by name."""
from .runtime.return_types import REGISTRY


def __getattr__(name):
    try:
        return REGISTRY[name]
    except KeyError:
        raise AttributeError(f"module 'llgrad.return_types' has no attribute {name!r}") from None


def __dir__():
    return sorted(REGISTRY)
