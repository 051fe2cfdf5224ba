"""llgrad.backends.mkl: PyTorch's CPU build has MKL; llgrad's matmuls use NumPy's BLAS."""


def is_available():
    return True
