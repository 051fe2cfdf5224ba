"""llgrad.utils: torch.utils counterparts -- `checkpoint` (activation checkpointing), `data`
(datasets, samplers, DataLoader), `dlpack` (from_dlpack, to_dlpack), `hooks`
(RemovableHandle). The submodules are imported
when first used (`llgrad.utils.data.DataLoader` works after `import llgrad`)."""
import importlib

_SUBMODULES = ("checkpoint", "data", "dlpack", "hooks")


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_SUBMODULES))
