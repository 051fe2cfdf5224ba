"""The range check of index-driven ops (gather, scatter*, index_select, index_add,
embedding): PyTorch accepts only 0 <= i < n there, where NumPy's take/put would wrap a
negative index silently. The op impls check, so the IR interpreter raises where eager does
and a compiled call falls back to eager for eager's own error; the LLVM kernels flag the
same values (codegen/lowerings/ops_index.wrap_index with negative=False)."""
import numpy as np

_min, _max = np.minimum.reduce, np.maximum.reduce    # (without ndarray.min's Python layer)


def check_index_range(index, n):
    """Raise IndexError if a value of the integer array index lies outside [0, n)."""
    a = np.asarray(index)
    if a.size and (_min(a, axis=None) < 0 or _max(a, axis=None) >= n):     # (a.min()'s ufunc)
        flat = a.reshape(-1)
        bad = int(flat[(flat < 0) | (flat >= n)][0])
        raise IndexError(f"index {bad} is out of bounds for dimension with size {n}")
