"""What registering an autograd hook returns (PyTorch's RemovableHandle), and the
registration itself: shared by nodes (node.py) and tensors (tensor_autograd.py)."""
import itertools

from . import trace_state


class _Handle:
    """What registering a hook returns: remove() unregisters it (once; again is a no-op);
    `with handle:` removes it on leaving the block (PyTorch's RemovableHandle)."""
    __slots__ = ("_remove",)

    def __init__(self, remove):
        self._remove = remove

    def remove(self):
        if self._remove is not None:
            self._remove()
            self._remove = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


_hook_keys = itertools.count()


def _register(hooks, fn):
    """Register fn in the dict `hooks` under a fresh key; the handle that removes it. (Not
    while tracing: a hook made inside a compiled function would have to run on every call.)"""
    if trace_state.state.tracer is not None:
        trace_state.state.tracer.graph_break("a hook registered inside the compiled function")
    key = next(_hook_keys)
    hooks[key] = fn
    return _Handle(lambda: hooks.pop(key, None))
