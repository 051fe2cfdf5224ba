"""The thread count of native code, by PyTorch's names: `llgrad.set_num_threads(n)` and
`llgrad.get_num_threads()`. The count lives in codegen/native/threadcount.py (a word native loops read
at run time); these wrappers import it on first use, so `import llgrad` does not load
llvmlite. LLGRAD_NUM_THREADS pins NumPy's OpenBLAS at import, as set_num_threads does
(codegen/native/openblas.py)."""
from .codegen.native import openblas

openblas.pin_from_env()


def set_num_threads(n: int) -> None:
    """Threads that compiled (native) loops use, like torch.set_num_threads: an int >= 1.
    As torch's sets its BLAS's, this sets NumPy's OpenBLAS thread count too (matmuls)."""
    from .codegen.native.blas import set_num_threads as set_blas
    from .codegen.native.threadcount import set_num_threads as set_loops
    set_loops(n)
    set_blas(n)


def get_num_threads() -> int:
    """The thread count native loops use (LLGRAD_NUM_THREADS, else the usable CPUs)."""
    from .codegen.native.threadcount import get_num_threads as get_loops
    return get_loops()
