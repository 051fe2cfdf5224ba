"""llgrad._dynamo: the torch._dynamo names PyTorch programs call (reset, explain, the
dynamic-shape marks, config) over llgrad.compile. Shapes are specialised: mark_dynamic and
its kin record nothing (a new size traces again)."""
from .compile.dynamo_config import config  # noqa: F401
from .compile.explain import explain  # noqa: F401
from .compiler import disable, is_compiling, reset  # noqa: F401

__all__ = ["reset", "explain", "disable", "is_compiling", "mark_dynamic", "maybe_mark_dynamic",
           "mark_static", "mark_static_address", "config"]


def mark_dynamic(t, index, *, hint_override=None, min=None, max=None, specialize_on=None):
    """Accepted, with torch's signature (llgrad specialises shapes: a new size traces
    again)."""


def maybe_mark_dynamic(t, index):
    """Accepted (llgrad specialises shapes)."""


def mark_static(t, index=None):
    """Accepted (shapes are static already)."""


def mark_static_address(t, guard=False):
    """Accepted (nothing to do on the CPU)."""
