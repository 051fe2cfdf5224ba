"""llgrad._dynamo: the torch._dynamo names PyTorch programs call (reset, explain, the
dynamic-shape marks, config) over llgrad.compile. Shapes are specialised: mark_dynamic and
its kin record nothing (a new size traces again)."""
import functools

from .compile.dynamo_config import config  # noqa: F401
from .compile.explain import explain as _explain
from .compiler import disable, is_compiling, reset  # noqa: F401

__all__ = ["reset", "explain", "disable", "is_compiling", "mark_dynamic", "maybe_mark_dynamic",
           "mark_static", "mark_static_address", "config"]


def explain(fn, *args, **kwargs):
    """torch._dynamo.explain: explain(fn)(*args, **kwargs), torch's documented form, or
    explain(fn, *args, **kwargs) (its older one); an llgrad.explain Explanation."""
    if args or kwargs:
        return _explain(fn, *args, **kwargs)
    return functools.wraps(fn)(lambda *a, **k: _explain(fn, *a, **k))


def mark_dynamic(t, index, *, hint_override=None, min=None, max=None, specialize_on=None):
    """Accepted, with torch's signature (llgrad specialises shapes: a new size traces
    again)."""


def maybe_mark_dynamic(t, index):
    """Accepted (llgrad specialises shapes)."""


def mark_static(t, index=None):
    """Accepted (shapes are static already)."""


def mark_static_address(t, guard=False):
    """Accepted (nothing to do on the CPU)."""
