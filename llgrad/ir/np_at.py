"""ufunc.at (np.add.at, np.maximum.at, ...) for the op table's scatter-style NumPy
implementations (index_add, scatter_add, scatter_reduce), on flat indices into the raveled
output where the output is C-contiguous. NumPy's ufunc.at runs a fast loop for one 1-D
integer index into a 1-D array, and a generic one, several times slower, for the tuples of
index arrays and slices these ops build (a GAT's scatter_reduce over its edges: 1.2 ms to
0.3 ms). Each output element takes its updates in the order of the index positions either
way (the raveled values keep their C order), so the values are the same bits."""
import numpy as np

_MIN_UPDATES = 256      # (fewer: the flat indices' set-up costs more than the generic loop)


def at(ufunc, out, idx, vals):
    """ufunc.at(out, idx, vals) for idx a tuple of out.ndim entries, each an integer array
    or slice(None), the arrays broadcasting together (scatter's sparse np.indices) or a
    single 1-D one among slices (index_add's, whose dimension stays in place)."""
    vals = np.asarray(vals)
    if out.ndim < 2 or len(idx) != out.ndim or not out.flags.c_contiguous or \
            vals.size < _MIN_UPDATES:
        ufunc.at(out, idx, vals)
        return
    arrays = [ix for ix in idx if not isinstance(ix, slice)]
    if len(arrays) < out.ndim:
        if len(arrays) != 1 or np.ndim(arrays[0]) != 1 or \
                any(isinstance(ix, slice) and ix != slice(None) for ix in idx):
            ufunc.at(out, idx, vals)
            return
        grids = []
        for d, ix in enumerate(idx):
            shape = [1] * out.ndim
            shape[d] = -1
            grids.append((np.arange(out.shape[d]) if isinstance(ix, slice) else ix).reshape(shape))
        idx = tuple(grids)
    flat = np.ravel_multi_index(idx, out.shape)
    ufunc.at(out.reshape(-1), flat.reshape(-1), np.broadcast_to(vals, flat.shape).reshape(-1))
