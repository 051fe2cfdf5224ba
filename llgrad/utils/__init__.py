"""llgrad.utils: torch.utils counterparts -- `benchmark` (Timer), `checkpoint` (activation
checkpointing), `data` (datasets, samplers, DataLoader), `dlpack` (from_dlpack, to_dlpack),
`hooks` (RemovableHandle), `_pytree` (tree_map, tree_flatten, ...); `swap_tensors`. The
submodules are imported when first used (`llgrad.utils.data.DataLoader` works after
`import llgrad`), except `tensorboard` (SummaryWriter), imported by name as in PyTorch
(`from llgrad.utils.tensorboard import SummaryWriter`: it needs the tensorboard package)."""
import copyreg
import importlib
import weakref

_SUBMODULES = ("benchmark", "checkpoint", "data", "dlpack", "hooks", "_pytree")


def swap_tensors(t1, t2):
    """Swap the contents of two tensors (class, attributes, data and autograd state), each
    keeping its identity, as torch.utils.swap_tensors (PyTorch's check that no other
    reference holds either tensor is not made)."""
    if weakref.getweakrefs(t1):
        raise RuntimeError("Cannot swap t1 because it has weakref associated with it")
    if weakref.getweakrefs(t2):
        raise RuntimeError("Cannot swap t2 because it has weakref associated with it")
    slots = set(copyreg._slotnames(t1.__class__))
    if slots != set(copyreg._slotnames(t2.__class__)):
        raise RuntimeError("Cannot swap t1 and t2 if they have different slots")
    t1.__class__, t2.__class__ = t2.__class__, t1.__class__
    t1.__dict__, t2.__dict__ = t2.__dict__, t1.__dict__
    missing = object()
    for slot in slots - {"__dict__", "__weakref__"}:
        a, b = getattr(t1, slot, missing), getattr(t2, slot, missing)
        for t, v in ((t1, b), (t2, a)):
            if v is missing:
                if hasattr(t, slot):
                    delattr(t, slot)
            else:
                setattr(t, slot, v)


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_SUBMODULES))
