"""The tracer active on this thread, if any. The dispatcher, creation functions and
Python conversions (bool(t), t.item()) report to it; `_reset()` clears it."""
import threading


class _State(threading.local):
    def __init__(self):
        self.tracer = None
        self.vmap_levels = 0        # llgrad.func.vmap calls active on this thread


state = _State()


def _reset():
    state.tracer = None
    state.vmap_levels = 0
