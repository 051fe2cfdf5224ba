"""`p.data = y` inside a compiled function: p (an input, or a tensor the function reaches,
such as a parameter) is given the memory of a tensor y made inside, the sparse
autoencoder's `self.W_dec.data = W_dec_normed`. The traced run ends with p holding y's
memory (and whatever was written there after); a compiled call gives p that value as a
fresh output buffer of its own, with the version counter eager's run leaves on it.

That is eager's state exactly when nothing else holds y's memory: not another input, not
a returned tensor, not a tensor put into an object, and y covers its whole buffer in C
order (so p's strides are eager's). One other holder is replayed too: a tensor the call
returns or puts into an object that has y's very Storage and layout (SAM's
`self.state[p]["old_p"] = p.data.clone()` ... `p.data = self.state[p]["old_p"]`): the
compiled call gives p that output tensor's Storage, so the two share memory as in eager.
Other cases run eagerly (TraceError).

The next call then reaches p and y as two inputs over one Storage: the trace binds them
as one memory (tracer/bindings.py, _input_alias) and its entry's calls check that they
still share it (aliases_hold). Neither kind of entry differentiates its results (a
backward would differentiate y, or one alias's input for the other's)."""
import numpy as np

from ..runtime.symbolic_uses import check_returned
from ..runtime.tensor import Tensor
from ..tracer.errors import TraceError


def moved_outputs(entry, tensors, storages, outs, n_grad_outs, aliases=(), written=None):
    """The inputs given other memory in the traced run, as extra outputs (after the .grad
    ones); sets entry.data_assign [(input, output position after n_fn_out, or ("out", k)
    for a share of output k's Storage, version)] and entry.input_aliases: those of the
    tracer's `aliases` [(input, input j, version then)] whose memory the run wrote (only
    read, the two inputs are two values, as any inputs that share memory); written(st, j):
    whether the trace wrote input j's memory (through x.data too, whose version counter is
    its own: the trace then read the other alias from j's memory)."""
    entry.input_aliases = [(k, j) for k, j, v in aliases if storages[j].version != v or
                           (written is not None and written(storages[j], j))]
    moved = [k for k, ((_, t), st) in enumerate(zip(tensors, storages)) if t._storage is not st]
    entry.data_assign = []
    if not moved:
        return []
    held = {id(st.base) for st in storages}
    held.update(id(t._storage.base) for k, (_, t) in enumerate(tensors) if k not in moved)
    own = {id(tensors[k][1]) for k in moved}     # (`return p`: p itself, as run.py gives it)
    by_out = [o for o in outs if isinstance(o, Tensor) and id(o) not in own]
    data_outs = []
    for k in moved:
        path, t = tensors[k]
        base = t._storage.base
        holders = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and id(o) not in own
                   and o._storage.base is base]
        if id(base) not in held and len(holders) == 1 and _same(outs[holders[0]], t):
            j = holders[0]
            entry.data_assign.append((k, ("out", j), t._storage.version))
            # (output j is not a view of p's memory before the call, as the notes made at
            # the run's end have it: p is given j's, share_moved)
            entry.input_views = [n for n in entry.input_views if n[:2] != (j, k)]
            entry.detached = [n for n in entry.detached if n[:2] != (j, k)]
            entry.input_outputs = [n for n in entry.input_outputs if n != (j, k)]
            continue
        held.update(id(o._storage.base) for o in by_out)
        if id(base) in held or not t._data.flags.c_contiguous or t._data.size != base.size:
            raise TraceError(f"{path} was given other memory (`.data = ...`) that other "
                             "tensors share, which a compiled call cannot replay")
        held.add(id(base))
        entry.data_assign.append((k, n_grad_outs + len(data_outs), t._storage.version))
        data_outs.append(t)
    return data_outs


def _same(o, t):
    """Whether output o is all of t's memory under the very Storage, laid out as t."""
    return o._storage is t._storage and o._data.shape == t._data.shape and \
        o._data.strides == t._data.strides and t._data.flags.c_contiguous and \
        t._data.size == t._storage.base.size


def check_replayable(entry, tensors):
    """Raise where the call's results require grad: compiled calls cannot replay `.data =`
    or aliased inputs then."""
    if entry.data_assign:       # (its backward would differentiate y)
        raise TraceError(f"{tensors[entry.data_assign[0][0]][0]} was given other memory "
                         "(`.data = ...`) in a call whose results require grad, which a "
                         "compiled call cannot replay")
    if entry.input_aliases:
        k, j = entry.input_aliases[0]
        raise TraceError(f"{tensors[k][0]} and {tensors[j][0]} share memory in a call whose "
                         "results require grad, which a compiled call cannot replay")


def check_given(tracer, tensors, changed, given):
    """Raise where compiled calls would give back copies of what eager's run leaves as views
    (given: every tensor the call gives back; changed: the (input, .grad) the run set): one
    over a copy standing for x[i]'s view (runtime/symbolic_uses.py: the trace is then kept
    with i's number), or a .grad set to a view of an input's memory (`w.grad = x[1]`), which
    later writes into x reach in eager."""
    check_returned(tracer, given)
    memory = {id(t._storage.base): path for path, t in reversed(tensors)}   # (the first)
    own = {id(t) for _, t in tensors}       # (`w.grad = x`: given back as x itself)
    for k, g in changed:
        if g is not None and id(g) not in own and id(g._storage.base) in memory:
            raise TraceError(f"{tensors[k][0]}.grad was set to a view of the memory of "
                             f"{memory[id(g._storage.base)]}, which a compiled call cannot "
                             "replay")


def aliases_hold(entry, tensors):
    """Whether the inputs the trace bound as one memory still share a Storage (and layout)."""
    for k, j in entry.input_aliases:
        a, b = tensors[k], tensors[j]
        if a._storage is not b._storage or a._data.shape != b._data.shape or \
                a._data.strides != b._data.strides or a._storage_offset() != b._storage_offset():
            return False
    return True


def assign_moved(entry, tensors, outs, taken):
    """A compiled call's `p.data = y`: p gets its new value's buffer (run.py)."""
    for k, pos, version in entry.data_assign:
        if type(pos) is tuple:      # (share_moved, once the results are made)
            continue
        arr = outs[entry.n_fn_out + pos]
        if arr.base is not None or id(arr) in taken or not arr.flags.c_contiguous:
            arr = np.array(arr, order="C")
        taken.add(id(arr))
        new = Tensor._from_array(arr)
        new._storage.version = version
        t = tensors[k]
        t._data, t._storage = new._data, new._storage


def share_moved(entry, tensors, results):
    """A compiled call's `p.data = y` with y also an output: p gets that result's Storage."""
    for k, pos, version in entry.data_assign:
        if type(pos) is tuple:
            r, t = results[pos[1]], tensors[k]
            if not r._data.flags.c_contiguous or r._data.size != r._storage.base.size:
                r = Tensor._from_array(np.array(r._data, order="C"))   # (t's: all of it)
                results[pos[1]] = r
            r._storage.version = version
            t._data, t._storage = r._data, r._storage
