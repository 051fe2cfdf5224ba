"""Saved-tensor hooks (torch.autograd.graph.saved_tensors_hooks): while a pair is active in
a thread, every tensor an op saves for backward goes through pack_hook(tensor) when it is
saved, and what backward reads is unpack_hook(packed), each time it reads it. The innermost
pair wins; disable_saved_tensors_hooks(message) makes entering a pair raise. The state is
thread-local, as PyTorch's; `_reset()` clears the calling thread's.
allow_mutation_on_saved_tensors is a pair that keeps what was saved readable after an
in-place write to it."""
import threading

from . import trace_state


class _State(threading.local):
    def __init__(self):
        self.stack = []         # [(pack_hook, unpack_hook)], innermost last
        self.disabled = None    # the message of the innermost disable_saved_tensors_hooks


state = _State()


class _Shared:
    """Process-wide, as PyTorch's flag: inside allow_mutation_on_saved_tensors (a backward
    run by another thread unpacks too)."""
    mutation_ok = False


shared = _Shared()


def _reset():
    state.stack = []
    state.disabled = None
    shared.mutation_ok = False


def current():
    """The innermost active (pack_hook, unpack_hook), or None."""
    stack = state.stack
    return stack[-1] if stack else None


class saved_tensors_hooks:
    """Context manager: tensors saved for backward inside it are packed by pack_hook and
    unpacked by unpack_hook, as torch.autograd.graph.saved_tensors_hooks."""

    _identity = False       # (save_on_cpu: a pair a compiled call may leave out)

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        if state.disabled is not None:
            raise RuntimeError(state.disabled)
        tracer = trace_state.state.tracer
        if tracer is not None and not self._identity:   # (a compiled call's saved values
            # never reach the hooks)
            tracer.graph_break("saved_tensors_hooks inside the compiled function")
        state.stack.append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc):
        state.stack.pop()
        return False


class save_on_cpu(saved_tensors_hooks):
    """As torch.autograd.graph.save_on_cpu: saved tensors are kept on the CPU, where
    llgrad's tensors already are (PyTorch's pack returns a CPU tensor as it is): the pair
    is the identity, so a compiled function compiles through it."""
    _identity = True

    def __init__(self, pin_memory=False, device_type="cuda"):
        super().__init__(lambda t: (t.device, t), lambda packed: packed[1])


class disable_saved_tensors_hooks:
    """Context manager: entering saved_tensors_hooks inside it raises
    RuntimeError(error_message), as torch.autograd.graph.disable_saved_tensors_hooks."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        if state.stack:
            raise RuntimeError(self.error_message)
        self.prev = state.disabled
        state.disabled = self.error_message
        return self

    def __exit__(self, *exc):
        state.disabled = self.prev
        return False


_OUTSIDE = ("Trying to backward outside of the 'allow_mutation_on_saved_tensors' context"
            "in which the graph was originally recorded.")     # (PyTorch's words)


class _AllowMutationOnSavedContext:
    """What allow_mutation_on_saved_tensors yields: the packed tensors it keeps (id ->
    (tensor, its version when saved, a copy of it then)); clear() forgets them all."""

    def __init__(self):
        self.saved = {}

    def clear(self):
        self.saved.clear()


class allow_mutation_on_saved_tensors(saved_tensors_hooks):
    """As torch.autograd.graph.allow_mutation_on_saved_tensors: an in-place write to a
    tensor saved for backward inside it is allowed, and backward (run inside it too) reads
    the value the tensor had when it was saved. PyTorch clones a saved tensor just before
    it is first written; llgrad's writes have no one place to intercept them, so each
    saved tensor is copied when saved and the copy is read only if the tensor's version
    moved since (else the tensor itself, as PyTorch's)."""

    def __init__(self):
        self.ctx = ctx = _AllowMutationOnSavedContext()

        def pack(t):
            key = object()
            ctx.saved[key] = (t, t._storage.version, t.detach().clone())
            return key

        def unpack(key):
            if not shared.mutation_ok or key not in ctx.saved:
                raise AssertionError(_OUTSIDE)
            t, version, copy = ctx.saved[key]
            return t if t._storage.version == version else copy
        super().__init__(pack, unpack)

    def __enter__(self):
        if shared.mutation_ok:
            raise RuntimeError("allow_mutation_on_saved_tensors contexts cannot be nested")
        super().__enter__()
        shared.mutation_ok = True
        return self.ctx

    def __exit__(self, *exc):
        self.ctx.clear()
        shared.mutation_ok = False
        return super().__exit__(*exc)
