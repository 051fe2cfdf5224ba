"""llgrad.backends.mps: no Metal backend."""


def is_available():
    return False


def is_built():
    return False


def is_macos_or_newer(major, minor):
    """Raises PyTorch's RuntimeError: the question needs the MPS backend."""
    raise RuntimeError("Cannot execute isOnMacOSorNewer() without MPS backend.")


def is_macos13_or_newer(minor=0):
    """Raises PyTorch's RuntimeError: the question needs the MPS backend."""
    return is_macos_or_newer(13, minor)
