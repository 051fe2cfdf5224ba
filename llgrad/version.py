"""llgrad's version (one place: the package, the kernel cache keys)."""
__version__ = "0.1.0"
