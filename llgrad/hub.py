"""llgrad.hub: the parts of torch.hub that programs use offline. `tqdm` is the tqdm package
when it is installed and otherwise a stand-in with PyTorch's: a byte counter that takes
`total`, `update`, `set_description`, `write` and `close` (and, as PyTorch's, cannot wrap
an iterable). Downloading models from a hub is not provided."""
import os
import sys

__all__ = ["tqdm", "get_dir", "set_dir"]

_hub_dir = None


class _ByteProgress:
    """A progress counter written to stderr (torch.hub's stand-in when tqdm is missing)."""

    def __init__(self, total=None, disable=False, unit=None, *args, **kwargs):
        self.total, self.disable, self.n = total, disable, 0

    def update(self, n):
        """Count n more units and print the progress."""
        if self.disable:
            return
        self.n += n
        if self.total is None:
            sys.stderr.write(f"\r{self.n:.1f} bytes")
        else:
            sys.stderr.write(f"\r{100 * self.n / float(self.total):.1f}%")
        sys.stderr.flush()

    def set_description(self, *args, **kwargs):
        """Ignored."""

    def write(self, s):
        """Print s on its own line."""
        sys.stderr.write(f"{s}\n")

    def close(self):
        """Stop printing."""
        self.disable = True

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if not self.disable:
            sys.stderr.write("\n")


try:
    from tqdm import tqdm
except ImportError:
    tqdm = _ByteProgress


def get_dir():
    """The hub cache directory: set_dir's, else $TORCH_HOME/hub, else
    $XDG_CACHE_HOME/torch/hub (~/.cache/torch/hub)."""
    if _hub_dir is not None:
        return _hub_dir
    torch_home = os.path.expanduser(os.getenv("TORCH_HOME", os.path.join(
        os.getenv("XDG_CACHE_HOME", "~/.cache"), "torch")))
    return os.path.join(torch_home, "hub")


def set_dir(d):
    """Use d as the hub cache directory (set_dir(None) returns to the default)."""
    global _hub_dir
    _hub_dir = None if d is None else os.path.expanduser(d)
