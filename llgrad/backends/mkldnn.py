"""llgrad.backends.mkldnn: torch.backends.mkldnn's flags (settable; llgrad's kernels are
its own)."""
import contextlib

enabled = True
deterministic = False


def is_available():
    return True


@contextlib.contextmanager
def flags(enabled=False, deterministic=False):
    g = globals()
    saved = (g["enabled"], g["deterministic"])
    g["enabled"], g["deterministic"] = enabled, deterministic
    try:
        yield
    finally:
        g["enabled"], g["deterministic"] = saved
