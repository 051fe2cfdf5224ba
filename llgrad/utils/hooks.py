"""RemovableHandle (torch.utils.hooks): what registering a module hook returns."""
import weakref
from collections import OrderedDict

__all__ = ["RemovableHandle"]


class RemovableHandle:
    """remove() unregisters the hook (again is a no-op); `with handle:` removes it on
    leaving the block. `extra_dict`: further dicts (or one) whose entry under the same id
    goes with it (the with_kwargs / always_call flags)."""
    next_id = 0

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        self.extra_dict_ref = ()
        if isinstance(extra_dict, dict):
            self.extra_dict_ref = (weakref.ref(extra_dict),)
        elif isinstance(extra_dict, list):
            self.extra_dict_ref = tuple(weakref.ref(d) for d in extra_dict)

    def remove(self):
        hooks_dict = self.hooks_dict_ref()
        if hooks_dict is not None and self.id in hooks_dict:
            del hooks_dict[self.id]
        for ref in self.extra_dict_ref:
            extra = ref()
            if extra is not None and self.id in extra:
                del extra[self.id]

    def __getstate__(self):
        # (weak references do not pickle: the dicts themselves do, as PyTorch's handle)
        return (self.hooks_dict_ref(), self.id, tuple(r() for r in self.extra_dict_ref))

    def __setstate__(self, state):
        # (a dict that is gone: a dead reference, as PyTorch's)
        self.hooks_dict_ref = weakref.ref(OrderedDict() if state[0] is None else state[0])
        self.id = state[1]
        RemovableHandle.next_id = max(RemovableHandle.next_id, self.id + 1)
        self.extra_dict_ref = tuple(weakref.ref(d) for d in state[2] if d is not None) \
            if len(state) > 2 else ()

    def __enter__(self):
        return self

    def __exit__(self, type, value, tb):  # noqa: A002
        self.remove()


def _new_hooks_dict():
    return OrderedDict()
