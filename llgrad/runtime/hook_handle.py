"""What registering an autograd hook returns (PyTorch's RemovableHandle), and the
registration itself: shared by nodes (node.py) and tensors (tensor_autograd.py)."""
import itertools

from . import trace_state
from .saved_tensor import user_location


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


def _register(hooks, fn, node=None):
    """Register fn in the dict `hooks` (of node, when it is a node's) under a fresh key; the
    handle that removes it. While tracing, only on a node the traced run made: its hooks
    run in the run's own backward, traced with it (a hook on anything older would have to
    be registered by every call)."""
    tracer = trace_state.state.tracer
    if tracer is not None:
        # (a leaf's AccumulateGrad, which has a variable, outlives the call)
        if node is None or hasattr(node, "variable") or node._seq < tracer.first_node:
            tracer.graph_break("a hook registered inside the compiled function")
        tracer.inner_hooks = tracer.inner_hooks or \
            f"a hook registered inside the compiled function at {user_location()}"
    key = next(_hook_keys)
    hooks[key] = fn
    return _Handle(lambda: hooks.pop(key, None))
