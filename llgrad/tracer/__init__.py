"""Define-by-run tracing of Python functions into IR graphs."""
from .trace import TraceError, trace  # noqa: F401
