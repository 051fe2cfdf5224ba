"""llgrad.backends.openmp."""


def is_available():
    return True
