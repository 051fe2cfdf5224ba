"""Sums with sparse COO tensors as PyTorch's CPU kernels order them (the optimisers' updates
with nn.Embedding(sparse=True)'s gradients depend on that order to the last bit):
sparse + sparse merges the two entry lists as add_out_sparse_cpu does (equal indices met
side by side are added, the rest keep their order, uncoalesced when either is) when both
values are contiguous, and concatenates them otherwise; dense +
sparse adds the entries into the dense tensor one by one in their order (duplicates too),
each a fused multiply-add by alpha, as add_dense_sparse_worker's rows."""
import numpy as np

from . import grad_mode, methods_alpha, trace_state
from .creation import zeros
from .functions import cat
from .sparse_coo import SparseCOOTensor, _index_tensor, _written
from .tensor import Tensor


def _merge_order(ti, si):
    """For index columns ti [sd, tn] and si [sd, sn]: the merged list as PyTorch's merge
    walks it, as (output row, t entry) and (output row, s entry) pairs."""
    tk, sk = [tuple(c) for c in ti.T.tolist()], [tuple(c) for c in si.T.tolist()]
    tn, sn = len(tk), len(sk)
    pos_t, from_t, pos_s, from_s = [], [], [], []
    a = b = r = 0
    while a < tn or b < sn:
        if a >= tn:
            cmp = -1
        elif b >= sn:
            cmp = 1
        else:
            cmp = 1 if tk[a] < sk[b] else (-1 if tk[a] > sk[b] else 0)
        if cmp >= 0:
            pos_t.append(r)
            from_t.append(a)
            a += 1
        if cmp <= 0:
            pos_s.append(r)
            from_s.append(b)
            b += 1
        r += 1
    return r, pos_t, from_t, pos_s, from_s


def sparse_sum(t, s, alpha=1):
    """t + alpha * s for sparse t and s of one size (PyTorch's merge, see above)."""
    if t.sparse_dim() != s.sparse_dim():
        raise RuntimeError(f"add: expected 'self' and 'other' to have same density, but "
                           f"'self' has {t.sparse_dim()} sparse dimensions while 'other' has "
                           f"{s.sparse_dim()} sparse dimensions")
    if s._nnz() == 0:
        return SparseCOOTensor._make(t._sp_indices, t._sp_values.clone(), t._sp_size,
                                     t._sp_coalesced)
    if t._nnz() == 0:
        return SparseCOOTensor._make(s._sp_indices, s._sp_values * alpha, s._sp_size,
                                     s._sp_coalesced)
    ti, si = t._sp_indices._data, s._sp_indices._data
    tv, sv = t._sp_values, s._sp_values
    if not (tv.is_contiguous() and sv.is_contiguous()):
        # (PyTorch's kernel merges contiguous values only; others are concatenated)
        return SparseCOOTensor._make(_index_tensor(np.concatenate([ti, si], 1)),
                                     cat([tv, sv if alpha == 1 else sv * alpha]), t._sp_size,
                                     False)
    n, pos_t, from_t, pos_s, from_s = _merge_order(ti, si)
    idx = np.empty((ti.shape[0], n), np.int64)
    idx[:, pos_t], idx[:, pos_s] = ti[:, from_t], si[:, from_s]
    shape = (n,) + tuple(tv.shape[1:])
    tpart = zeros(shape, dtype=tv.dtype).index_put(
        (_index_tensor(pos_t),), tv.index_select(0, _index_tensor(from_t)))
    spart = zeros(shape, dtype=sv.dtype).index_put(
        (_index_tensor(pos_s),), sv.index_select(0, _index_tensor(from_s)))
    return SparseCOOTensor._make(_index_tensor(idx), tpart.add(spart, alpha=alpha), t._sp_size,
                                 t._sp_coalesced and s._sp_coalesced)


def sparse_add_(t, s, alpha=1):
    """t += alpha * s for sparse t (PyTorch's in-place sparse add: t takes the merged
    entries; a dense s densifies nothing and raises, as PyTorch's)."""
    if type(s) is not SparseCOOTensor:
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) "
                           "instead.")
    _same_size(t, s)
    _written(t, "add_")
    r = sparse_sum(t, s, alpha)
    t._sp_indices, t._sp_values, t._sp_coalesced = r._sp_indices, r._sp_values, \
        r._sp_coalesced
    t._dtype = r._dtype
    return t


def _same_size(a, b):
    if tuple(a.shape) != tuple(b.shape):
        raise RuntimeError(f"add: expected 'self' and 'other' to have same size, but self has "
                           f"size {list(a.shape)} while other has size {list(b.shape)} (FYI: "
                           "dense-sparse addition does not currently support broadcasting)")


def _ranks(flat):
    """Each entry's number of earlier entries with the same index."""
    order = np.argsort(flat, kind="stable")
    sorted_flat = flat[order]
    starts = np.r_[0, np.nonzero(np.diff(sorted_flat))[0] + 1]
    first = np.repeat(starts, np.diff(np.r_[starts, len(flat)]))
    ranks = np.empty_like(flat)
    ranks[order] = np.arange(len(flat)) - first
    return ranks


def dense_add_sparse(name, dense, s, alpha):
    """dense.add / add_ / sub / sub_ (name) of a sparse s: its entries added one by one, in
    order (see above); under autograd, the dense sum of s's dense reading."""
    _same_size(dense, s)
    if name.startswith("sub"):
        alpha = -alpha
    in_place = name.endswith("_")
    if grad_mode.state.grad_enabled and (dense.requires_grad or s.requires_grad):
        other = s.to_dense()
        return dense.add_(other, alpha=alpha) if in_place else dense.add(other, alpha=alpha)
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.graph_break(f"Tensor.{name} of a sparse tensor")
    out = dense
    if not in_place:
        out = dense.to(s.dtype if s.dtype.is_floating_point and
                       not dense.dtype.is_floating_point else dense.dtype).clone()
    arr = out._data
    if not arr.flags.writeable:
        return out.add_(s.to_dense(), alpha=alpha)      # (its error)
    idx, values = s._sp_indices._data, s._sp_values.detach()
    if idx.shape[1]:
        sd = idx.shape[0]
        ranks = _ranks(np.ravel_multi_index(tuple(idx), s._sp_size[:sd]))
        for r in range(int(ranks.max()) + 1):
            sel = np.nonzero(ranks == r)[0]
            where = tuple(idx[:, sel])
            rows = Tensor._from_array(arr[where])
            arr[where] = rows.add(values.index_select(0, _index_tensor(sel)), alpha=alpha)._data
    out._storage.version += 1
    return out


methods_alpha.dense_add_sparse[0] = dense_add_sparse
